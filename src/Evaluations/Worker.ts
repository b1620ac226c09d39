/**
 * The evaluation worker (DECISIONS.md A16, O1, O5), run in every process
 * with `PARLEY_ROLE` `all` or `worker`: claims queued or running evaluations
 * under a lease ({@link LEASE_MS}) and advances each, a batch of turns at a
 * time, until it completes, fails or is cancelled (`Evaluations.advance`). A
 * crashed process's evaluation is claimed again when its lease expires and
 * goes on from its unanswered turns. Wakeup: `LISTEN parley_evaluations` (a
 * new evaluation notifies at commit) and a {@link POLL_MS} poll; shutdown as
 * every stepped job worker (`Database/Workers.ts` `steppedJobWorker`).
 */
import { Effect, Layer } from "effect"
import { steppedJobWorker } from "../Database/Workers.ts"
import { Ids } from "../Shared/Ids.ts"
import { Evaluations } from "./Evaluations.ts"
import { evaluationsChannel } from "./Repo.ts"

/** Fallback poll interval, in ms. */
export const POLL_MS = 1_000
/** Lease of a claimed evaluation, in ms, renewed by every answered turn: a worker silent this long is taken to have crashed. */
export const LEASE_MS = 120_000

/** The worker as a layer: starts when built. Requires `Evaluations`, `Ids` and `PgClient`. */
export const EvaluationWorkerLive = Layer.effectDiscard(
  Effect.gen(function* () {
    const evaluations = yield* Evaluations
    const workerId = (yield* Ids).newId()
    yield* steppedJobWorker({
      name: "Evaluation",
      channel: evaluationsChannel,
      pollMs: POLL_MS,
      claim: evaluations.claim(workerId, LEASE_MS),
      advance: (evaluation) => evaluations.advance(evaluation, workerId, LEASE_MS),
      release: evaluations.release(workerId)
    })
  })
)
