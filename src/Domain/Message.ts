/**
 * The Message resource (conversations.md "Message", DECISIONS.md D13).
 */
import { Schema } from "effect"
import { JsonObject, Timestamp } from "./Common.ts"
import { Content } from "./Content.ts"

/** `user` or `assistant`. */
export const MessageRole = Schema.Literals(["user", "assistant"])
export type MessageRole = typeof MessageRole.Type

/** Delivery states; `pending` < `sent` < `delivered` < `read`; `failed`/`rejected` final (D13). */
export const DeliveryStatus = Schema.Literals(["pending", "sent", "delivered", "read", "failed", "rejected"])
export type DeliveryStatus = typeof DeliveryStatus.Type

/** A message as every endpoint and the message.created event return it. */
export const Message = Schema.Struct({
  id: Schema.String,
  session_id: Schema.String,
  conversation_id: Schema.String,
  organization_id: Schema.String,
  role: MessageRole,
  content: Content,
  provider_message_id: Schema.NullOr(Schema.String),
  replied_provider_message_id: Schema.NullOr(Schema.String),
  run_id: Schema.NullOr(Schema.String),
  delivery_status: DeliveryStatus,
  delivery_error_code: Schema.NullOr(Schema.Int),
  delivery_error_message: Schema.NullOr(Schema.String),
  delivered_at: Schema.NullOr(Timestamp),
  metadata: JsonObject,
  created_at: Timestamp,
  updated_at: Schema.NullOr(Timestamp)
}).annotate({ identifier: "Message" })
export type Message = typeof Message.Type
