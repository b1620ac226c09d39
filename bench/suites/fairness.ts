/**
 * `npm run bench -- fairness [--cpu-prof]`: whether a rate limit protects the
 * other organizations (issue 38 item 4, DECISIONS.md D20). One Parley process,
 * two organizations posting messages (POST message, each to a session of its
 * own): `free`, unlimited, and `limited`, at `BENCH_FAIRNESS_RATE` requests per
 * second (20). Each round measures, `BENCH_DURATION` seconds each, at the same
 * connection count for both:
 *
 * - `alone`: `free` by itself;
 * - `together`: `free` while `limited` is hammered at the same time (almost
 *   every one of its requests a 429), its autocannon in a process of its own
 *   (as on another machine: in this process it would delay the measured
 *   organization's responses on the client side);
 * - `refusals`: `limited` by itself, for the server CPU per 429, after the
 *   server's CPU with no load is measured as long.
 *
 * Goals: `free` keeps >= 0.85 of its throughput together vs. alone and its p50
 * within 1.25x (each the ratio of the means of the measured rounds); a 429
 * aims at <= 0.1 ms of server CPU: the server's CPU over the refusals run,
 * less its idle CPU and the messages it stored (at the CPU per message of the
 * `alone` runs), divided by the 429s. `--cpu-prof` (or BENCH_CPU_PROF=1)
 * profiles the server and prints the top self-time functions of the refusals
 * runs.
 *
 * Settings: BENCH_DURATION (s, 10), BENCH_ROUNDS (2), BENCH_CONNECTIONS (20,
 * per organization), BENCH_WARMUP (s, 3), BENCH_FAIRNESS_RATE (20),
 * BENCH_DATABASE_URL (a server to create the database on; default an embedded
 * PostgreSQL), BENCH_SERVER_NODE_OPTIONS (the server's NODE_OPTIONS). Writes
 * bench/results/fairness-<timestamp>.{json,md}.
 */
import { randomUUID } from "node:crypto"
import * as fs from "node:fs"
import * as path from "node:path"
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
import { expectJson } from "../lib/http.ts"
import { type LoadResult, runLoad, runLoadApart } from "../lib/load.ts"
import { startParley } from "../lib/parley.ts"
import { measureCpu } from "../lib/proc.ts"
import { rootDirectory, sleep } from "../lib/process.ts"
import { environment, resultsDirectory, writeResults } from "../lib/results.ts"
import { mean } from "../lib/stats.ts"
import { type Cell, type Column, fixed, formatTable, markdownTable } from "../lib/table.ts"

/** Issue 38 item 4: the unlimited organization keeps at least this share of its throughput. */
const THROUGHPUT_GOAL = 0.85
/** Issue 38 item 4: its p50 grows by at most this factor. */
const P50_GOAL = 1.25
/** Issue 38 item 4: server CPU per 429, ms (an aim). */
const CPU_PER_REFUSAL_GOAL = 0.1
const BASE = "/conversations/v2/api/v1"
const MESSAGE = JSON.stringify({ content: { type: "text", text: "Hello from the benchmark" }, role: "user" })

const log = (line: string) => process.stdout.write(`${line}\n`)

type Phase = "warmup" | "alone" | "together" | "refusals"

interface Run extends LoadResult {
  readonly phase: Phase
  /** The organization whose load this is. */
  readonly organization: "free" | "limited"
  /** 0 = warmup. */
  readonly round: number
  readonly refused: number
  /** Server CPU ms per response (the server's whole CPU over the run, shared when two loads run together). */
  readonly cpuMsPerRequest: number | undefined
}

const runColumns: ReadonlyArray<Column> = [
  { header: "phase", align: "left" },
  { header: "organization", align: "left" },
  { header: "round" },
  { header: "req/s" },
  { header: "p50 ms" },
  { header: "p99 ms" },
  { header: "429" },
  { header: "other non-2xx" },
  { header: "errors" },
  { header: "srv CPU%" },
  { header: "srv CPU ms/req" },
  { header: "pg CPU%" },
  { header: "load gen CPU%" },
  { header: "other CPU%" }
]

