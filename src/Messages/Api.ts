/**
 * The messages endpoints (conversations.md "Messages"; DECISIONS.md D1, D3, D5, D12, D13, D17, D23).
 */
import { Schema } from "effect"
import { HttpApiEndpoint, HttpApiGroup, HttpApiSchema, OpenApi } from "effect/http-api"
import { conversationsBasePath } from "../Domain/BasePaths.ts"
import { DateTimeInput, Identifier, Limit, Offset } from "../Domain/Common.ts"
import { ContentInput } from "../Domain/Content.ts"
import { Forbidden, ValidationFailed } from "../Domain/Errors.ts"
import { Int32 } from "../Domain/Limits.ts"
import { DeliveryStatus, Message, MessageRole } from "../Domain/Message.ts"
import { Authorization } from "../Domain/Security.ts"
import { SessionNotFound, SessionNotOpen } from "../Sessions/Errors.ts"
import { InvalidContentType, MessageNotFound, MessageRedacted, ReferencedMessageNotFound } from "./Errors.ts"

/** An optional identifier member (null: none) with its description. */
const optionalIdentifier = (description: string) =>
  Schema.optionalKey(Schema.NullOr(Identifier).annotate({ description }))

/** POST /sessions/{id}/messages body; `content` is checked per type by the service (D12). */
export const CreateMessagePayload = Schema.Struct({
  content: ContentInput,
  role: MessageRole.annotate({ description: "`user` (the contact) or `assistant` (the agent)." }),
  provider_message_id: optionalIdentifier("The channel's id of the message."),
  replied_provider_message_id: optionalIdentifier(
    "The channel's id of the message this one replies to; resolved to `reply_to_message_id` when it names a message of the conversation (D24)."
  ),
  reply_to_message_id: optionalIdentifier(
    "The id of the message of the same conversation this one replies to (D24); else 400 `Message not found`."
  ),
  run_id: optionalIdentifier("The AI run the message comes from, if any.")
}).annotate({
  examples: [
    { role: "user", content: { type: "text", text: "Hi, where is my order?" }, provider_message_id: "wamid.HBgL001" }
  ]
})

/** PATCH /sessions/{id}/messages/{message_id} body: delivery tracking (D13) and edits (D24). */
export const UpdateMessagePayload = Schema.Struct({
  content: Schema.optionalKey(
    ContentInput.annotate({
      description:
        "An edit (D24): the new content (text, image, audio, video or file); the former one is kept in `edits` and `edited_at` is set. The same content again changes nothing."
    })
  ),
  provider_message_id: Schema.optionalKey(Identifier),
  replied_provider_message_id: Schema.optionalKey(Identifier),
  delivery_status: Schema.optionalKey(DeliveryStatus),
  delivery_error_code: Schema.optionalKey(Schema.NullOr(Int32)),
  delivery_error_message: Schema.optionalKey(Schema.NullOr(Schema.String.pipe(Schema.check(Schema.isMaxLength(4096))))),
  delivered_at: Schema.optionalKey(Schema.NullOr(DateTimeInput))
})

/** POST /sessions/{id}/messages/search body (D3): `session_id` must equal the path's. */
export const SearchMessagesPayload = Schema.Struct({
  session_id: Identifier,
  provider_message_id: Schema.optionalKey(Identifier),
  replied_provider_message_id: Schema.optionalKey(Identifier),
  role: Schema.optionalKey(MessageRole),
  offset: Schema.optionalKey(Offset),
  limit: Schema.optionalKey(Limit(1000))
})

const sessionPath = { session_id: Identifier }
const messagePath = { session_id: Identifier, message_id: Identifier }

