/**
 * The webhook delivery worker (DECISIONS.md W2-W6, O1, O5), run as fibers in
 * every process with `PARLEY_ROLE` `all` or `worker`.
 *
 * - Claim: due pending deliveries are leased with `FOR UPDATE SKIP LOCKED`
 *   (`Repo.ts` `claimStatement`), so processes sharing a database never take the same
 *   delivery, organization by organization (O11: the organizations with due
 *   work found by `Repo.ts` `discoverStatement`, each claimed in a statement of
 *   its own, in rotation: `Database/Workers.ts` `makeOrganizationRotation`); a lease (`WEBHOOK_TIMEOUT_MS` + 10 s) makes a crashed process's
 *   claims due again. The worker's statements and its `LISTEN` run on a pool
 *   of its own ({@link workerClientLayer}).
 * - Wakeup: `LISTEN parley_deliveries` (the fan-out trigger and the admin retry
 *   notify at commit), this process's POST message (`Wakeup.ts`
 *   {@link DeliveryWakeup}: its events do not notify while this worker runs),
 *   local timers for retries this process scheduled, and a 1 s poll as the
 *   fallback (lost notifications, other processes' retries and unclaimed
 *   POST message deliveries, expired leases).
 * - Concurrency: at most {@link MAX_IN_FLIGHT} attempts per process and
 *   {@link MAX_IN_FLIGHT_PER_APP} per app, so one slow app cannot take every slot (W5).
 * - Attempt: POST of the stored envelope text (byte-identical, W3) with the
 *   Standard Webhooks headers (W4), `content-type: application/json` and
 *   `traceparent`, within `WEBHOOK_TIMEOUT_MS`; the connection goes only to an
 *   address the SSRF guard accepted (W6). 2xx = succeeded; otherwise the next
 *   attempt follows `WEBHOOK_RETRY_SCHEDULE` with up to +20% jitter, and after
 *   the last the delivery is `failed` (W5). Results are recorded in batches,
 *   with the health of their apps: an app failing for `APP_DISABLE_AFTER` is
 *   disabled, with `app.failing` at a fifth of it and `app.disabled` (W10;
 *   `Repo.ts` `completeStatement`).
 * - Batching: under load, claims that take deliveries and writes of results
 *   start at most once per batch window ({@link BATCH_WINDOW_MS}, 5 ms), so each statement
 *   carries what came meanwhile; a quiet worker claims and writes at once, and
 *   a claim that took all it asked for (up to 128, fewer when fewer slots are
 *   free) is followed by the next at once.
 * - Shutdown (O5): stop claiming, let attempts in flight finish (up to 10 s),
 *   record them, and release every lease still held.
 * - Sweep: once a minute, the deliveries of apps deleted while an event fanned
 *   out to them are deleted (`Repo.ts` `sweepStatement`).
 *
 * The decisions of an attempt are pure ({@link retryDelayMs},
 * {@link attemptVerdict}) and one attempt runs over any {@link SendWebhook}
 * ({@link makeAttempt}); {@link WebhookWorker} over {@link workerRepoLayer}
 * and a {@link WebhookSender} of a test's own runs the whole worker on
 * PostgreSQL with a stub sender (test/support/WebhookWorker.ts).
 */

import {
  Clock,
  Context,
  Deferred,
  Duration,
  Effect,
  FiberSet,
  Layer,
  Metric,
  Option,
  Queue,
  type Redacted,
  Schedule
} from "effect"
import type { Dispatcher } from "undici"
import { AppConfig } from "../Config.ts"
import { clientLayer, DatabaseLocation, type DatabaseTimeouts, timeoutsOf } from "../Database/Database.ts"
import { logUnlessOutage } from "../Database/Health.ts"
import { DISCOVERED_ORGANIZATIONS, makeOrganizationRotation, stopWorker } from "../Database/Workers.ts"
import { Ids } from "../Shared/Ids.ts"
import { describeOutboundFailure, guardedDispatcher, guardedTarget } from "../Shared/Ssrf.ts"
import * as Metrics from "../Telemetry/Metrics.ts"
import { currentTraceparent, spanOfTraceparent } from "../Telemetry/Telemetry.ts"
import type { DeliveryStatus } from "./Api.ts"
import { type AttemptResult, type ClaimedDelivery, WebhooksRepo, WORKER_SESSION_SETTINGS } from "./Repo.ts"
import { signatureHeaders } from "./Signing.ts"
import { DeliveryWakeup } from "./Wakeup.ts"

