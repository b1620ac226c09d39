/**
 * The errors of the messages domain (conversations.md "Messages"; DECISIONS.md D1, D12),
 * each a `Schema.TaggedError` with its status and `*.Wire`, the `{detail}`
 * body an endpoint lists (`Domain/Errors.ts` says how). Imports only `effect`
 * and `Domain/`: a contract file.
 */
import { Schema } from "effect"
import { asDetail, detailDefault } from "../Domain/Errors.ts"

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

/**
 * 400 `Message not found` (D24): a `reply_to_message_id`, or a reaction's
 * `message_id`, that names no message of the session's conversation.
 */
export class ReferencedMessageNotFound extends Schema.TaggedError<ReferencedMessageNotFound>()(
  "ReferencedMessageNotFound",
  { detail: detailDefault("Message not found") },
  { httpApiStatus: 400 }
) {
  static readonly Wire = ReferencedMessageNotFound.pipe(asDetail(Schema.Literal("Message not found")))
}

/** 409 `Message is redacted` (D24, D23): an edit of a redacted message. */
export class MessageRedacted extends Schema.TaggedError<MessageRedacted>()(
  "MessageRedacted",
  { detail: detailDefault("Message is redacted") },
  { httpApiStatus: 409 }
) {
  static readonly Wire = MessageRedacted.pipe(asDetail(Schema.Literal("Message is redacted")))
}
