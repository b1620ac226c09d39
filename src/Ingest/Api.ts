/**
 * The unified ingest endpoint (conversations.md "Unified ingest"; DECISIONS.md
 * D6, D8-D12, D17).
 */
import { Schema } from "effect"
import { HttpApiEndpoint, HttpApiGroup, OpenApi } from "effect/http-api"
import { AgentNotFound } from "../Admin/Errors.ts"
import { conversationsBasePath } from "../Domain/BasePaths.ts"
import { Identifier, JsonObjectInput, ShortText, Uuid } from "../Domain/Common.ts"
import { ContentInput } from "../Domain/Content.ts"
import { ValidationFailed } from "../Domain/Errors.ts"
import { MessageRole } from "../Domain/Message.ts"
import { Authorization } from "../Domain/Security.ts"
import { InvalidContentType } from "../Messages/Errors.ts"

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
  to: Identifier.annotate({
    description: "Your side of the channel: the number or account the message went to or came from."
  }),
  from: Identifier.annotate({
    description: "The contact's side of the channel; it is the contact's `contact_id` (D9)."
  }),
  channel_type: Schema.optionalKey(Identifier.annotate({ description: "The channel, `whatsapp` by default (D9)." })),
  contact: Schema.optionalKey(
    Schema.NullOr(IngestContact).annotate({
      description: "The contact's `name` and `phone`, stored on the contact (D8)."
    })
  ),
  content: Schema.optionalKey(
    Schema.NullOr(ContentInput).annotate({ description: "The message; without it, only the session is acted on (D9)." })
  ),
  role: Schema.optionalKey(
    MessageRole.annotate({ description: "`user` (default: the contact wrote) or `assistant` (you sent it)." })
  ),
  provider_message_id: Schema.optionalKey(
    Schema.NullOr(Identifier).annotate({ description: "The channel's id of the message: a repeat is a no-op (D10)." })
  ),
  replied_provider_message_id: Schema.optionalKey(
    Schema.NullOr(Identifier).annotate({
      description:
        "The channel's id of the message this one quotes: resolved to `reply_to_message_id` when it names a message of the conversation, kept as given otherwise; never a reason to refuse the message (D24)."
    })
  ),
  edit_of_provider_message_id: Schema.optionalKey(
    Schema.NullOr(Identifier).annotate({
      description:
        "The channel's id of a message this call edits (D24): `content` replaces that message's content (kept in its `edits`); no message is stored and no reply is triggered. When it names no message of the conversation, `content` is stored as a new message. Cannot be combined with `agent_id`, `metadata` or a `session` other than `continue` (422)."
    })
  ),
  session: Schema.optionalKey(
    IngestSessionMode.annotate({
      description: "`continue` (default) the open session, `new` session, or `close` the session after this message."
    })
  ),
  agent_id: Schema.optionalKey(
    Schema.NullOr(Identifier).annotate({
      description: "Omitted keeps the session's agent, null removes it, an id assigns that agent (D6)."
    })
  ),
  metadata: Schema.optionalKey(
    JsonObjectInput.annotate({ description: "An RFC 7396 merge patch on the session's metadata (D17)." })
  )
}).annotate({
  examples: [
    {
      to: "+15550199",
      from: "+15550100",
      contact: { name: "Ada Lovelace" },
      content: { type: "text", text: "Hi, where is my order?" },
      provider_message_id: "wamid.HBgL001"
    }
  ]
})
export type IngestPayload = typeof IngestPayload.Type

/**
 * POST /ingest response (spec "Unified ingest"): the conversation (created or
 * reused), the session the call acted on (null when there is none: `close`
 * without content and without an open session, D9), the message stored (null
 * without content), and whether this call created the conversation and the
 * session. A repeated `provider_message_id` gets the first call's ids with
 * both flags false (D10).
 */
export const IngestResponse = Schema.Struct({
  conversation_id: Uuid.annotate({ description: "The conversation of (`channel_type`, `to`, `from`) (D8)." }),
  session_id: Schema.NullOr(Uuid).annotate({
    description: "The session the call acted on; null for `close` without content and without an open session (D9)."
  }),
  message_id: Schema.NullOr(Uuid).annotate({ description: "The message stored; null without content." }),
  created_conversation: Schema.Boolean.annotate({ description: "Whether this call created the conversation." }),
  created_session: Schema.Boolean.annotate({ description: "Whether this call created the session." })
}).annotate({ identifier: "IngestResponse" })
export type IngestResponse = typeof IngestResponse.Type

/** The ingest group, under the conversations base path, with API-key auth. */
export class IngestApi extends HttpApiGroup.make("ingest")
  .add(
    HttpApiEndpoint.post("ingest", "/ingest", {
      payload: IngestPayload,
      success: IngestResponse,
      error: [AgentNotFound.Wire, InvalidContentType.Wire, ValidationFailed.Wire]
    }).annotateMerge(
      OpenApi.annotations({
        summary: "Ingest a channel message",
        description:
          "One call per message received or sent on a channel: finds or creates the contact (`from`), the conversation of (`channel_type`, `to`, `from`) and its open session, stores the message, and triggers the AI reply for `user` messages after the organization's `reply_debounce_seconds` (D8, D9, D11). `session`: `continue` (default) reuses the open session or creates one, `new` closes it and starts another, `close` stores the message then closes the session. Calls for one (organization, `channel_type`, `to`, `from`) are serialized across every process (D9). Idempotent on `provider_message_id` within the conversation: a repeat stores and emits nothing and returns the first call's ids with both `created_*` false (D10). `metadata` is an RFC 7396 merge patch on the session's metadata (at most 16 KiB after the patch, D17)."
      })
    )
  )
  .middleware(Authorization)
  .prefix(conversationsBasePath)
  .annotateMerge(
    OpenApi.annotations({
      title: "Ingest",
      description:
        "One call per channel message (WhatsApp, SMS, web chat): contact, conversation, session and message in one idempotent, serialized step (D8-D11). Requests use an organization's API key."
    })
  ) {}
