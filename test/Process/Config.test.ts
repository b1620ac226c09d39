/**
 * Configuration (DECISIONS.md O3): a bad value stops start-up with one line
 * naming the variable, and exit code 1.
 */
import { assert, describe, it } from "@effect/vitest"
import { Duration, Effect } from "effect"
import { formatConfigError, parseDuration } from "../../src/Config.ts"
import { runNode } from "../support/Processes.ts"

describe("configuration", () => {
  it.effect.each([
    ["PORT", "abc"],
    ["PORT", "70000"],
    ["PARLEY_ROLE", "everything"],
    ["LOG_LEVEL", "loud"],
    ["LOG_FORMAT", "xml"],
    ["WEBHOOK_TIMEOUT_MS", "soon"],
    ["WEBHOOK_RETRY_SCHEDULE", "5s,often"],
    ["SESSION_EXPIRY_SWEEP_INTERVAL", "30 seconds"],
    ["MAX_BODY_BYTES", "1MB"],
    ["AI_PROVIDER", "skynet"],
    ["ALLOW_PRIVATE_NETWORK_TARGETS", "perhaps"]
  ] as const)("%s=%s stops start-up with one line naming it and exit code 1", ([name, value]) =>
    Effect.gen(function* () {
      const result = yield* Effect.promise(() =>
        runNode("src/main.ts", [], { [name]: value, DATABASE_URL: "postgres://nobody@127.0.0.1:1/none" })
      )
      assert.strictEqual(result.code, 1)
      const lines = result.stderr.trim().split("\n")
      assert.strictEqual(lines.length, 1, result.stderr)
      assert.match(lines[0]!, new RegExp(`^Invalid configuration: ${name}: `))
    })
  )

  it("durations are a number and a unit among ms, s, m, h (O3)", () => {
    assert.deepStrictEqual(
      ["200ms", "5s", "30m", "2h"].map((text) => Duration.toMillis(parseDuration(text))),
      [200, 5_000, 1_800_000, 7_200_000]
    )
    assert.throws(() => parseDuration("5 seconds"))
  })

  it("formats a schema message into one line", () => {
    assert.strictEqual(
      formatConfigError('SchemaError(Expected a string representing a finite number\n  at ["PORT"])'),
      "Invalid configuration: PORT: Expected a string representing a finite number"
    )
  })
})
