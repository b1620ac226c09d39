/**
 * `npm run bench -- ingest [--cpu-prof]`: POST /ingest on Parley against the
 * Fastify + postgres.js baseline (bench/baseline/server.ts, its /ingest route:
 * the same statements in one transaction with the same advisory lock), both on
 * the same dedicated database, in two scenarios:
 *
 * - `distinct`: text messages spread round-robin over 1,000 (to, from) pairs
 *   (`BENCH_INGEST_PAIRS`); the first message of each pair creates its contact,
 *   conversation and session, the others go to the open session;
 * - `hot`: every message for one pair, so every call waits for the pair's lock;
 * - `channels` (Parley only, D24): as `distinct`, with 20% quoted replies, 10%
 *   reactions and 10% edits ({@link ingestBody}); its ratio is over Parley's
 *   own `distinct` (goal >= 0.9: what the channels carry costs ingest little).
 *
 * Every message carries a unique `provider_message_id` (claimed in
 * `ingest_receipts`, D10) and a contact name. Each run uses its own `to`, so
 * each starts with no conversation. After each run the database is checked: one
 * conversation and one open session per pair, one message per 2xx response.
 * Alternating rounds (Parley, then baseline) after a warmup of each, per
 * scenario; prints req/s, p50, p99, non-2xx, RSS and CPU, the ratio
 * Parley/baseline (goal >= 0.8 for distinct pairs), and writes
 * bench/results/ingest-<timestamp>.{json,md}.
 *
 * Settings: BENCH_DURATION (s, 15), BENCH_ROUNDS (2), BENCH_CONNECTIONS (50),
 * BENCH_WARMUP (s, 3), BENCH_INGEST_PAIRS (1000), BENCH_DATABASE_URL,
 * `--cpu-prof` (profile Parley, print its top self-time functions).
 */
import { randomBytes } from "node:crypto"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import autocannon from "autocannon"
import { Effect, Layer, Redacted } from "effect"
import { SqlClient } from "effect/sql"
import { v7 as uuidv7 } from "uuid"
import * as Database from "../../src/Database/Database.ts"
import { IngestRepo } from "../../src/Ingest/Repo.ts"
import { ingestLockSql, ingestOpenSql, ingestStepSql } from "../baseline/sql.ts"
import { makeCleanup } from "../lib/cleanup.ts"
import {
  analyzeProfile,
  findProfile,
  formatProfile,
  nowMicros,
  type ProfileSummary,
  type Window
} from "../lib/cpuprofile.ts"
import { runStatement, startDatabase } from "../lib/database.ts"
import { envFlag, envInt } from "../lib/env.ts"
import { expectJson, requestJson } from "../lib/http.ts"
import { serverNodeOptions } from "../lib/parley.ts"
import { measureCpu, measureMachine, pidsNamed, processAndChildren, sampleRss } from "../lib/proc.ts"
import { freePort, rootDirectory, type ServerProcess, sleep, startServer } from "../lib/process.ts"
import { environment, resultsDirectory, writeResults } from "../lib/results.ts"
import { mean } from "../lib/stats.ts"
import { type Cell, type Column, fixed, formatTable, markdownTable } from "../lib/table.ts"

const GOAL = 0.8
/** Issue 42 item 1 (D24): Parley's req/s with replies, reactions and edits in the load over its plain `distinct` req/s. */
const CHANNELS_GOAL = 0.9
const BASE = "/conversations/v2/api/v1"
const INGEST = `${BASE}/ingest`
/** "other" CPU (percent of one core) above which a run is flagged as disturbed by foreign load. */
const OTHER_CPU_LIMIT = 40
const MB = 1024 * 1024

const log = (line: string) => process.stdout.write(`${line}\n`)

/** The request autocannon is about to send; `setupRequest` returns it, changed. */
interface RequestData {
  body?: string
}

/**
 * autocannon with its `requests` option (per-request bodies through
 * `setupRequest`), which bench/lib/autocannon.d.ts does not declare.
 */
