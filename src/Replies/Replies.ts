/**
 * The replies service (conversations.md "Sessions": reply, schedule;
 * DECISIONS.md D5, D7, D11, D15, R1): triggers durable, debounced reply jobs
 * and keeps session schedules. The jobs and schedules are run by the replies
 * worker (`Worker.ts`) through the AI runtime. The rules that live in
 * TypeScript (D7's checks, the trailing debounce) are in `Rules.ts`.
 */
import { Clock, Context, Effect, Layer } from "effect"
import { isUuid, type JsonObject, type JsonText } from "../Domain/Common.ts"
import type { ValidationFailed } from "../Domain/Errors.ts"
import type { Session } from "../Domain/Session.ts"
import type { InvalidContentType } from "../Messages/Errors.ts"
import { validateContent } from "../Messages/Messages.ts"
import { SessionNotFound, SessionNotOpen } from "../Sessions/Errors.ts"
import { currentTraceContext } from "../Telemetry/Telemetry.ts"
import type { ScheduleConfig, SessionSchedule } from "./Api.ts"
import { ScheduleNotFound, ScheduleNotPending } from "./Errors.ts"
import { RepliesRepo } from "./Repo.ts"
import { type ReplyRefusal, type ReplyState, replyDue, replyRefusal } from "./Rules.ts"

/** Default debounce of POST /reply, in seconds (conversations.md). */
const DEFAULT_DEBOUNCE_SECONDS = 3

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
     * POST /sessions/{id}/reply: refuses in D7's order (`Rules.replyRefusal`:
     * SessionNotFound 404, SessionNotOpen, SessionHasNoAgent,
     * SessionAgentNotAi, SessionHasNoThread 400), else triggers the session's
     * reply job due in `debounce_time` seconds (R1 trailing debounce: a job
     * still pending is moved to the new due time). Returns the session's wire
     * JSON. One statement (`RepliesRepo.reply`).
     */
    reply(
      organizationId: string,
      sessionId: string,
      request: ReplyRequest
    ): Effect.Effect<JsonText<Session>, ReplyRefusal>
    /**
     * D11: ingest's automatic reply. Triggers the reply job of `session` due in
     * `trigger.debounceSeconds` (R1) when D7 would answer it
     * (`Rules.replyRefusal` accepts its state: open, an AI agent, a thread),
     * in the caller's transaction; else does nothing. Returns whether it
     * triggered.
     */
    trigger(
      organizationId: string,
      session: ReplyState & { readonly id: string },
      trigger: ReplyTrigger
    ): Effect.Effect<boolean>
    /**
     * POST /sessions/{id}/schedule (D15): a pending schedule at `scheduledFor`
     * (ISO 8601 text, kept to the microsecond; a past moment runs at once); returns its wire JSON. A `message` config
     * must be client content (D12). Fails with SessionNotFound, SessionNotOpen
     * (D5), InvalidContentType, ValidationFailed.
     */
    schedule(
      organizationId: string,
      sessionId: string,
      scheduledFor: string,
      config: ScheduleConfig
    ): Effect.Effect<
      JsonText<SessionSchedule>,
      SessionNotFound | SessionNotOpen | InvalidContentType | ValidationFailed
    >
    /**
     * GET /sessions/{id}/schedules: every schedule, oldest first, canceled
     * ones included (D15), as a JSON array. Fails with SessionNotFound.
     */
    listSchedules(
      organizationId: string,
      sessionId: string
    ): Effect.Effect<JsonText<ReadonlyArray<SessionSchedule>>, SessionNotFound>
    /**
     * DELETE /sessions/{id}/schedules/{schedule_id} (D15): cancels a pending
     * schedule (status `canceled`). Fails with SessionNotFound,
     * ScheduleNotFound 404, ScheduleNotPending 409.
     */
    cancelSchedule(
      organizationId: string,
      sessionId: string,
      scheduleId: string
    ): Effect.Effect<void, SessionNotFound | ScheduleNotFound | ScheduleNotPending>
  }
>()("parley/Replies") {
  /** The service, its repository left open; requires `RepliesRepo`. */
  static readonly layerNoDeps = Layer.effect(
    Replies,
    Effect.gen(function* () {
      const repo = yield* RepliesRepo

      /** The job of a trigger now with `debounceSeconds` (R1). */
      const job = Effect.fnUntraced(function* (
        organizationId: string,
        sessionId: string,
        debounceSeconds: number,
        startingNodeId: string | null | undefined,
        metadata: JsonObject | undefined
      ) {
        return {
          organizationId,
          sessionId,
          ...replyDue(yield* Clock.currentTimeMillis, debounceSeconds),
          startingNodeId: startingNodeId ?? null,
          metadata: metadata ?? {},
          traceContext: yield* currentTraceContext
        }
      })

      const reply = Effect.fn("Replies.reply")(
        function* (organizationId: string, sessionId: string, request: ReplyRequest) {
          const debounce = request.debounce_time ?? DEFAULT_DEBOUNCE_SECONDS
          const state = yield* repo.reply(
            yield* job(organizationId, sessionId, debounce, request.starting_node_id, request.metadata)
          )
          const refusal = replyRefusal(state)
          if (refusal !== undefined) return yield* Effect.fail(refusal)
          return state!.body as JsonText<Session>
        },
        Effect.catchTag("SqlError", Effect.die)
      )

      const trigger = Effect.fn("Replies.trigger")(
        function* (organizationId: string, session: ReplyState & { readonly id: string }, trigger: ReplyTrigger) {
          if (replyRefusal(session) !== undefined) return false
          yield* repo.enqueue(
            yield* job(organizationId, session.id, trigger.debounceSeconds, trigger.startingNodeId, trigger.metadata)
          )
          return true
        },
        Effect.catchTag("SqlError", Effect.die)
      )

      /** The session's id and status (D1, D5), locked for share inside a transaction. */
      const sessionState = Effect.fnUntraced(function* (organizationId: string, sessionId: string) {
        const state = yield* repo.sessionState(organizationId, sessionId)
        if (state === undefined) return yield* new SessionNotFound()
        return state
      })

      const schedule = Effect.fn("Replies.schedule")(
        function* (organizationId: string, sessionId: string, scheduledFor: string, config: ScheduleConfig) {
          const stored: JsonObject =
            config.type === "message"
              ? { type: "message", message: yield* validateContent(config.message) }
              : { type: "node", node_id: config.node_id }
          const traceContext = yield* currentTraceContext
          return yield* repo.withTransaction(
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
          return (yield* repo.listSchedules(organizationId, state.id)) as JsonText<ReadonlyArray<SessionSchedule>>
        },
        Effect.catchTag("SqlError", Effect.die)
      )

      const cancelSchedule = Effect.fn("Replies.cancelSchedule")(
        function* (organizationId: string, sessionId: string, scheduleId: string) {
          const state = yield* sessionState(organizationId, sessionId)
          if (!isUuid(scheduleId)) return yield* new ScheduleNotFound()
          if (yield* repo.cancelSchedule(organizationId, state.id, scheduleId)) return
          const status = yield* repo.scheduleStatus(organizationId, state.id, scheduleId)
          if (status === undefined) return yield* new ScheduleNotFound()
          return yield* new ScheduleNotPending()
        },
        Effect.catchTag("SqlError", Effect.die)
      )

      return Replies.of({ reply, trigger, schedule, listSchedules, cancelSchedule })
    })
  )

  /** The service over its PostgreSQL repository (`RepliesRepo.layer`); the rest of what `layerNoDeps` requires stays open. */
  static readonly layer = Replies.layerNoDeps.pipe(Layer.provide(RepliesRepo.layer))
}
