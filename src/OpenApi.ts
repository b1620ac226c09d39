/**
 * The finishing pass of the OpenAPI document (issue 14): what the schemas of
 * the endpoints cannot say one by one, applied once to the whole document by
 * the `OpenApi.Transform` annotation of `ParleyApi` (`src/Api.ts`).
 *
 * - Responses any operation can give, whatever it does (DECISIONS.md
 *   "Errors", O9): 413 and 415 for operations with a body, 500, and 503 with
 *   `Retry-After`, as shared `components.responses` with the `ErrorDetail`
 *   body. 401 (security) and 422 (validation) come from the middleware of the
 *   contract, the other 4xx from each endpoint's declared errors.
 * - Objects never forbid members: requests may carry members the server
 *   ignores, and responses may gain members in later versions (an additive
 *   change), so `additionalProperties: false` is dropped everywhere; a
 *   free-form object (`metadata`, `config`, ...) says `additionalProperties:
 *   true`, which generators type as "any members" (a bare `{type: object}`
 *   becomes `Record<string, never>` in openapi-typescript).
 * - Component names are the schemas' own: the encoded side of an error
 *   (`SessionNotFoundEncoded`, its `{detail}` body) is named as the error
 *   (`SessionNotFound`) when no other component has that name.
 * - Rate limits (D20): 429 with `Retry-After` and `RateLimit-*` on every
 *   operation of the conversations and assistants APIs, and the `RateLimit-*`
 *   headers on each of their responses; `X-Request-Id` (O8) on every response
 *   (issue 39 item 3).
 * - Idempotency-Key (D19): the optional header on every POST and PATCH of the
 *   conversations and assistants APIs, their 409 and 422 responses, and the
 *   `Idempotent-Replayed` header of their successes.
 * - `webhooks`: every event type of W1 as the request an app receives, with
 *   its W3 envelope schema (`Domain/Event.ts`) and the Standard Webhooks
 *   headers of W4.
 * - A body that may be left out (`[Body, NoBody]`: transfer, finish, reply,
 *   publish) is documented as not required, with the body's own schema: the
 *   generator marks every body required, and renders `NoBody` as an
 *   alternative that would take any JSON value (issue 37 item 3).
 * - Numbers in the query (`limit`, `offset`) are documented as the numbers
 *   they decode to, with their bounds and descriptions (`{type: integer,
 *   minimum: 1, maximum: 1000}`), where the generated document gave the
 *   encoded side: any numeric-looking string, no bounds. Generators then type
 *   them as numbers, and reference pages show the range.
 *
 * Imports only `effect` and the contract's domain files, like `Api.ts`.
 */
import { Schema, SchemaAST } from "effect"
import { HttpApi, type HttpApiGroup } from "effect/http-api"
import { isOrganizationApiPath } from "./Domain/BasePaths.ts"
import { NoBody } from "./Domain/Common.ts"
import { transportDetails } from "./Domain/Errors.ts"
import { eventDescriptions, eventSchemaIdentifier, eventSchemas } from "./Domain/Event.ts"
import { eventTypes } from "./Domain/EventType.ts"
import { IN_PROGRESS_RETRY_AFTER_SECONDS, idempotencyDetails, idempotencyKeyDescription } from "./Domain/Idempotency.ts"

/** An OpenAPI document or a part of it, as `OpenApi.fromApi` builds it (JSON). */
type Json = Record<string, any>

/** The `{detail}` body of every error but 422's (DECISIONS.md "Errors"). */
const errorDetail = {
  type: "object",
  description: 'An error: `detail` says what went wrong, in a sentence fixed per error (DECISIONS.md "Errors").',
  required: ["detail"],
  properties: { detail: { type: "string", description: "What went wrong." } }
}

/** A response with the body `{detail}` (`detail` as an example). */
const detailResponse = (description: string, detail: string, headers?: Json): Json => ({
  description,
  ...(headers === undefined ? {} : { headers }),
  content: {
    "application/json": { schema: { $ref: "#/components/schemas/ErrorDetail" }, example: { detail } }
  }
})

