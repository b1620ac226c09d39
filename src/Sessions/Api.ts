/**
 * The sessions endpoints (conversations.md "Sessions"; DECISIONS.md D1, D2, D4-D7, D17).
 */
import { Schema } from "effect"
import { HttpApiEndpoint, HttpApiGroup, HttpApiSchema, OpenApi } from "effect/http-api"
import { AgentNotFound } from "../Admin/Errors.ts"
import { conversationsBasePath } from "../Domain/BasePaths.ts"
import { Identifier, Limit, Metadata, NoBody, Offset, ShortText } from "../Domain/Common.ts"
import { Authorization } from "../Domain/Security.ts"
import { Session, SessionStatus } from "../Domain/Session.ts"
import { SessionNotFound, SessionNotOpen } from "./Errors.ts"

/** POST /sessions body. */
export const CreateSessionPayload = Schema.Struct({
  contact_id: Identifier.annotate({ description: "Your id of the contact, 1-255 characters (D8, D17)." }),
  contact_name: ShortText.annotate({ description: "The contact's name; stored on the contact (D8)." }),
  agent_id: Schema.optionalKey(
    Schema.NullOr(Identifier).annotate({ description: "An agent of the organization (D6); null or omitted: none." })
  ),
  status: Schema.optionalKey(SessionStatus.annotate({ description: "`open` (default) or `closed`." })),
  metadata: Schema.optionalKey(Metadata.annotate({ description: "Any JSON object of at most 16 KiB (D17)." }))
}).annotate({
  examples: [{ contact_id: "+15550100", contact_name: "Ada Lovelace", metadata: { whatsapp_instance_id: "wa-01" } }]
})

/** POST /sessions/search body (D2): limit 1-1000, default 10; offset default 0. */
export const SearchSessionsPayload = Schema.Struct({
  contact_id: Schema.optionalKey(Identifier.annotate({ description: "Only this contact's sessions." })),
  status: Schema.optionalKey(SessionStatus.annotate({ description: "Only sessions of this status." })),
  metadata: Schema.optionalKey(
    Metadata.annotate({ description: "Only sessions whose metadata contains these members (JSON containment, D2)." })
  ),
  offset: Schema.optionalKey(Offset.annotate({ description: "Results to skip (default 0)." })),
  limit: Schema.optionalKey(Limit(1000).annotate({ description: "Most results, 1-1000 (default 10, D2)." }))
}).annotate({ examples: [{ contact_id: "+15550100", status: "open", limit: 1 }] })

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
    }).annotateMerge(
      OpenApi.annotations({
        summary: "Create a session",
        description:
          "Creates a session for `contact_id` (the contact is created or its name updated, D8) in the contact's conversation without a channel, open unless `status` says `closed`. `agent_id` must name an agent of the organization (400 `Agent not found`, D6); an AI agent gives the session a `thread_id` (D7). Emits `conversation.created` when the conversation is new, then `session.created` (W1)."
      })
    ),
    HttpApiEndpoint.post("search", "/sessions/search", {
      payload: SearchSessionsPayload,
      success: Schema.Array(Session)
    }).annotateMerge(
      OpenApi.annotations({
        summary: "Search sessions",
        description:
          "Sessions of the organization matching every given filter: `contact_id`, `status`, and `metadata` by JSON containment (the session's metadata holds every given member). Newest first (`created_at`, then `id`, descending) so the first result is the latest session; `limit` 1-1000, default 10; `offset` default 0 (D2)."
      })
    ),
    HttpApiEndpoint.get("get", "/sessions/:session_id", {
      params: sessionPath,
      success: Session,
      error: SessionNotFound.Wire
    }).annotateMerge(
      OpenApi.annotations({
        summary: "Get a session",
        description:
          "The session. A session that does not exist or belongs to another organization gets 404 `Session not found` on every `/sessions/{session_id}` operation (D1)."
      })
    ),
    HttpApiEndpoint.patch("update", "/sessions/:session_id", {
      params: sessionPath,
      payload: UpdateSessionPayload,
      success: Session,
      error: [SessionNotFound.Wire, SessionNotOpen.Wire, AgentNotFound.Wire]
    }).annotateMerge(
      OpenApi.annotations({
        summary: "Update a session",
        description:
          "Changes the members of `fields` that are present: `metadata` (replaced), `status` (`closed` closes the session exactly as finish does; `open` on a closed session gets 400 `Session is closed and cannot be reopened`) and `agent_id` (changes the agent exactly as transfer does; null removes it) (D4). Other changes on a closed session get 400 `Session is not open` (D5)."
      })
    ),
    HttpApiEndpoint.post("transfer", "/sessions/:session_id/transfer", {
      params: sessionPath,
      payload: [TransferSessionPayload, NoBody],
      success: Session,
      error: [SessionNotFound.Wire, SessionNotOpen.Wire, AgentNotFound.Wire]
    }).annotateMerge(
      OpenApi.annotations({
        summary: "Transfer a session to another agent",
        description:
          "Gives the session the agent `agent_id`, or no agent when it is null, omitted or the body is empty. The agent must be one of the organization's (400 `Agent not found`, D6); a session's first AI agent gives it a `thread_id`, kept afterwards (D7). Emits `session.transferred` (W1). A closed session gets 400 `Session is not open` (D5)."
      })
    ),
    HttpApiEndpoint.post("finish", "/sessions/:session_id/finish", {
      params: sessionPath,
      payload: [FinishSessionPayload, NoBody],
      success: Session,
      error: [SessionNotFound.Wire, SessionNotOpen.Wire]
    }).annotateMerge(
      OpenApi.annotations({
        summary: "Finish a session",
        description:
          "Closes the session, recording `ending_survey_id` when given. Emits `session.finished` and `session.closed` with `action: null` (W1); the session's pending schedules are canceled and its pending reply dropped (D15, R1). A closed session gets 400 `Session is not open` (D5)."
      })
    )
  )
  .middleware(Authorization)
  .prefix(conversationsBasePath)
  .annotateMerge(
    OpenApi.annotations({
      title: "Sessions",
      description:
        "A session is one stretch of a conversation between a contact and an agent: open until finished, closed by ingest, or expired. Requests use an organization's API key; a session of another organization gets 404 (D1)."
    })
  ) {}
