/**
 * The unified ingest endpoint (conversations.md "Unified ingest"; DECISIONS.md
 * D6, D8-D12, D17).
 */
import { Schema } from "effect"
import { HttpApiEndpoint, HttpApiGroup, OpenApi } from "effect/http-api"
import { conversationsBasePath } from "../Domain/BasePaths.ts"
import { Identifier, JsonObjectInput, ShortText } from "../Domain/Common.ts"
import { ContentInput } from "../Domain/Content.ts"
import { AgentNotFound, InvalidContentType, ValidationFailed } from "../Domain/Errors.ts"
import { MessageRole } from "../Domain/Message.ts"
import { Authorization } from "../Domain/Security.ts"

/** The `channel_type` of an ingest call that names none (D9). */
export const DEFAULT_CHANNEL_TYPE = "whatsapp"

/**
 * What an ingest call does with the session: `continue` (default) reuses the
 * open session or creates one; `new` closes the open session and creates one;
 * `close` inserts the message (if any), then closes the session.
 */
export const IngestSessionMode = Schema.Literals(["continue", "new", "close"])
export type IngestSessionMode = typeof IngestSessionMode.Type

/**
 * `contact`: `name` and `phone` (each at most 255 characters, D17); when the
 * object is sent, at least one of them must be a string, else 422 at
 * `["body", "contact"]`.
 */
export const IngestContact = Schema.Struct({
  name: Schema.optionalKey(Schema.NullOr(ShortText)),
  phone: Schema.optionalKey(Schema.NullOr(ShortText))
}).pipe(
  Schema.check(
    Schema.makeFilter(
      (contact) => contact.name != null || contact.phone != null || "contact needs at least one of name or phone",
      { expected: "an object with name or phone" }
    )
  )
)
export type IngestContact = typeof IngestContact.Type

/**
 * POST /ingest body (spec "Unified ingest"). `to` and `from` are identifiers
 * of 1-255 characters; `channel_type` defaults to `whatsapp` (D9); `content`
 * is checked per type by the service (400 `Invalid content type`, 422 for bad
 * fields; D12); `role` defaults to `user`; `agent_id` omitted keeps the agent,
 * null removes it, a value assigns it (400 `Agent not found`, D6); `metadata`
 * is an RFC 7396 merge patch on the session metadata (at most 16 KiB after the
 * patch, D17). Null `contact`, `content` and `provider_message_id` mean omitted.
 */
export const IngestPayload = Schema.Struct({
  to: Identifier,
  from: Identifier,
  channel_type: Schema.optionalKey(Identifier),
  contact: Schema.optionalKey(Schema.NullOr(IngestContact)),
  content: Schema.optionalKey(Schema.NullOr(ContentInput)),
  role: Schema.optionalKey(MessageRole),
  provider_message_id: Schema.optionalKey(Schema.NullOr(Identifier)),
  session: Schema.optionalKey(IngestSessionMode),
  agent_id: Schema.optionalKey(Schema.NullOr(Identifier)),
  metadata: Schema.optionalKey(JsonObjectInput)
})
export type IngestPayload = typeof IngestPayload.Type

/**
 * POST /ingest answer (spec "Unified ingest"): the conversation (created or
 * reused), the session the call acted on (null when there is none: `close`
 * without content and without an open session, D9), the message stored (null
 * without content), and whether this call created the conversation and the
 * session. A repeated `provider_message_id` answers the first call's ids with
 * both flags false (D10).
 */
export const IngestResponse = Schema.Struct({
  conversation_id: Schema.String,
  session_id: Schema.NullOr(Schema.String),
  message_id: Schema.NullOr(Schema.String),
  created_conversation: Schema.Boolean,
  created_session: Schema.Boolean
}).annotate({ identifier: "IngestResponse" })
export type IngestResponse = typeof IngestResponse.Type

/** The ingest group, under the conversations base path, with API-key auth. */
export class IngestApi extends HttpApiGroup.make("ingest")
  .add(
    HttpApiEndpoint.post("ingest", "/ingest", {
      payload: IngestPayload,
      success: IngestResponse,
      error: [AgentNotFound.Wire, InvalidContentType.Wire, ValidationFailed.Wire]
    })
  )
  .middleware(Authorization)
  .prefix(conversationsBasePath)
  .annotateMerge(OpenApi.annotations({ title: "Ingest" })) {}