/** Attempts in flight per process. */
export const MAX_IN_FLIGHT = 256
/** Attempts in flight per app and process (W5: a slow app leaves the other slots to other apps). */
export const MAX_IN_FLIGHT_PER_APP = 128
/** Deliveries claimed per round of claims (one statement per organization, O11). */
const CLAIM_BATCH = 128
/** Fallback poll interval, in ms. */
const POLL_MS = 1_000
/** Lease margin over the attempt timeout, in ms. */
const LEASE_MARGIN_MS = 10_000
/** Most attempt results recorded per statement. */
const WRITE_BATCH = 500
/**
 * The batch window, in ms: the least time between the starts of two claims
 * that took deliveries, and of two writes of attempt results (unless the last
 * claim took all it asked for: then the next follows at once; a stopping
 * worker waits no more). Under load a delivery waits up to this long to share
 * its claim and its completion with the others that came meanwhile; a quiet
 * worker claims at once. Each statement costs PostgreSQL and the server about
 * the same whatever its batch, so fewer, larger ones cost less per delivery.
 * Speed tactic measured by `npm run bench -- webhooks` (end to end, one app;
 * bench/README.md "webhooks: delivery"; measured in "The delivery worker's own
 * pool" of `git show 73e3eb4:bench/README.md`).
 */
const BATCH_WINDOW_MS = 5
/** Interval of the sweep of deleted apps' deliveries, in ms (`Repo.ts` `sweepStatement`). */
const SWEEP_MS = 60_000

/**
 * The delay in ms before the attempt after attempt `attempt` (1-based): the
 * schedule's `attempt`-th delay plus up to 20% of it (`random` in [0, 1) is
 * the share of those 20%, W5), or undefined after the last delay of the
 * schedule (the delivery is then `failed`).
 */
export const retryDelayMs = (
  schedule: ReadonlyArray<Duration.Duration>,
  attempt: number,
  random = Math.random()
): number | undefined => {
  const base = schedule[attempt - 1]
  if (base === undefined) return undefined
  const ms = Duration.toMillis(base)
  return Math.round(ms + ms * 0.2 * random)
}

/** What an attempt got: the HTTP status of a response, or why there was none (`describeOutboundFailure`). */
export type AttemptResponse = { readonly statusCode: number } | { readonly failure: string }

/** What an attempt makes of its delivery (W5), as recorded. */
export interface AttemptVerdict {
  /** The response's HTTP status; null without a response. */
  readonly statusCode: number | null
  /** null on success; else `HTTP status <code>` or the failure. */
  readonly error: string | null
  /** `succeeded` on a 2xx; else `pending` while the schedule has a delay left, then `failed`. */
  readonly status: DeliveryStatus
  /** With `pending`: ms until the next attempt ({@link retryDelayMs}); else 0. */
  readonly delayMs: number
}

/**
 * The verdict of attempt number `attempt` (1-based) of a delivery (W5): a 2xx
 * response is success; anything else (another status, a time-out, a refused
 * address, a network error) is retried after the schedule's next delay with
 * jitter, and after the last delay the delivery is `failed`.
 */
export const attemptVerdict = (
  response: AttemptResponse,
  attempt: number,
  schedule: ReadonlyArray<Duration.Duration>,
  random = Math.random()
): AttemptVerdict => {
  const statusCode = "statusCode" in response ? response.statusCode : null
  const error =
    "failure" in response
      ? response.failure
      : response.statusCode < 200 || response.statusCode > 299
        ? `HTTP status ${response.statusCode}`
        : null
  if (error === null) return { statusCode, error, status: "succeeded", delayMs: 0 }
  const delayMs = retryDelayMs(schedule, attempt, random)
  return delayMs === undefined
    ? { statusCode, error, status: "failed", delayMs: 0 }
    : { statusCode, error, status: "pending", delayMs }
}

