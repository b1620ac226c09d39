/**
 * The evaluations service (DECISIONS.md A16, A17; issue 41): what a draft
 * (or any branch or commit) would have answered to the conversations the
 * assistant actually had, against a baseline.
 *
 * - `create` resolves both sides to runtime snapshots (a draft is copied as
 *   it is now), selects the sessions and makes the evaluation `queued` with
 *   one turn per recorded run of the assistant in them.
 * - The worker (`Worker.ts`) claims it under a lease and `advance`s it, a
 *   batch of turns at a time, {@link TURN_CONCURRENCY} turns at once: each
 *   side answers each turn `repeats` times through `Replay.ts` (the runtime's
 *   walk with recorded tool results: no tool URL is called, nothing a run
 *   writes is written), the answers are compared (`Compare.ts`), a judge
 *   grades a changed turn when asked (`Judge.ts`, A17), and the turn is
 *   written once. When no turn is left the summary is computed and the
 *   evaluation completes with its `evaluation.completed` event.
 * - A defect while answering (a bug) fails the evaluation with `Internal
 *   error: ...`; a database outage leaves it to be taken up again.
 */
import { performance } from "node:perf_hooks"
import { Cause, Context, Duration, Effect, Layer } from "effect"
import type { AssistantAccessError, BranchAccessError } from "../Assistants/Access.ts"
import { Assistants } from "../Assistants/Assistants.ts"
import type { BranchNotPublished, CommitNotFound } from "../Assistants/Errors.ts"
import { isUnavailable } from "../Database/Health.ts"
import { DISCOVERED_ORGANIZATIONS, makeOrganizationRotation } from "../Database/Workers.ts"
import { DEFAULT_PAGE_LIMIT, type PageQuery } from "../Domain/Common.ts"
import { ValidationFailed } from "../Domain/Errors.ts"
import {
  type CreateEvaluationPayload,
  DEFAULT_EVALUATION_SESSIONS,
  type Evaluation,
  type EvaluationTurn,
  type EvaluationTurnsQuery
} from "../Domain/Evaluation.ts"
import { Messages } from "../Messages/Messages.ts"
import { LiveRuns } from "../Runtime/LiveRuns.ts"
import { Models } from "../Runtime/Models.ts"
import { defectMessage, HISTORY_LIMIT } from "../Runtime/Runtime.ts"
import type { RuntimeSnapshot } from "../Runtime/Walk.ts"
import { compareTurn, summarize } from "./Compare.ts"
import { EvaluationFinished, EvaluationNotFound } from "./Errors.ts"
import { judgeTurn } from "./Judge.ts"
import { replay } from "./Replay.ts"
import { type ClaimedEvaluation, EvaluationsRepo, type PendingTurn, type TurnSource } from "./Repo.ts"
import { renderReport } from "./Report.ts"

/** Turns read per batch. */
export const TURNS_PER_BATCH = 32
/**
 * Turns answered at once by one worker (each makes its model calls one after
 * the other) while no live run is near; beside live runs (see
 * {@link LIVE_WINDOW_MS}) one at a time (`npm run bench -- evaluations`:
 * with two at a time beside live replies, their pooled p99 was 1.53 times the
 * p99 without an evaluation; one at a time with {@link PAUSE_PER_TURN_TIME}
 * 12, 0.82-1.25 over nine runs, not reliably under 1.10; bench/README.md "evaluations").
 */
export const TURN_CONCURRENCY = 2

/** How long after a live run an evaluation still counts as beside live work, in ms (see {@link PAUSE_PER_TURN_TIME}). */
export const LIVE_WINDOW_MS = 1_000
/**
 * Beside live runs (one in flight or ended within {@link LIVE_WINDOW_MS}),
 * turns are answered one at a time and each is followed by a pause of this
 * many times the event loop's busy time while it was answered (not its wall
 * time: a turn waiting on a model or the database leaves the loop to the
 * live replies, and a model's seconds of latency would otherwise become
 * a pause of a minute), so the evaluation takes at most about a thirteenth
 * of the process's time from live replies. Measured by
 * `npm run bench -- evaluations` (bench/README.md "evaluations": live replies
 * without and beside evaluations, p99 ratio; a pause of 3x the wall time
 * read 1.14, 6x 1.30, 1.07, 1.14 and 1.04 over four runs, 12x 0.94, 0.98,
 * 1.16 and 1.01 alternating with them; of the busy time 1.18, 1.06, 0.82).
 */
export const PAUSE_PER_TURN_TIME = 12

/**
 * The longest pause after one turn, in ms. The loop's busy time over a turn
 * is everything the process did meanwhile, not the turn's own work: a turn
 * held seconds on a model while live traffic kept the loop busy would
 * otherwise rest 12 times those seconds (`.ci/run` once saw an evaluation
 * queued for more than 30 s behind such a pause). The benchmark's pauses
 * are tens of ms, far under it.
 */
