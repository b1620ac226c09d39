/**
 * `npm run bench [-- messages] [--cpu-prof]`: POST message on Parley against
 * the Fastify + postgres.js baseline (bench/baseline/server.ts), both on the
 * same dedicated database, alternating: a warmup of each, then rounds of
 * Parley then baseline at the same concurrency. Prints req/s, p50, p99,
 * non-2xx, RSS and CPU of each run, the ratio Parley/baseline of req/s (goal
 * >= 0.8), and writes bench/results/messages-<timestamp>.{json,md}.
 *
 * Parley is also measured with a new `Idempotency-Key` on every request
 * (D19, issue 15: "parley key" rows) and for an organization with a rate
 * limit far above the load (D20: "parley limited" rows), in the same rounds;
 * their ratios to plain Parley (goal >= 0.9) are printed too.
 *
 * Settings: BENCH_DURATION (s, 15), BENCH_ROUNDS (2), BENCH_CONNECTIONS (50),
 * BENCH_WARMUP (s, 3), BENCH_DATABASE_URL (a server to create the database on;
 * default an embedded PostgreSQL), BENCH_SYNCHRONOUS_COMMIT (e.g. `off`, set
 * on the bench database to take WAL flushes out of the picture), `--cpu-prof` or BENCH_CPU_PROF=1 (profile
 * Parley into bench/results/profiles and print the top self-time functions of
 * the measured rounds), `--cpu-prof-baseline` (profile the baseline too).
 */
import { randomBytes, randomUUID } from "node:crypto"
import * as fs from "node:fs"
import * as path from "node:path"
import { Effect, Layer, Redacted } from "effect"
import { SqlClient } from "effect/sql"
import { AdminRepo } from "../../src/Admin/Repo.ts"
import * as Database from "../../src/Database/Database.ts"
import { MessagesRepo } from "../../src/Messages/Repo.ts"
import { Ids } from "../../src/Shared/Ids.ts"
import { apiKeyLookupSql, insertMessageSql } from "../baseline/sql.ts"
import { makeCleanup } from "../lib/cleanup.ts"
import {
  analyzeProfile,
  findProfile,
  formatProfile,
  nowMicros,
  type ProfileSummary,
  type Window
} from "../lib/cpuprofile.ts"
import { startDatabase } from "../lib/database.ts"
import { envFlag, envInt } from "../lib/env.ts"
import { expectJson, requestJson } from "../lib/http.ts"
import { type LoadResult, runLoad } from "../lib/load.ts"
import { serverNodeOptions } from "../lib/parley.ts"
import { freePort, rootDirectory, type ServerProcess, sleep, startServer } from "../lib/process.ts"
import { environment, resultsDirectory, writeResults } from "../lib/results.ts"
import { mean } from "../lib/stats.ts"
import { type Cell, type Column, fixed, formatTable, markdownTable } from "../lib/table.ts"

const GOAL = 0.8
/** Issue 15: POST message with an Idempotency-Key keeps >= 0.9 of plain POST message. */
const KEY_GOAL = 0.9
/** The name of Parley's runs with an `Idempotency-Key` on every request. */
const PARLEY_KEY = "parley key"
/** Issue 15: POST message of an organization with a rate limit above the load keeps >= 0.9 of plain. */
const PARLEY_LIMITED = "parley limited"
/** The limited organization's rate: far above what this machine serves, so no request is refused. */
const LIMITED_RATE = 1_000_000
/** "other" CPU (percent of one core) above which a run is flagged as disturbed by foreign load. */
const OTHER_CPU_LIMIT = 40
const BASE = "/conversations/v2/api/v1"
const messagesPath = (sessionId: string) => `${BASE}/sessions/${sessionId}/messages`
const MESSAGE = { content: { type: "text", text: "Hello from the benchmark" }, role: "user" }

const log = (line: string) => process.stdout.write(`${line}\n`)

/**
 * The statements Parley prepares for POST message (its own repositories on a
 * one-connection client, read back from pg_prepared_statements), compared
 * with the baseline's text: the two servers must run the same SQL.
 */
