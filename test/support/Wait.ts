/**
 * Waiting in real time, also under TestClock: polling an effect until its
 * value is what a test expects, and sleeping.
 */
import { Effect } from "effect"

/** Polls `effect` every 50 ms (real time) until `done` holds for its value; dies after `timeoutMs`. */
export const waitFor = <A, E, R>(effect: Effect.Effect<A, E, R>, done: (a: A) => boolean, timeoutMs = 15_000) =>
  Effect.gen(function* () {
    const deadline = Date.now() + timeoutMs
    for (;;) {
      const value = yield* effect
      if (done(value)) return value
      if (Date.now() > deadline) return yield* Effect.die(new Error(`Timed out after ${timeoutMs} ms`))
      yield* realSleep(50)
    }
  })

/** Waits `ms` of real time (also under TestClock). */
export const realSleep = (ms: number) => Effect.promise(() => new Promise((resolve) => setTimeout(resolve, ms)))