/**
 * The headers of one attempt at `at` carrying the trace context `traceparent`
 * (W3, W4; none when null): the Standard Webhooks headers (`webhook-id` the event id,
 * `webhook-timestamp` Unix seconds of `at`, `webhook-signature` `v1,<base64
 * HMAC-SHA256>`, two during a rotation, W8), `content-type:
 * application/json`, `user-agent: Parley-Webhooks/1` and `traceparent`
 * (Node adds the envelope's `content-length`).
 */
const attemptHeaders = (delivery: ClaimedDelivery, at: Date, traceparent: string | null): Record<string, string> => ({
  ...signatureHeaders(
    [delivery.signing_secret, delivery.previous_signing_secret],
    delivery.event_id,
    at,
    delivery.body
  ),
  "content-type": "application/json",
  "user-agent": "Parley-Webhooks/1",
  ...(traceparent === null ? {} : { traceparent })
})

/**
 * How an attempt's request is sent: a POST of `body` with `headers` to `url`
 * (already checked by the W6 guard), returning the response's HTTP status once
 * its body was read, failing with why there was none. Interrupting it (the
 * attempt's time-out) aborts the request.
 */
export type SendWebhook = (url: URL, headers: Record<string, string>, body: string) => Effect.Effect<number, unknown>

/** Most bytes of a response's body read (and dropped) before its connection is closed instead, as `undici`'s `dump`. */
const RESPONSE_BODY_LIMIT = 128 * 1024

/** Why an attempt's request is aborted when the attempt is interrupted (its time-out). */
const interrupted = () => new Error("Attempt interrupted")

/**
 * {@link SendWebhook} over an `undici` `dispatcher` (keep-alive and the W6
 * lookup: `Shared/Ssrf.ts` `guardedDispatcher`), through its `dispatch` API
 * with a handler that keeps only the response's status: the body is read and
 * dropped (past {@link RESPONSE_BODY_LIMIT}, 128 KiB, the connection is closed
 * instead), and the effect's interruption (the attempt's time-out) aborts the
 * request, queued or sent. Fails with `undici`'s error when there is no response.
 *
 * `dispatch` rather than `undici`'s `request`, which wraps every response in a
 * body stream and a promise: a scratch loop of 30,000 POSTs of a 400-byte body
 * to a local receiver, 128 at a time, took 75-93 us of client CPU per request
 * with `request` and `body.dump()`, and 52-59 us with `dispatch` (bench/README.md
 * "webhooks: delivery"; "The worker on undici's dispatch" in
 * `git show 73e3eb4:bench/README.md`). `undici` rather than Node's
 * `http.request`: `npm run bench -- webhooks` measured 0.419 ms of server CPU
 * per delivery in the burst with Node's client and 0.393 ms with `undici`'s
 * `request` ("The worker on undici", same file). Before that, Node's client
 * had replaced `effect/http`'s `HttpClient` (0.41 -> 0.24 ms per delivery,
 * "Webhooks past Svix", same file).
 */
export const undiciSendWebhook =
  (dispatcher: Dispatcher): SendWebhook =>
  (url, headers, body) =>
    Effect.callback<number, unknown>((resume) => {
      let settled = false
      let controller: Dispatcher.DispatchController | undefined
      let statusCode = 0
      let read = 0
      const settle = (outcome: Effect.Effect<number, unknown>) => {
        if (settled) return
        settled = true
        resume(outcome)
      }
      const handler: Dispatcher.DispatchHandler = {
        onRequestStart: (started) => {
          controller = started
          // Settled before it was written (interrupted while queued for a connection): never sent.
          if (settled) started.abort(interrupted())
        },
        onResponseStart: (_, status) => {
          statusCode = status
        },
        onResponseData: (reading, chunk) => {
          read += chunk.length
          if (read <= RESPONSE_BODY_LIMIT) return
          settle(Effect.succeed(statusCode))
          reading.abort(new Error(`Response body over ${RESPONSE_BODY_LIMIT} bytes: connection closed`))
        },
        onResponseEnd: () => settle(Effect.succeed(statusCode)),
        onResponseError: (_, error) => settle(Effect.fail(error))
      }
      try {
        dispatcher.dispatch(
          { origin: url.origin, path: `${url.pathname}${url.search}`, method: "POST", headers, body },
          handler
        )
      } catch (error) {
        settle(Effect.fail(error))
      }
      return Effect.sync(() => {
        settled = true
        controller?.abort(interrupted())
      })
    })

