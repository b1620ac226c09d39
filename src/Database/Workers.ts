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
