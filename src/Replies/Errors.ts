/**
 * The failures of the replies endpoints (conversations.md "Sessions": reply,
 * schedules; DECISIONS.md D7, D15), one tagged error per case so a typed
 * client tells them apart. On the wire each is `{"detail": "<text>"}` with its
 * status, exactly as before they had classes of their own.
 */
import { Schema } from "effect"
import { asDetail, detailDefault } from "../Domain/Errors.ts"

/** 400 `Session has no agent`: POST /reply to a session without an agent (D7). */
export class SessionHasNoAgent extends Schema.TaggedError<SessionHasNoAgent>()(
  "SessionHasNoAgent",
  { detail: detailDefault("Session has no agent") },
  { httpApiStatus: 400 }
) {
  static readonly Wire = SessionHasNoAgent.pipe(asDetail(Schema.String))
}

/** 400 `Session agent is not an AI agent`: POST /reply to a session whose agent is human (D7). */
export class SessionAgentNotAi extends Schema.TaggedError<SessionAgentNotAi>()(
  "SessionAgentNotAi",
  { detail: detailDefault("Session agent is not an AI agent") },
  { httpApiStatus: 400 }
) {
  static readonly Wire = SessionAgentNotAi.pipe(asDetail(Schema.String))
}

/** 400 `Session has no thread`: POST /reply to a session that never got a thread (D7). */
export class SessionHasNoThread extends Schema.TaggedError<SessionHasNoThread>()(
  "SessionHasNoThread",
  { detail: detailDefault("Session has no thread") },
  { httpApiStatus: 400 }
) {
  static readonly Wire = SessionHasNoThread.pipe(asDetail(Schema.String))
}

/** 404 `Schedule not found`: no such schedule in the session (D15). */
export class ScheduleNotFound extends Schema.TaggedError<ScheduleNotFound>()(
  "ScheduleNotFound",
  { detail: detailDefault("Schedule not found") },
  { httpApiStatus: 404 }
) {
  static readonly Wire = ScheduleNotFound.pipe(asDetail(Schema.String))
}

/** 409 `Schedule is not pending`: DELETE of a schedule that already ran, runs or was canceled (D15). */
export class ScheduleNotPending extends Schema.TaggedError<ScheduleNotPending>()(
  "ScheduleNotPending",
  { detail: detailDefault("Schedule is not pending") },
  { httpApiStatus: 409 }
) {
  static readonly Wire = ScheduleNotPending.pipe(asDetail(Schema.String))
}
