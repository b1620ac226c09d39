/**
 * Configuration (DECISIONS.md O3): a bad value stops start-up with one line
 * naming the variable, and exit code 1. Failures an operator can read (O9): an
 * unreachable or malformed DATABASE_URL or a port in use print one line on
 * stderr, nothing on stdout, exit 1, for the server and the CLI.
 */

import * as fs from "node:fs"
import * as net from "node:net"
import * as path from "node:path"
import { assert, describe, it } from "@effect/vitest"
import { Duration, Effect, Redacted } from "effect"
import { formatConfigError, parseDuration, readConfig, VARIABLES, weakAdminTokenWarning } from "../../src/Config.ts"
import { freePort, ownDatabase, root, runNode, startServer } from "../support/Processes.ts"

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

  it.effect.each([
    ["SESSION_EXPIRY_SWEEP_INTERVAL", "0s", "Expected a duration from 1s to 24h"],
    ["WEBHOOK_TIMEOUT_MS", "0", "Expected 100 to 300000 ms"],
    ["WEBHOOK_TIMEOUT_MS", "-5", "Expected 100 to 300000 ms"],
    ["MAX_BODY_BYTES", "0", "Expected 1024 to 268435456 bytes"],
    ["MAX_BODY_BYTES", "-1", "Expected 1024 to 268435456 bytes"],
    ["WEBHOOK_RETRY_SCHEDULE", "", "Expected a value, not an empty one"],
    ["WEBHOOK_RETRY_SCHEDULE", "5s,0s", "Expected 1 to 20 delays, each from 100ms to 24h"],
    ["ADMIN_TOKEN", "", "Expected a value, not an empty one"],
    ["REQUEST_TIMEOUT", "0s", "Expected a duration from 100ms to 10m"],
    ["DATABASE_CONNECT_TIMEOUT", "10m", "Expected a duration from 100ms to 5m"]
  ] as const)(
    "issue 38 item 3: %s=%s is refused before anything starts, for the server and the CLI",
    ([name, value, why]) =>
      Effect.gen(function* () {
        // A database that would refuse the connection: the configuration's line comes first, not that one.
        const env = { [name]: value, DATABASE_URL: "postgres://nobody@127.0.0.1:1/none" }
        const line = new RegExp(`^Invalid configuration: ${name}: ${why.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")}$`)
        oneLine(yield* Effect.promise(() => runNode("src/main.ts", [], env)), line)
        oneLine(yield* Effect.promise(() => runNode("src/cli.ts", ["bootstrap", "--name", "Acme"], env)), line)
      })
  )

  it.effect("issue 38 item 3: the ends of every range are accepted, one step beyond them refused", () =>
    Effect.gen(function* () {
      const accepted = [
        { SESSION_EXPIRY_SWEEP_INTERVAL: "1s" },
        { SESSION_EXPIRY_SWEEP_INTERVAL: "24h" },
        { WEBHOOK_TIMEOUT_MS: "100" },
        { WEBHOOK_TIMEOUT_MS: "300000" },
        { MAX_BODY_BYTES: "1024" },
        { MAX_BODY_BYTES: "268435456" },
        { WEBHOOK_RETRY_SCHEDULE: "100ms" },
        { WEBHOOK_RETRY_SCHEDULE: Array.from({ length: 20 }, () => "24h").join(",") },
        { REQUEST_TIMEOUT: "100ms", DATABASE_CONNECT_TIMEOUT: "5m" },
        { DATABASE_STATEMENT_TIMEOUT: "24h", DATABASE_LOCK_TIMEOUT: "100ms" },
        { DATABASE_URL: "", OPENAI_BASE_URL: "", CORS_ORIGINS: "" }
      ]
      for (const env of accepted) {
        const result = yield* Effect.result(readConfig(env))
        assert.strictEqual(result._tag, "Success", `${JSON.stringify(env)}: ${JSON.stringify(result)}`)
      }
      const refused = [
        { SESSION_EXPIRY_SWEEP_INTERVAL: "999ms" },
        { SESSION_EXPIRY_SWEEP_INTERVAL: "25h" },
        { WEBHOOK_TIMEOUT_MS: "99" },
        { WEBHOOK_TIMEOUT_MS: "300001" },
        { MAX_BODY_BYTES: "1023" },
        { MAX_BODY_BYTES: "268435457" },
        { WEBHOOK_RETRY_SCHEDULE: Array.from({ length: 21 }, () => "1s").join(",") },
        { WEBHOOK_RETRY_SCHEDULE: "99ms" },
        { REQUEST_TIMEOUT: "99ms" },
        { DATABASE_STATEMENT_TIMEOUT: "25h" },
        { HOST: "" },
        { DATA_DIR: " " },
        { PARLEY_ROLE: "" }
      ]
      for (const env of refused) {
        const result = yield* Effect.result(readConfig(env))
        assert.strictEqual(result._tag, "Failure", JSON.stringify(env))
        if (result._tag === "Failure")
          assert.match(result.failure, new RegExp(`^Invalid configuration: ${Object.keys(env)[0]}: `))
      }
    })
  )

  it("issue 38 item 3: ADMIN_TOKEN shorter than 32 characters gets one warning; unset or long ones none", () => {
    const config = (token: string | undefined) => ({
      adminToken: token === undefined ? undefined : Redacted.make(token)
    })
    assert.match(weakAdminTokenWarning(config("short"))!, /^ADMIN_TOKEN is shorter than 32 characters/)
    assert.isUndefined(weakAdminTokenWarning(config("x".repeat(32))))
    assert.isUndefined(weakAdminTokenWarning(config(undefined)))
  })

  it.live("issue 38 item 3: a server with a short ADMIN_TOKEN starts with one WARN saying so, never the token", () =>
    Effect.promise(async () => {
      const server = await startServer({
        DATABASE_URL: databaseUrl(),
        ADMIN_TOKEN: "short-admin-token",
        LOG_LEVEL: "warn"
      })
      server.child.kill("SIGTERM")
      await server.exited
      const warnings = server
        .output()
        .split("\n")
        .filter((line) => line.includes("ADMIN_TOKEN"))
      assert.strictEqual(warnings.length, 1, server.output())
      assert.match(warnings[0]!, /"level":"WARN"/)
      assert.notInclude(server.output(), "short-admin-token")
    })
  )

  it("O3: VARIABLES names every variable the configuration reads, and configuration.md documents each", () => {
    const source = fs.readFileSync(path.join(root, "src/Config.ts"), "utf8")
    const spec = source.slice(0, source.indexOf("export type AppConfigShape"))
    const read = new Set([...spec.matchAll(/"([A-Z][A-Z0-9_]+)"/g)].map((match) => match[1]))
    assert.deepStrictEqual([...read].sort(), [...VARIABLES].sort())
    const documented = [
      ...fs.readFileSync(path.join(root, "docs/configuration.md"), "utf8").matchAll(/^\| `([A-Z0-9_]+)` \|/gm)
    ]
    assert.deepStrictEqual(documented.map((match) => match[1]).sort(), [...VARIABLES].sort())
  })

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