const checkSameSql = async (url: string) => {
  const statements = await Effect.runPromise(
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      const messages = yield* MessagesRepo
      const admin = yield* AdminRepo
      yield* admin.organizationOfToken(new Uint8Array(32))
      yield* messages.insert(randomUUID(), randomUUID(), {
        role: "user",
        content: { type: "text", text: "x" },
        provider_message_id: null,
        replied_provider_message_id: null,
        run_id: null
      })
      const rows = yield* sql<{ statement: string }>`SELECT statement FROM pg_prepared_statements`
      return rows.map((row) => row.statement)
    }).pipe(
      Effect.provide(
        Layer.mergeAll(MessagesRepo.layer, AdminRepo.layer).pipe(
          Layer.provide(Ids.layer),
          Layer.provideMerge(Database.clientLayer(Redacted.make(url), 1))
        )
      )
    )
  )
  for (const [name, text, marker] of [
    ["API-key lookup", apiKeyLookupSql, "FROM api_keys"],
    ["message insert", insertMessageSql, "INSERT INTO messages"]
  ] as const) {
    const parley = statements.find((statement) => statement.includes(marker))
    if (parley !== text) {
      throw new Error(
        `The baseline's ${name} SQL differs from Parley's prepared statement: check bench/baseline/sql.ts.\nParley:\n${parley}\nBaseline:\n${text}`
      )
    }
  }
}

interface Setup {
  readonly token: string
  readonly createSession: () => Promise<string>
}

/** An organization and API key (admin API), and a way to open sessions (conversations API), on Parley. */
const setUp = async (parley: ServerProcess, adminToken: string, settings?: Record<string, unknown>): Promise<Setup> => {
  const organization = await expectJson(201, "POST", `${parley.baseUrl}/admin/v1/organizations`, {
    token: adminToken,
    body: { name: "bench" }
  })
  if (settings !== undefined) {
    await expectJson(200, "PATCH", `${parley.baseUrl}/admin/v1/organizations/${organization.id}/settings`, {
      token: adminToken,
      body: settings
    })
  }
  const key = await expectJson(201, "POST", `${parley.baseUrl}/admin/v1/organizations/${organization.id}/api-keys`, {
    token: adminToken,
    body: { name: "bench" }
  })
  const token: string = key.token
  let n = 0
  const createSession = async () => {
    const session = await expectJson(201, "POST", `${parley.baseUrl}${BASE}/sessions`, {
      token,
      body: { contact_id: `bench-contact-${Date.now()}-${n++}`, contact_name: "Bench" }
    })
    if (session.status !== "open") throw new Error(`New session is ${session.status}, expected open`)
    return session.id as string
  }
  return { token, createSession }
}

/** Both servers respond alike: 201 with the same Message keys, 404 for an unknown session, 400 for a closed one. */
const checkSameBehaviour = async (servers: ReadonlyArray<ServerProcess>, parley: ServerProcess, setup: Setup) => {
  const open = await setup.createSession()
  const closed = await setup.createSession()
  await expectJson(200, "PATCH", `${parley.baseUrl}${BASE}/sessions/${closed}`, {
    token: setup.token,
    body: { fields: { status: "closed" } }
  })
  const shapes: Array<string> = []
  for (const server of servers) {
    const created = await expectJson(201, "POST", `${server.baseUrl}${messagesPath(open)}`, {
      token: setup.token,
      body: MESSAGE
    })
    if (created.session_id !== open || created.delivery_status !== "pending") {
      throw new Error(`${server.name} responded with an unexpected message: ${JSON.stringify(created)}`)
    }
    shapes.push(Object.keys(created).join(","))
    for (const [sessionId, status] of [
      [randomUUID(), 404],
      [closed, 400]
    ] as const) {
      const response = await requestJson("POST", `${server.baseUrl}${messagesPath(sessionId)}`, {
        token: setup.token,
        body: MESSAGE
      })
      if (response.status !== status) {
        throw new Error(`${server.name}: expected ${status}, got ${response.status}: ${response.text}`)
      }
    }
    const unauthorized = await requestJson("POST", `${server.baseUrl}${messagesPath(open)}`, {
      token: "not-a-key",
      body: MESSAGE
    })
    if (unauthorized.status !== 401) throw new Error(`${server.name}: expected 401, got ${unauthorized.status}`)
  }
  if (new Set(shapes).size !== 1)
    throw new Error(`The servers respond with different Message shapes:\n${shapes.join("\n")}`)
}