const runRow = (run: Run): Array<Cell> => [
  run.phase,
  run.organization,
  run.round === 0 ? "warmup" : run.round,
  fixed(run.requestsPerSecond, 0),
  fixed(run.p50, 1),
  fixed(run.p99, 1),
  run.refused,
  run.non2xx - run.refused,
  run.errors + run.timeouts,
  fixed(run.cpu.server, 0),
  fixed(run.cpuMsPerRequest, 3),
  fixed(run.cpu.postgres, 0),
  fixed(run.cpu.loadGenerator, 0),
  fixed(run.cpu.other, 0)
]

export const run = async (args: ReadonlyArray<string>) => {
  const options = {
    cpuProf: args.includes("--cpu-prof") || envFlag("BENCH_CPU_PROF"),
    durationSeconds: envInt("BENCH_DURATION", 10),
    rounds: envInt("BENCH_ROUNDS", 2),
    connections: envInt("BENCH_CONNECTIONS", 20),
    warmupSeconds: envInt("BENCH_WARMUP", 3),
    rate: envInt("BENCH_FAIRNESS_RATE", 20)
  }
  const startedAt = new Date()
  const cleanup = makeCleanup()
  try {
    log(
      `fairness: POST ${BASE}/sessions/:id/messages of an unlimited organization, alone and while one limited to ${options.rate}/s is hammered; ${options.rounds} round(s) x 3 runs x ${options.durationSeconds} s at ${options.connections} connections per organization (warmup ${options.warmupSeconds} s)`
    )
    const database = await startDatabase("parley_bench_fairness")
    cleanup.add("database", database.close)
    log(`database ${database.name} (${database.kind}, PostgreSQL ${database.serverVersion}), migrated`)
    const profileDirectory = path.join(resultsDirectory, "profiles")
    if (options.cpuProf) fs.mkdirSync(profileDirectory, { recursive: true })
    const parley = await startParley(
      database.url,
      cleanup,
      {},
      options.cpuProf ? ["--cpu-prof", `--cpu-prof-dir=${profileDirectory}`] : []
    )
    const server = parley.server
    /** The refusals runs (the limited organization alone), the windows of the profile. */
    const refusalWindows: Array<Window> = []
    log(`parley pid ${server.pid} on :${server.port}`)

    const limitedOrganization = await parley.admin(201, "POST", "/organizations", { name: "bench limited" })
    await parley.admin(200, "PATCH", `/organizations/${limitedOrganization.id}/settings`, {
      rate_limit_per_second: options.rate
    })
    const limitedKey = await parley.admin(201, "POST", `/organizations/${limitedOrganization.id}/api-keys`, {
      name: "bench"
    })
    const tokens = { free: parley.token, limited: limitedKey.token as string }
    const newSession = async (organization: "free" | "limited") => {
      // The limited organization's own requests count against its bucket: a 429 is retried after its Retry-After.
      for (;;) {
        const response = await fetch(`${server.baseUrl}${BASE}/sessions`, {
          method: "POST",
          headers: { authorization: `Bearer ${tokens[organization]}`, "content-type": "application/json" },
          body: JSON.stringify({ contact_id: `bench-${randomUUID()}`, contact_name: "Bench" })
        })
        const body: any = await response.json()
        if (response.status === 201) return body.id as string
        if (response.status !== 429) throw new Error(`POST /sessions: ${response.status} ${JSON.stringify(body)}`)
        await sleep(Number(response.headers.get("retry-after") ?? "1") * 1_000)
      }
    }
    const sessions = { free: await newSession("free"), limited: await newSession("limited") }
    await expectJson(201, "POST", `${server.baseUrl}${BASE}/sessions/${sessions.free}/messages`, {
      token: tokens.free,
      body: JSON.parse(MESSAGE)
    })

    const runs: Array<Run> = []
    /** The server's CPU with no load before each round's refusals run, percent of one core. */
    const idleCpu: Array<number> = []
    // The hammering client runs in a process of its own, as it would on another machine: in this process its
    // autocannon would delay the measured organization's responses on the client side.
    const load = (organization: "free" | "limited", durationSeconds: number) =>
      (organization === "limited" ? runLoadApart : runLoad)({
        url: `${server.baseUrl}${BASE}/sessions/${sessions[organization]}/messages`,
        method: "POST",
        headers: { authorization: `Bearer ${tokens[organization]}`, "content-type": "application/json" },
        body: MESSAGE,
        connections: options.connections,
        duration: durationSeconds,
        serverPid: server.pid,
        postmasterPid: database.postmasterPid
      })
    const record = (phase: Phase, organization: "free" | "limited", round: number, result: LoadResult) => {
      const entry: Run = {
        phase,
        organization,
        round,
        ...result,
        refused: result.statusCodes["429"] ?? 0,
        cpuMsPerRequest:
          result.cpu.server === undefined || result.requestsPerSecond === 0
            ? undefined
            : (result.cpu.server * 10) / result.requestsPerSecond
      }
      runs.push(entry)
      log(
        `  ${phase} ${organization} ${round === 0 ? "warmup" : `round ${round}`}: ${fixed(entry.requestsPerSecond, 0)} req/s, p50 ${fixed(entry.p50)} ms, p99 ${fixed(entry.p99)} ms, 429 ${entry.refused}, srv CPU ${fixed(entry.cpu.server, 0)}%`
      )
    }
    const measure = async (phase: Phase, round: number, durationSeconds: number) => {
      if (phase === "together") {
        const [free, limited] = await Promise.all([load("free", durationSeconds), load("limited", durationSeconds)])
        record(phase, "free", round, free)
        record(phase, "limited", round, limited)
      } else {
        if (phase === "refusals") {
          // The server's CPU with no load (workers' polls, timers), taken out of the refusals' CPU.
          const cpu = measureCpu(() => [server.pid])
          await sleep(durationSeconds * 1_000)
          idleCpu.push(cpu.stop())
          log(`  idle round ${round}: srv CPU ${fixed(idleCpu.at(-1), 1)}%`)
        }
        const organization = phase === "refusals" ? "limited" : "free"
        const start = nowMicros()
        record(phase, organization, round, await load(organization, durationSeconds))
        if (phase === "refusals") refusalWindows.push([start, nowMicros()])
      }
      await sleep(1_000)
    }

    record("warmup", "free", 0, await load("free", options.warmupSeconds))
    record("warmup", "limited", 0, await load("limited", options.warmupSeconds))
    await sleep(1_000)
    for (let round = 1; round <= options.rounds; round++) {
      for (const phase of ["alone", "together", "refusals"] as const) {
        await measure(phase, round, options.durationSeconds)
      }
    }

    const measured = (phase: Phase, organization: "free" | "limited") =>
      runs.filter((entry) => entry.phase === phase && entry.organization === organization && entry.round > 0)
    const alone = measured("alone", "free")
    const together = measured("together", "free")
    const aloneRps = mean(alone.map((entry) => entry.requestsPerSecond))
    const togetherRps = mean(together.map((entry) => entry.requestsPerSecond))
    const aloneP50 = mean(alone.map((entry) => entry.p50))
    const togetherP50 = mean(together.map((entry) => entry.p50))
    const throughputRatio = togetherRps / aloneRps
    const p50Ratio = togetherP50 / aloneP50
    const cpuPerMessage = mean(alone.map((entry) => entry.cpuMsPerRequest ?? 0))
    // The refusals runs' CPU, less the server's idle CPU and the messages the limited organization stored, per 429.
    const cpuPerRefusal = mean(
      measured("refusals", "limited").map((entry, i) => {
        const cpuMs = ((entry.cpu.server ?? 0) - (idleCpu[i] ?? 0)) * 10 * options.durationSeconds
        const stored = entry.total - entry.non2xx
        return entry.refused === 0 ? 0 : (cpuMs - stored * cpuPerMessage) / entry.refused
      })
    )
    const refusalRate = mean(measured("refusals", "limited").map((entry) => entry.requestsPerSecond))
    const failed = runs.filter(
      (entry) =>
        entry.round > 0 &&
        (entry.errors > 0 ||
          entry.timeouts > 0 ||
          entry.non2xx - entry.refused > 0 ||
          (entry.organization === "free" && entry.refused > 0))
    )
    const verdicts = [
      `unlimited organization's throughput, hammered neighbour / alone: ${throughputRatio.toFixed(2)} (${fixed(togetherRps, 0)} / ${fixed(aloneRps, 0)} req/s); goal >= ${THROUGHPUT_GOAL}: ${throughputRatio >= THROUGHPUT_GOAL ? "met" : "NOT met"}`,
      `unlimited organization's p50, hammered neighbour / alone: ${p50Ratio.toFixed(2)} (${fixed(togetherP50)} / ${fixed(aloneP50)} ms); goal <= ${P50_GOAL}: ${p50Ratio <= P50_GOAL ? "met" : "NOT met"}`,
      `server CPU per 429: ${cpuPerRefusal.toFixed(3)} ms (${fixed(refusalRate, 0)} responses/s, ${cpuPerMessage.toFixed(3)} ms per stored message); aim <= ${CPU_PER_REFUSAL_GOAL}: ${cpuPerRefusal <= CPU_PER_REFUSAL_GOAL ? "met" : "NOT met"}`
    ]

    let profile: ProfileSummary | undefined
    if (options.cpuProf) {
      await server.stop()
      const file = findProfile(profileDirectory, server.pid)
      if (file === undefined) log(`\nNo .cpuprofile for pid ${server.pid} in ${profileDirectory}`)
      else profile = analyzeProfile(file, 30, refusalWindows)
    }

    log("")
    log(formatTable(runColumns, runs.map(runRow)))
    log("")
    for (const verdict of verdicts) log(verdict)
    if (profile !== undefined) log(`\nParley, refusals runs: ${formatProfile(profile)}`)
    if (failed.length > 0) log(`WARNING: ${failed.length} measured run(s) had errors or unexpected statuses`)

    const env = environment()
    const json = {
      benchmark: "fairness",
      endpoint: `POST ${BASE}/sessions/:session_id/messages`,
      startedAt: startedAt.toISOString(),
      environment: { ...env, database: { kind: database.kind, version: database.serverVersion } },
      options,
      runs,
      summary: {
        aloneRequestsPerSecond: aloneRps,
        togetherRequestsPerSecond: togetherRps,
        throughputRatio,
        throughputGoal: THROUGHPUT_GOAL,
        aloneP50,
        togetherP50,
        p50Ratio,
        p50Goal: P50_GOAL,
        cpuMsPerMessage: cpuPerMessage,
        idleCpu,
        cpuMsPerRefusal: cpuPerRefusal,
        cpuPerRefusalGoal: CPU_PER_REFUSAL_GOAL,
        refusalsPerSecond: refusalRate
      },
      valid: failed.length === 0,
      ...(profile !== undefined ? { profile: { ...profile, file: path.relative(rootDirectory, profile.file) } } : {})
    }
    const markdown = [
      `# fairness benchmark, ${startedAt.toISOString()}`,
      "",
      `POST ${BASE}/sessions/:session_id/messages of an unlimited organization, alone and while an organization limited to ${options.rate}/s is hammered; then the limited one alone.`,
      `${options.rounds} round(s) x 3 runs x ${options.durationSeconds} s at ${options.connections} connections per organization, after a ${options.warmupSeconds} s warmup of each.`,
      `Node ${env.node}, ${env.cpus} CPU (${env.cpuModel}), ${env.platform}; PostgreSQL ${database.serverVersion} (${database.kind}); commit ${env.commit ?? "?"}.`,
      "",
      ...verdicts.map((verdict) => `**${verdict}**\n`),
      ...(failed.length > 0
        ? [`WARNING: ${failed.length} measured run(s) had errors or unexpected statuses.`, ""]
        : []),
      "## Runs",
      "",
      markdownTable(runColumns, runs.map(runRow)),
      "",
      "CPU% is of one core over the run (srv = the server process, shared by both loads in `together`); pg CPU% sums the PostgreSQL server's processes; load gen CPU% is the row's autocannon (the free organization's in the benchmark process, the limited one's in a process of its own); other CPU% is the rest of the machine's busy time (in `together`, the other organization's autocannon too).",
      ...(profile !== undefined
        ? ["", "## Parley CPU profile, refusals runs", "", "```", formatProfile(profile), "```"]
        : [])
    ].join("\n")
    const written = writeResults("fairness", json, markdown, startedAt)
    log(`\nresults: ${path.relative(rootDirectory, written.json)}, ${path.relative(rootDirectory, written.markdown)}`)
    if (failed.length > 0) process.exitCode = 1
  } finally {
    await cleanup.run()
  }
}
