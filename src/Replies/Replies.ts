/**
 * The replies service (conversations.md "Sessions": reply, schedule;
 * DECISIONS.md D5, D7, D11, D15, R1): triggers durable, debounced reply jobs
 * and keeps session schedules. The jobs and schedules are run by the replies
 * worker (`Worker.ts`) through the AI runtime.
 */
import { PgClient } from "@effect/sql-pg"
import { Clock, Context, Effect, Layer } from "effect"
import { isUuid, type JsonObject, type JsonText } from "../Domain/Common.ts"
import {
  BadRequest,
  Conflict,
  type InvalidContentType,
  NotFound,
  SessionNotFound,
  SessionNotOpen,
  type ValidationFailed
} from "../Domain/Errors.ts"
import type { Session } from "../Domain/Session.ts"
import { validateContent } from "../Messages/Messages.ts"
import { currentTraceContext } from "../Telemetry/Telemetry.ts"
import type { ScheduleConfig, SessionSchedule } from "./Api.ts"
import { NOTIFY_WITHIN_MS, RepliesRepo } from "./Repo.ts"

/** Default debounce of POST /reply, in seconds (conversations.md). */
export const DEFAULT_DEBOUNCE_SECONDS = 3

/** Body of POST /sessions/{id}/reply. */
export interface ReplyRequest {
  /** Whole seconds, 0-60; default {@link DEFAULT_DEBOUNCE_SECONDS}. */
  readonly debounce_time?: number | undefined
  readonly starting_node_id?: string | null | undefined
  readonly metadata?: JsonObject | undefined
}

/** A reply trigger from another domain (ingest, D11). */
export interface ReplyTrigger {
  /** Whole seconds before the job is due (trailing, R1). */
  readonly debounceSeconds: number
  readonly startingNodeId?: string | null | undefined
  readonly metadata?: JsonObject | undefined
}

/** The replies service. */
export class Replies extends Context.Service<
  Replies,
  {
    /**
     * POST /sessions/{id}/reply: checks in D7's order (SessionNotFound 404,
     * SessionNotOpen 400, BadRequest `Session has no agent`, `Session agent is
     * not an AI agent`, `Session has no thread`), then triggers the session's
     * reply job due in `debounce_time` seconds (R1). Answers the session.
     */
    reply(
      organizationId: string,
      sessionId: string,
      request: ReplyRequest
    ): Effect.Effect<JsonText<Session>, SessionNotFound | SessionNotOpen | BadRequest>
    /**
     * Triggers a reply job without the D7 checks (the caller made them), in the
     * caller's transaction: for ingest's automatic reply (D11).
     */
    trigger(organizationId: string, sessionId: string, trigger: ReplyTrigger): Effect.Effect<void>
    /**
     * POST /sessions/{id}/schedule (D15): a pending schedule at `scheduledFor`
     * (a past moment runs at once). A `message` config must be client content
     * (D12). Fails with SessionNotFound, SessionNotOpen (D5),
     * InvalidContentType, ValidationFailed.
     */
    schedule(
      organizationId: string,
      sessionId: string,
      scheduledFor: Date,
      config: ScheduleConfig
    ): Effect.Effect<
      JsonText<SessionSchedule>,
      SessionNotFound | SessionNotOpen | InvalidContentType | ValidationFailed
    >
    /** GET /sessions/{id}/schedules: every schedule, oldest first, canceled ones included (D15). */
    listSchedules(
      organizationId: string,
      sessionId: string
    ): Effect.Effect<JsonText<ReadonlyArray<SessionSchedule>>, SessionNotFound>
    /**
     * DELETE /sessions/{id}/schedules/{schedule_id} (D15): cancels a pending
     * schedule. Fails with SessionNotFound, NotFound `Schedule not found`,
     * Conflict `Schedule is not pending`.
     */
    cancelSchedule(
      organizationId: string,
      sessionId: string,
      scheduleId: string
    ): Effect.Effect<void, SessionNotFound | NotFound | Conflict>
  }
