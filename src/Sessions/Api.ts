/**
 * The sessions endpoints (conversations.md "Sessions"; DECISIONS.md D1, D2, D4-D7, D17).
 */
import { Schema } from "effect"
import { HttpApiEndpoint, HttpApiGroup, HttpApiSchema, OpenApi } from "effect/http-api"
import { conversationsBasePath } from "../Domain/BasePaths.ts"
import { Identifier, Limit, Metadata, Offset, ShortText } from "../Domain/Common.ts"
import { AgentNotFound, SessionNotFound, SessionNotOpen } from "../Domain/Errors.ts"
import { Authorization } from "../Domain/Security.ts"
import { Session, SessionStatus } from "../Domain/Session.ts"

/** POST /sessions body. */
export const CreateSessionPayload = Schema.Struct({
  contact_id: Identifier,
  contact_name: ShortText,
  agent_id: Schema.optionalKey(Schema.NullOr(Identifier)),
  status: Schema.optionalKey(SessionStatus),
  metadata: Schema.optionalKey(Metadata)
})

/** POST /sessions/search body (D2): limit 1-1000, default 10; offset default 0. */
export const SearchSessionsPayload = Schema.Struct({
  contact_id: Schema.optionalKey(Identifier),
  status: Schema.optionalKey(SessionStatus),
  metadata: Schema.optionalKey(Metadata),
  offset: Schema.optionalKey(Offset),
  limit: Schema.optionalKey(Limit(1000))
})

/** PATCH /sessions/{id} body (D4): `fields.agent_id` null removes the agent. */
export const UpdateSessionPayload = Schema.Struct({
  fields: Schema.Struct({
    metadata: Schema.optionalKey(Metadata),
    status: Schema.optionalKey(SessionStatus),
    agent_id: Schema.optionalKey(Schema.NullOr(Identifier))
  })
})

/** POST /sessions/{id}/transfer body: `agent_id` null (or omitted, or no body) removes the agent. */
export const TransferSessionPayload = Schema.Struct({
  agent_id: Schema.optionalKey(Schema.NullOr(Identifier))
})

/** POST /sessions/{id}/finish body, possibly `{}` or no body at all. */
export const FinishSessionPayload = Schema.Struct({
  ending_survey_id: Schema.optionalKey(Schema.NullOr(Identifier))
})

const sessionPath = { session_id: Identifier }

/** The sessions group, under the conversations base path, with API-key auth. */
export class SessionsApi extends HttpApiGroup.make("sessions")
  .add(
    HttpApiEndpoint.post("create", "/sessions", {
      payload: CreateSessionPayload,
      success: Session.pipe(HttpApiSchema.status(201)),
      error: AgentNotFound.Wire
    }),
    HttpApiEndpoint.post("search", "/sessions/search", {
      payload: SearchSessionsPayload,
      success: Schema.Array(Session)
    }),
    HttpApiEndpoint.get("get", "/sessions/:session_id", {
      params: sessionPath,
      success: Session,
      error: SessionNotFound.Wire
    }),
    HttpApiEndpoint.patch("update", "/sessions/:session_id", {
      params: sessionPath,
      payload: UpdateSessionPayload,
      success: Session,
      error: [SessionNotFound.Wire, SessionNotOpen.Wire, AgentNotFound.Wire]
    }),
    HttpApiEndpoint.post("transfer", "/sessions/:session_id/transfer", {
      params: sessionPath,
      payload: [TransferSessionPayload, Schema.Null],
      success: Session,
      error: [SessionNotFound.Wire, SessionNotOpen.Wire, AgentNotFound.Wire]
    }),
    HttpApiEndpoint.post("finish", "/sessions/:session_id/finish", {
      params: sessionPath,
      payload: [FinishSessionPayload, Schema.Null],
      success: Session,
      error: [SessionNotFound.Wire, SessionNotOpen.Wire]
    })
  )
  .middleware(Authorization)
  .prefix(conversationsBasePath)
  .annotateMerge(OpenApi.annotations({ title: "Sessions" })) {}
