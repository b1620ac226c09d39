/**
 * Errors shared by every API, with the wire bodies of DECISIONS.md "Errors":
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

/** 404 `Session not found` (D1). */
export class SessionNotFound extends Schema.TaggedError<SessionNotFound>()(
  "SessionNotFound",
  { detail: detailDefault("Session not found") },
  { httpApiStatus: 404 }
) {
  static readonly Wire = SessionNotFound.pipe(asDetail(Schema.Literal("Session not found")))
}

/** 400 `Session is not open` (D5), or `Session is closed and cannot be reopened` (D4). */
export class SessionNotOpen extends Schema.TaggedError<SessionNotOpen>()(
  "SessionNotOpen",
  { detail: detailDefault("Session is not open") },
  { httpApiStatus: 400 }
) {
  static readonly Wire = SessionNotOpen.pipe(
    asDetail(Schema.Literals(["Session is not open", "Session is closed and cannot be reopened"]))
  )
  static readonly cannotReopen = () => new SessionNotOpen({ detail: "Session is closed and cannot be reopened" })
}

/** 400 `Agent not found`: an agent_id that is not an agent of the organization (D6). */
export class AgentNotFound extends Schema.TaggedError<AgentNotFound>()(
  "AgentNotFound",
  { detail: detailDefault("Agent not found") },
  { httpApiStatus: 400 }
) {
  static readonly Wire = AgentNotFound.pipe(asDetail(Schema.Literal("Agent not found")))
}

/** 400 `Invalid content type` (D12). */
export class InvalidContentType extends Schema.TaggedError<InvalidContentType>()(
  "InvalidContentType",
  { detail: detailDefault("Invalid content type") },
  { httpApiStatus: 400 }
) {
  static readonly Wire = InvalidContentType.pipe(asDetail(Schema.Literal("Invalid content type")))
}

/** 404 `Message not found` (D1). */
export class MessageNotFound extends Schema.TaggedError<MessageNotFound>()(
  "MessageNotFound",
  { detail: detailDefault("Message not found") },
  { httpApiStatus: 404 }
) {
  static readonly Wire = MessageNotFound.pipe(asDetail(Schema.Literal("Message not found")))
}

/** 403 `Forbidden`: a message of another organization (D1). */
export class Forbidden extends Schema.TaggedError<Forbidden>()(
  "Forbidden",
  { detail: detailDefault("Forbidden") },
  { httpApiStatus: 403 }
) {
  static readonly Wire = Forbidden.pipe(asDetail(Schema.Literal("Forbidden")))
}

/** 404 `Organization not found` (O6): an unknown organization on the admin API. */
export class OrganizationNotFound extends Schema.TaggedError<OrganizationNotFound>()(
  "OrganizationNotFound",
  { detail: detailDefault("Organization not found"), organization_id: Schema.optionalKey(Schema.String) },
  { httpApiStatus: 404 }
) {
  static readonly Wire = OrganizationNotFound.pipe(asDetail(Schema.Literal("Organization not found")))
}

/** 404 `API key not found` (O6): revoking a key the organization does not have. */
export class ApiKeyNotFound extends Schema.TaggedError<ApiKeyNotFound>()(
  "ApiKeyNotFound",
  { detail: detailDefault("API key not found"), key_id: Schema.optionalKey(Schema.String) },
  { httpApiStatus: 404 }
) {
  static readonly Wire = ApiKeyNotFound.pipe(asDetail(Schema.Literal("API key not found")))
}

/** 404 `App not found` (O6): an unknown app, or another organization's. */
export class AppNotFound extends Schema.TaggedError<AppNotFound>()(
  "AppNotFound",
  { detail: detailDefault("App not found"), app_id: Schema.optionalKey(Schema.String) },
  { httpApiStatus: 404 }
) {
  static readonly Wire = AppNotFound.pipe(asDetail(Schema.Literal("App not found")))
}

/** 404 `Delivery not found` (O6): an unknown delivery of the app. */
export class DeliveryNotFound extends Schema.TaggedError<DeliveryNotFound>()(
  "DeliveryNotFound",
  { detail: detailDefault("Delivery not found"), delivery_id: Schema.optionalKey(Schema.String) },
  { httpApiStatus: 404 }
) {
  static readonly Wire = DeliveryNotFound.pipe(asDetail(Schema.Literal("Delivery not found")))
}

/** 400 `Invalid cursor` (D14): an export `after_id` that is unknown or another organization's. */
export class InvalidCursor extends Schema.TaggedError<InvalidCursor>()(
  "InvalidCursor",
  { detail: detailDefault("Invalid cursor"), after_id: Schema.optionalKey(Schema.String) },
  { httpApiStatus: 400 }
) {
  static readonly Wire = InvalidCursor.pipe(asDetail(Schema.Literal("Invalid cursor")))
}

/**
 * The fixed `detail` of the answers the HTTP layer gives outside any endpoint
 * (DECISIONS.md "Errors", O9): 413 over `MAX_BODY_BYTES`, 415 for a body that
 * is not JSON, 503 while the database is unreachable or the server drains, 500
 * for an unexpected failure. `Http.ts` answers them; `Document.ts` documents
 * them.
 */
export const transportDetails = {
  tooLarge: "Request body too large",
  unsupportedMediaType: "Content-Type must be application/json",
  unavailable: "Service unavailable",
  rateLimited: "Rate limit exceeded",
  internal: "Internal server error"
} as const