export const MAX_PAUSE_MS = 1_000

/**
 * The pause after a turn beside live runs, in ms: {@link PAUSE_PER_TURN_TIME}
 * times the event loop's busy time over the turn (`activeMs`, in ms), at most
 * {@link MAX_PAUSE_MS} (A16, issue 41 item 6).
 */
export const pauseAfterTurn = (activeMs: number): number => Math.min(activeMs * PAUSE_PER_TURN_TIME, MAX_PAUSE_MS)

/** What one batch did: `more` (call again), `completed`, or `stopped` (cancelled, lease lost, failed). */
export type Advance = "more" | "completed" | "stopped"

/** The failures of starting an evaluation. */
export type CreateEvaluationError = BranchAccessError | BranchNotPublished | CommitNotFound | ValidationFailed

/** The evaluations service (see module docs). */
export class Evaluations extends Context.Service<
  Evaluations,
  {
    /**
     * POST /assistants/{id}/evaluations (A16): starts an evaluation and
     * returns it `queued` with `turns_total`. `AssistantNotFound`,
     * `AssistantNotVersioned` (A1); `BranchNotFound`, `BranchNotPublished`,
     * `CommitNotFound` for a side; `ValidationFailed` at
     * `["body", "sessions", "ids", i]` for a session id that is not one of the
     * organization's.
     */
    readonly create: (
      organizationId: string,
      assistantId: string,
      payload: CreateEvaluationPayload
    ) => Effect.Effect<Evaluation, CreateEvaluationError>
    /** GET /assistants/{id}/evaluations: newest first, `limit` (default 100) after `after_id`. */
    readonly list: (
      organizationId: string,
      assistantId: string,
      page: PageQuery
    ) => Effect.Effect<ReadonlyArray<Evaluation>, AssistantAccessError>
    /** GET .../evaluations/{eval_id}. `EvaluationNotFound`. */
    readonly get: (
      organizationId: string,
      assistantId: string,
      evaluationId: string
    ) => Effect.Effect<Evaluation, AssistantAccessError | EvaluationNotFound>
    /** DELETE .../evaluations/{eval_id}: cancels it. `EvaluationNotFound`; `EvaluationFinished` (409) once finished. */
    readonly cancel: (
      organizationId: string,
      assistantId: string,
      evaluationId: string
    ) => Effect.Effect<Evaluation, AssistantAccessError | EvaluationNotFound | EvaluationFinished>
    /** GET .../evaluations/{eval_id}/turns: answered turns in order, keyset by `after_id`. `EvaluationNotFound`. */
    readonly turns: (
      organizationId: string,
      assistantId: string,
      evaluationId: string,
      query: EvaluationTurnsQuery
    ) => Effect.Effect<ReadonlyArray<EvaluationTurn>, AssistantAccessError | EvaluationNotFound>
    /** GET .../evaluations/{eval_id}/report: the HTML page of `Report.ts`. `EvaluationNotFound`. */
    readonly report: (
      organizationId: string,
      assistantId: string,
      evaluationId: string
    ) => Effect.Effect<string, AssistantAccessError | EvaluationNotFound>
    /**
     * Leases an evaluation waiting (queued, or running with an expired lease)
     * to `workerId` for `leaseMs`, the one waiting longest of an organization,
     * the organizations in rotation (O11, `Database/Workers.ts`
     * `makeOrganizationRotation`); undefined when none.
     */
    readonly claim: (workerId: string, leaseMs: number) => Effect.Effect<ClaimedEvaluation | undefined>
    /** Gives back the leases `workerId` holds (O5). */
    readonly release: (workerId: string) => Effect.Effect<void>
    /** Answers one batch of the claimed evaluation's turns, or completes it (see {@link Advance}). */
    readonly advance: (evaluation: ClaimedEvaluation, workerId: string, leaseMs: number) => Effect.Effect<Advance>
  }
