/**
 * LiveRuns (issue 41 item 6; `src/Runtime/LiveRuns.ts`): `idle` waits while
 * any tracked run is in flight, however it ends, and completes at once when
 * none is.
 */
import { assert, describe, it } from "@effect/vitest"
import { Deferred, Effect, Fiber } from "effect"
import { LiveRuns } from "../../src/Runtime/LiveRuns.ts"

describe("LiveRuns", () => {
  it.effect("idle waits for every tracked run, one that fails included, then completes", () =>
    Effect.gen(function* () {
      const live = yield* LiveRuns
      yield* live.idle
      const first = yield* Deferred.make<void>()
      const second = yield* Deferred.make<void, string>()
      const runs = [
        yield* Effect.forkChild(live.track(Deferred.await(first))),
        yield* Effect.forkChild(live.track(Deferred.await(second)).pipe(Effect.ignore))
      ]
      yield* Effect.yieldNow
      const waiting = yield* Effect.forkChild(live.idle)
      yield* Deferred.succeed(first, undefined)
      yield* Effect.yieldNow
      assert.isUndefined(waiting.pollUnsafe(), "one run is still in flight")
      yield* Deferred.fail(second, "model down")
      yield* Fiber.join(waiting)
      for (const run of runs) yield* Fiber.await(run)
      yield* live.idle
    }).pipe(Effect.provide(LiveRuns.layer))
  )
})
