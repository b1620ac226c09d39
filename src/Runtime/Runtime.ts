/**
 * The AI runtime (DECISIONS.md R2): one run answers one turn of a session from
 * its agent's assistant.
 *
 * 1. Reads the session and checks it can run (in the organization, open, an AI
 *    agent with an assistant), its assistant's snapshot for this session
 *    (`Assistants.sessionRuntime`: the session's branch, from a rollout or
 *    `main`, at its HEAD or at the pinned commit, A12, A13; or the legacy
 *    snapshot of an unversioned assistant) and the session's text history.
 * 2. Walks the graph (`Walk.ts`: {@link startNode}, {@link walk}) from
 *    `starting_node_id`, else the session's current node, else
 *    `config.initial_node_id`, calling the node's language model
 *    ({@link Models}) and its tools over HTTP ({@link ToolCaller}), until an
 *    llm node answers.
 * 3. Writes the turn in one transaction: every tool call and result as
 *    `function_call` / `function_result` messages, the reply as an assistant
 *    text message (delivery `pending`, `run_id` set, the trigger's metadata),
 *    the current node, the close of a `should_close` tool, and the run record
 *    (assistant commit, nodes visited, model, tokens, duration). A failed run
 *    writes only its record: never half a reply.
 *
 * A run that fails has a tagged reason (`Errors.ts`); its `message` is the
 * `error` recorded on the run.
 */
import { Cause, Clock, Context, Data, Effect, Layer } from "effect"
import type { AssistantAccessError } from "../Assistants/Access.ts"
import { Assistants } from "../Assistants/Assistants.ts"
import { isUnavailable } from "../Database/Health.ts"
import type { RunStats } from "../Domain/Assistant.ts"
import type { JsonObject } from "../Domain/Common.ts"
import { Messages } from "../Messages/Messages.ts"
import { Sessions } from "../Sessions/Sessions.ts"
import { Ids } from "../Shared/Ids.ts"
import * as Metrics from "../Telemetry/Metrics.ts"
import * as RunFailure from "./Errors.ts"
import { Models } from "./Models.ts"
import type { ToolCallRecord } from "./Records.ts"
import { RuntimeRepo } from "./Repo.ts"
import { ToolCaller } from "./Tools.ts"
import { type RuntimeSnapshot, startNode, type Turn, walk } from "./Walk.ts"

/**
 * How a run ends its work, inside the transaction that writes the run:
 * `succeeded`, or `failed` with its reason (the recorded `error` is
 * `reason.message`).
 */
export type RunCompletion =
  | { readonly status: "succeeded" }
  | { readonly status: "failed"; readonly reason: RunFailure.Reason }

/** The range of run statistics when the request names no start (A14): 24 hours, in ms. */
const STATS_DEFAULT_RANGE_MS = 24 * 60 * 60 * 1000
/** 0001-01-01T00:00:00Z in ms: the earliest default start of that range. */
const EARLIEST_MS = Date.parse("0001-01-01T00:00:00Z")

/** Most text messages of the history a run sends to the model (the latest ones, R2). */
export const HISTORY_LIMIT = 200

/** What causes a run and how its outcome is recorded. */
export interface RunRequest {
  readonly organizationId: string
  readonly sessionId: string
  readonly trigger: "reply" | "schedule"
  /** The reply job or schedule that caused the run. */
  readonly jobId: string | null
  /** R2: the node to start from, before the session's current node and the initial node. */
  readonly startingNodeId: string | null
  /** Merged into the reply message's metadata. */
  readonly metadata: JsonObject
  /**
   * Runs inside the transaction that writes the outcome; returns false when
   * the caller no longer holds the work (its lease was lost), and then nothing
   * is written. Reply jobs delete themselves here; schedules record their
   * status (`canceled` for the reason `SessionNotOpen`, D15).
   */
  readonly complete: (completion: RunCompletion) => Effect.Effect<boolean>
}

/**
 * A run's outcome; `error` is the text recorded on the run (null when none):
 * - `succeeded`: the reply is written;
 * - `failed`: the run is recorded with `reason` (its `message` is `error`);
 * - `lost`: the work was no longer held and nothing was written;
 * - `died`: the run died of a defect (a bug, a timeout, not a model or tool
 *   failure) and nothing was written, so its caller decides whether to try
 *   again or to end it with {@link Runtime} `recordFailure` (issue 12 "Poison
 *   jobs"); `unavailable` tells a defect that is the database being
 *   unreachable (O9).
 */