/** How attempts are made: `WEBHOOK_TIMEOUT_MS`, `WEBHOOK_RETRY_SCHEDULE`, `ALLOW_PRIVATE_NETWORK_TARGETS` (O3). */
export interface AttemptOptions {
  /** Time allowed for the response, in ms (W5). */
  readonly timeoutMs: number
  /** Delays after the first attempt (W5). */
  readonly schedule: ReadonlyArray<Duration.Duration>
  /** Whether non-public addresses are allowed (W6). */
  readonly allowPrivate: boolean
}

/**
 * One attempt of a claimed delivery with `send` (W3-W6), as an effect that
 * never fails: the URL is checked first (W6: a non-public IP literal is
 * refused and nothing is sent; host names are checked by the agents' lookup,
 * `Shared/Ssrf.ts`), the request ({@link attemptHeaders}, the envelope text)
 * gets `timeoutMs` for its response, under a `Webhooks.attempt` span that is a
 * child of the event's trace and whose context the request carries. Returns
 * the {@link AttemptResult} to record (start from the effect's `Clock`,
 * duration in ms) and counts it in the webhook metrics.
 */
export const makeAttempt = (send: SendWebhook, options: AttemptOptions) => {
  const { timeoutMs, schedule, allowPrivate } = options
  /** `parley.webhook.attempts` per outcome, its attributes set once. */
  const attemptsOf = (outcome: string) => Metric.withAttributes(Metrics.webhookAttempts, { outcome })
  const attemptsBy: Record<DeliveryStatus, ReturnType<typeof attemptsOf>> = {
    succeeded: attemptsOf("succeeded"),
    pending: attemptsOf("retry"),
    failed: attemptsOf("failed")
  }

  /** POSTs the envelope with the `traceparent` of the attempt's span; returns the HTTP status. */
  const post = (delivery: ClaimedDelivery, at: Date) =>
    Effect.flatMap(guardedTarget(delivery.webhook_url, allowPrivate), (url) =>
      Effect.flatMap(currentTraceparent, (traceparent) =>
        send(url, attemptHeaders(delivery, at, traceparent), delivery.body)
      )
    )

  return (delivery: ClaimedDelivery): Effect.Effect<AttemptResult> =>
    Effect.flatMap(Clock.currentTimeMillis, (now) => {
      const startedAt = new Date(now)
      const start = performance.now()
      const parent = spanOfTraceparent(delivery.traceparent)
      return post(delivery, startedAt).pipe(
        Effect.timeout(timeoutMs),
        Effect.result,
        Effect.withSpan(
          "Webhooks.attempt",
          {
            attributes: { "parley.delivery_id": delivery.id, "parley.event_id": delivery.event_id },
            ...(parent === undefined ? {} : { parent })
          },
          // The span's place in the code is always this line: no stack trace is captured per attempt.
          { captureStackTrace: false }
        ),
        Effect.flatMap((outcome) => {
          const durationMs = Math.round(performance.now() - start)
          const verdict = attemptVerdict(
            outcome._tag === "Success"
              ? { statusCode: outcome.success }
              : { failure: describeOutboundFailure(outcome.failure, timeoutMs) },
            delivery.attempts + 1,
            schedule
          )
          const result: AttemptResult = {
            organizationId: delivery.organization_id,
            id: delivery.id,
            durationMs,
            startedAt,
            ...verdict
          }
          return Metric.update(attemptsBy[verdict.status], 1).pipe(
            Effect.andThen(Metric.update(Metrics.webhookAttemptDuration, durationMs / 1000)),
            Effect.as(result)
          )
        })
      )
    })
}

/**
 * How the worker sends its requests ({@link SendWebhook}): {@link WebhookSender.layer}
 * in {@link WebhookWorkerLive}, a stub in tests.
 */
