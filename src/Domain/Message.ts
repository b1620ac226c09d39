/**
 * The Message resource (conversations.md "Message", DECISIONS.md D13).
 */
import { Schema } from "effect"
import { JsonObject, Timestamp, Uuid } from "./Common.ts"
import { Content } from "./Content.ts"

/** `user` or `assistant`. */
export const MessageRole = Schema.Literals(["user", "assistant"])
export type MessageRole = typeof MessageRole.Type

/** Delivery states; `pending` < `sent` < `delivered` < `read`; `failed`/`rejected` final (D13). */
export const DeliveryStatus = Schema.Literals(["pending", "sent", "delivered", "read", "failed", "rejected"])
export type DeliveryStatus = typeof DeliveryStatus.Type

/** One reaction of a message's summary (D24): an emoji and how many roles reacted with it. */
export const ReactionCount = Schema.Struct({
  emoji: Schema.String.annotate({ description: "One grapheme." }),
  count: Schema.Int.annotate({ description: "How many roles (each at most once) reacted with it." })
}).annotate({ identifier: "ReactionCount" })

/** A former content of an edited message (D24). */
export const MessageEdit = Schema.Struct({
  content: Content.annotate({ description: "The content the message had before this edit." }),
  edited_at: Timestamp.annotate({ description: "When the edit replaced it." })
}).annotate({ identifier: "MessageEdit" })

/** A message as every endpoint and the message.created event return it. */
export const Message = Schema.Struct({
  id: Uuid.annotate({ description: "The message's id." }),
  session_id: Uuid.annotate({ description: "The session the message belongs to." }),
  conversation_id: Uuid.annotate({ description: "The conversation of that session (D8)." }),
  organization_id: Uuid.annotate({ description: "The organization the message belongs to." }),
  role: MessageRole.annotate({ description: "`user` (the contact) or `assistant` (the agent, human or AI)." }),
  content: Content.annotate({
    description:
      'What was said: `text`, `image`, `audio`, `video` or `file`, or what the AI runtime wrote (`function_call`, `function_result`, `thought`) (D12); `{"type":"redacted"}` once the message was redacted (D23).'
  }),
  redacted_at: Schema.NullOr(Timestamp).annotate({
    description:
      'When the message was redacted (POST .../redact, D23): its content was overwritten with `{"type":"redacted"}`. Null for a message never redacted.'
  }),
  edited_at: Schema.NullOr(Timestamp).annotate({
    description:
      "When the content was last edited (PATCH with `content`, or ingest's `edit_of_provider_message_id`, D24); null when never."
  }),
  edits: Schema.Array(MessageEdit).annotate({
    description:
      "The former contents, oldest first, each with when an edit replaced it (D24); emptied by a redaction (D23)."
  }),
  reactions: Schema.Array(ReactionCount).annotate({
    description:
      "The reactions to this message (D24): each emoji with its count, most first; each role counts once (its latest reaction)."
  }),
  provider_message_id: Schema.NullOr(Schema.String).annotate({
    description: "The channel's id of the message (WhatsApp's `wamid...`, an SMS id); ingest is idempotent on it (D10)."
  }),
  replied_provider_message_id: Schema.NullOr(Schema.String).annotate({
    description: "The channel's id of the message this one replies to."
  }),
  reply_to_message_id: Schema.NullOr(Uuid).annotate({
    description:
      "The message of the same conversation this one replies to (D24): given on POST message, or resolved from `replied_provider_message_id`; null when none, or when the channel's id names no message of the conversation (kept as given)."
  }),
  run_id: Schema.NullOr(Schema.String).annotate({ description: "The AI run that wrote the message (R2), or null." }),
  delivery_status: DeliveryStatus.annotate({
    description:
      "`pending` until the channel reports; never goes back: `pending` < `sent` < `delivered` < `read`, and `failed`/`rejected` are final (D13)."
  }),
  delivery_error_code: Schema.NullOr(Schema.Int).annotate({
    description: "The channel's error code of a failed delivery."
  }),
  delivery_error_message: Schema.NullOr(Schema.String).annotate({
    description: "The channel's error text of a failed delivery."
  }),
  delivered_at: Schema.NullOr(Timestamp).annotate({
    description:
      "When the message was delivered; set when the status reaches `delivered` or `read` and none is given (D13)."
  }),
  metadata: JsonObject.annotate({
    description: "Your data about the message (a reply's carries the reply request's metadata, R2)."
  }),
  created_at: Timestamp.annotate({ description: "When the message was stored (ISO 8601, UTC, microseconds)." }),
  updated_at: Schema.NullOr(Timestamp).annotate({
    description:
      "When its delivery, content (an edit) or reactions last changed or it was redacted (D23, D24); null until then."
  })
}).annotate({ identifier: "Message" })
export type Message = typeof Message.Type
