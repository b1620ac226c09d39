/**
 * The replies worker (DECISIONS.md R1, D15, O1, O5), run as fibers in
 * every process with `PARLEY_ROLE` `all` or `worker`:
 *
 * - Reply jobs: due jobs are claimed with `FOR UPDATE SKIP LOCKED` under a
 *   lease ({@link LEASE_MS}), organization by organization in rotation
 *   (O11, `Database/Workers.ts` `makeOrganizationRotation`), and run through the AI runtime; the transaction
 *   that writes the reply deletes the job only if this worker still holds it,
 *   so each job's reply is written once even with several processes (R1).
 *   Expired leases (a crashed process) make jobs due again.
 * - Schedules (D15): due schedules are claimed the same way; `message` inserts
 *   the assistant message, `node` runs the runtime from that node. A schedule
 *   whose session is closed ends `canceled` (the run's reason
 *   `SessionNotOpen`), any other failure `failed`, with the error text.
 * - Wakeup: `LISTEN parley_replies` (triggers and new schedules notify at
 *   commit), a timer to the earliest due time, and a {@link POLL_MS} poll.
 *   Times come from Effect's `Clock`, so tests drive debounce with `TestClock`.
 * - Shutdown (O5): stop claiming, let runs in flight finish (up to 10 s), then
 *   release what is still held so another process takes it at once.
 */

import { PgClient } from "@effect/sql-pg"
import { Cause, Clock, Effect, FiberSet, Layer, Queue } from "effect"
import { logUnlessOutage } from "../Database/Health.ts"
import { DISCOVERED_ORGANIZATIONS, listenForever, makeOrganizationRotation, stopWorker } from "../Database/Workers.ts"
import type { Content } from "../Domain/Content.ts"
import { Messages } from "../Messages/Messages.ts"
import * as RunFailure from "../Runtime/Errors.ts"
import { LiveRuns } from "../Runtime/LiveRuns.ts"
import { diedOutcome, type RunCompletion, type RunOutcome, type RunRequest, Runtime } from "../Runtime/Runtime.ts"
import { Ids } from "../Shared/Ids.ts"
import * as Metrics from "../Telemetry/Metrics.ts"
import { spanOfTraceparent } from "../Telemetry/Telemetry.ts"
import { type ClaimedJob, type ClaimedSchedule, RepliesRepo, repliesChannel } from "./Repo.ts"

/** Runs in flight per process (jobs and schedules together). */
const MAX_CONCURRENT_RUNS = 64
/** Fallback poll interval, in ms. */
export const POLL_MS = 1_000
/** Lease of a claimed job or schedule, in ms: a run taking longer may be run again by another process. */
const LEASE_MS = 180_000
/** How long a run may take before it is abandoned (and its lease left to expire), in ms. */
const RUN_TIMEOUT_MS = 150_000
/** Attempts of a reply job or schedule whose runs die of defects, before it ends failed (issue 12 "Poison jobs"). */
const MAX_RUN_ATTEMPTS = 3
/** Delays before the 2nd and 3rd attempt of work whose run died, in ms. */
const DEFECT_RETRY_DELAYS_MS = [5_000, 30_000] as const
/** How often expired leases are recovered, in ms. */
const RECOVER_EVERY_MS = 5_000

/**
 * A schedule's status after its run (D15): `done` when it succeeded,
 * `canceled` when its session was closed (the reason `SessionNotOpen`),
 * else `failed`.
 */
const scheduleStatus = (completion: RunCompletion): "done" | "canceled" | "failed" =>
  completion.status === "succeeded" ? "done" : completion.reason._tag === "SessionNotOpen" ? "canceled" : "failed"

/** A span link to the trace that caused the work, when stored. */
const linksOf = (traceparent: string | null) => {
  const span = spanOfTraceparent(traceparent)
  return span === undefined ? [] : [{ span, attributes: { "link.type": "caused-by" } }]
}

