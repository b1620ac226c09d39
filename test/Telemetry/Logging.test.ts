/**
 * JSON log lines carry the trace and span of the entry (issue 8 item 3, built
 * on the foundation's logging).
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Logger } from "effect"
import { jsonLogger } from "../../src/Telemetry/Telemetry.ts"

describe("logging", () => {
  it.effect("JSON lines have trace_id and span_id inside a span, none outside", () =>
    Effect.gen(function* () {
      const lines: Array<string> = []
      const logged = Effect.provide(Logger.layer([jsonLogger((line) => lines.push(line))]))
      yield* Effect.logInfo("outside").pipe(logged)
      yield* Effect.logInfo("inside", { n: 1 }).pipe(Effect.withSpan("Test.span"), logged)
      const [outside, inside] = lines.map((line) => JSON.parse(line))
      assert.isTrue(lines.every((line) => line.endsWith("\n") && !line.slice(0, -1).includes("\n")))
      assert.strictEqual(outside.level, "INFO")
      assert.isUndefined(outside.trace_id)
      assert.deepStrictEqual(inside.message, ["inside", { n: 1 }])
      assert.match(inside.trace_id, /^[0-9a-f]{32}$/)
      assert.match(inside.span_id, /^[0-9a-f]{16}$/)
    })
  )
})