/** The shared responses, by status, and their component names. */
const commonResponses = {
  "413": [
    "PayloadTooLarge",
    detailResponse("The body is larger than the server's `MAX_BODY_BYTES` (D17).", transportDetails.tooLarge)
  ],
  "415": [
    "UnsupportedMediaType",
    detailResponse('The body is not `application/json` (DECISIONS.md "Errors").', transportDetails.unsupportedMediaType)
  ],
  "500": [
    "InternalServerError",
    detailResponse(
      "An unexpected failure; its cause is in the server's log and trace, under the `x-request-id` of the response (O8).",
      transportDetails.internal
    )
  ],
  "503": [
    "ServiceUnavailable",
    detailResponse(
      "The database cannot be reached, a lock the request needed was held past `DATABASE_LOCK_TIMEOUT` (or a statement ran past `DATABASE_STATEMENT_TIMEOUT`, or met a deadlock), or the server is shutting down: retry after `Retry-After` seconds (O9).",
      transportDetails.unavailable,
      { "retry-after": { description: "Seconds to wait before retrying.", schema: { type: "integer" } } }
    )
  ]
} as const

const METHODS = ["get", "put", "post", "delete", "patch"] as const

/** Adds the shared responses to every operation that does not document that status already. */
const withCommonResponses = (paths: Json): void => {
  for (const item of Object.values(paths)) {
    for (const method of METHODS) {
      const operation = item[method]
      if (operation === undefined) continue
      for (const [status, [name]] of Object.entries(commonResponses)) {
        // 413 and 415 respond to a body: operations without one never give them.
        if ((status === "413" || status === "415") && operation.requestBody === undefined) continue
        operation.responses[status] ??= { $ref: `#/components/responses/${name}` }
      }
    }
  }
}

/** Calls `visit` on every object in `value` (arrays looked through), parents before their members. */
const eachObject = (value: unknown, visit: (node: Json) => void): void => {
  if (Array.isArray(value)) {
    for (const item of value) eachObject(item, visit)
    return
  }
  if (typeof value !== "object" || value === null) return
  visit(value as Json)
  for (const child of Object.values(value)) eachObject(child, visit)
}

/**
 * Drops `additionalProperties: false`, opens free-form objects and reduces a
 * union with an empty schema (any value) to that schema (see module docs).
 */
const openObject = (node: Json): void => {
  if (node.additionalProperties === false) delete node.additionalProperties
  // `anyOf: [{}, {type: "null"}]` (a nullable free-form value) is any value: `{}`.
  if (Array.isArray(node.anyOf) && node.anyOf.some((member: Json) => Object.keys(member).length === 0)) {
    delete node.anyOf
  }
  if (
    node.type === "object" &&
    node.properties === undefined &&
    node.additionalProperties === undefined &&
    node.patternProperties === undefined
  ) {
    node.additionalProperties = true
  }
}

/** Renames the components `<Name>Encoded` to `<Name>` where that name is free, and their references. */
const readableComponentNames = (spec: Json): void => {
  const schemas: Json = spec.components.schemas
  const renames = new Map<string, string>()
  for (const name of Object.keys(schemas)) {
    const plain = name.replace(/Encoded$/, "")
    if (plain !== name && !(plain in schemas)) renames.set(name, plain)
  }
  spec.components.schemas = Object.fromEntries(
    Object.entries(schemas).map(([name, schema]) => [renames.get(name) ?? name, schema])
  )
  const prefix = "#/components/schemas/"
  eachObject(spec, (node) => {
    const renamed = typeof node.$ref === "string" ? renames.get(node.$ref.slice(prefix.length)) : undefined
    if (renamed !== undefined && node.$ref.startsWith(prefix)) node.$ref = `${prefix}${renamed}`
  })
}

/** The Standard Webhooks headers of every event request (W4) and its trace context. */
const webhookHeaders = [
  ["webhook-id", "The event's id, the same on every attempt: deduplicate by it (W2, W4)."],
  ["webhook-timestamp", "When this attempt was signed, in Unix seconds; refuse old ones to stop replays (W4)."],
  [
    "webhook-signature",
    "`v1,<base64 HMAC-SHA256>` of `<webhook-id>.<webhook-timestamp>.<body>` with the app's signing secret (the base64 after `whsec_`), per the Standard Webhooks specification (W4)."
  ],
  ["traceparent", "The W3C trace context of the change that produced the event (W4)."]
] as const