/** The messages group, under the conversations base path, with API-key auth. */
export class MessagesApi extends HttpApiGroup.make("messages")
  .add(
    HttpApiEndpoint.post("create", "/sessions/:session_id/messages", {
      params: sessionPath,
      payload: CreateMessagePayload,
      success: Message.pipe(HttpApiSchema.status(201)),
      error: [SessionNotFound.Wire, SessionNotOpen.Wire, InvalidContentType.Wire, ReferencedMessageNotFound.Wire]
    }).annotateMerge(
      OpenApi.annotations({
        summary: "Add a message to a session",
        description:
          "Stores a message of role `user` or `assistant` in an open session (400 `Session is not open` otherwise, D5) with delivery status `pending`, and emits `message.created` (W1). `content.type` is `text`, `image`, `video`, `audio` or `file`, each with its fields (422 for bad fields); another type, the runtime's `function_call`, `function_result` and `thought` included, gets 400 `Invalid content type` (D12). Storing a message does not trigger a reply: call reply, or use ingest (D11). A reply names the message it answers: `reply_to_message_id` (a message of the same conversation, else 400 `Message not found`) or the channel's `replied_provider_message_id`, resolved to `reply_to_message_id` when it names a message of the conversation and kept as given otherwise (D24). A `reaction` (`{type, emoji, message_id}`, `emoji` one grapheme or \"\" to remove) names a message of the same conversation (else 400 `Message not found`): it is stored as a message and replaces the role's reaction in that message's `reactions` summary, with `message.updated` of that message when the summary changed (D24)."
      })
    ),
    HttpApiEndpoint.post("search", "/sessions/:session_id/messages/search", {
      params: sessionPath,
      payload: SearchMessagesPayload,
      success: Schema.Array(Message),
      error: [SessionNotFound.Wire, ValidationFailed.Wire]
    }).annotateMerge(
      OpenApi.annotations({
        summary: "Search a session's messages",
        description:
          "Messages of the session matching every given filter (`provider_message_id`, `replied_provider_message_id`, `role`), oldest first (`created_at`, then `id`); `limit` 1-1000, default 100; `offset` default 0. `session_id` in the body must equal the path's, else 422 (D3)."
      })
    ),
    HttpApiEndpoint.get("get", "/sessions/:session_id/messages/:message_id", {
      params: messagePath,
      success: Message,
      error: [SessionNotFound.Wire, MessageNotFound.Wire, Forbidden.Wire]
    }).annotateMerge(
      OpenApi.annotations({
        summary: "Get a message",
        description:
          "The message. 404 `Session not found` for a session of another organization (D1), 403 `Forbidden` for a message of another organization, 404 `Message not found` for a missing one."
      })
    ),
    HttpApiEndpoint.patch("update", "/sessions/:session_id/messages/:message_id", {
      params: messagePath,
      payload: UpdateMessagePayload,
      success: Message,
      error: [SessionNotFound.Wire, MessageNotFound.Wire, Forbidden.Wire, InvalidContentType.Wire, MessageRedacted.Wire]
    }).annotateMerge(
      OpenApi.annotations({
        summary: "Record a message's delivery, or edit it",
        description:
          "Delivery tracking from the channel: `provider_message_id`, `replied_provider_message_id`, `delivery_status`, `delivery_error_code`, `delivery_error_message`, `delivered_at`. The status never goes back (`pending` < `sent` < `delivered` < `read`; `failed` and `rejected` are final): a PATCH that would move it backwards gets 200 and keeps the later status, its other members still applied; `delivered_at` is set when the status reaches `delivered` or `read` and none is given (D13). Works on closed sessions (D5). Emits `message.updated` when a delivery member or the content changed (W1). With `content`, an edit (D24): content other than the current one replaces it, the former one is appended to `edits` (`{content, edited_at}`) and `edited_at` is set; only text, image, audio, video and file messages are edited, to such content (else 400 `Invalid content type`), and a redacted message is not (409 `Message is redacted`)."
      })
    ),
    HttpApiEndpoint.post("redact", "/sessions/:session_id/messages/:message_id/redact", {
      params: messagePath,
      success: Message,
      error: [SessionNotFound.Wire, MessageNotFound.Wire, Forbidden.Wire]
    }).annotateMerge(
      OpenApi.annotations({
        summary: "Redact a message",
        description:
          'Overwrites the message\'s `content` with `{"type":"redacted"}` and sets `redacted_at` (and `updated_at`); answers the message. Also overwritten: the `function_call` and `function_result` messages of its run (same session and `run_id`: the tool calls of the AI turn that wrote it, R2), each redacted alike, and the copies of these messages inside `message.created` and `message.updated` events not yet delivered to every subscribed app (the one exception to byte-identical attempts, W3). Emits `message.updated` for each message redacted (W1). A message redacted already is answered as it is, and nothing is emitted. Works on closed sessions (D5 does not apply). A redacted message stays in searches, the export and the AI\'s history (as the text `[redacted]`) (D23). Errors as GET message (D1).'
      })
    )
  )
  .middleware(Authorization)
  .prefix(conversationsBasePath)
  .annotateMerge(
    OpenApi.annotations({
      title: "Messages",
      description:
        "The messages of a session, with their delivery tracking (D13). Requests use an organization's API key."
    })
  ) {}