const autocannonWithRequests = autocannon as unknown as (
  options: Parameters<typeof autocannon>[0] & {
    readonly requests: ReadonlyArray<{ readonly setupRequest: (request: RequestData) => RequestData }>
  }
) => ReturnType<typeof autocannon>

interface Scenario {
  readonly name: "distinct" | "hot" | "channels"
  readonly pairs: number
}

/**
 * The body of the `n`th call of `scenario` (its `to`): a text message with a
 * contact name and a unique provider id, round-robin over the pairs. In
 * `channels` (D24, issue 42 item 1), of each pair's every ten calls, two
 * quote the pair's previous message by its channel id
 * (`replied_provider_message_id`), one reacts to it and one edits it
 * (`edit_of_provider_message_id`); the previous message is always a plain one.
 */
const ingestBody = (scenario: Scenario, to: string, n: number) => {
  const body = {
    to,
    from: `user-${n % scenario.pairs}`,
    contact: { name: "Bench user" },
    content: { type: "text", text: "Hello from the benchmark" } as Record<string, unknown>,
    provider_message_id: `${to}-${n}`
  }
  const i = Math.floor(n / scenario.pairs)
  if (scenario.name !== "channels" || i === 0) return { body, edit: false }
  const previous = `${to}-${n - scenario.pairs}`
  switch (i % 10) {
    case 1:
    case 5:
      return { body: { ...body, replied_provider_message_id: previous }, edit: false }
    case 3:
      return { body: { ...body, content: { type: "reaction", emoji: "👍", message_id: previous } }, edit: false }
    case 7:
      return {
        body: { ...body, content: { type: "text", text: "Hello, edited" }, edit_of_provider_message_id: previous },
        edit: true
      }
    default:
      return { body, edit: false }
  }
}

/**
 * The statements Parley prepares for ingest (its own repository on a
 * one-connection client, in a transaction rolled back, read back from
 * pg_prepared_statements) must be the baseline's texts.
 */
const checkSameSql = async (url: string, organizationId: string) => {
  const statements = await Effect.runPromise(
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      const repo = yield* IngestRepo
      const message = {
        id: uuidv7(),
        role: "user" as const,
        content: { type: "text", text: "x" },
        providerMessageId: "p",
        repliedProviderMessageId: null
      }
      yield* sql
        .withTransaction(
          Effect.gen(function* () {
            yield* repo.lock(organizationId, "whatsapp", "check", "check")
            const state = yield* repo.step({
              organizationId,
              contactId: "check",
              channelType: "whatsapp",
              channelTo: "check",
              contactName: null,
              contactPhone: null,
              message,
              append: true,
              reuseOpen: true,
              newSessionId: uuidv7(),
              requestedAgentId: null,
              traceContext: null,
              newId: uuidv7
            })
            yield* repo.open({
              id: uuidv7(),
              organizationId,
              conversationId: state.conversation_id,
              contactId: "check",
              contactName: null,
              threadId: null,
              agentId: null,
              metadata: {},
              message,
              traceContext: null,
              newId: uuidv7
            })
            return yield* Effect.fail("rollback" as const)
          })
        )
        .pipe(
          Effect.catchIf(
            (error) => error === "rollback",
            () => Effect.void
          )
        )
      const rows = yield* sql<{ statement: string }>`SELECT statement FROM pg_prepared_statements`
      return rows.map((row) => row.statement)
    }).pipe(
      Effect.provide(IngestRepo.layer.pipe(Layer.provideMerge(Database.clientLayer(Redacted.make(url), 1)))),
      Effect.scoped
    )
  )
  for (const [name, text] of [
    ["advisory lock", ingestLockSql],
    ["ingest step", ingestStepSql],
    ["new session", ingestOpenSql]
  ] as const) {
    if (!statements.includes(text)) {
      throw new Error(`Parley did not prepare the baseline's ${name} statement: check bench/baseline/sql.ts`)
    }
  }
}