/** The tag of the webhook events. */
const WEBHOOKS_TAG = "Webhook events"

/** The `webhooks` member: one POST per event type (W1), its body the event schema of `components`. */
const webhooks = (): Json =>
  Object.fromEntries(
    eventTypes.map((type) => [
      type,
      {
        post: {
          tags: [WEBHOOKS_TAG],
          operationId: `${eventSchemaIdentifier(type)}Webhook`,
          summary: type,
          description: `${eventDescriptions[type]} Sent to the apps subscribed to \`${type}\`, at least once (W2); any 2xx response within the server's \`WEBHOOK_TIMEOUT_MS\` is success, anything else is retried on \`WEBHOOK_RETRY_SCHEDULE\` (W5). The body is byte-identical on every attempt (W3).`,
          parameters: webhookHeaders.map(([name, description]) => ({
            name,
            in: "header",
            required: name !== "traceparent",
            description,
            schema: { type: "string" }
          })),
          requestBody: {
            required: true,
            content: {
              "application/json": { schema: { $ref: `#/components/schemas/${eventSchemaIdentifier(type)}` } }
            }
          },
          responses: {
            "2XX": { description: "Received: the delivery succeeded." },
            default: { description: "Anything else: the delivery is attempted again later (W5)." }
          }
        }
      }
    ])
  )

/** The `RateLimit-*` headers of a response to a limited organization (D20). */
const rateLimitHeaders = {
  "RateLimit-Limit": {
    description: "The organization's burst: the most requests allowed at once (D20). Only when it has a limit.",
    schema: { type: "integer" }
  },
  "RateLimit-Remaining": {
    description: "Requests left in the organization's bucket, as this server process last saw it (D20).",
    schema: { type: "integer" }
  },
  "RateLimit-Reset": {
    description: "Seconds until the bucket is full again (D20).",
    schema: { type: "integer" }
  }
}

/** The request id of every response (O8): required, so a validating proxy (Prism) checks each response has it. */
const requestIdHeader = {
  description:
    "The request's id (O8): the client's `X-Request-Id` when it is 1-200 visible ASCII characters, else a new UUIDv7; the server's log lines and spans of the request carry it.",
  required: true,
  schema: { type: "string" }
}

/** `{name: {$ref}}` for each header of `components.headers` named. */
const headerRefs = (names: ReadonlyArray<string>): Json =>
  Object.fromEntries(names.map((name) => [name, { $ref: `#/components/headers/${name}` }]))

/**
 * The headers every response carries, documented on every response (issue 39
 * item 3): `X-Request-Id` (O8) everywhere, and `RateLimit-*` (D20) on the
 * responses of the conversations and assistants APIs, which an organization
 * with a limit gets on every response, errors included. A response given as
 * a `$ref` gets them in its component.
 */
const withResponseHeaders = (spec: Json): void => {
  spec.components.headers = { ...spec.components.headers, "X-Request-Id": requestIdHeader, ...rateLimitHeaders }
  for (const [path, item] of Object.entries(spec.paths as Json)) {
    const names = isOrganizationApiPath(path) ? ["X-Request-Id", ...Object.keys(rateLimitHeaders)] : ["X-Request-Id"]
    for (const method of METHODS) {
      const operation = item[method]
      if (operation === undefined) continue
      for (const response of Object.values(operation.responses as Json)) {
        const target: Json =
          typeof response.$ref === "string"
            ? spec.components.responses[response.$ref.slice("#/components/responses/".length)]
            : response
        target.headers = { ...target.headers, ...headerRefs(names) }
      }
    }
  }
}

/**
 * D20 in the document: every operation of the conversations and assistants
 * APIs may respond 429 `Rate limit exceeded` with `Retry-After` and the
 * `RateLimit-*` headers, which every response to a limited organization carries.
 */