export class WebhookSender extends Context.Service<WebhookSender, { readonly send: SendWebhook }>()(
  "parley/Webhooks/WebhookSender"
) {
  /**
   * {@link undiciSendWebhook} over a keep-alive dispatcher with the W6 lookup
   * unless `ALLOW_PRIVATE_NETWORK_TARGETS` (`Shared/Ssrf.ts`
   * `guardedDispatcher`), closed with the layer once the worker stopped.
   * Requires `AppConfig`.
   */
  static readonly layer = Layer.effect(
    WebhookSender,
    Effect.gen(function* () {
      const config = yield* AppConfig
      const dispatcher = yield* guardedDispatcher(config.allowPrivateNetworkTargets)
      return WebhookSender.of({ send: undiciSendWebhook(dispatcher) })
    })
  )
}

/** The worker, its claims and result writes a batch window of `batchWindowMs` apart ({@link BATCH_WINDOW_MS} live). */
const makeWorker = (batchWindowMs: number) =>
  Effect.gen(function* () {
    const repo = yield* WebhooksRepo
    const config = yield* AppConfig
    const { send } = yield* WebhookSender
    const workerId = (yield* Ids).newId()
    const timeoutMs = Duration.toMillis(config.webhookTimeout)
    const leaseMs = timeoutMs + LEASE_MARGIN_MS
    const schedule = config.webhookRetrySchedule
    const allowPrivate = config.allowPrivateNetworkTargets
    const disableAfterMs = Duration.toMillis(config.appDisableAfter)

    /** Which organizations this worker's claims visit, round after round (O11). */
    const rotation = makeOrganizationRotation()
    let inFlight = 0
    const perApp = new Map<string, number>()
    /** The organization of each app in `perApp` (O11: its claims are that organization's). */
    const organizationOf = new Map<string, string>()
    /** Whether the last claim may have left due work behind (full batch or saturated apps). */
    let moreDue = false
    /** Retries this process scheduled within the next poll: when due (epoch ms) and their organization. */
    let localDue: Array<{ readonly at: number; readonly organizationId: string }> = []
    /** Whether the last wait ended by the poll, with no local retry due: the next claim looks everywhere. */
    let polled = false
    let stopping = false
    /** Completed by the stop (O5): cuts short a wait for the batch window. */
    const stopped = yield* Deferred.make<void>()

    // Wakeups: notifications, this process's POST message (DeliveryWakeup), finished attempts.
    const wakeup = yield* DeliveryWakeup
    const wake = wakeup.wake
    const results = yield* Queue.unbounded<AttemptResult>()
    const attempts = yield* FiberSet.make<void, never>()

    const attemptOnce = makeAttempt(send, { timeoutMs, schedule, allowPrivate })

    /** Waits until the batch window that began at `start` (epoch ms) ends, or until the worker stops ({@link BATCH_WINDOW_MS}). */
    const waitBatchWindow = (start: number) =>
      Effect.flatMap(Clock.currentTimeMillis, (now) =>
        start + batchWindowMs > now
          ? Effect.raceFirst(Effect.sleep(start + batchWindowMs - now), Deferred.await(stopped))
          : Effect.void
      )

    /** One attempt of a claimed delivery; the result goes to the writer. */
    const attempt = (delivery: ClaimedDelivery) =>
      Effect.flatMap(attemptOnce(delivery), (result) => Queue.offer(results, result)).pipe(Effect.asVoid)

    /** Records attempt results in batches, at most one write per batch window, then frees their slots. */
    const writer = Effect.gen(function* () {
      let lastWrite = Number.NEGATIVE_INFINITY
      for (;;) {
        yield* Queue.peek(results)
        yield* waitBatchWindow(lastWrite)
        lastWrite = yield* Clock.currentTimeMillis
        const batch = yield* Queue.takeBetween(results, 1, WRITE_BATCH)
        yield* repo.complete(workerId, batch, disableAfterMs).pipe(
          Effect.retry(Schedule.exponential("100 millis").pipe(Schedule.upTo({ times: 5 }))),
          Effect.catchCause((cause) =>
            // The leases expire and the deliveries are attempted again (at least once, W2).
            logUnlessOutage("Could not record webhook attempts", cause)
          )
        )
        const written = yield* Clock.currentTimeMillis
        for (const result of batch) {
          // Due in the database at write time + delay, so no earlier than this (same clock or synced clocks).
          if (result.status === "pending" && result.delayMs < POLL_MS)
            localDue.push({ at: written + result.delayMs + 5, organizationId: result.organizationId })
          inFlight--
          const appId = appOf.get(result.id)
          appOf.delete(result.id)
          if (appId !== undefined) {
            const n = (perApp.get(appId) ?? 1) - 1
            if (n <= 0) {
              perApp.delete(appId)
              organizationOf.delete(appId)
            } else perApp.set(appId, n)
          }
        }
        // Slots were freed (and a queue's next head may be due): claim again where these attempts were (O11).
        if (moreDue || batch.some((result) => result.status !== "pending" || result.delayMs < POLL_MS))
          for (const organizationId of new Set(batch.map((result) => result.organizationId))) wake(organizationId)
      }
    })
    const appOf = new Map<string, string>()

    /** Claims and starts attempts while there is work and capacity. */
    const claimLoop = Effect.gen(function* () {
      for (;;) {
        if (stopping) return
        const free = MAX_IN_FLIGHT - inFlight
        if (free <= 0) {
          yield* wakeup.woken
          continue
        }
        const now = yield* Clock.currentTimeMillis
        const hints = wakeup.takeHints()
        const dueNow = localDue.filter((due) => due.at <= now).map((due) => due.organizationId)
        localDue = localDue.filter((due) => due.at > now)
        const everywhere = polled || hints.everywhere
        polled = false
        const busyApps = [...perApp.keys()]
        const busyCounts = busyApps.map((app) => perApp.get(app)!)
        const saturated = busyApps.filter((app) => perApp.get(app)! >= MAX_IN_FLIGHT_PER_APP)
        const limit = Math.min(free, CLAIM_BATCH)
        const claimed = yield* rotation
          .claim(
            limit,
            (after) => repo.discover({ after, limit, saturated, organizations: DISCOVERED_ORGANIZATIONS }),
            (organizationId, share) =>
              repo.claim(organizationId, {
                workerId,
                leaseMs,
                limit: share,
                perApp: MAX_IN_FLIGHT_PER_APP,
                busyApps,
                busyCounts,
                saturated
              }),
            {
              inFlight: [...new Set(busyApps.map((app) => organizationOf.get(app)!))],
              hinted: [...hints.organizations, ...dueNow],
              everywhere
            }
          )
          .pipe(
            Effect.catchCause((cause) =>
              logUnlessOutage("Could not claim webhook deliveries", cause).pipe(
                Effect.andThen(Effect.sleep(POLL_MS)),
                Effect.as([] as ReadonlyArray<ClaimedDelivery>)
              )
            )
          )
        // Claimed during shutdown: not started; the release below makes them due for another process.
        if (stopping) return
        for (const delivery of claimed) {
          inFlight++
          perApp.set(delivery.app_id, (perApp.get(delivery.app_id) ?? 0) + 1)
          organizationOf.set(delivery.app_id, delivery.organization_id)
          appOf.set(delivery.id, delivery.app_id)
          yield* FiberSet.run(attempts, attempt(delivery))
        }
        moreDue = claimed.length === limit || saturated.length > 0
        if (claimed.length === limit) continue
        if (claimed.length > 0) {
          // At most one claim that takes deliveries per batch window from its start (now): those due meanwhile
          // share the next.
          yield* waitBatchWindow(now)
        }
        const nextLocal = localDue.length === 0 ? Number.POSITIVE_INFINITY : Math.min(...localDue.map((due) => due.at))
        const wait = Math.max(0, Math.min(POLL_MS, nextLocal - (yield* Clock.currentTimeMillis)))
        const woken = yield* wakeup.woken.pipe(Effect.timeoutOption(wait))
        polled = Option.isNone(woken) && nextLocal > (yield* Clock.currentTimeMillis)
      }
    })

    /** Wakes the claim loop on every notification; re-listens after a connection loss. */
    const listener = repo.listen(wake, POLL_MS)

    /**
     * Once a minute, deletes the deliveries an event made for an app being
     * deleted (W2: never attempted, since every claim joins the apps; migrations/0017).
     */
    const sweeper = Effect.sleep(SWEEP_MS).pipe(
      Effect.andThen(repo.sweep),
      Effect.tap((n) => (n > 0 ? Effect.logInfo(`Deleted ${n} delivery(ies) of deleted apps`) : Effect.void)),
      Effect.catchCause((cause) => logUnlessOutage("Could not sweep the deliveries of deleted apps", cause)),
      Effect.forever
    )

    yield* Effect.forkScoped(writer)
    yield* Effect.forkScoped(listener)
    yield* Effect.forkScoped(sweeper)
    const loop = yield* Effect.forkScoped(claimLoop)

    // O5: runs before the fibers above are interrupted (finalizers run in reverse order).
    yield* Effect.addFinalizer(() =>
      stopWorker({
        stop: () => {
          stopping = true
          Deferred.doneUnsafe(stopped, Effect.void)
          wake()
        },
        loop,
        inFlight: () => inFlight,
        work: attempts,
        release: repo.release(workerId),
        cannotRelease: "Could not release webhook leases"
      }).pipe(
        Effect.tap((left) => Effect.logInfo(`Webhook worker stopped; ${left} attempt(s) still in flight were released`))
      )
    )
    // Until the worker stops, POST message in this process wakes it directly (DeliveryWakeup); acquired after
    // the finalizer above, so released before it runs: requests arriving while it stops notify every process.
    yield* wakeup.attach
  })

