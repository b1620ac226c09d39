/**
 * The reply and schedule endpoints of a session (conversations.md "Sessions":
 * reply, schedule; DECISIONS.md D5, D7, D15, R1).
 */
import { Schema } from "effect"
import { HttpApiEndpoint, HttpApiGroup, HttpApiSchema, OpenApi } from "effect/http-api"
import { conversationsBasePath } from "../Domain/BasePaths.ts"
import { DateTimeInput, Identifier, JsonObject, Metadata, NoBody, Timestamp, Uuid } from "../Domain/Common.ts"
import { ContentInput } from "../Domain/Content.ts"
import { Authorization } from "../Domain/Security.ts"
import { Session } from "../Domain/Session.ts"
import { InvalidContentType } from "../Messages/Errors.ts"
import { SessionNotFound, SessionNotOpen } from "../Sessions/Errors.ts"
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
}).annotate({ examples: [{ debounce_time: 0 }] })

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
}).annotate({
  examples: [
    {
      scheduled_for: "2026-12-01T09:00:00Z",
      config: { type: "message", message: { type: "text", text: "Did the parcel arrive?" } }
    }
  ]
})

/** `pending`, `running`, `done`, `failed` or `canceled` (D15). */
export const ScheduleStatus = Schema.Literals(["pending", "running", "done", "failed", "canceled"])

/** A SessionSchedule (D15) as the schedule endpoints return it. */
export const SessionSchedule = Schema.Struct({
  id: Uuid.annotate({ description: "The schedule's id." }),
  session_id: Uuid.annotate({ description: "The session it belongs to." }),
  organization_id: Uuid.annotate({ description: "The organization it belongs to." }),
  scheduled_for: Timestamp.annotate({ description: "When it runs (ISO 8601, UTC)." }),
  config: JsonObject.annotate({
    description:
      'What it does: `{type: "message", message}` inserts an assistant message, `{type: "node", node_id}` runs the AI from that node.'
  }),
  status: ScheduleStatus.annotate({ description: "`pending`, `running`, `done`, `failed` or `canceled` (D15)." }),
  error: Schema.NullOr(Schema.String).annotate({
    description: "Why it failed or was canceled (`Session closed` when its session closed)."
  }),
  created_at: Timestamp.annotate({ description: "When it was created (ISO 8601, UTC)." }),
  executed_at: Schema.NullOr(Timestamp).annotate({ description: "When it ran; null until then." })
}).annotate({ identifier: "SessionSchedule" })
export type SessionSchedule = typeof SessionSchedule.Type

const sessionPath = { session_id: Identifier }

/** The replies group: reply, schedule, list and cancel schedules; API-key auth. */
export class RepliesApi extends HttpApiGroup.make("replies")
  .add(
    HttpApiEndpoint.post("reply", "/sessions/:session_id/reply", {
      params: sessionPath,
      payload: [ReplyPayload, NoBody],
      success: Session,
      // D7's refusals, in its order.
      error: [
        SessionNotFound.Wire,
        SessionNotOpen.Wire,
        SessionHasNoAgent.Wire,
        SessionAgentNotAi.Wire,
        SessionHasNoThread.Wire
      ]
    }).annotateMerge(
      OpenApi.annotations({
        summary: "Ask the AI agent to reply",
        description:
          "Queues an AI reply to the session after `debounce_time` seconds (0-60, default 3): every call within the window moves the due time, so a burst of messages gets one reply (trailing debounce, R1). The job is durable: a restart loses none and with several processes it runs once. Checks, in this order, each failing with 400: the session is open, has an agent, the agent is an AI agent, the session has a thread (D7). The reply is written later as an assistant message (`message.created`); `starting_node_id` picks the node to start from and `metadata` is merged into the reply's metadata (R2)."
      })
    ),
    HttpApiEndpoint.post("schedule", "/sessions/:session_id/schedule", {
      params: sessionPath,
      payload: SchedulePayload,
      success: SessionSchedule,
      error: [SessionNotFound.Wire, SessionNotOpen.Wire, InvalidContentType.Wire]
    }).annotateMerge(
      OpenApi.annotations({
        summary: "Schedule a message or an AI run",
        description:
          'At `scheduled_for` (a moment in the past runs at once), `config.type: "message"` inserts an assistant message with that content (`message.created` follows), `config.type: "node"` runs the AI from that node. Closing the session cancels its pending schedules (D15).'
      })
    ),
    HttpApiEndpoint.get("listSchedules", "/sessions/:session_id/schedules", {
      params: sessionPath,
      success: Schema.Array(SessionSchedule),
      error: SessionNotFound.Wire
    }).annotateMerge(
      OpenApi.annotations({
        summary: "List a session's schedules",
        description:
          "Every schedule of the session with its status (`pending`, `running`, `done`, `failed`, `canceled`), canceled ones included (D15)."
      })
    ),
    HttpApiEndpoint.delete("cancelSchedule", "/sessions/:session_id/schedules/:schedule_id", {
      params: { session_id: Identifier, schedule_id: Identifier },
      success: HttpApiSchema.NoContent,
      error: [SessionNotFound.Wire, ScheduleNotFound.Wire, ScheduleNotPending.Wire]
    }).annotateMerge(
      OpenApi.annotations({
        summary: "Cancel a schedule",
        description:
          "Cancels a pending schedule: 204, and its status becomes `canceled`. A schedule that is not pending gets 409 `Schedule is not pending`, an unknown one 404 `Schedule not found` (D15)."
      })
    )
  )
  .middleware(Authorization)
  .prefix(conversationsBasePath)
  .annotateMerge(
    OpenApi.annotations({
      title: "Replies and schedules",
      description:
        "AI replies, debounced and durable (R1, R2), and messages or AI runs scheduled for a later moment (D15). Requests use an organization's API key."
    })
  ) {}
