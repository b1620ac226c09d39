/**
 * The erasure worker (DECISIONS.md D22, O1, O5), run in every process with
 * `PARLEY_ROLE` `all` or `worker`: claims pending erasures under a lease
 * ({@link LEASE_MS}) and advances each, one batch per transaction, until it
 * is completed (`Erasures.advance`). A crashed process's erasure is claimed
 * again when its lease expires and goes on from what is left. Wakeup:
 * `LISTEN parley_erasures` (a new erasure notifies at commit) and a
 * {@link POLL_MS} poll. Shutdown (O5): stop between batches (up to 10 s),
 * then give back the lease still held (`Database/Workers.ts` `steppedJobWorker`).
 */
import { Effect, Layer } from "effect"
import { steppedJobWorker } from "../Database/Workers.ts"
import { Ids } from "../Shared/Ids.ts"
import { Erasures } from "./Erasures.ts"
import { erasuresChannel } from "./Repo.ts"

/** Fallback poll interval, in ms. */
export const POLL_MS = 1_000
/** Lease of a claimed erasure, in ms, renewed by every batch: a worker silent this long is taken to have crashed. */
export const LEASE_MS = 60_000

/** The worker as a layer: starts when built. Requires `Erasures`, `Ids` and `PgClient`. */
export const ErasureWorkerLive = Layer.effectDiscard(
  Effect.gen(function* () {
    const erasures = yield* Erasures
    const workerId = (yield* Ids).newId()
    yield* steppedJobWorker({
      name: "Erasure",
      channel: erasuresChannel,
      pollMs: POLL_MS,
      claim: erasures.claim(workerId, LEASE_MS),
      advance: (erasure) => Effect.map(erasures.advance(erasure, workerId, LEASE_MS), (step) => step._tag),
      release: erasures.release(workerId)
    })
  })
)