/** Both servers respond alike: a new pair creates, the next message reuses, a repeated id gets the first ids. */
const checkSameBehaviour = async (servers: ReadonlyArray<ServerProcess>, token: string) => {
  for (const server of servers) {
    const to = `check-${server.name}`
    const send = (providerMessageId: string) =>
      expectJson(200, "POST", `${server.baseUrl}${INGEST}`, {
        token,
        body: {
          to,
          from: "check-user",
          contact: { name: "Check" },
          content: { type: "text", text: "hi" },
          provider_message_id: providerMessageId
        }
      })
    const first = await send("p1")
    const second = await send("p2")
    const repeat = await send("p1")
    const keys = ["conversation_id", "session_id", "message_id", "created_conversation", "created_session"]
    for (const body of [first, second, repeat]) {
      if (Object.keys(body).join() !== keys.join()) {
        throw new Error(`${server.name} responded with other fields: ${JSON.stringify(body)}`)
      }
    }
    if (!first.created_conversation || !first.created_session)
      throw new Error(`${server.name}: first call created nothing`)
    if (second.created_session || second.session_id !== first.session_id || second.message_id === first.message_id) {
      throw new Error(`${server.name}: the second message did not reuse the session: ${JSON.stringify(second)}`)
    }
    if (JSON.stringify(repeat) !== JSON.stringify({ ...first, created_conversation: false, created_session: false })) {
      throw new Error(`${server.name}: a repeated provider_message_id got ${JSON.stringify(repeat)}`)
    }
    const unauthorized = await requestJson("POST", `${server.baseUrl}${INGEST}`, {
      token: "not-a-key",
      body: { to, from: "x" }
    })
    if (unauthorized.status !== 401) throw new Error(`${server.name}: expected 401, got ${unauthorized.status}`)
  }
}

interface Run {
  readonly scenario: Scenario["name"]
  readonly server: string
  /** 0 = warmup. */
  readonly round: number
  readonly durationSeconds: number
  readonly requestsPerSecond: number
  readonly p50: number
  readonly p99: number
  readonly total: number
  readonly ok: number
  readonly non2xx: number
  readonly errors: number
  readonly rssMaxMb: number | undefined
  readonly cpu: { readonly server: number | undefined; readonly postgres: number; readonly other: number | undefined }
  /** Server CPU milliseconds per request. */
  readonly cpuMsPerRequest: number | undefined
  /** After the run: conversations, open sessions and messages of the run's `to`. */
  readonly stored: { readonly conversations: number; readonly openSessions: number; readonly messages: number }
  /** The stored rows match the responses (see `consistent` below). */
  readonly consistent: boolean
}

