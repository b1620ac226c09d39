/**
 * The reply and schedule endpoints of a session (conversations.md "Sessions":
 * reply, schedule; DECISIONS.md D5, D7, D15, R1).
 */
import { Schema } from "effect"
import { HttpApiEndpoint, HttpApiGroup, HttpApiSchema, OpenApi } from "effect/http-api"
import { conversationsBasePath } from "../Domain/BasePaths.ts"
import { DateTimeInput, Identifier, JsonObject, Metadata, Timestamp } from "../Domain/Common.ts"
import { ContentInput } from "../Domain/Content.ts"
import { InvalidContentType, SessionNotFound, SessionNotOpen } from "../Domain/Errors.ts"
import { Authorization } from "../Domain/Security.ts"
import { Session } from "../Domain/Session.ts"
import {
  ScheduleNotFound,
  ScheduleNotPending,
  SessionAgentNotAi,
  SessionHasNoAgent,
  SessionHasNoThread
} from "./Errors.ts"

/**
 * POST /sessions/{id}/reply body, all optional: `debounce_time` whole seconds
 * 0-60 (default 3; outside gives 422), `starting_node_id` (the node to start
 * from, R2), `metadata` (merged into the reply message's metadata).
 */
export const ReplyPayload = Schema.Struct({
  debounce_time: Schema.optionalKey(Schema.Int.pipe(Schema.check(Schema.isBetween({ minimum: 0, maximum: 60 })))),
  starting_node_id: Schema.optionalKey(Schema.NullOr(Identifier)),
  metadata: Schema.optionalKey(Metadata)
})

/** A schedule's `config` (D15): an assistant message to insert, or a node to run the AI from. */
export const ScheduleConfig = Schema.Union([
  Schema.Struct({ type: Schema.Literal("message"), message: ContentInput }),
  Schema.Struct({ type: Schema.Literal("node"), node_id: Identifier })
]).annotate({ identifier: "ScheduleConfig" })
export type ScheduleConfig = typeof ScheduleConfig.Type

/** POST /sessions/{id}/schedule body: `scheduled_for` ISO 8601 (a past moment runs at once) and `config` (D15). */
export const SchedulePayload = Schema.Struct({
  scheduled_for: DateTimeInput,
  config: ScheduleConfig
})

/** `pending`, `running`, `done`, `failed` or `canceled` (D15). */
export const ScheduleStatus = Schema.Literals(["pending", "running", "done", "failed", "canceled"])

/** A SessionSchedule (D15) as the schedule endpoints return it. */
export const SessionSchedule = Schema.Struct({
  id: Schema.String,
  session_id: Schema.String,
  organization_id: Schema.String,
  scheduled_for: Timestamp,
  config: JsonObject,
  status: ScheduleStatus,
  error: Schema.NullOr(Schema.String),
  created_at: Timestamp,
  executed_at: Schema.NullOr(Timestamp)
}).annotate({ identifier: "SessionSchedule" })
export type SessionSchedule = typeof SessionSchedule.Type

const sessionPath = { session_id: Identifier }

/** The replies group: reply, schedule, list and cancel schedules; API-key auth. */
export class RepliesApi extends HttpApiGroup.make("replies")
  .add(
    HttpApiEndpoint.post("reply", "/sessions/:session_id/reply", {
      params: sessionPath,
      payload: [ReplyPayload, Schema.Null],
      success: Session,
      // D7's refusals, in its order.
      error: [
        SessionNotFound.Wire,
        SessionNotOpen.Wire,
        SessionHasNoAgent.Wire,
        SessionAgentNotAi.Wire,
        SessionHasNoThread.Wire
      ]
    }),
    HttpApiEndpoint.post("schedule", "/sessions/:session_id/schedule", {
      params: sessionPath,
      payload: SchedulePayload,
      success: SessionSchedule,
      error: [SessionNotFound.Wire, SessionNotOpen.Wire, InvalidContentType.Wire]
    }),
    HttpApiEndpoint.get("listSchedules", "/sessions/:session_id/schedules", {
      params: sessionPath,
      success: Schema.Array(SessionSchedule),
      error: SessionNotFound.Wire
    }),
    HttpApiEndpoint.delete("cancelSchedule", "/sessions/:session_id/schedules/:schedule_id", {
      params: { session_id: Identifier, schedule_id: Identifier },
      success: HttpApiSchema.NoContent,
      error: [SessionNotFound.Wire, ScheduleNotFound.Wire, ScheduleNotPending.Wire]
    })
  )
  .middleware(Authorization)
  .prefix(conversationsBasePath)
  .annotateMerge(OpenApi.annotations({ title: "Replies and schedules" })) {}