/**
 * The delivery worker as a layer (O1), its claims and result writes a batch
 * window of `batchWindowMs` apart ({@link BATCH_WINDOW_MS} live; tests may use
 * 0, each at once): starts when built, stops gracefully when its scope closes (O5).
 * Requires `WebhooksRepo`, `AppConfig`, `DeliveryWakeup`, `WebhookSender`,
 * `DatabaseHealth` and `Ids`.
 */
export const WebhookWorker = (batchWindowMs: number) => Layer.effectDiscard(makeWorker(batchWindowMs))

/**
 * Connections of the delivery worker's pool per process: one held by its
 * `LISTEN`, the others shared (pipelined) by the claims, the completions, the
 * sweep and the release.
 */
const WORKER_POOL_SIZE = 3

/**
 * The delivery worker's pool on `url` (O1): at most `poolSize` connections
 * (default {@link WORKER_POOL_SIZE}), shown as `parley/webhooks` in
 * `pg_stat_activity`, each started with `Repo.ts` `WORKER_SESSION_SETTINGS`
 * (the planner's and asynchronous commit).
 * Its connections wait on PostgreSQL as long as `timeouts` allow (the API's
 * bounds in the server, issue 38 item 1). Provides `PgClient` and `SqlClient`;
 * builds without connecting (connections open on first use), and its
 * statements fail with `SqlError` when none can be made.
 */