/** One autocannon run of ingest calls for `scenario` against `server`, measured. */
const measure = async (options: {
  readonly server: ServerProcess
  readonly scenario: Scenario
  readonly round: number
  readonly durationSeconds: number
  readonly connections: number
  readonly token: string
  readonly databaseUrl: string
  readonly organizationId: string
  readonly postmasterPid: number | undefined
}): Promise<Run> => {
  const { server, scenario } = options
  const to = `bench-${scenario.name}-${server.name}-${options.round}-${Date.now()}`
  let sent = 0
  let edits = 0
  const rss = sampleRss(server.pid)
  const serverCpu = measureCpu(() => [server.pid])
  const postmaster = options.postmasterPid
  const postgresCpu = measureCpu(() =>
    postmaster === undefined ? pidsNamed("postgres") : processAndChildren(postmaster)
  )
  const selfCpu = measureCpu(() => [process.pid])
  const machine = measureMachine()
  const result = await autocannonWithRequests({
    url: `${server.baseUrl}${INGEST}`,
    method: "POST",
    headers: { authorization: `Bearer ${options.token}`, "content-type": "application/json" },
    connections: options.connections,
    duration: options.durationSeconds,
    timeout: 10,
    requests: [
      {
        setupRequest: (request) => {
          const call = ingestBody(scenario, to, sent++)
          if (call.edit) edits++
          request.body = JSON.stringify(call.body)
          return request
        }
      }
    ]
  })
  const cpuServer = serverCpu.stop()
  const cpuPostgres = postgresCpu.stop()
  const cpuSelf = selfCpu.stop()
  const machineUse = machine.stop()
  const rssMax = rss.stop()
  // Calls still in flight when autocannon stopped may commit without being counted: let them finish.
  await sleep(1_000)
  const [row] = await runStatement<{
    conversations: number
    open_sessions: number
    messages: number
    receipts: number
  }>(
    options.databaseUrl,
    `WITH c AS (
       SELECT id FROM conversations WHERE organization_id = '${options.organizationId}' AND channel_to = '${to}'
     )
     SELECT (SELECT count(*)::int FROM c) AS conversations,
       (SELECT count(*)::int FROM sessions s WHERE s.conversation_id IN (SELECT id FROM c) AND s.status = 'open') AS open_sessions,
       (SELECT count(*)::int FROM messages m WHERE m.conversation_id IN (SELECT id FROM c)) AS messages,
       (SELECT count(DISTINCT m.provider_message_id)::int FROM messages m
         WHERE m.conversation_id IN (SELECT id FROM c)) AS receipts`
  )
  const stored = {
    conversations: row?.conversations ?? 0,
    openSessions: row?.open_sessions ?? 0,
    messages: row?.messages ?? 0
  }
  const ok = result["2xx"]
  const pairsUsed = Math.min(scenario.pairs, ok)
  const other =
    machineUse === undefined
      ? undefined
      : Math.max(0, machineUse.busy * os.availableParallelism() - cpuServer - cpuPostgres - cpuSelf)
  return {
    scenario: scenario.name,
    server: server.name,
    round: options.round,
    durationSeconds: options.durationSeconds,
    requestsPerSecond: result.requests.average,
    p50: result.latency.p50,
    p99: result.latency.p99,
    total: result.requests.total,
    ok,
    non2xx: result.non2xx,
    errors: result.errors + result.timeouts,
    rssMaxMb: rssMax === undefined ? undefined : rssMax / MB,
    cpu: { server: cpuServer, postgres: cpuPostgres, other },
    cpuMsPerRequest: result.requests.average === 0 ? undefined : (cpuServer * 10) / result.requests.average,
    stored,
    // One conversation and one open session per pair, one message per provider_message_id; calls in flight when
    // autocannon stopped (at most one per connection) may have been stored without their responses being counted.
    consistent:
      stored.conversations >= pairsUsed &&
      stored.conversations <= scenario.pairs &&
      stored.openSessions === stored.conversations &&
      stored.messages === (row?.receipts ?? 0) &&
      stored.messages >= ok - edits &&
      stored.messages <= ok + options.connections
  }
}

const runColumns: ReadonlyArray<Column> = [
  { header: "scenario", align: "left" },
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
  { header: "other CPU%" },
  { header: "stored conv/open/msgs" },
  { header: "consistent", align: "left" }
]

const runRow = (run: Run): Array<Cell> => [
  run.scenario,
  run.server,
  run.round === 0 ? "warmup" : run.round,
  fixed(run.requestsPerSecond, 0),
  fixed(run.p50, 1),
  fixed(run.p99, 1),
  run.non2xx,
  run.errors,
  fixed(run.rssMaxMb, 0),
  fixed(run.cpu.server, 0),
  fixed(run.cpuMsPerRequest, 3),
  fixed(run.cpu.postgres, 0),
  fixed(run.cpu.other, 0),
  `${run.stored.conversations}/${run.stored.openSessions}/${run.stored.messages}`,
  run.consistent ? "yes" : "NO"
]