interface Run extends LoadResult {
  readonly server: string
  /** 0 = warmup. */
  readonly round: number
  readonly durationSeconds: number
  /** Server CPU milliseconds per request. */
  readonly cpuMsPerRequest: number | undefined
}

const runColumns: ReadonlyArray<Column> = [
  { header: "server", align: "left" },
  { header: "round" },
  { header: "req/s" },
  { header: "p50 ms" },
  { header: "p99 ms" },
  { header: "non-2xx" },
  { header: "errors" },
  { header: "RSS MB" },
  { header: "srv CPU%" },
  { header: "srv CPU ms/req" },
  { header: "pg CPU%" },
  { header: "autocannon CPU%" },
  { header: "other CPU%" },
  { header: "host busy%" },
  { header: "steal%" }
]

const runRow = (run: Run): Array<Cell> => [
  run.server,
  run.round === 0 ? "warmup" : run.round,
  fixed(run.requestsPerSecond, 0),
  fixed(run.p50, 1),
  fixed(run.p99, 1),
  run.non2xx,
  run.errors + run.timeouts,
  fixed(run.rssMaxMb, 0),
  fixed(run.cpu.server, 0),
  fixed(run.cpuMsPerRequest, 3),
  fixed(run.cpu.postgres, 0),
  fixed(run.cpu.loadGenerator, 0),
  fixed(run.cpu.other, 0),
  fixed(run.machine?.busy, 0),
  fixed(run.machine?.steal, 0)
]

const summarize = (runs: ReadonlyArray<Run>, server: string) => {
  const measured = runs.filter((run) => run.server === server && run.round > 0)
  return {
    server,
    requestsPerSecond: mean(measured.map((run) => run.requestsPerSecond)),
    p50: mean(measured.map((run) => run.p50)),
    p99: mean(measured.map((run) => run.p99)),
    non2xx: measured.reduce((sum, run) => sum + run.non2xx, 0),
    errors: measured.reduce((sum, run) => sum + run.errors + run.timeouts, 0),
    rssMaxMb: Math.max(...measured.map((run) => run.rssMaxMb ?? 0)),
    cpuServer: mean(measured.map((run) => run.cpu.server ?? 0)),
    cpuMsPerRequest: mean(measured.map((run) => run.cpuMsPerRequest ?? 0)),
    cpuPostgres: mean(measured.map((run) => run.cpu.postgres)),
    hostBusy: mean(measured.map((run) => run.machine?.busy ?? 0))
  }
}

const summaryColumns: ReadonlyArray<Column> = [
  { header: "server", align: "left" },
  { header: "req/s" },
  { header: "p50 ms" },
  { header: "p99 ms" },
  { header: "non-2xx" },
  { header: "errors" },
  { header: "max RSS MB" },
  { header: "srv CPU%" },
  { header: "srv CPU ms/req" },
  { header: "pg CPU%" },
  { header: "host busy%" }
]

const summaryRow = (summary: ReturnType<typeof summarize>): Array<Cell> => [
  summary.server,
  fixed(summary.requestsPerSecond, 0),
  fixed(summary.p50, 1),
  fixed(summary.p99, 1),
  summary.non2xx,
  summary.errors,
  fixed(summary.rssMaxMb, 0),
  fixed(summary.cpuServer, 0),
  fixed(summary.cpuMsPerRequest, 3),
  fixed(summary.cpuPostgres, 0),
  fixed(summary.hostBusy, 0)
]

