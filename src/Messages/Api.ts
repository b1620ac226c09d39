/**
 * The messages endpoints (conversations.md "Messages"; DECISIONS.md D1, D3, D5, D12, D13, D17).
 */
import { Schema } from "effect"
import { HttpApiEndpoint, HttpApiGroup, HttpApiSchema, OpenApi } from "effect/http-api"
import { conversationsBasePath } from "../Domain/BasePaths.ts"
import { DateTimeInput, Identifier, Limit, Offset } from "../Domain/Common.ts"
import { ContentInput } from "../Domain/Content.ts"
import {
  Forbidden,
  InvalidContentType,
  MessageNotFound,
  SessionNotFound,
  SessionNotOpen,
  ValidationFailed
} from "../Domain/Errors.ts"
import { Int32 } from "../Domain/Limits.ts"
import { DeliveryStatus, Message, MessageRole } from "../Domain/Message.ts"
import { Authorization } from "../Domain/Security.ts"

const OptionalIdentifier = Schema.optionalKey(Schema.NullOr(Identifier))

/** POST /sessions/{id}/messages body; `content` is checked per type by the service (D12). */
export const CreateMessagePayload = Schema.Struct({
  content: ContentInput,
  role: MessageRole,
  provider_message_id: OptionalIdentifier,
  replied_provider_message_id: OptionalIdentifier,
  run_id: OptionalIdentifier
})

/** PATCH /sessions/{id}/messages/{message_id} body: delivery tracking only (D13). */
export const UpdateMessagePayload = Schema.Struct({
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
      error: [SessionNotFound.Wire, SessionNotOpen.Wire, InvalidContentType.Wire]
    }),
    HttpApiEndpoint.post("search", "/sessions/:session_id/messages/search", {
      params: sessionPath,
      payload: SearchMessagesPayload,
      success: Schema.Array(Message),
      error: [SessionNotFound.Wire, ValidationFailed.Wire]
    }),
    HttpApiEndpoint.get("get", "/sessions/:session_id/messages/:message_id", {
      params: messagePath,
      success: Message,
      error: [SessionNotFound.Wire, MessageNotFound.Wire, Forbidden.Wire]
    }),
    HttpApiEndpoint.patch("update", "/sessions/:session_id/messages/:message_id", {
      params: messagePath,
      payload: UpdateMessagePayload,
      success: Message,
      error: [SessionNotFound.Wire, MessageNotFound.Wire, Forbidden.Wire]
    })
  )
  .middleware(Authorization)
  .prefix(conversationsBasePath)
  .annotateMerge(OpenApi.annotations({ title: "Messages" })) {}