const summarize = (runs: ReadonlyArray<Run>, scenario: Scenario["name"], server: string) => {
  const measured = runs.filter((run) => run.scenario === scenario && run.server === server && run.round > 0)
  return {
    scenario,
    server,
    requestsPerSecond: mean(measured.map((run) => run.requestsPerSecond)),
    p50: mean(measured.map((run) => run.p50)),
    p99: mean(measured.map((run) => run.p99)),
    non2xx: measured.reduce((sum, run) => sum + run.non2xx, 0),
    errors: measured.reduce((sum, run) => sum + run.errors, 0),
    rssMaxMb: Math.max(...measured.map((run) => run.rssMaxMb ?? 0)),
    cpuMsPerRequest: mean(measured.map((run) => run.cpuMsPerRequest ?? 0)),
    cpuPostgres: mean(measured.map((run) => run.cpu.postgres))
  }
}

const summaryColumns: ReadonlyArray<Column> = [
  { header: "scenario", align: "left" },
  { header: "server", align: "left" },
  { header: "req/s" },
  { header: "p50 ms" },
  { header: "p99 ms" },
  { header: "non-2xx" },
  { header: "errors" },
  { header: "max RSS MB" },
  { header: "srv CPU ms/req" },
  { header: "pg CPU%" },
  { header: "Parley/baseline" }
]