>()("parley/Replies") {
  static readonly layer = Layer.effect(
    Replies,
    Effect.gen(function* () {
      const sql = yield* PgClient.PgClient
      const repo = yield* RepliesRepo

      const enqueue = Effect.fnUntraced(function* (organizationId: string, sessionId: string, trigger: ReplyTrigger) {
        const now = yield* Clock.currentTimeMillis
        yield* repo.enqueue({
          organizationId,
          sessionId,
          notify: trigger.debounceSeconds * 1000 < NOTIFY_WITHIN_MS,
          dueAt: new Date(now + trigger.debounceSeconds * 1000),
          startingNodeId: trigger.startingNodeId ?? null,
          metadata: trigger.metadata ?? {},
          traceContext: yield* currentTraceContext
        })
      })

      const reply = Effect.fn("Replies.reply")(
        function* (organizationId: string, sessionId: string, request: ReplyRequest) {
          const now = yield* Clock.currentTimeMillis
          const debounceMs = (request.debounce_time ?? DEFAULT_DEBOUNCE_SECONDS) * 1000
          const state = yield* repo.reply({
            organizationId,
            sessionId,
            notify: debounceMs < NOTIFY_WITHIN_MS,
            dueAt: new Date(now + debounceMs),
            startingNodeId: request.starting_node_id ?? null,
            metadata: request.metadata ?? {},
            traceContext: yield* currentTraceContext
          })
          if (state === undefined) return yield* new SessionNotFound()
          if (state.status !== "open") return yield* new SessionNotOpen()
          if (state.agent_id === null) return yield* new BadRequest({ detail: "Session has no agent" })
          if (state.agent_type !== "ai") return yield* new BadRequest({ detail: "Session agent is not an AI agent" })
          if (state.thread_id === null) return yield* new BadRequest({ detail: "Session has no thread" })
          return state.body as JsonText<Session>
        },
        Effect.catchTag("SqlError", Effect.die)
      )

      const trigger = Effect.fn("Replies.trigger")(enqueue, Effect.catchTag("SqlError", Effect.die))

      /** The session's open state (D1, D5). */
      const sessionState = Effect.fnUntraced(function* (organizationId: string, sessionId: string) {
        const state = yield* repo.sessionForReply(organizationId, sessionId)
        if (state === undefined) return yield* new SessionNotFound()
        return state
      })

      const schedule = Effect.fn("Replies.schedule")(
        function* (organizationId: string, sessionId: string, scheduledFor: Date, config: ScheduleConfig) {
          const stored: JsonObject =
            config.type === "message"
              ? { type: "message", message: yield* validateContent(config.message) }
              : { type: "node", node_id: config.node_id }
          const traceContext = yield* currentTraceContext
          return yield* sql.withTransaction(
            Effect.gen(function* () {
              const state = yield* sessionState(organizationId, sessionId)
              if (state.status !== "open") return yield* new SessionNotOpen()
              const body = yield* repo.insertSchedule({
                organizationId,
                sessionId: state.id,
                scheduledFor,
                config: stored,
                traceContext
              })
              return body as JsonText<SessionSchedule>
            })
          )
        },
        Effect.catchTag("SqlError", Effect.die)
      )

      const listSchedules = Effect.fn("Replies.listSchedules")(
        function* (organizationId: string, sessionId: string) {
          const state = yield* sessionState(organizationId, sessionId)
          return (yield* repo.listSchedules(state.id)) as JsonText<ReadonlyArray<SessionSchedule>>
        },
        Effect.catchTag("SqlError", Effect.die)
      )

      const cancelSchedule = Effect.fn("Replies.cancelSchedule")(
        function* (organizationId: string, sessionId: string, scheduleId: string) {
          const state = yield* sessionState(organizationId, sessionId)
          const notFound = new NotFound({ detail: "Schedule not found" })
          if (!isUuid(scheduleId)) return yield* notFound
          if (yield* repo.cancelSchedule(state.id, scheduleId)) return
          const status = yield* repo.scheduleStatus(state.id, scheduleId)
          if (status === undefined) return yield* notFound
          return yield* new Conflict({ detail: "Schedule is not pending" })
        },
        Effect.catchTag("SqlError", Effect.die)
      )

      return Replies.of({ reply, trigger, schedule, listSchedules, cancelSchedule })
    })
  )
}