>()("parley/Evaluations") {
  /** The service; requires `EvaluationsRepo`, `Assistants`, `Messages`, `Models`, `LiveRuns`. */
  static readonly layerNoDeps = Layer.effect(
    Evaluations,
    Effect.gen(function* () {
      const repo = yield* EvaluationsRepo
      const assistants = yield* Assistants
      const messages = yield* Messages
      const models = yield* Models
      const live = yield* LiveRuns
      /** The models a replay calls: each call first waits for this process's live runs (`LiveRuns`). */
      const yieldingModels = Models.of({
        defaultName: models.defaultName,
        forNode: (name) =>
          Effect.map(models.forNode(name), (named) => ({
            ...named,
            model: {
              ...named.model,
              generateText: ((options: any) =>
                Effect.andThen(live.idle, named.model.generateText(options))) as typeof named.model.generateText
            }
          }))
      })

      const create = Effect.fn("Evaluations.create")(
        function* (organizationId: string, assistantId: string, payload: CreateEvaluationPayload) {
          const baseline = yield* assistants.sideSnapshot(organizationId, assistantId, payload.baseline)
          const candidate = yield* assistants.sideSnapshot(organizationId, assistantId, payload.candidate)
          let source: TurnSource
          if ("ids" in payload.sessions) {
            const ids = payload.sessions.ids
            const unknown = new Set(yield* repo.unknownSessions(organizationId, ids))
            if (unknown.size > 0) {
              return yield* new ValidationFailed({
                detail: ids.flatMap((id, i) =>
                  unknown.has(id)
                    ? [{ loc: ["body", "sessions", "ids", i], msg: "Session not found", type: "value_error" }]
                    : []
                )
              })
            }
            source = { ids: ids.map((id) => id.toLowerCase()) }
          } else {
            source = {
              since: payload.sessions.since ?? "0001-01-01T00:00:00Z",
              until: payload.sessions.until ?? "infinity",
              limit: payload.sessions.limit ?? DEFAULT_EVALUATION_SESSIONS
            }
          }
          return yield* repo.insert({
            organizationId,
            assistantId,
            baseline: payload.baseline,
            candidate: payload.candidate,
            baselineCommitId: baseline.commit_id,
            candidateCommitId: candidate.commit_id,
            baselineSnapshot: baseline.snapshot,
            candidateSnapshot: candidate.snapshot,
            repeats: payload.repeats ?? 1,
            judge: payload.judge ?? null,
            source
          })
        },
        Effect.catchTag("SqlError", Effect.die)
      )

      const found = (evaluation: Evaluation | undefined) =>
        evaluation === undefined ? Effect.fail(new EvaluationNotFound()) : Effect.succeed(evaluation)

      const list = Effect.fn("Evaluations.list")(
        function* (organizationId: string, assistantId: string, page: PageQuery) {
          yield* assistants.checkVersioned(organizationId, assistantId)
          return yield* repo.list(organizationId, assistantId, {
            limit: page.limit ?? DEFAULT_PAGE_LIMIT,
            afterId: page.after_id
          })
        },
        Effect.catchTag("SqlError", Effect.die)
      )

      const get = Effect.fn("Evaluations.get")(
        function* (organizationId: string, assistantId: string, evaluationId: string) {
          yield* assistants.checkVersioned(organizationId, assistantId)
          return yield* found(yield* repo.find(organizationId, assistantId, evaluationId))
        },
        Effect.catchTag("SqlError", Effect.die)
      )

      const cancel = Effect.fn("Evaluations.cancel")(
        function* (organizationId: string, assistantId: string, evaluationId: string) {
          yield* assistants.checkVersioned(organizationId, assistantId)
          const cancelled = yield* repo.cancel(organizationId, assistantId, evaluationId)
          if (cancelled !== undefined) return cancelled
          yield* found(yield* repo.find(organizationId, assistantId, evaluationId))
          return yield* new EvaluationFinished()
        },
        Effect.catchTag("SqlError", Effect.die)
      )

      const turns = Effect.fn("Evaluations.turns")(
        function* (organizationId: string, assistantId: string, evaluationId: string, query: EvaluationTurnsQuery) {
          const evaluation = yield* get(organizationId, assistantId, evaluationId)
          return yield* repo.turns(organizationId, evaluation.id, {
            changed: query.changed === undefined ? undefined : query.changed === "true",
            limit: query.limit ?? DEFAULT_PAGE_LIMIT,
            afterId: query.after_id
          })
        },
        Effect.catchTag("SqlError", Effect.die)
      )

      const report = Effect.fn("Evaluations.report")(
        function* (organizationId: string, assistantId: string, evaluationId: string) {
          const evaluation = yield* get(organizationId, assistantId, evaluationId)
          const all = yield* repo.turns(organizationId, evaluation.id, { limit: evaluation.turns_total + 1 })
          return renderReport({ evaluation, turns: all })
        },
        Effect.catchTag("SqlError", Effect.die)
      )

      /** Which organizations the claims visit, claim after claim (O11). */
      const rotation = makeOrganizationRotation()
      const claim = (workerId: string, leaseMs: number) =>
        rotation
          .claim(
            1,
            (after) => repo.discover(after, DISCOVERED_ORGANIZATIONS),
            (organizationId) => repo.claim(organizationId, workerId, leaseMs)
          )
          .pipe(
            Effect.map((claimed) => claimed[0]),
            Effect.orDie
          )
      const release = (workerId: string) => repo.release(workerId).pipe(Effect.orDie)

      /** Both sides' answers to one turn, compared and (when asked and changed) judged; written once. */
      const answerTurn = (evaluation: ClaimedEvaluation, workerId: string, leaseMs: number, turn: PendingTurn) =>
        Effect.gen(function* () {
          yield* live.idle
          const started = performance.eventLoopUtilization()
          const history = yield* messages.history(
            evaluation.organization_id,
            turn.session_id,
            HISTORY_LIMIT,
            turn.started_at
          )
          const side = (snapshot: unknown) =>
            Effect.forEach(Array.from({ length: evaluation.repeats }), () =>
              replay({
                snapshot: snapshot as RuntimeSnapshot,
                nodeId: turn.node_id,
                history,
                records: turn.recorded.tool_calls
              })
            )
          const baseline = yield* side(evaluation.baseline_snapshot)
          const candidate = yield* side(evaluation.candidate_snapshot)
          const comparison = compareTurn(
            baseline.map((a) => a.answer),
            candidate.map((a) => a.answer)
          )
          const verdict =
            evaluation.judge !== null && comparison.changed
              ? yield* judgeTurn({
                  instructions: evaluation.judge.instructions,
                  history,
                  baseline: baseline[0]!.answer.text,
                  candidate: candidate[0]!.answer.text
                })
              : null
          const cost = (answers: typeof baseline) => ({
            durations_ms: answers.map((a) => a.durationMs),
            input_tokens: answers.reduce((sum, a) => sum + a.inputTokens, 0),
            output_tokens: answers.reduce((sum, a) => sum + a.outputTokens, 0)
          })
          const held = yield* repo.answer(evaluation, workerId, leaseMs, turn.id, {
            should_close: candidate[0]!.shouldClose,
            baseline: baseline.map((a) => a.answer),
            candidate: candidate.map((a) => a.answer),
            text_changed: comparison.text_changed,
            path_changed: comparison.path_changed,
            tools_changed: comparison.tools_changed,
            changed: comparison.changed,
            similarity: comparison.similarity,
            verdict,
            stats: {
              baseline: cost(baseline),
              candidate: cost(candidate),
              unrecorded_tool_calls: [...baseline, ...candidate].reduce((sum, a) => sum + a.unrecorded, 0),
              baseline_unstable: comparison.baseline_unstable
            }
          })
          if (yield* live.recentlyBusy(LIVE_WINDOW_MS)) {
            yield* Effect.sleep(Duration.millis(pauseAfterTurn(performance.eventLoopUtilization(started).active)))
          }
          return held
        }).pipe(Effect.provideService(Models, yieldingModels))

      const advance = Effect.fn("Evaluations.advance")(function* (
        evaluation: ClaimedEvaluation,
        workerId: string,
        leaseMs: number
      ) {
        const outcome = yield* Effect.gen(function* () {
          const pending = yield* repo.pendingTurns(evaluation, TURNS_PER_BATCH)
          if (pending.length === 0) {
            const summary = summarize(yield* repo.answeredTurns(evaluation), evaluation.judge !== null)
            return (yield* repo.complete(evaluation, workerId, summary)) ? "completed" : "stopped"
          }
          // Once a turn finds the evaluation no longer held (cancelled, or its lease taken over), the batch's
          // turns not yet started are not answered: no model calls for an evaluation nobody waits for.
          let lost = false
          const held = yield* Effect.forEach(
            pending,
            (turn) =>
              lost
                ? Effect.succeed(false)
                : Effect.map(answerTurn(evaluation, workerId, leaseMs, turn), (kept) => {
                    if (!kept) lost = true
                    return kept
                  }),
            { concurrency: (yield* live.recentlyBusy(LIVE_WINDOW_MS)) ? 1 : TURN_CONCURRENCY }
          )
          return held.every(Boolean) ? "more" : "stopped"
        }).pipe(
          Effect.catchTag("SqlError", Effect.die),
          Effect.catchCause((cause) => {
            if (Cause.hasInterruptsOnly(cause) || isUnavailable(cause)) return Effect.failCause(cause)
            const message = defectMessage(cause)
            return Effect.logError("Evaluation failed", { evaluation_id: evaluation.id, error: message }).pipe(
              Effect.andThen(repo.fail(evaluation, workerId, `Internal error: ${message}`).pipe(Effect.orDie)),
              Effect.as<Advance>("stopped")
            )
          })
        )
        if (outcome === "completed") {
          yield* Effect.logInfo("Evaluation completed").pipe(
            Effect.annotateLogs({ evaluation_id: evaluation.id, organization_id: evaluation.organization_id })
          )
        }
        return outcome
      })

      return Evaluations.of({ create, list, get, cancel, turns, report, claim, release, advance })
    })
  )

  /** Over PostgreSQL; requires `Models`, `LiveRuns`, `Assistants`, `Messages`, `PgClient` and `Ids`. */
  static readonly layer = Evaluations.layerNoDeps.pipe(Layer.provide(EvaluationsRepo.layer))
}