export type RunOutcome =
  | { readonly runId: string; readonly status: "succeeded"; readonly error: null }
  | { readonly runId: string; readonly status: "failed"; readonly error: string; readonly reason: RunFailure.Reason }
  | { readonly runId: string; readonly status: "lost"; readonly error: null }
  | { readonly runId: string; readonly status: "died"; readonly error: string; readonly unavailable: boolean }

/** The outcome of a run recorded as failed with `reason`. */
const failedOutcome = (runId: string, reason: RunFailure.Reason): RunOutcome => ({
  runId,
  status: "failed",
  error: reason.message,
  reason
})

class Lost extends Data.TaggedError("Lost")<{}> {}

/** The first line of a defect's message, at most 500 characters, as recorded on a run that died (no stack, no data). */
export const defectMessage = (cause: Cause.Cause<unknown>): string => {
  const defect = Cause.squash(cause)
  return (defect instanceof Error ? defect.message : String(defect)).split("\n")[0]!.slice(0, 500)
}

/**
 * The `died` outcome of a run that ended by `cause` (a defect, a timeout, the
 * database gone) with nothing written: `error` is `Internal error: <the first
 * line of the defect's message, at most 500 characters>`. Interruptions pass
 * through (the effect is interrupted too).
 */
export const diedOutcome = (runId: string, cause: Cause.Cause<unknown>): Effect.Effect<RunOutcome> =>
  Cause.hasInterruptsOnly(cause)
    ? Effect.failCause(cause as Cause.Cause<never>)
    : Effect.succeed({
        runId,
        status: "died",
        error: `Internal error: ${defectMessage(cause)}`,
        unavailable: isUnavailable(cause)
      })

/** The AI runtime service (see module docs). */
export class Runtime extends Context.Service<
  Runtime,
  {
    /**
     * Runs one turn (R2) and records it; never fails (a failed run is an
     * outcome with its reason). A defect is the outcome `died`, with nothing
     * written.
     */
    run(request: RunRequest): Effect.Effect<RunOutcome>
    /**
     * Ends the work of `request` as a failed run with `reason` (`GaveUp`
     * after its runs died too often): completes it through
     * `request.complete` and records the run, in one transaction. `lost` when
     * the work was no longer held. Dies on a database failure.
     */
    recordFailure(request: RunRequest, reason: RunFailure.Reason): Effect.Effect<RunOutcome>
    /**
     * GET /assistants/{id}/runs/stats (A14): the statistics of the runs
     * started in [`since`, `until`) (ISO 8601; `until` defaults to now and
     * `since` to 24 hours before `until`), per commit and branch, newest
     * commit first (`RuntimeRepo.runStats`). `AssistantNotFound`,
     * `AssistantNotVersioned` (A1).
     */
    stats(
      organizationId: string,
      assistantId: string,
      range: { readonly since?: string | undefined; readonly until?: string | undefined }
    ): Effect.Effect<RunStats, AssistantAccessError>
  }