const makeWorker = Effect.gen(function* () {
  const repo = yield* RepliesRepo
  const runtime = yield* Runtime
  const messages = yield* Messages
  const pg = yield* PgClient.PgClient
  const live = yield* LiveRuns
  const workerId = (yield* Ids).newId()

  /** Which organizations the claims of jobs and of schedules visit, round after round (O11). */
  const jobRotation = makeOrganizationRotation()
  const scheduleRotation = makeOrganizationRotation()
  let inFlight = 0
  let stopping = false
  /** Wakeups of the claim loop (coalesced: one pending at most). */
  const wakeups = yield* Queue.dropping<void>(1)
  const wake = () => {
    Queue.offerUnsafe(wakeups, undefined)
  }
  const runs = yield* FiberSet.make<void, never>()

  const finished = Effect.sync(() => {
    inFlight--
    wake()
  })

  /**
   * Runs claimed work under {@link RUN_TIMEOUT_MS}; when its run dies (a
   * defect, the timeout, the database gone: issue 12 "Poison jobs"), the work
   * is given back through `retry` while it has attempts left, due after the
   * next delay of {@link DEFECT_RETRY_DELAYS_MS} (a database outage does not
   * count and retries after {@link POLL_MS}), and after
   * {@link MAX_RUN_ATTEMPTS} it ends failed through `end` with the reason
   * `GaveUp`.
   */
  const supervise = (
    work: Effect.Effect<RunOutcome, unknown>,
    attempts: number,
    retry: (at: Date, counted: boolean, error: string) => Effect.Effect<unknown, unknown>,
    end: (reason: RunFailure.GaveUp) => Effect.Effect<unknown, unknown>
  ) =>
    work.pipe(
      Effect.timeout(RUN_TIMEOUT_MS),
      Effect.catchCause((cause) => diedOutcome("", cause)),
      Effect.tap((outcome) =>
        outcome.status !== "died"
          ? Effect.void
          : Effect.gen(function* () {
              const counted = outcome.unavailable !== true
              const attempt = attempts + (counted ? 1 : 0)
              const error = outcome.error
              yield* Effect.annotateCurrentSpan({
                "error.type": "RunDied",
                "parley.run_error": error,
                "parley.attempt": attempt
              })
              if (counted && attempt >= MAX_RUN_ATTEMPTS) {
                yield* end(new RunFailure.GaveUp({ error, attempts: attempt }))
                return
              }
              const now = yield* Clock.currentTimeMillis
              yield* retry(new Date(now + (counted ? DEFECT_RETRY_DELAYS_MS[attempt - 1]! : POLL_MS)), counted, error)
            }).pipe(Effect.catchCause((cause) => logUnlessOutage("Could not give back work whose run died", cause)))
      )
    )

  /** Runs a claimed reply job through the runtime (R1, R2). */
  const runJob = (job: ClaimedJob) => {
    const request: RunRequest = {
      organizationId: job.organization_id,
      sessionId: job.session_id,
      trigger: "reply",
      jobId: job.id,
      startingNodeId: job.starting_node_id,
      metadata: job.metadata,
      complete: () => repo.completeJob(job.organization_id, job.id, workerId).pipe(Effect.orDie)
    }
    return supervise(
      runtime.run(request),
      job.attempts,
      (dueAt, counted, error) =>
        repo.retryJob({ organizationId: job.organization_id, jobId: job.id, workerId, dueAt, error, counted }),
      (reason) => runtime.recordFailure(request, reason)
    ).pipe(
      Effect.tap((outcome) =>
        Effect.flatMap(Clock.currentTimeMillis, (now) =>
          Metrics.record(Metrics.replyLatency, Math.max(0, now - job.due_at.getTime()) / 1000, {
            status: outcome.status
          })
        )
      ),
      Effect.catchCause((cause) => logUnlessOutage("Reply job failed", cause)),
      Effect.withSpan("Replies.job", {
        attributes: { "parley.job_id": job.id, "parley.session_id": job.session_id, "parley.triggers": job.triggers },
        links: linksOf(job.traceparent)
      }),
      Effect.asVoid,
      Effect.ensuring(finished)
    )
  }

  /** Runs a claimed schedule (D15). */
  const runSchedule = (schedule: ClaimedSchedule) => {
    const request: RunRequest | undefined =
      schedule.config.type === "node"
        ? {
            organizationId: schedule.organization_id,
            sessionId: schedule.session_id,
            trigger: "schedule",
            jobId: schedule.id,
            startingNodeId: schedule.config.node_id,
            metadata: {},
            complete: (completion) =>
              repo
                .finishSchedule(
                  schedule.organization_id,
                  schedule.id,
                  workerId,
                  scheduleStatus(completion),
                  completion.status === "failed" ? completion.reason.message : null
                )
                .pipe(Effect.orDie)
          }
        : undefined
    const work: Effect.Effect<RunOutcome, unknown> =
      request === undefined
        ? (() => {
            const content = (schedule.config as { readonly message: unknown }).message as Content
            return pg
              .withTransaction(
                Effect.gen(function* () {
                  if (!(yield* repo.finishSchedule(schedule.organization_id, schedule.id, workerId, "done", null)))
                    return
                  yield* messages.append(schedule.organization_id, schedule.session_id, {
                    role: "assistant",
                    content,
                    provider_message_id: null,
                    replied_provider_message_id: null,
                    run_id: null
                  })
                })
              )
              .pipe(
                Effect.catchTags({
                  SessionNotOpen: () =>
                    repo.finishSchedule(schedule.organization_id, schedule.id, workerId, "canceled", "Session closed"),
                  SessionNotFound: () =>
                    repo.finishSchedule(schedule.organization_id, schedule.id, workerId, "failed", "Session not found")
                }),
                Effect.as<RunOutcome>({ runId: "", status: "succeeded", error: null })
              )
          })()
        : runtime.run(request)
    return supervise(
      work,
      schedule.attempts,
      (retryAt, counted, error) =>
        repo.retrySchedule({
          organizationId: schedule.organization_id,
          scheduleId: schedule.id,
          workerId,
          retryAt,
          error,
          counted
        }),
      (reason) =>
        request === undefined
          ? repo.finishSchedule(schedule.organization_id, schedule.id, workerId, "failed", reason.message)
          : runtime.recordFailure(request, reason)
    ).pipe(
      Effect.catchCause((cause) => logUnlessOutage("Schedule failed", cause)),
      Effect.withSpan("Replies.schedule", {
        attributes: { "parley.schedule_id": schedule.id, "parley.session_id": schedule.session_id },
        links: linksOf(schedule.traceparent)
      }),
      Effect.asVoid,
      Effect.ensuring(finished)
    )
  }

  /** Claims and starts due work while there is capacity; sleeps until the next due time or a notification. */
  let lastRecovery = 0
  const claimUntilStopped = Effect.gen(function* () {
    for (;;) {
      if (stopping) return
      const now = yield* Clock.currentTimeMillis
      if (now - lastRecovery >= RECOVER_EVERY_MS) {
        lastRecovery = now
        yield* repo
          .recoverJobs(new Date(now))
          .pipe(Effect.andThen(repo.releaseSchedules({ expiredBefore: new Date(now) })))
      }
      let full = false
      const free = MAX_CONCURRENT_RUNS - inFlight
      if (free > 0) {
        const jobs = yield* jobRotation.claim(
          free,
          (after) =>
            repo.discoverJobs({ after, now: new Date(now), limit: free, organizations: DISCOVERED_ORGANIZATIONS }),
          (organizationId, limit) =>
            repo.claimJobs({ organizationId, workerId, now: new Date(now), leaseMs: LEASE_MS, limit })
        )
        if (stopping) return
        for (const job of jobs) {
          inFlight++
          yield* FiberSet.run(runs, live.track(runJob(job)))
        }
        const room = MAX_CONCURRENT_RUNS - inFlight
        const schedules =
          room > 0
            ? yield* scheduleRotation.claim(
                room,
                (after) =>
                  repo.discoverSchedules({
                    after,
                    now: new Date(now),
                    limit: room,
                    organizations: DISCOVERED_ORGANIZATIONS
                  }),
                (organizationId, limit) =>
                  repo.claimSchedules({ organizationId, workerId, now: new Date(now), leaseMs: LEASE_MS, limit })
              )
            : []
        if (stopping) return
        for (const schedule of schedules) {
          inFlight++
          yield* FiberSet.run(runs, live.track(runSchedule(schedule)))
        }
        full = jobs.length === free || schedules.length === room
      }
      if (full) continue
      const next = yield* repo.nextDue
      // Nothing due, or due at this pass's `now` but not claimable (its session's previous turn
      // still runs): the finishing run wakes the loop, the poll is the fallback.
      let wait = POLL_MS
      if (next !== null && next.getTime() > now) {
        const untilDue = next.getTime() - (yield* Clock.currentTimeMillis)
        // Fell due while this pass ran (a slow round trip, or a test's clock moved on): claim it now,
        // rather than a poll later (on TestClock that poll may never come).
        if (untilDue <= 0) continue
        wait = Math.min(POLL_MS, untilDue)
      }
      yield* Queue.take(wakeups).pipe(Effect.timeoutOption(wait))
    }
  }).pipe(
    Effect.catchCause((cause) =>
      Cause.hasInterruptsOnly(cause)
        ? Effect.failCause(cause)
        : logUnlessOutage("Replies worker loop failed; restarting", cause).pipe(Effect.andThen(Effect.sleep(POLL_MS)))
    )
  )
  /** The claim loop, restarted after a failure, until shutdown. */
  const claimLoop = Effect.gen(function* () {
    while (!stopping) yield* claimUntilStopped
  })

  /** Wakes the claim loop on every notification; re-listens after a connection loss. */
  const listener = listenForever(repliesChannel, wake, POLL_MS)

  yield* Effect.forkScoped(listener)
  const loop = yield* Effect.forkScoped(claimLoop)

  // O5: runs before the fibers above are interrupted (finalizers run in reverse order).
  yield* Effect.addFinalizer(() =>
    stopWorker({
      stop: () => {
        stopping = true
        wake()
      },
      loop,
      inFlight: () => inFlight,
      work: runs,
      release: Effect.flatMap(Clock.currentTimeMillis, (now) =>
        repo.releaseJobs(workerId, new Date(now)).pipe(Effect.andThen(repo.releaseSchedules({ workerId })))
      ),
      cannotRelease: "Could not release reply jobs and schedules"
    })
  )
})

/**
 * The replies worker as a layer (O1): starts when built, stops gracefully when
 * its scope closes (O5). Requires `Runtime`, `Messages`, `Sessions`, `PgClient`
 * and `AppConfig`.
 */
export const RepliesWorkerLive = Layer.effectDiscard(makeWorker).pipe(Layer.provide(RepliesRepo.layer))