export const workerClientLayer = (
  url: Redacted.Redacted<string>,
  poolSize = WORKER_POOL_SIZE,
  timeouts?: DatabaseTimeouts
) =>
  clientLayer(url, poolSize, {
    part: "webhooks",
    startupParameters: WORKER_SESSION_SETTINGS,
    ...(timeouts === undefined ? {} : { timeouts })
  })

/**
 * The delivery worker's repository: `WebhooksRepo.layer` over a pool of its
 * own ({@link workerClientLayer}) to the database of `DatabaseLocation`, with
 * the configured bounds, not over the application's `PgClient`. Fresh: the application builds
 * `WebhooksRepo.layer` once over its own pool, and layers are shared by
 * identity, so without it the worker would get that one.
 */
export const workerRepoLayer = Layer.fresh(WebhooksRepo.layer).pipe(
  Layer.provide(
    Layer.unwrap(
      Effect.gen(function* () {
        const { url } = yield* DatabaseLocation
        return workerClientLayer(url, WORKER_POOL_SIZE, timeoutsOf(yield* AppConfig))
      })
    )
  )
)

/**
 * {@link WebhookWorker} on PostgreSQL, over a pool of its own
 * ({@link workerRepoLayer}), with Node's guarded HTTP agents (W6, {@link WebhookSender}).
 * Requires `DatabaseLocation`, `AppConfig`, `DatabaseHealth`, `Ids` and
 * `DeliveryWakeup` (the one of this process's `Messages`).
 */
export const WebhookWorkerLive = WebhookWorker(BATCH_WINDOW_MS).pipe(
  Layer.provide(workerRepoLayer),
  Layer.provide(WebhookSender.layer)
)