>()("parley/Runtime") {
  /** The service alone: requires `RuntimeRepo`, `ToolCaller`, `Models`, `Assistants`, `Messages`, `Sessions` and `Ids`. */
  static readonly layerNoDeps = Layer.effect(
    Runtime,
    Effect.gen(function* () {
      const repo = yield* RuntimeRepo
      const { newId } = yield* Ids
      const models = yield* Models
      const assistants = yield* Assistants
      const messages = yield* Messages
      const sessions = yield* Sessions
      const tools = yield* ToolCaller
      const defaultModel = models.defaultName

      /** What a run learns before its record is written. */
      interface RunInfo {
        assistantId: string | null
        commitId: string | null
        /** A12, A14: the branch the commit was read through. */
        branchName: string | null
        /** R2/A13: the session's current node the published version no longer has (started at the initial node). */
        missingNodeId: string | null
        /** A15: the tool calls made so far, kept on the record of a failed run too. */
        readonly toolCalls: Array<ToolCallRecord>
      }

      /** Computes the turn (no writes); fails with the run's reason. */
      const computeTurn = Effect.fn("Runtime.turn")(function* (request: RunRequest, run: RunInfo) {
        const session = yield* sessions.runState(request.organizationId, request.sessionId)
        if (session === undefined) return yield* RunFailure.fail(new RunFailure.SessionNotFound())
        if (session.status !== "open") return yield* RunFailure.fail(new RunFailure.SessionNotOpen())
        if (session.agent_type !== "ai") return yield* RunFailure.fail(new RunFailure.AgentNotAi())
        const assistantId = session.assistant_id
        if (assistantId === null) return yield* RunFailure.fail(new RunFailure.NoAssistant())
        run.assistantId = assistantId
        const runtime = yield* assistants.sessionRuntime(request.organizationId, assistantId, session.id).pipe(
          Effect.mapError(
            (error) =>
              new RunFailure.RunFailed({
                reason: new RunFailure.AssistantUnavailable({ assistantId, detail: error.detail })
              })
          )
        )
        run.commitId = runtime.commit_id
        run.branchName = runtime.branch_name
        const snapshot = runtime.snapshot as unknown as RuntimeSnapshot
        const history = yield* messages.history(request.organizationId, session.id, HISTORY_LIMIT)
        const start = startNode(snapshot, request.startingNodeId, session.current_node_id)
        if (start.missingNodeId !== null) {
          // R2, A13: a publish deleted or renamed the node the session stood on; start over rather than strand it.
          run.missingNodeId = start.missingNodeId
          yield* Effect.annotateCurrentSpan("parley.missing_node_id", start.missingNodeId)
        }
        return yield* walk({
          snapshot,
          startNodeId: start.nodeId,
          history,
          metadata: request.metadata,
          toolCalls: run.toolCalls
        }).pipe(Effect.provideService(Models, models), Effect.provideService(ToolCaller, tools))
      })

      /** Records a finished run (`runs`), inside the caller's transaction. */
      const recordRun = (
        request: RunRequest,
        run: { readonly id: string; readonly startedAt: number; readonly durationMs: number; readonly info: RunInfo },
        turn: Turn | undefined,
        completion: RunCompletion
      ) =>
        repo.insertRun({
          id: run.id,
          organizationId: request.organizationId,
          sessionId: request.sessionId,
          trigger: request.trigger,
          jobId: request.jobId,
          assistantId: run.info.assistantId,
          commitId: run.info.commitId,
          branchName: run.info.branchName,
          nodes: turn?.nodes ?? [],
          toolCalls: turn?.toolCalls ?? run.info.toolCalls,
          model: turn?.model ?? defaultModel,
          inputTokens: turn?.inputTokens ?? null,
          outputTokens: turn?.outputTokens ?? null,
          status: completion.status,
          error: completion.status === "failed" ? completion.reason.message : null,
          missingNodeId: run.info.missingNodeId,
          startedAt: new Date(run.startedAt),
          durationMs: run.durationMs
        })

      /** Logs, measures and puts a failed or died run on its span. */
      const report = (request: RunRequest, outcome: RunOutcome) =>
        Effect.gen(function* () {
          yield* Metrics.record(Metrics.runs, 1, { trigger: request.trigger, status: outcome.status })
          // During a database outage DatabaseHealth reports once (O9).
          if (outcome.status === "failed" || (outcome.status === "died" && outcome.unavailable !== true)) {
            yield* Effect.logError(outcome.status === "died" ? "AI run died" : "AI run failed", {
              run_id: outcome.runId,
              session_id: request.sessionId,
              error: outcome.error
            })
            yield* Effect.annotateCurrentSpan({
              "error.type": outcome.status === "died" ? "RunDied" : "RunFailed",
              "parley.run_error": outcome.error ?? ""
            })
          }
        })

      const run = Effect.fn("Runtime.run")(function* (request: RunRequest) {
        const runId = newId()
        const startedAt = yield* Clock.currentTimeMillis
        const started = performance.now()
        const info: RunInfo = {
          assistantId: null,
          commitId: null,
          branchName: null,
          missingNodeId: null,
          toolCalls: []
        }
        yield* Effect.annotateCurrentSpan({
          "parley.run_id": runId,
          "parley.session_id": request.sessionId,
          "parley.trigger": request.trigger
        })
        const record = (turn: Turn | undefined, completion: RunCompletion) =>
          recordRun(
            request,
            { id: runId, startedAt, durationMs: Math.round(performance.now() - started), info },
            turn,
            completion
          )

        const write = (turn: Turn) =>
          repo.withTransaction(
            Effect.gen(function* () {
              const completion: RunCompletion = { status: "succeeded" }
              if (!(yield* request.complete(completion))) return yield* new Lost()
              for (const message of turn.messages) {
                yield* messages.append(request.organizationId, request.sessionId, { ...message, run_id: runId }).pipe(
                  Effect.catchTags({
                    SessionNotFound: () => RunFailure.fail(new RunFailure.SessionNotFound()),
                    SessionNotOpen: () => RunFailure.fail(new RunFailure.SessionNotOpen())
                  })
                )
              }
              if (turn.nextNode !== undefined)
                yield* sessions.setCurrentNode(request.organizationId, request.sessionId, turn.nextNode)
              if (turn.shouldClose) yield* sessions.close(request.organizationId, request.sessionId, { kind: "system" })
              yield* record(turn, completion)
            })
          )

        const writeFailure = (turn: Turn | undefined, reason: RunFailure.Reason) =>
          repo.withTransaction(
            Effect.gen(function* () {
              const completion: RunCompletion = { status: "failed", reason }
              if (!(yield* request.complete(completion))) return yield* new Lost()
              yield* record(turn, completion)
            })
          )

        const outcome = yield* computeTurn(request, info).pipe(
          Effect.flatMap((turn) =>
            write(turn).pipe(
              Effect.as<RunOutcome>({ runId, status: "succeeded", error: null }),
              Effect.catchTag("RunFailed", ({ reason }) =>
                writeFailure(turn, reason).pipe(Effect.as(failedOutcome(runId, reason)))
              )
            )
          ),
          Effect.catchTag("RunFailed", ({ reason }) =>
            writeFailure(undefined, reason).pipe(Effect.as(failedOutcome(runId, reason)))
          ),
          Effect.catchTag("Lost", () => Effect.succeed<RunOutcome>({ runId, status: "lost", error: null })),
          Effect.catchTag("SqlError", Effect.die),
          // A defect (a bug, the database gone): nothing was written; the caller retries or ends the work.
          Effect.catchCause((cause) => diedOutcome(runId, cause))
        )
        yield* report(request, outcome)
        return outcome
      })

      const recordFailure = Effect.fn("Runtime.recordFailure")(function* (
        request: RunRequest,
        reason: RunFailure.Reason
      ) {
        const runId = newId()
        const startedAt = yield* Clock.currentTimeMillis
        const info: RunInfo = {
          assistantId: null,
          commitId: null,
          branchName: null,
          missingNodeId: null,
          toolCalls: []
        }
        const completion: RunCompletion = { status: "failed", reason }
        const held = yield* repo
          .withTransaction(
            Effect.gen(function* () {
              if (!(yield* request.complete(completion))) return false
              yield* recordRun(request, { id: runId, startedAt, durationMs: 0, info }, undefined, completion)
              return true
            })
          )
          .pipe(Effect.orDie)
        const outcome: RunOutcome = held ? failedOutcome(runId, reason) : { runId, status: "lost", error: null }
        yield* report(request, outcome)
        return outcome
      })

      const stats = Effect.fn("Runtime.stats")(
        function* (
          organizationId: string,
          assistantId: string,
          range: { readonly since?: string | undefined; readonly until?: string | undefined }
        ) {
          yield* assistants.checkVersioned(organizationId, assistantId)
          const until = range.until ?? new Date(yield* Clock.currentTimeMillis).toISOString()
          // No earlier than year 1, the first moment a client may send (D18): PostgreSQL has no year 0.
          const since =
            range.since ?? new Date(Math.max(Date.parse(until) - STATS_DEFAULT_RANGE_MS, EARLIEST_MS)).toISOString()
          return { commits: yield* repo.runStats(organizationId, assistantId, since, until) }
        },
        Effect.catchTag("SqlError", Effect.die)
      )

      return Runtime.of({ run, recordFailure, stats })
    })
  )

  /**
   * Over PostgreSQL, tools over HTTP (W6). Requires `Models`, `Assistants`,
   * `Messages`, `Sessions`, `Ids`, `PgClient` and `AppConfig`.
   */
  static readonly layer = Runtime.layerNoDeps.pipe(Layer.provide(RuntimeRepo.layer), Layer.provide(ToolCaller.layer))
}
