/**
 * The erasure worker (DECISIONS.md D22, O1, O5), run in every process with
 * `PARLEY_ROLE` `all` or `worker`: claims pending erasures under a lease
 * ({@link LEASE_MS}) and advances each, one batch per transaction, until it
 * is completed (`Erasures.advance`). A crashed process's erasure is claimed
 * again when its lease expires and goes on from what is left. Wakeup:
 * `LISTEN parley_erasures` (a new erasure notifies at commit) and a
 * {@link POLL_MS} poll. Shutdown (O5): stop between batches (up to 10 s),
 * then give back the lease still held.
 */
import { Effect, Fiber, Layer, Queue } from "effect"
import { logUnlessOutage } from "../Database/Health.ts"
import { listenForever } from "../Database/Workers.ts"
import { Ids } from "../Shared/Ids.ts"
import { Erasures } from "./Erasures.ts"
import { erasuresChannel } from "./Repo.ts"

/** Fallback poll interval, in ms. */
export const POLL_MS = 1_000
/** Lease of a claimed erasure, in ms, renewed by every batch: a worker silent this long is taken to have crashed. */
export const LEASE_MS = 60_000
/** How long a stopping worker waits for its batch in flight, in ms (O5). */
const SHUTDOWN_GRACE_MS = 10_000

/** The worker as a layer: starts when built. Requires `Erasures`, `Ids` and `PgClient`. */
export const ErasureWorkerLive = Layer.effectDiscard(
  Effect.gen(function* () {
    const erasures = yield* Erasures
    const workerId = (yield* Ids).newId()
    let stopping = false
    const wakeups = yield* Queue.dropping<void>(1)
    const wake = () => {
      Queue.offerUnsafe(wakeups, undefined)
    }

    /** Claims and finishes erasures until none is due; returns when there is nothing left or it stops. */
    const drain = Effect.gen(function* () {
      while (!stopping) {
        const erasure = yield* erasures.claim(workerId, LEASE_MS)
        if (erasure === undefined) return
        while (!stopping) {
          const step = yield* erasures.advance(erasure, workerId, LEASE_MS)
          if (step._tag !== "more") break
        }
      }
    }).pipe(Effect.catchCause((cause) => logUnlessOutage("Erasure batch failed", cause)))

    const loop = Effect.gen(function* () {
      while (!stopping) {
        yield* drain
        if (stopping) return
        yield* Queue.take(wakeups).pipe(Effect.timeout(POLL_MS), Effect.ignore)
      }
    })

    yield* Effect.forkScoped(listenForever(erasuresChannel, wake, POLL_MS))
    const fiber = yield* Effect.forkScoped(loop)
    yield* Effect.addFinalizer(() =>
      Effect.gen(function* () {
        stopping = true
        wake()
        yield* Fiber.await(fiber).pipe(Effect.timeout(SHUTDOWN_GRACE_MS), Effect.ignore)
        yield* Fiber.interrupt(fiber)
        yield* erasures.release(workerId).pipe(
          Effect.timeout(5_000),
          Effect.catchCause((cause) => Effect.logWarning("Could not release erasure leases", cause))
        )
      })
    )
  })
)
