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
    ["ADMIN_TOKEN", "   ", "Expected a value, not an empty one"],
    ["OTEL_EXPORTER_OTLP_ENDPOINT", "localhost:4318", "Expected an http or https URL such as http://localhost:4318"],
    ["HOST", "localhost:8080", "Expected an IP address or a host name such as 0.0.0.0, :: or localhost"],
    ["REQUEST_TIMEOUT", "0s", "Expected a duration from 100ms to 10m"],
    ["DATABASE_CONNECT_TIMEOUT", "10m", "Expected a duration from 100ms to 5m"],
    ["APP_DISABLE_AFTER", "0s", "Expected a duration from 1s to 365d"]
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

  /**
   * Every range of src/Config.ts (issue 38 item 3, O3): [variable, field of AppConfigShape, the lowest and
   * highest values accepted with what they decode to, one step below and above, the refusal's reason].
   * Durations decode to milliseconds here.
   */
  const ranges = [
    ["PORT", "port", ["1", 1], ["65535", 65_535], ["0", "65536"], "Expected a value between 1 and 65535"],
    [
      "WEBHOOK_TIMEOUT_MS",
      "webhookTimeout",
      ["100", 100],
      ["300000", 300_000],
      ["99", "300001"],
      "Expected 100 to 300000 ms"
    ],
    [
      "MAX_BODY_BYTES",
      "maxBodyBytes",
      ["1024", 1_024],
      ["268435456", 268_435_456],
      ["1023", "268435457"],
      "Expected 1024 to 268435456 bytes"
    ],
    [
      "SESSION_EXPIRY_SWEEP_INTERVAL",
      "sessionExpirySweepInterval",
      ["1s", 1_000],
      ["24h", 86_400_000],
      ["999ms", "86400001ms"],
      "Expected a duration from 1s to 24h"
    ],
    [
      "RETENTION_SWEEP_INTERVAL",
      "retentionSweepInterval",
      ["1s", 1_000],
      ["24h", 86_400_000],
      ["999ms", "86400001ms"],
      "Expected a duration from 1s to 24h"
    ],
    [
      "DATABASE_CONNECT_TIMEOUT",
      "databaseConnectTimeout",
      ["100ms", 100],
      ["5m", 300_000],
      ["99ms", "300001ms"],
      "Expected a duration from 100ms to 5m"
    ],
    [
      "DATABASE_STATEMENT_TIMEOUT",
      "databaseStatementTimeout",
      ["100ms", 100],
      ["24h", 86_400_000],
      ["99ms", "86400001ms"],
      "Expected a duration from 100ms to 24h"
    ],
    [
      "DATABASE_LOCK_TIMEOUT",
      "databaseLockTimeout",
      ["100ms", 100],
      ["24h", 86_400_000],
      ["99ms", "86400001ms"],
      "Expected a duration from 100ms to 24h"
    ],
    [
      "REQUEST_TIMEOUT",
      "requestTimeout",
      ["100ms", 100],
      ["10m", 600_000],
      ["99ms", "600001ms"],
      "Expected a duration from 100ms to 10m"
    ]
  ] as const

  /** Decodes `env` as the server does, before anything starts ({@link readConfig}). */
  const decode = (env: Record<string, string>) => Effect.runSync(Effect.result(readConfig(env)))

  /** A decoded value as a number: milliseconds for a `Duration`. */
  const numeric = (value: unknown) => (Duration.isDuration(value) ? Duration.toMillis(value) : value)

  it.each(ranges)(
    "issue 38 item 3: %s accepts both ends of its range and refuses one step beyond each with the range named",
    (name, field, [lowest, lowestValue], [highest, highestValue], [below, above], why) => {
      for (const [value, expected] of [
        [lowest, lowestValue],
        [highest, highestValue]
      ] as const) {
        const result = decode({ [name]: value })
        assert.strictEqual(result._tag, "Success", `${name}=${value}: ${JSON.stringify(result)}`)
        if (result._tag === "Success") assert.strictEqual(numeric(result.success[field]), expected, `${name}=${value}`)
      }
      for (const value of [below, above]) {
        const result = decode({ [name]: value })
        assert.deepStrictEqual(
          result._tag === "Failure" ? result.failure : "accepted",
          `Invalid configuration: ${name}: ${why}`
        )
      }
    }
  )

  it("issue 38 item 3: WEBHOOK_RETRY_SCHEDULE takes 1 to 20 delays, each from 100ms to 24h", () => {
    const accepted: ReadonlyArray<readonly [string, Array<number>]> = [
      ["100ms", [100]],
      [" 5s , 24h ", [5_000, 86_400_000]],
      [Array.from({ length: 20 }, () => "24h").join(","), Array.from({ length: 20 }, () => 86_400_000)]
    ]
    for (const [value, delays] of accepted) {
      const result = decode({ WEBHOOK_RETRY_SCHEDULE: value })
      assert.deepStrictEqual(
        result._tag === "Success" ? result.success.webhookRetrySchedule.map(Duration.toMillis) : result.failure,
        delays
      )
    }
    for (const value of ["99ms", "5s,86400001ms", Array.from({ length: 21 }, () => "1s").join(",")]) {
      const result = decode({ WEBHOOK_RETRY_SCHEDULE: value })
      assert.deepStrictEqual(
        result._tag === "Failure" ? result.failure : "accepted",
        "Invalid configuration: WEBHOOK_RETRY_SCHEDULE: Expected 1 to 20 delays, each from 100ms to 24h"
      )
    }
    for (const value of [",", "5s,", "5s;5m"]) {
      const result = decode({ WEBHOOK_RETRY_SCHEDULE: value })
      assert.match(
        result._tag === "Failure" ? result.failure : "accepted",
        /^Invalid configuration: WEBHOOK_RETRY_SCHEDULE: /
      )
    }
  })

  it("issue 38 item 3: HOST is an IP address or a host name, the endpoints Parley sends to are http(s) URLs", () => {
    for (const host of ["0.0.0.0", "::", "127.0.0.1", "localhost", "parley-1.internal"]) {
      const result = decode({ HOST: host })
      assert.strictEqual(result._tag === "Success" ? result.success.host : result.failure, host)
    }
    for (const host of ["http://localhost", "localhost:8080", "not a host", "-parley"]) {
      const result = decode({ HOST: host })
      assert.strictEqual(
        result._tag === "Failure" ? result.failure : "accepted",
        "Invalid configuration: HOST: Expected an IP address or a host name such as 0.0.0.0, :: or localhost"
      )
    }
    const endpoint = decode({
      OTEL_EXPORTER_OTLP_ENDPOINT: "http://localhost:4318",
      OPENAI_BASE_URL: "https://llm.example/v1"
    })
    assert.deepStrictEqual(
      endpoint._tag === "Success" ? [endpoint.success.otlpEndpoint, endpoint.success.openaiBaseUrl] : endpoint.failure,
      ["http://localhost:4318", "https://llm.example/v1"]
    )
    for (const [name, value, example] of [
      ["OTEL_EXPORTER_OTLP_ENDPOINT", "localhost:4318", "http://localhost:4318"],
      ["OTEL_EXPORTER_OTLP_ENDPOINT", "collector", "http://localhost:4318"],
      ["OPENAI_BASE_URL", "ftp://llm.example/v1", "http://localhost:11434/v1"],
      ["OPENAI_BASE_URL", "llm.example/v1", "http://localhost:11434/v1"]
    ] as const) {
      const result = decode({ [name]: value })
      assert.strictEqual(
        result._tag === "Failure" ? result.failure : "accepted",
        `Invalid configuration: ${name}: Expected an http or https URL such as ${example}`
      )
    }
  })

  it("issue 38 item 3: empty means unset only where the table says so; elsewhere it is refused", () => {
    const unset = decode({ DATABASE_URL: "", OPENAI_BASE_URL: "", OTEL_EXPORTER_OTLP_ENDPOINT: "", CORS_ORIGINS: "" })
    assert.deepStrictEqual(
      unset._tag === "Success"
        ? [
            unset.success.databaseUrl,
            unset.success.openaiBaseUrl,
            unset.success.otlpEndpoint,
            unset.success.corsOrigins
          ]
        : unset.failure,
      [undefined, undefined, undefined, []]
    )
    for (const [name, value] of [
      ["HOST", ""],
      ["DATA_DIR", " "],
      ["PARLEY_ROLE", ""],
      ["ADMIN_TOKEN", ""],
      ["ADMIN_TOKEN", " \t "],
      ["WEBHOOK_RETRY_SCHEDULE", ""],
      ["MAX_BODY_BYTES", ""],
      ["ALLOW_PRIVATE_NETWORK_TARGETS", ""]
    ] as const) {
      const result = decode({ [name]: value })
      assert.strictEqual(
        result._tag === "Failure" ? result.failure : "accepted",
        `Invalid configuration: ${name}: Expected a value, not an empty one`
      )
    }
  })

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

  it("durations are a number and a unit among ms, s, m, h, and d for W10's 5d (O3)", () => {
    assert.deepStrictEqual(
      ["200ms", "5s", "30m", "2h", "5d"].map((text) => Duration.toMillis(parseDuration(text))),
      [200, 5_000, 1_800_000, 7_200_000, 432_000_000]
    )
    assert.throws(() => parseDuration("5 seconds"))
  })

  it.effect("W10: APP_DISABLE_AFTER defaults to 5d and takes 1s-365d", () =>
    Effect.gen(function* () {
      const days = (config: { readonly appDisableAfter: Duration.Duration }) =>
        Duration.toMillis(config.appDisableAfter) / 86_400_000
      assert.strictEqual(days(yield* readConfig({})), 5)
      assert.strictEqual(days(yield* readConfig({ APP_DISABLE_AFTER: "36h" })), 1.5)
      for (const value of ["0s", "366d", "5 days"]) {
        const refused = yield* Effect.flip(readConfig({ APP_DISABLE_AFTER: value }))
        assert.match(refused, /^Invalid configuration: APP_DISABLE_AFTER: /, value)
      }
    })
  )

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