export const run = async (args: ReadonlyArray<string>) => {
  const options = {
    durationSeconds: envInt("BENCH_DURATION", 15),
    rounds: envInt("BENCH_ROUNDS", 2),
    connections: envInt("BENCH_CONNECTIONS", 50),
    warmupSeconds: envInt("BENCH_WARMUP", 3),
    pairs: envInt("BENCH_INGEST_PAIRS", 1000),
    cpuProf: args.includes("--cpu-prof") || envFlag("BENCH_CPU_PROF")
  }
  const scenarios: ReadonlyArray<Scenario> = [
    { name: "distinct", pairs: options.pairs },
    { name: "hot", pairs: 1 },
    { name: "channels", pairs: options.pairs }
  ]
  const startedAt = new Date()
  const cleanup = makeCleanup()
  const started: Array<ServerProcess> = []
  try {
    log(
      `ingest: POST ${INGEST}, ${options.pairs} distinct pairs and one hot pair; ${options.rounds} round(s) x ${options.durationSeconds} s at ${options.connections} connections (warmup ${options.warmupSeconds} s)`
    )
    const database = await startDatabase("parley_bench_ingest")
    cleanup.add("database", database.close)
    log(`database ${database.name} (${database.kind}, PostgreSQL ${database.serverVersion}), migrated`)

    const profileDirectory = path.join(resultsDirectory, "profiles")
    if (options.cpuProf) fs.mkdirSync(profileDirectory, { recursive: true })
    const adminToken = randomBytes(24).toString("base64url")
    const parleyPort = await freePort()
    const parley = await startServer({
      name: "parley",
      args: [...(options.cpuProf ? ["--cpu-prof", `--cpu-prof-dir=${profileDirectory}`] : []), "src/main.ts"],
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
      args: ["bench/baseline/server.ts"],
      port: baselinePort,
      env: { DATABASE_URL: database.url, PORT: String(baselinePort), HOST: "127.0.0.1" },
      readyPath: "/readyz",
      cwd: rootDirectory
    })
    started.push(baseline)
    cleanup.add("baseline", () => baseline.stop())
    log(
      `parley pid ${parley.pid} on :${parley.port}${options.cpuProf ? " (--cpu-prof)" : ""}, baseline pid ${baseline.pid} on :${baseline.port}`
    )

    const organization = await expectJson(201, "POST", `${parley.baseUrl}/admin/v1/organizations`, {
      token: adminToken,
      body: { name: "bench" }
    })
    const key = await expectJson(201, "POST", `${parley.baseUrl}/admin/v1/organizations/${organization.id}/api-keys`, {
      token: adminToken,
      body: { name: "bench" }
    })
    const token: string = key.token
    await checkSameSql(database.url, organization.id)
    log("SQL check: the baseline runs the same statements Parley prepares")
    const servers = [parley, baseline] as const
    await checkSameBehaviour(servers, token)
    log(
      "behaviour check: both create, reuse, return the first ids for a repeated provider_message_id and refuse a bad token alike"
    )

    const runs: Array<Run> = []
    const windows: Array<Window> = []
    for (const scenario of scenarios) {
      const once = async (server: ServerProcess, round: number, durationSeconds: number) => {
        const start = nowMicros()
        const entry = await measure({
          server,
          scenario,
          round,
          durationSeconds,
          connections: options.connections,
          token,
          databaseUrl: database.url,
          organizationId: organization.id,
          postmasterPid: database.postmasterPid
        })
        if (round > 0 && server === parley) windows.push([start, nowMicros()])
        runs.push(entry)
        log(
          `  ${scenario.name} ${server.name} ${round === 0 ? "warmup" : `round ${round}`}: ${fixed(entry.requestsPerSecond, 0)} req/s, p50 ${fixed(entry.p50)} ms, p99 ${fixed(entry.p99)} ms, non-2xx ${entry.non2xx}, stored ${entry.stored.conversations}/${entry.stored.openSessions}/${entry.stored.messages}${entry.consistent ? "" : " INCONSISTENT"}`
        )
        await sleep(1_000)
      }
      // The baseline stores text messages only: `channels` is Parley's, compared with its own `distinct`.
      const measured = scenario.name === "channels" ? [parley] : servers
      for (const server of measured) await once(server, 0, options.warmupSeconds)
      for (let round = 1; round <= options.rounds; round++) {
        for (const server of measured) await once(server, round, options.durationSeconds)
      }
    }

    let profile: ProfileSummary | undefined
    if (options.cpuProf) {
      await stopParley()
      const file = findProfile(profileDirectory, parley.pid)
      if (file === undefined) log(`\nNo .cpuprofile for pid ${parley.pid} in ${profileDirectory}`)
      else profile = analyzeProfile(file, 25, windows)
    }

    const summaries = scenarios.flatMap((scenario) => {
      const ours = summarize(runs, scenario.name, "parley")
      if (scenario.name === "channels") {
        const plain = summarize(runs, "distinct", "parley")
        return [{ ...ours, ratio: ours.requestsPerSecond / plain.requestsPerSecond }]
      }
      const theirs = summarize(runs, scenario.name, "baseline")
      return [
        { ...ours, ratio: ours.requestsPerSecond / theirs.requestsPerSecond },
        { ...theirs, ratio: undefined }
      ]
    })
    const summaryRows = summaries.map(
      (summary): Array<Cell> => [
        summary.scenario,
        summary.server,
        fixed(summary.requestsPerSecond, 0),
        fixed(summary.p50, 1),
        fixed(summary.p99, 1),
        summary.non2xx,
        summary.errors,
        fixed(summary.rssMaxMb, 0),
        fixed(summary.cpuMsPerRequest, 3),
        fixed(summary.cpuPostgres, 0),
        summary.ratio === undefined ? "" : fixed(summary.ratio, 2)
      ]
    )
    const distinctRatio = summaries.find((summary) => summary.scenario === "distinct" && summary.ratio !== undefined)!
      .ratio!
    const hotRatio = summaries.find((summary) => summary.scenario === "hot" && summary.ratio !== undefined)!.ratio!
    const channelsRatio = summaries.find((summary) => summary.scenario === "channels")!.ratio!
    const verdict = `ratio Parley/baseline req/s: distinct pairs ${distinctRatio.toFixed(2)} (goal >= ${GOAL}: ${distinctRatio >= GOAL ? "met" : "NOT met"}), hot pair ${hotRatio.toFixed(2)}; Parley channels/distinct ${channelsRatio.toFixed(2)} (goal >= ${CHANNELS_GOAL}: ${channelsRatio >= CHANNELS_GOAL ? "met" : "NOT met"})`
    const failed = runs.filter((run) => run.round > 0 && (run.non2xx > 0 || run.errors > 0))
    const inconsistent = runs.filter((run) => !run.consistent)
    const disturbed = runs.filter((run) => run.round > 0 && (run.cpu.other ?? 0) > OTHER_CPU_LIMIT)
    const warnings = [
      ...(failed.length > 0 ? [`WARNING: ${failed.length} measured run(s) had non-2xx responses or errors`] : []),
      ...(inconsistent.length > 0
        ? [`WARNING: stored rows do not match the responses in ${inconsistent.length} run(s)`]
        : []),
      ...(disturbed.length > 0
        ? [
            `WARNING: other CPU above ${OTHER_CPU_LIMIT}% of a core (something else was running) in ${disturbed
              .map((run) => `${run.scenario} ${run.server} round ${run.round}`)
              .join(", ")}: compare those rounds with care`
          ]
        : [])
    ]

    log("")
    log(formatTable(runColumns, runs.map(runRow)))
    log("")
    log(formatTable(summaryColumns, summaryRows))
    log("")
    log(verdict)
    for (const warning of warnings) log(warning)
    if (profile !== undefined) log(`\nParley ${formatProfile(profile)}`)

    const env = environment()
    const json = {
      benchmark: "ingest",
      endpoint: `POST ${INGEST}`,
      startedAt: startedAt.toISOString(),
      environment: { ...env, database: { kind: database.kind, version: database.serverVersion } },
      options,
      runs,
      summary: {
        scenarios: summaries,
        distinctRatio,
        hotRatio,
        channelsRatio,
        goal: GOAL,
        goalMet: distinctRatio >= GOAL,
        channelsGoal: CHANNELS_GOAL
      },
      valid: failed.length === 0 && inconsistent.length === 0,
      disturbed: disturbed.map((run) => ({ scenario: run.scenario, server: run.server, round: run.round })),
      ...(profile !== undefined ? { profile: { ...profile, file: path.relative(rootDirectory, profile.file) } } : {})
    }
    const markdown = [
      `# ingest benchmark, ${startedAt.toISOString()}`,
      "",
      `POST ${INGEST}, Parley vs the Fastify + postgres.js baseline (same statements in one transaction with the same advisory lock, pool 20).`,
      `Text messages with a contact name and a unique provider_message_id; \`distinct\`: round-robin over ${options.pairs} (to, from) pairs, each run on a fresh \`to\` (the first message of a pair creates contact, conversation and session); \`hot\`: one pair.`,
      `${options.rounds} round(s) x ${options.durationSeconds} s at ${options.connections} connections per scenario, alternating, after a ${options.warmupSeconds} s warmup of each.`,
      `Node ${env.node}, ${env.cpus} CPU (${env.cpuModel}), ${env.platform}; PostgreSQL ${database.serverVersion} (${database.kind}); commit ${env.commit ?? "?"}${options.cpuProf ? "; Parley under --cpu-prof" : ""}.`,
      "",
      "## Summary (mean of the measured rounds)",
      "",
      markdownTable(summaryColumns, summaryRows),
      "",
      `**${verdict}**`,
      ...warnings.flatMap((warning) => ["", warning]),
      "",
      "## Runs",
      "",
      markdownTable(runColumns, runs.map(runRow)),
      "",
      "CPU% is of one core over the run (srv = the server process); pg CPU% sums the PostgreSQL server's processes; other CPU% is the rest of the machine's busy time beside the server, PostgreSQL and autocannon. `stored` counts the run's conversations, open sessions and messages after it; `consistent` means one conversation and one open session per pair, one message per provider_message_id, and as many messages as 2xx responses (plus at most one call per connection still in flight when the run stopped).",
      ...(profile !== undefined ? ["", "## Parley CPU profile", "", "```", formatProfile(profile), "```"] : [])
    ].join("\n")
    const written = writeResults("ingest", json, markdown, startedAt)
    log(`\nresults: ${path.relative(rootDirectory, written.json)}, ${path.relative(rootDirectory, written.markdown)}`)
    if (failed.length > 0 || inconsistent.length > 0) process.exitCode = 1
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