const withRateLimits = (spec: Json): void => {
  spec.components.responses.RateLimited = detailResponse(
    "The organization's rate limit is exceeded (D20): retry after `Retry-After` seconds. Every response to an organization with a limit carries the `RateLimit-*` headers.",
    transportDetails.rateLimited,
    {
      "Retry-After": { description: "Whole seconds to wait, at least 1.", schema: { type: "integer" } },
      ...headerRefs(Object.keys(rateLimitHeaders))
    }
  )
  for (const [path, item] of Object.entries(spec.paths as Json)) {
    if (!isOrganizationApiPath(path)) continue
    for (const method of METHODS) {
      if (item[method] !== undefined) item[method].responses["429"] ??= { $ref: "#/components/responses/RateLimited" }
    }
  }
}

/** The 409 and 422 responses of D19 (Idempotency-Key). */
const idempotencyResponses = {
  "409": [
    "IdempotencyKeyInProgress",
    "A request with the same `Idempotency-Key` is still running, in this or another process (D19): retry after `Retry-After` seconds.",
    idempotencyDetails.inProgress
  ],
  "422": [
    "IdempotencyKeyReused",
    "The `Idempotency-Key` was used with another method, path or body (D19); nothing changed.",
    idempotencyDetails.differentRequest
  ]
} as const

/**
 * D19 in the document: every POST and PATCH of the conversations and
 * assistants APIs takes the optional `Idempotency-Key` header, may respond with the
 * 409 and 422 of {@link idempotencyResponses} (beside its own responses of those
 * statuses), and its successes may carry `Idempotent-Replayed: true`.
 */
const withIdempotencyKey = (spec: Json): void => {
  const inProgressRetryAfter = {
    description: `Seconds to wait before repeating the request (${IN_PROGRESS_RETRY_AFTER_SECONDS}); sent with the 409 of a key in progress.`,
    schema: { type: "integer" }
  }
  spec.components.parameters = {
    ...spec.components.parameters,
    IdempotencyKey: {
      name: "Idempotency-Key",
      in: "header",
      required: false,
      description: idempotencyKeyDescription,
      schema: { type: "string", minLength: 1, maxLength: 255, pattern: "^[\\x21-\\x7e]+$" },
      example: "5f0c6f7e-8a51-4f0e-9d4e-2b6a0c1d9e3f"
    }
  }
  const replayed = {
    description: "`true` when this is the stored response of an earlier request with the same `Idempotency-Key` (D19).",
    schema: { type: "string", enum: ["true"] }
  }
  for (const [path, item] of Object.entries(spec.paths as Json)) {
    if (!isOrganizationApiPath(path)) continue
    for (const method of ["post", "patch"] as const) {
      const operation = item[method]
      if (operation === undefined) continue
      operation.parameters = [...(operation.parameters ?? []), { $ref: "#/components/parameters/IdempotencyKey" }]
      for (const [status, [name, description, text]] of Object.entries(idempotencyResponses)) {
        const own = operation.responses[status]
        const headers = status === "409" ? { "Retry-After": inProgressRetryAfter } : undefined
        if (own === undefined) spec.components.responses[name] ??= detailResponse(description, text, headers)
        operation.responses[status] =
          own === undefined
            ? { $ref: `#/components/responses/${name}` }
            : {
                description: `${own.description}; or ${description}`,
                ...(headers === undefined ? {} : { headers: { ...own.headers, ...headers } }),
                content: {
                  "application/json": {
                    schema: {
                      anyOf: [own.content["application/json"].schema, { $ref: "#/components/schemas/ErrorDetail" }]
                    }
                  }
                }
              }
      }
      for (const [status, response] of Object.entries(operation.responses as Json)) {
        if (status.startsWith("2")) response.headers = { ...response.headers, "Idempotent-Replayed": replayed }
      }
    }
  }
}

/** The pattern with which the generated document gives a number's encoded side: any numeric-looking string. */
export const NUMERIC_STRING = "^[+-]?(?:\\d+(?:\\.\\d+)?|\\.\\d+)(?:[Ee][+-]?\\d+)?$"

/**
 * Documents the query parameters of `api`'s operations that the generated
 * document gave as numeric strings as the numbers they decode to, with their
 * bounds and description (see module docs). Throws when an operation of
 * `api` with a query is not in `spec` (a path this pass writes differently
 * from the generator).
 */
