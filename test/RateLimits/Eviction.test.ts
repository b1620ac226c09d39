/**
 * The rate limiter's memory (DECISIONS.md D20, `RateLimits/RateLimiter.ts`):
 * a process keeps state only for the organizations it served within the last
 * minute, so serving many organizations over time does not grow it without end.
 */
import { assert, layer } from "@effect/vitest"
import { Effect, Layer } from "effect"
import { TestClock } from "effect/testing"
import { RateLimiter } from "../../src/RateLimits/RateLimiter.ts"
import { makeIdGenerator } from "../../src/Shared/Ids.ts"
import { FileDatabase, fileDatabaseClient } from "../support/Database.ts"

const newId = makeIdGenerator()

layer(RateLimiter.layer.pipe(Layer.provide(fileDatabaseClient(1)), Layer.provide(FileDatabase)), {
  timeout: "120 seconds"
})("the rate limiter's memory (D20)", (it) => {
  it.effect("organizations with no request for a minute are forgotten; one still served is kept", () =>
    Effect.gen(function* () {
      const limiter = yield* RateLimiter
      // Organizations without settings are unlimited: each take returns undefined and is remembered for a lease.
      const served = newId()
      const others = Array.from({ length: 50 }, () => newId())
      for (const organizationId of [served, ...others]) {
        assert.isUndefined(yield* limiter.take(organizationId))
      }
      assert.strictEqual(limiter.tracked(), 51)
      // Half a minute later only `served` has a request again.
      yield* TestClock.adjust("30 seconds")
      assert.isUndefined(yield* limiter.take(served))
      assert.strictEqual(limiter.tracked(), 51, "nothing is forgotten within a minute")
      // A minute after the first requests, the others are forgotten; `served` is not.
      yield* TestClock.adjust("31 seconds")
      const newcomer = newId()
      assert.isUndefined(yield* limiter.take(newcomer))
      assert.strictEqual(limiter.tracked(), 2)
      // A forgotten organization is served as before.
      assert.isUndefined(yield* limiter.take(others[0]!))
      assert.strictEqual(limiter.tracked(), 3)
    })
  )
})
