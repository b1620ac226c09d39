/**
 * What the background workers (webhook deliveries, reply jobs, schedules)
 * share: wakeups by LISTEN and graceful stopping (O5).
 */

import { PgClient } from "@effect/sql-pg"
import { Effect, Fiber, FiberSet, Queue } from "effect"
import { logUnlessOutage } from "./Health.ts"

/**
 * Calls `onNotification` for every NOTIFY on `channel` (and once when
 * listening starts, so a worker re-checks after a reconnect); after a lost
 * connection, logs `Listener lost: <channel>` and listens again after
 * `retryMs`. Runs until interrupted. Requires `PgClient`.
 */
export const listenForever = (channel: string, onNotification: () => void, retryMs: number) =>
  Effect.flatMap(PgClient.PgClient, (pg) =>
    Effect.scoped(
      Effect.gen(function* () {
        const notifications = yield* pg.listen(channel)
        onNotification()
        for (;;) {
          yield* Queue.take(notifications)
          onNotification()
        }
      })
    ).pipe(
      Effect.catchCause((cause) => logUnlessOutage(`Listener lost: ${channel}`, cause)),
      Effect.andThen(Effect.sleep(retryMs)),
      Effect.forever
    )
  )

/** How long work in flight may take to finish when a worker stops, in ms (O5). */
const SHUTDOWN_GRACE_MS = 10_000

/**
 * A worker's stop (O5), for its scope's finalizer: `stop()` makes the claim
 * loop return at its next check (it is never interrupted mid-statement, so no
 * lease is committed after the release), then the work in flight gets up to
 * {@link SHUTDOWN_GRACE_MS} (real time, also under a test clock), what is left
 * is interrupted, and `release` gives back the leases still held (5 s at most,
 * failures logged as `cannotRelease`).
 */
export const stopWorker = (options: {
  readonly stop: () => void
  readonly loop: Fiber.Fiber<unknown, unknown>
  readonly inFlight: () => number
  readonly work: FiberSet.FiberSet<unknown, unknown>
  readonly release: Effect.Effect<void, unknown>
  readonly cannotRelease: string
}) =>
  Effect.gen(function* () {
    options.stop()
    yield* Fiber.await(options.loop).pipe(Effect.timeout(5_000), Effect.ignore)
    yield* Fiber.interrupt(options.loop)
    const deadline = Date.now() + SHUTDOWN_GRACE_MS
    while (options.inFlight() > 0 && Date.now() < deadline) {
      yield* Effect.promise(() => new Promise((resolve) => setTimeout(resolve, 20)))
    }
    const left = options.inFlight()
    yield* FiberSet.clear(options.work)
    yield* options.release.pipe(
      Effect.timeout(5_000),
      Effect.catchCause((cause) => Effect.logWarning(options.cannotRelease, cause))
    )
    return left
  })

/**
 * A worker of leased jobs that advance in steps (erasures D22, evaluations
 * A16), as a layer effect (O1, O5): claims a job (`claim`, under the
 * caller's lease), calls `advance` until it answers anything but `"more"`,
 * claims the next, and when none is left waits for a NOTIFY on `channel` or
 * `pollMs`. A failed step is logged (`<name> batch failed`, quiet during a
 * database outage) and the loop goes on; a crashed process's job is claimed
 * again once its lease expires. Shutdown: stop between steps (up to
 * `SHUTDOWN_GRACE_MS`), then `release` the leases still held. Requires `PgClient`.
 */
export const steppedJobWorker = <J>(options: {
  /** The job kind, for log lines: `Erasure`, `Evaluation`. */
  readonly name: string
  readonly channel: string
  readonly pollMs: number
  readonly claim: Effect.Effect<J | undefined>
  readonly advance: (job: J) => Effect.Effect<string>
  readonly release: Effect.Effect<void>
}) =>
  Effect.gen(function* () {
    let stopping = false
    const wakeups = yield* Queue.dropping<void>(1)
    const wake = () => {
      Queue.offerUnsafe(wakeups, undefined)
    }

    /** Claims and advances jobs until none is waiting; returns then, or when it stops. */
    const drain = Effect.gen(function* () {
      while (!stopping) {
        const job = yield* options.claim
        if (job === undefined) return
        while (!stopping) {
          if ((yield* options.advance(job)) !== "more") break
        }
      }
    }).pipe(Effect.catchCause((cause) => logUnlessOutage(`${options.name} batch failed`, cause)))

    const loop = Effect.gen(function* () {
      while (!stopping) {
        yield* drain
        if (stopping) return
        yield* Queue.take(wakeups).pipe(Effect.timeout(options.pollMs), Effect.ignore)
      }
    })

    yield* Effect.forkScoped(listenForever(options.channel, wake, options.pollMs))
    const fiber = yield* Effect.forkScoped(loop)
    yield* Effect.addFinalizer(() =>
      Effect.gen(function* () {
        stopping = true
        wake()
        yield* Fiber.await(fiber).pipe(Effect.timeout(SHUTDOWN_GRACE_MS), Effect.ignore)
        yield* Fiber.interrupt(fiber)
        yield* options.release.pipe(
          Effect.timeout(5_000),
          Effect.catchCause((cause) =>
            Effect.logWarning(`Could not release ${options.name.toLowerCase()} leases`, cause)
          )
        )
      })
    )
  })