const numbersInQuery = <Id extends string, Groups extends HttpApiGroup.Constraint>(
  spec: Json,
  api: HttpApi.HttpApi<Id, Groups>
): void =>
  HttpApi.reflect(api, {
    onGroup: () => {},
    onEndpoint: ({ endpoint }) => {
      if (endpoint.query === undefined) return
      const decoded = SchemaAST.toType(endpoint.query.ast)
      if (!SchemaAST.isObjects(decoded)) return
      const operation = operationOf(spec, endpoint)
      for (const parameter of operation.parameters ?? []) {
        if (parameter.in !== "query" || parameter.schema?.pattern !== NUMERIC_STRING) continue
        const property = decoded.propertySignatures.find((candidate) => String(candidate.name) === parameter.name)
        if (property === undefined) continue
        const { description, ...schema }: Json = Schema.toJsonSchemaDocument(Schema.make(property.type)).schema
        parameter.schema = schema
        if (description !== undefined) parameter.description = description
      }
    }
  })

/** The operation of `endpoint` in `spec`; throws when the generator wrote its path otherwise. */
const operationOf = (spec: Json, endpoint: { readonly path: string; readonly method: string }): Json => {
  const path = endpoint.path.replace(/:(\w+)/g, "{$1}")
  const operation = spec.paths[path]?.[endpoint.method.toLowerCase()]
  if (operation === undefined) throw new Error(`OpenAPI document: no operation ${endpoint.method} ${path}`)
  return operation
}

/** How the generator renders {@link NoBody} among a body's alternatives. */
const noBodyJson = JSON.stringify(Schema.toJsonSchemaDocument(NoBody).schema)

/**
 * Documents the bodies of `api`'s operations that may be left out (a payload
 * with {@link NoBody}) as not required, without the alternative the generator
 * renders `NoBody` as (see module docs).
 */
const optionalBodies = <Id extends string, Groups extends HttpApiGroup.Constraint>(
  spec: Json,
  api: HttpApi.HttpApi<Id, Groups>
): void =>
  HttpApi.reflect(api, {
    onGroup: () => {},
    onEndpoint: ({ endpoint }) => {
      const optional = [...endpoint.payload.values()].some(
        (entry) => "schemas" in entry && entry.schemas.some((schema) => schema.ast === NoBody.ast)
      )
      if (!optional) return
      const body = operationOf(spec, endpoint).requestBody
      const media = body.content["application/json"]
      const { anyOf, ...rest }: Json = media.schema
      const members = (anyOf as Array<Json>).filter((member) => JSON.stringify(member) !== noBodyJson)
      if (members.length === anyOf.length) throw new Error(`OpenAPI document: NoBody not found in ${endpoint.path}`)
      media.schema = members.length === 1 ? { ...rest, ...members[0] } : { ...rest, anyOf: members }
      body.required = false
    }
  })

/**
 * Finishes the document generated from `api` (see module docs): shared
 * responses, open objects, numbers in the query, optional bodies, the
 * webhooks section and its tag. Returns `spec`, changed in place.
 */
export const finishDocument = <Id extends string, Groups extends HttpApiGroup.Constraint>(
  spec: Json,
  api: HttpApi.HttpApi<Id, Groups>
): Json => {
  numbersInQuery(spec, api)
  optionalBodies(spec, api)
  spec.components.schemas.ErrorDetail = errorDetail
  spec.components.responses = Object.fromEntries(Object.values(commonResponses).map(([name, body]) => [name, body]))
  withCommonResponses(spec.paths)
  withIdempotencyKey(spec)
  withRateLimits(spec)
  withResponseHeaders(spec)
  spec.webhooks = webhooks()
  spec.tags.push({
    name: WEBHOOKS_TAG,
    description:
      "What an app receives at its `webhook_url`: a POST with the event as JSON, signed per Standard Webhooks (W1-W5). Verify the signature with the app's `signing_secret` before trusting the body."
  })
  readableComponentNames(spec)
  eachObject(spec, openObject)
  return spec
}

/** The event schemas the webhooks refer to, for `HttpApi.AdditionalSchemas` (each has an identifier). */
export const webhookSchemas = Object.values(eventSchemas)
