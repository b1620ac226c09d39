/**
 * Live runs before evaluations (issue 41 item 6; DECISIONS.md A16): the AI
 * runs of this process that answer real sessions (reply jobs, schedules:
 * `Replies/Worker.ts`) are counted while they run, and an evaluation's
 * replay waits until none is in flight before each turn and each model call
 * (`Evaluations/Evaluations.ts`). One Node process has one event loop: every
 * step an evaluation takes while a live reply runs is a step that reply
 * waits for, so the evaluation gives way. `npm run bench -- evaluations`
 * measures live replies without and beside an evaluation (bench/README.md
 * "evaluations").
 *
 * Process-local: runs of other processes are not seen (they have their own
 * event loop).
 */
import { Context, Effect, Latch, Layer } from "effect"

/** The live runs of this process (see module docs). */
export class LiveRuns extends Context.Service<
  LiveRuns,
  {
    /** Runs `effect` counted as a live run (until it ends, however it ends). */
    readonly track: <A, E, R>(effect: Effect.Effect<A, E, R>) => Effect.Effect<A, E, R>
    /** Completes at once when no live run is in flight, else when the last one ends. */
    readonly idle: Effect.Effect<void>
    /** Whether a live run is in flight or was within the last `windowMs` (real time). */
    readonly recentlyBusy: (windowMs: number) => Effect.Effect<boolean>
  }
>()("parley/Runtime/LiveRuns") {
  /** One count per process (build it once, shared by the replies worker and the evaluations). */
  static readonly layer = Layer.effect(
    LiveRuns,
    Effect.gen(function* () {
      const open = yield* Latch.make(true)
      let inFlight = 0
      let lastEnd = Number.NEGATIVE_INFINITY
      const begin = Effect.sync(() => {
        if (inFlight++ === 0) open.closeUnsafe()
      })
      const end = Effect.sync(() => {
        lastEnd = performance.now()
        if (--inFlight === 0) open.openUnsafe()
      })
      return LiveRuns.of({
        track: (effect) =>
          Effect.acquireUseRelease(
            begin,
            () => effect,
            () => end
          ),
        idle: open.await,
        recentlyBusy: (windowMs) => Effect.sync(() => inFlight > 0 || performance.now() - lastEnd < windowMs)
      })
    })
  )
}
