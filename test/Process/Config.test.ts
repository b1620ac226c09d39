/**
 * Configuration (DECISIONS.md O3): a bad value stops start-up with one line
 * naming the variable, and exit code 1. Failures an operator can read (O9): an
 * unreachable or malformed DATABASE_URL or a port in use print one line on
 * stderr, nothing on stdout, exit 1, for the server and the CLI.
 */

import * as net from "node:net"
import { assert, describe, it } from "@effect/vitest"
import { Duration, Effect } from "effect"
import { formatConfigError, parseDuration } from "../../src/Config.ts"
import { freePort, ownDatabase, runNode } from "../support/Processes.ts"

/** Asserts O9: exit 1, nothing on stdout, exactly `line` on stderr. */
const oneLine = (result: { code: number | null; stdout: string; stderr: string }, line: RegExp) => {
  assert.strictEqual(result.code, 1, result.stderr)
  assert.strictEqual(result.stdout, "")
  const lines = result.stderr.trim().split("\n")
  assert.strictEqual(lines.length, 1, result.stderr)
  assert.match(lines[0]!, line)
}

const databaseUrl = ownDatabase("parley_config")

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
    ["ALLOW_PRIVATE_NETWORK_TARGETS", "perhaps"],
    ["CORS_ORIGINS", "app.example.com"]
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

  it.live("O9: an unreachable DATABASE_URL is one line on stderr for the server and the CLI", () =>
    Effect.promise(async () => {
      const port = await freePort()
      const env = { DATABASE_URL: `postgres://parley:secret@127.0.0.1:${port}/parley`, LOG_FORMAT: "json" }
      const expected = new RegExp(`^Cannot connect to PostgreSQL at 127\\.0\\.0\\.1:${port}: connection refused$`)
      oneLine(await runNode("src/main.ts", [], env), expected)
      // `eval "$(npx parley bootstrap)"` evaluates nothing on failure.
      oneLine(await runNode("src/cli.ts", ["bootstrap", "--name", "Acme"], env), expected)
    })
  )

  it.live("O9: a malformed DATABASE_URL names the variable and never prints the password", () =>
    Effect.promise(async () => {
      for (const url of ["mysql://root:hunter2@db/x", "postgres://u:hunter2@/x", "not a url hunter2"]) {
        const result = await runNode("src/main.ts", [], { DATABASE_URL: url })
        oneLine(result, /^Invalid configuration: DATABASE_URL: Expected a URL such as postgres:\/\//)
        assert.notInclude(result.stderr, "hunter2")
      }
    })
  )

  it.live("O9: a port in use is one line naming the port", () =>
    Effect.promise(async () => {
      const port = await freePort()
      const holder = net.createServer()
      await new Promise<void>((resolve) => holder.listen(port, "127.0.0.1", resolve))
      try {
        const result = await runNode("src/main.ts", [], {
          PORT: String(port),
          HOST: "127.0.0.1",
          PARLEY_ROLE: "api",
          LOG_FORMAT: "json",
          DATABASE_URL: databaseUrl()
        })
        assert.strictEqual(result.code, 1, result.stderr)
        assert.deepStrictEqual(result.stderr.trim().split("\n"), [`Port ${port} is already in use`])
        assert.notInclude(result.stdout, "Error")
      } finally {
        holder.close()
      }
    })
  )
})
