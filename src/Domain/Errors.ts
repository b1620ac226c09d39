/**
 * Errors shared by every API (validation, authentication, authorization), and
 * how every error is put on the wire; each domain's own errors are in its
 * `Errors.ts` (`Sessions/Errors.ts`, `Assistants/Errors.ts`, ...). The wire
 * bodies are those of DECISIONS.md "Errors":
 * `{"detail": "<text>"}` for domain errors and
 * `{"detail": [{loc, msg, type}]}` for validation failures (422).
 *
 * Each error is a `Schema.TaggedError` with its `httpApiStatus` and data; `*.Wire`
 * is the schema to list in an endpoint's `error`, encoding the error as
 * `{detail}` with no `_tag` and none of the data on the wire. A fixed `detail`
 * is declared as a literal, so a typed client (`HttpApiClient`) tells errors of
 * one status apart by their text (`Organization not found` vs `App not found`).
 */
import { Effect, Schema, SchemaTransformation } from "effect"
import { HttpApiSchema } from "effect/http-api"

/**
 * Re-encodes an error class whose only field is `detail` as `{detail}` (the
 * same construction as `HttpApiSchema.asProblem`); the class's `httpApiStatus`
 * is kept.
 */
export const asDetail =
  <S extends Schema.Top & { new (props: { readonly detail: D["Type"] }): S["Type"] }, D extends Schema.Top>(
    detail: D
  ) =>
  (self: S) =>
    Schema.Struct({ detail }).pipe(
      Schema.decodeTo(
        Schema.toType(self),
        SchemaTransformation.transform({
          decode: (encoded) => new self({ detail: (encoded as { readonly detail: D["Type"] }).detail }),
          encode: (error) => ({ detail: (error as { readonly detail: D["Type"] }).detail })
        })
      )
    )

/** A `detail` field defaulting to `text`, so `new Error()` needs no argument. */
export const detailDefault = (text: string) => Schema.String.pipe(Schema.withConstructorDefault(Effect.succeed(text)))

/** One validation problem: `loc` starts with `body`, `query` or `path` (Errors). */
export const ValidationIssue = Schema.Struct({
  loc: Schema.Array(Schema.Union([Schema.String, Schema.Int])),
  msg: Schema.String,
  type: Schema.String
}).annotate({ identifier: "ValidationIssue" })
export type ValidationIssue = typeof ValidationIssue.Type

/** 422 `{"detail": [{loc, msg, type}, ...]}`: every problem of the request (Errors). */
export class ValidationFailed extends Schema.TaggedError<ValidationFailed>()(
  "ValidationFailed",
  { detail: Schema.Array(ValidationIssue) },
  { httpApiStatus: 422 }
) {
  static readonly Wire = ValidationFailed.pipe(asDetail(Schema.Array(ValidationIssue)))
  /** A single problem at `loc`. */
  static readonly one = (loc: ReadonlyArray<string | number>, msg: string, type = "value_error") =>
    new ValidationFailed({ detail: [{ loc, msg, type }] })
}

/** 401 `Invalid or expired token` with `WWW-Authenticate: Bearer` (Errors). */
export class Unauthorized extends Schema.TaggedError<Unauthorized>()(
  "Unauthorized",
  { detail: detailDefault("Invalid or expired token") },
  { httpApiStatus: 401 }
) {
  static readonly Wire = Unauthorized.pipe(
    HttpApiSchema.encodeToWithHeaders(
      {
        body: Schema.Struct({ detail: Schema.String }).pipe(HttpApiSchema.status(401)),
        headers: { "www-authenticate": Schema.String }
      },
      {
        decode: ({ body }) => new Unauthorized({ detail: body.detail }),
        encode: (error) => ({ body: { detail: error.detail }, headers: { "www-authenticate": "Bearer" } })
      }
    )
  )
}

/** 403 `Forbidden`: a message of another organization (D1). */
export class Forbidden extends Schema.TaggedError<Forbidden>()(
  "Forbidden",
  { detail: detailDefault("Forbidden") },
  { httpApiStatus: 403 }
) {
  static readonly Wire = Forbidden.pipe(asDetail(Schema.Literal("Forbidden")))
}

/**
 * The fixed `detail` of the responses the HTTP layer gives outside any endpoint
 * (DECISIONS.md "Errors", O9): 413 over `MAX_BODY_BYTES`, 415 for a body that
 * is not JSON, 503 while the database is unreachable, refuses work for now (a
 * lock timeout, a deadlock) or the server drains, 500
 * for an unexpected failure. `Http.ts` sends them; `OpenApi.ts` documents
 * them.
 */
export const transportDetails = {
  tooLarge: "Request body too large",
  unsupportedMediaType: "Content-Type must be application/json",
  unavailable: "Service unavailable",
  rateLimited: "Rate limit exceeded",
  internal: "Internal server error"
} as const