export const run = async (args: ReadonlyArray<string>) => {
  const options = {
    durationSeconds: envInt("BENCH_DURATION", 15),
    rounds: envInt("BENCH_ROUNDS", 2),
    connections: envInt("BENCH_CONNECTIONS", 50),
    warmupSeconds: envInt("BENCH_WARMUP", 3),
    cpuProf: args.includes("--cpu-prof") || envFlag("BENCH_CPU_PROF"),
    cpuProfBaseline: args.includes("--cpu-prof-baseline"),
    synchronousCommit: process.env.BENCH_SYNCHRONOUS_COMMIT || undefined
  }
  const startedAt = new Date()
  const cleanup = makeCleanup()
  const started: Array<ServerProcess> = []
  try {
    log(
      `messages: POST ${BASE}/sessions/:id/messages, ${options.rounds} round(s) x ${options.durationSeconds} s at ${options.connections} connections (warmup ${options.warmupSeconds} s)`
    )
    const database = await startDatabase(
      "parley_bench",
      options.synchronousCommit === undefined ? {} : { synchronous_commit: options.synchronousCommit }
    )
    cleanup.add("database", database.close)
    const settingsText = Object.entries(database.settings)
      .map(([setting, value]) => `, ${setting}=${value}`)
      .join("")
    log(`database ${database.name} (${database.kind}, PostgreSQL ${database.serverVersion}${settingsText}), migrated`)
    await checkSameSql(database.url)
    log("SQL check: the baseline runs the same statements Parley prepares")

    const profileDirectory = path.join(resultsDirectory, "profiles")
    if (options.cpuProf || options.cpuProfBaseline) fs.mkdirSync(profileDirectory, { recursive: true })
    const profileFlags = (on: boolean) => (on ? ["--cpu-prof", `--cpu-prof-dir=${profileDirectory}`] : [])
    const adminToken = randomBytes(24).toString("base64url")
    const parleyPort = await freePort()
    const parley = await startServer({
      name: "parley",
      args: [...profileFlags(options.cpuProf), "src/main.ts"],
      port: parleyPort,
      env: {
        DATABASE_URL: database.url,
        PORT: String(parleyPort),
        HOST: "127.0.0.1",
        LOG_LEVEL: "warn",
        LOG_FORMAT: "json",
        ADMIN_TOKEN: adminToken,
        ...serverNodeOptions()
      },
      readyPath: "/readyz",
      cwd: rootDirectory
    })
    started.push(parley)
    const stopParley = cleanup.add("parley", () => parley.stop())
    const baselinePort = await freePort()
    const baseline = await startServer({
      name: "baseline",
      args: [...profileFlags(options.cpuProfBaseline), "bench/baseline/server.ts"],
      port: baselinePort,
      env: { DATABASE_URL: database.url, PORT: String(baselinePort), HOST: "127.0.0.1" },
      readyPath: "/readyz",
      cwd: rootDirectory
    })
    started.push(baseline)
    const stopBaseline = cleanup.add("baseline", () => baseline.stop())
    log(
      `parley pid ${parley.pid} on :${parley.port}${options.cpuProf ? " (--cpu-prof)" : ""}, baseline pid ${baseline.pid} on :${baseline.port}`
    )

    const setup = await setUp(parley, adminToken)
    const servers = [parley, baseline] as const
    await checkSameBehaviour(servers, parley, setup)
    log("behaviour check: both respond 201 with the same Message keys, 404, 400 and 401 alike")

    const runs: Array<Run> = []
    const windows: Record<string, Array<Window>> = { parley: [], baseline: [] }
    const limitedSetup = await setUp(parley, adminToken, { rate_limit_per_second: LIMITED_RATE })
    const measure = async (
      server: ServerProcess,
      round: number,
      durationSeconds: number,
      variant: "plain" | "key" | "limited" = "plain"
    ) => {
      const withKey = variant === "key"
      const of = variant === "limited" ? limitedSetup : setup
      const sessionId = await of.createSession()
      const start = nowMicros()
      const result = await runLoad({
        url: `${server.baseUrl}${messagesPath(sessionId)}`,
        method: "POST",
        headers: { authorization: `Bearer ${of.token}`, "content-type": "application/json" },
        body: JSON.stringify(MESSAGE),
        ...(withKey ? { headersPerRequest: () => ({ "idempotency-key": randomUUID() }) } : {}),
        connections: options.connections,
        duration: durationSeconds,
        serverPid: server.pid,
        postmasterPid: database.postmasterPid
      })
      if (round > 0 && variant === "plain") windows[server.name]!.push([start, nowMicros()])
      const entry: Run = {
        server: variant === "key" ? PARLEY_KEY : variant === "limited" ? PARLEY_LIMITED : server.name,
        round,
        durationSeconds,
        ...result,
        cpuMsPerRequest:
          result.cpu.server === undefined || result.requestsPerSecond === 0
            ? undefined
            : (result.cpu.server * 10) / result.requestsPerSecond
      }
      runs.push(entry)
      log(
        `  ${entry.server} ${round === 0 ? "warmup" : `round ${round}`}: ${fixed(entry.requestsPerSecond, 0)} req/s, p50 ${fixed(entry.p50)} ms, p99 ${fixed(entry.p99)} ms, non-2xx ${entry.non2xx}`
      )
      await sleep(1_000)
    }
    for (const server of servers) await measure(server, 0, options.warmupSeconds)
    await measure(parley, 0, options.warmupSeconds, "key")
    await measure(parley, 0, options.warmupSeconds, "limited")
    for (let round = 1; round <= options.rounds; round++) {
      for (const server of servers) await measure(server, round, options.durationSeconds)
      await measure(parley, round, options.durationSeconds, "key")
      await measure(parley, round, options.durationSeconds, "limited")
    }

    const profileOf = async (server: ServerProcess, stop: () => Promise<void>) => {
      await stop()
      const file = findProfile(profileDirectory, server.pid)
      if (file === undefined) log(`\nNo .cpuprofile for pid ${server.pid} in ${profileDirectory}`)
      return file === undefined ? undefined : analyzeProfile(file, 25, windows[server.name])
    }
    const profile: ProfileSummary | undefined = options.cpuProf ? await profileOf(parley, stopParley) : undefined
    const baselineProfile: ProfileSummary | undefined = options.cpuProfBaseline
      ? await profileOf(baseline, stopBaseline)
      : undefined

    const parleySummary = summarize(runs, "parley")
    const parleyKeySummary = summarize(runs, PARLEY_KEY)
    const parleyLimitedSummary = summarize(runs, PARLEY_LIMITED)
    const limitedRatio = parleyLimitedSummary.requestsPerSecond / parleySummary.requestsPerSecond
    const baselineSummary = summarize(runs, "baseline")
    const keyRatio = parleyKeySummary.requestsPerSecond / parleySummary.requestsPerSecond
    const ratio = parleySummary.requestsPerSecond / baselineSummary.requestsPerSecond
    const roundRatios = Array.from({ length: options.rounds }, (_, i) => {
      const of = (server: string) => runs.find((run) => run.server === server && run.round === i + 1)!
      return of("parley").requestsPerSecond / of("baseline").requestsPerSecond
    })
    // Another process (tests, a build) competing for the cores shows as "other" CPU.
    const disturbed = runs.filter((run) => run.round > 0 && (run.cpu.other ?? 0) > OTHER_CPU_LIMIT)
    const failed = runs.filter((run) => run.round > 0 && (run.non2xx > 0 || run.errors > 0 || run.timeouts > 0))
    const verdict = `ratio Parley/baseline req/s: ${ratio.toFixed(2)} (rounds: ${roundRatios.map((r) => r.toFixed(2)).join(", ")}); goal >= ${GOAL}: ${ratio >= GOAL ? "met" : "NOT met"}`
    const keyVerdict = `ratio Parley with Idempotency-Key / plain Parley req/s: ${keyRatio.toFixed(2)}; goal >= ${KEY_GOAL}: ${keyRatio >= KEY_GOAL ? "met" : "NOT met"}`
    const limitedVerdict = `ratio Parley with a rate limit above the load / plain Parley req/s: ${limitedRatio.toFixed(2)}; goal >= ${KEY_GOAL}: ${limitedRatio >= KEY_GOAL ? "met" : "NOT met"}`
    const summaryRows = [
      summaryRow(parleySummary),
      summaryRow(parleyKeySummary),
      summaryRow(parleyLimitedSummary),
      summaryRow(baselineSummary)
    ]

    log("")
    log(formatTable(runColumns, runs.map(runRow)))
    log("")
    log(formatTable(summaryColumns, summaryRows))
    log("")
    log(verdict)
    log(keyVerdict)
    log(limitedVerdict)
    if (failed.length > 0) log(`WARNING: ${failed.length} measured run(s) had non-2xx responses or errors`)
    const disturbedText = `WARNING: other CPU above ${OTHER_CPU_LIMIT}% of a core (something else was running) in ${disturbed
      .map((run) => `${run.server} round ${run.round}`)
      .join(", ")}: compare those rounds with care`
    if (disturbed.length > 0) log(disturbedText)
    if (profile !== undefined) log(`\nParley ${formatProfile(profile)}`)
    if (baselineProfile !== undefined) log(`\nBaseline ${formatProfile(baselineProfile)}`)

    const env = environment()
    const json = {
      benchmark: "messages",
      endpoint: `POST ${BASE}/sessions/:session_id/messages`,
      startedAt: startedAt.toISOString(),
      environment: {
        ...env,
        database: { kind: database.kind, version: database.serverVersion, settings: database.settings }
      },
      options,
      runs,
      summary: {
        parley: parleySummary,
        parleyKey: parleyKeySummary,
        parleyLimited: parleyLimitedSummary,
        limitedRatio,
        baseline: baselineSummary,
        ratio,
        keyRatio,
        keyGoal: KEY_GOAL,
        roundRatios,
        goal: GOAL,
        goalMet: ratio >= GOAL
      },
      valid: failed.length === 0,
      disturbed: disturbed.map((run) => ({ server: run.server, round: run.round })),
      profileWindowsMicros: windows,
      ...(profile !== undefined ? { profile: { ...profile, file: path.relative(rootDirectory, profile.file) } } : {}),
      ...(baselineProfile !== undefined
        ? { baselineProfile: { ...baselineProfile, file: path.relative(rootDirectory, baselineProfile.file) } }
        : {})
    }
    const markdown = [
      `# messages benchmark, ${startedAt.toISOString()}`,
      "",
      `POST ${BASE}/sessions/:session_id/messages, Parley vs the Fastify + postgres.js baseline (same SQL, pool 20).`,
      `${options.rounds} round(s) x ${options.durationSeconds} s at ${options.connections} connections, alternating, after a ${options.warmupSeconds} s warmup of each.`,
      `Node ${env.node}, ${env.cpus} CPU (${env.cpuModel}), ${env.platform}; PostgreSQL ${database.serverVersion} (${database.kind}${settingsText}); commit ${env.commit ?? "?"}${options.cpuProf ? "; Parley under --cpu-prof" : ""}${options.cpuProfBaseline ? "; baseline under --cpu-prof" : ""}.`,
      "",
      "## Summary (mean of the measured rounds)",
      "",
      markdownTable(summaryColumns, summaryRows),
      "",
      `**${verdict}**`,
      "",
      `**${keyVerdict}**`,
      "",
      `**${limitedVerdict}**`,
      ...(failed.length > 0 ? ["", `WARNING: ${failed.length} measured run(s) had non-2xx responses or errors.`] : []),
      ...(disturbed.length > 0 ? ["", disturbedText] : []),
      "",
      "## Runs",
      "",
      markdownTable(runColumns, runs.map(runRow)),
      "",
      "CPU% is of one core over the run (srv = the server process); pg CPU% sums the PostgreSQL server's processes; autocannon runs in the benchmark process; other CPU% is the rest of the machine's busy time (kernel, steal, other processes). host busy% and steal% are of all cores.",
      ...(profile !== undefined ? ["", "## Parley CPU profile", "", "```", formatProfile(profile), "```"] : []),
      ...(baselineProfile !== undefined
        ? ["", "## Baseline CPU profile", "", "```", formatProfile(baselineProfile), "```"]
        : [])
    ].join("\n")
    const written = writeResults("messages", json, markdown, startedAt)
    log(`\nresults: ${path.relative(rootDirectory, written.json)}, ${path.relative(rootDirectory, written.markdown)}`)
    if (failed.length > 0) process.exitCode = 1
  } catch (error) {
    for (const server of started) {
      const state = server.child.exitCode !== null || server.child.signalCode !== null ? "exited" : "running"
      log(`--- ${server.name} (${state}), last output:\n${server.output().split("\n").slice(-30).join("\n")}`)
    }
    throw error
  } finally {
    await cleanup.run()
  }
}
