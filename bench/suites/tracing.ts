/**
 * `npm run bench -- tracing`: the cost of tracing on the hot path (issue 8
 * item 7). The POST message load of the messages benchmark against two Parley
 * processes on the same dedicated database: one with tracing off (no
 * `OTEL_EXPORTER_OTLP_ENDPOINT`) and one with tracing on, exporting by
 * OTLP/HTTP to a receiver in the benchmark process (bench/lib/otlp.ts) that
 * responds 200 and counts the spans. A warmup of each, then rounds alternating
 * the order (off, on / on, off, ...) at the same concurrency. Prints req/s,
 * p50, p99 and server CPU per request of each run, the ratio on/off of req/s,
 * the spans received (and how many of the requests were traced: server spans /
 * requests), and writes bench/results/tracing-<timestamp>.{json,md}.
 *
 * Settings as in the messages benchmark: BENCH_DURATION (s, 15), BENCH_ROUNDS
 * (2), BENCH_CONNECTIONS (50), BENCH_WARMUP (s, 3), BENCH_DATABASE_URL. The
 * traced process inherits the standard OpenTelemetry variables of the
 * benchmark's environment (`OTEL_TRACES_SAMPLER`, `OTEL_TRACES_SAMPLER_ARG`,
 * `OTEL_BSP_*`), so `OTEL_TRACES_SAMPLER=parentbased_traceidratio
 * OTEL_TRACES_SAMPLER_ARG=0.1 npm run bench -- tracing` measures sampling.
 */
import * as path from "node:path"
import { makeCleanup } from "../lib/cleanup.ts"
import { runStatement, startDatabase } from "../lib/database.ts"
import { envInt } from "../lib/env.ts"
import { expectJson } from "../lib/http.ts"
import { type LoadResult, runLoad } from "../lib/load.ts"
import { countsBetween, type OtlpCounts, startOtlpReceiver } from "../lib/otlp.ts"
import { type BenchParley, startParley } from "../lib/parley.ts"
import { rootDirectory, sleep } from "../lib/process.ts"
import { environment, writeResults } from "../lib/results.ts"
import { mean } from "../lib/stats.ts"
import { type Cell, type Column, fixed, formatTable, markdownTable } from "../lib/table.ts"

const BASE = "/conversations/v2/api/v1"
const messagesPath = (sessionId: string) => `${BASE}/sessions/${sessionId}/messages`
const MESSAGE = { content: { type: "text", text: "Hello from the benchmark" }, role: "user" }
/** `OTEL_SERVICE_NAME` of each process, to attribute spans (the untraced one must send none). */
const SERVICE = { off: "parley-tracing-off", on: "parley-tracing-on" } as const
/** "other" CPU (percent of one core) above which a run is flagged as disturbed by foreign load (as in messages). */
const OTHER_CPU_LIMIT = 40
/** How long to wait for the traced process to flush a run's spans (its batch processor exports every 5 s). */
const FLUSH_MAX_MS = 15_000

const log = (line: string) => process.stdout.write(`${line}\n`)

type Mode = keyof typeof SERVICE

interface Run extends LoadResult {
  readonly tracing: Mode
  /** 0 = warmup. */
  readonly round: number
  readonly durationSeconds: number
  /** Server CPU milliseconds per request. */
  readonly cpuMsPerRequest: number | undefined
  /** Messages the server stored in the run's session: the requests it served, in-flight ones at the end included. */
  readonly served: number
  /** What the receiver got during the run and its flush (tracing on only). */
  readonly otlp: OtlpCounts | undefined
  /**
   * Server spans of this run's POST message requests (matched by their session's
   * path; tracing on only), whatever their status: a request the load generator
   * abandoned at its end (499) may have stored its message.
   */
  readonly endpointSpans: number | undefined
  /** Those server spans by response status (requests the load generator abandoned at its end show as 499). */
  readonly endpointStatuses: Readonly<Record<string, number>> | undefined
  /** Whether the traced process flushed after the run within {@link FLUSH_MAX_MS}. */
  readonly flushed: boolean | undefined
}

const runColumns: ReadonlyArray<Column> = [
  { header: "tracing", align: "left" },
  { header: "round" },
  { header: "req/s" },
  { header: "p50 ms" },
  { header: "p99 ms" },
  { header: "non-2xx" },
  { header: "errors" },
  { header: "served" },
  { header: "RSS MB" },
  { header: "srv CPU%" },
  { header: "srv CPU ms/req" },
  { header: "pg CPU%" },
  { header: "bench CPU%" },
  { header: "other CPU%" },
  { header: "spans" },
  { header: "traced req %" },
  { header: "exports" },
  { header: "export KB" }
]

const tracedShare = (run: Run) =>
  run.endpointSpans === undefined || run.served === 0 ? undefined : (run.endpointSpans / run.served) * 100

const runRow = (run: Run): Array<Cell> => [
  run.tracing,
  run.round === 0 ? "warmup" : run.round,
  fixed(run.requestsPerSecond, 0),
  fixed(run.p50, 1),
  fixed(run.p99, 1),
  run.non2xx,
  run.errors + run.timeouts,
  run.served,
  fixed(run.rssMaxMb, 0),
  fixed(run.cpu.server, 0),
  fixed(run.cpuMsPerRequest, 3),
  fixed(run.cpu.postgres, 0),
  fixed(run.cpu.loadGenerator, 0),
  fixed(run.cpu.other, 0),
  run.otlp?.spans,
  fixed(tracedShare(run), 1),
  run.otlp?.traceRequests,
  run.otlp === undefined ? undefined : fixed(run.otlp.traceBytes / 1024, 0)
]

const summarize = (runs: ReadonlyArray<Run>, tracing: Mode) => {
  const measured = runs.filter((run) => run.tracing === tracing && run.round > 0)
  const requests = measured.reduce((sum, run) => sum + run.served, 0)
  const spans = measured.reduce((sum, run) => sum + (run.otlp?.spans ?? 0), 0)
  const serverSpans = measured.reduce((sum, run) => sum + (run.endpointSpans ?? 0), 0)
  return {
    tracing,
    requestsPerSecond: mean(measured.map((run) => run.requestsPerSecond)),
    p50: mean(measured.map((run) => run.p50)),
    p99: mean(measured.map((run) => run.p99)),
    non2xx: measured.reduce((sum, run) => sum + run.non2xx, 0),
    errors: measured.reduce((sum, run) => sum + run.errors + run.timeouts, 0),
    rssMaxMb: Math.max(...measured.map((run) => run.rssMaxMb ?? 0)),
    cpuServer: mean(measured.map((run) => run.cpu.server ?? 0)),
    cpuMsPerRequest: mean(measured.map((run) => run.cpuMsPerRequest ?? 0)),
    requests,
    spans,
    serverSpans,
    /** Percent of the requests served whose server span arrived. */
    tracedShare: tracing === "on" && requests > 0 ? (serverSpans / requests) * 100 : undefined,
    spansPerTracedRequest: serverSpans > 0 ? spans / serverSpans : undefined,
    exportRequests: measured.reduce((sum, run) => sum + (run.otlp?.traceRequests ?? 0), 0),
    exportBytes: measured.reduce((sum, run) => sum + (run.otlp?.traceBytes ?? 0), 0)
  }
}

const summaryColumns: ReadonlyArray<Column> = [
  { header: "tracing", align: "left" },
  { header: "req/s" },
  { header: "p50 ms" },
  { header: "p99 ms" },
  { header: "non-2xx" },
  { header: "errors" },
  { header: "max RSS MB" },
  { header: "srv CPU%" },
  { header: "srv CPU ms/req" },
  { header: "served" },
  { header: "spans" },
  { header: "traced req %" },
  { header: "spans/traced req" }
]

const summaryRow = (summary: ReturnType<typeof summarize>): Array<Cell> => [
  summary.tracing,
  fixed(summary.requestsPerSecond, 0),
  fixed(summary.p50, 1),
  fixed(summary.p99, 1),
  summary.non2xx,
  summary.errors,
  fixed(summary.rssMaxMb, 0),
  fixed(summary.cpuServer, 0),
  fixed(summary.cpuMsPerRequest, 3),
  summary.requests,
  summary.tracing === "on" ? summary.spans : undefined,
  fixed(summary.tracedShare, 1),
  fixed(summary.spansPerTracedRequest, 1)
]

/** The OpenTelemetry SDK variables the traced process inherits from this environment. */
const otelSettings = () =>
  Object.fromEntries(
    Object.entries(process.env).filter(
      ([name, value]) => (name.startsWith("OTEL_TRACES_") || name.startsWith("OTEL_BSP_")) && value !== undefined
    )
  ) as Record<string, string>

export const run = async (_args: ReadonlyArray<string>) => {
  const options = {
    durationSeconds: envInt("BENCH_DURATION", 15),
    rounds: envInt("BENCH_ROUNDS", 2),
    connections: envInt("BENCH_CONNECTIONS", 50),
    warmupSeconds: envInt("BENCH_WARMUP", 3)
  }
  const otel = otelSettings()
  const samplerText =
    otel.OTEL_TRACES_SAMPLER === undefined
      ? "parentbased_always_on (SDK default)"
      : `${otel.OTEL_TRACES_SAMPLER}${otel.OTEL_TRACES_SAMPLER_ARG === undefined ? "" : ` ${otel.OTEL_TRACES_SAMPLER_ARG}`}`
  const startedAt = new Date()
  const cleanup = makeCleanup()
  const started: Array<BenchParley> = []
  try {
    log(
      `tracing: POST ${BASE}/sessions/:id/messages with tracing off and on (OTLP/HTTP to a local receiver), ${options.rounds} round(s) x ${options.durationSeconds} s at ${options.connections} connections (warmup ${options.warmupSeconds} s); sampler ${samplerText}`
    )
    const database = await startDatabase("parley_bench_tracing")
    cleanup.add("database", database.close)
    log(`database ${database.name} (${database.kind}, PostgreSQL ${database.serverVersion}), migrated`)
    const receiver = await startOtlpReceiver()
    cleanup.add("otlp receiver", receiver.close)
    log(`OTLP/HTTP receiver on ${receiver.url}`)

    // Spans of the untraced process would show under its service name: there must be none.
    const off = await startParley(database.url, cleanup, {
      OTEL_EXPORTER_OTLP_ENDPOINT: "",
      OTEL_SERVICE_NAME: SERVICE.off
    })
    started.push(off)
    const on = await startParley(database.url, cleanup, {
      OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
      OTEL_SERVICE_NAME: SERVICE.on
    })
    started.push(on)
    const parleys: Record<Mode, BenchParley> = { off, on }
    log(
      `tracing off: pid ${off.server.pid} on :${off.server.port}; tracing on: pid ${on.server.pid} on :${on.server.port}`
    )

    let contacts = 0
    const createSession = async (parley: BenchParley) => {
      const session = await expectJson(201, "POST", `${parley.server.baseUrl}${BASE}/sessions`, {
        token: parley.token,
        body: { contact_id: `bench-contact-${Date.now()}-${contacts++}`, contact_name: "Bench" }
      })
      return session.id as string
    }

    // Both respond to the message alike, and the traced process really exports (as JSON, spans counted).
    for (const parley of [off, on]) {
      const sessionId = await createSession(parley)
      const created = await expectJson(201, "POST", `${parley.server.baseUrl}${messagesPath(sessionId)}`, {
        token: parley.token,
        body: MESSAGE
      })
      if (created.session_id !== sessionId) throw new Error(`Unexpected message: ${JSON.stringify(created)}`)
    }
    if (!(await receiver.flushedAfter(performance.now(), 300, FLUSH_MAX_MS))) {
      throw new Error(`The traced process sent nothing to ${receiver.url} in ${FLUSH_MAX_MS} ms`)
    }
    const checked = receiver.counts()
    if (checked.protobufRequests > 0) {
      log(`note: the exporter sends protobuf; spans are not decoded, only export requests and bytes are counted`)
    } else if (checked.serverSpans === 0) {
      throw new Error(`The traced process exported no server span: ${JSON.stringify(checked.spansByName)}`)
    }
    log(
      `check: both respond 201; the traced process exported ${checked.spans} spans (${Object.keys(checked.spansByName).length} names)`
    )

    const runs: Array<Run> = []
    const measure = async (tracing: Mode, round: number, durationSeconds: number) => {
      const parley = parleys[tracing]
      const sessionId = await createSession(parley)
      const before = receiver.counts()
      const result = await runLoad({
        url: `${parley.server.baseUrl}${messagesPath(sessionId)}`,
        method: "POST",
        headers: { authorization: `Bearer ${parley.token}`, "content-type": "application/json" },
        body: JSON.stringify(MESSAGE),
        connections: options.connections,
        duration: durationSeconds,
        serverPid: parley.server.pid,
        postmasterPid: database.postmasterPid
      })
      // Requests still in flight when the load stopped finish (and end their spans) meanwhile.
      await sleep(1_000)
      // The run's spans still in the batch processor leave on its next scheduled export.
      const flushed = tracing === "on" ? await receiver.flushedAfter(performance.now(), 1_000, FLUSH_MAX_MS) : undefined
      const otlp = tracing === "on" ? countsBetween(before, receiver.counts()) : undefined
      const statuses = tracing === "on" ? receiver.serverSpansOfPath(messagesPath(sessionId)) : undefined
      if (!/^[0-9a-f-]{36}$/.test(sessionId)) throw new Error(`Unexpected session id ${sessionId}`)
      const [stored] = await runStatement<{ n: number }>(
        database.url,
        `SELECT count(*)::int AS n FROM messages WHERE session_id = '${sessionId}'`
      )
      const entry: Run = {
        tracing,
        round,
        durationSeconds,
        ...result,
        cpuMsPerRequest:
          result.cpu.server === undefined || result.requestsPerSecond === 0
            ? undefined
            : (result.cpu.server * 10) / result.requestsPerSecond,
        served: stored?.n ?? 0,
        otlp,
        endpointSpans: statuses === undefined ? undefined : Object.values(statuses).reduce((a, b) => a + b, 0),
        endpointStatuses: statuses,
        flushed
      }
      runs.push(entry)
      const spansText =
        otlp === undefined
          ? ""
          : `, ${otlp.spans} spans (${fixed(tracedShare(entry), 1)}% of requests traced; server spans by status ${JSON.stringify(statuses)})${flushed ? "" : ", flush NOT seen"}`
      log(
        `  tracing ${tracing} ${round === 0 ? "warmup" : `round ${round}`}: ${fixed(entry.requestsPerSecond, 0)} req/s, p50 ${fixed(entry.p50)} ms, p99 ${fixed(entry.p99)} ms, non-2xx ${entry.non2xx}${spansText}`
      )
      await sleep(1_000)
    }
    for (const tracing of ["off", "on"] as const) await measure(tracing, 0, options.warmupSeconds)
    for (let round = 1; round <= options.rounds; round++) {
      const order: ReadonlyArray<Mode> = round % 2 === 1 ? ["off", "on"] : ["on", "off"]
      for (const tracing of order) await measure(tracing, round, options.durationSeconds)
    }

    const offSummary = summarize(runs, "off")
    const onSummary = summarize(runs, "on")
    const ratio = onSummary.requestsPerSecond / offSummary.requestsPerSecond
    const cpuRatio = onSummary.cpuMsPerRequest / offSummary.cpuMsPerRequest
    const roundRatios = Array.from({ length: options.rounds }, (_, i) => {
      const of = (tracing: Mode) => runs.find((run) => run.tracing === tracing && run.round === i + 1)!
      return of("on").requestsPerSecond / of("off").requestsPerSecond
    })
    const final = receiver.counts()
    const fromOff = final.spansByService[SERVICE.off] ?? 0
    const topSpans = Object.entries(onSummary.spans > 0 ? final.spansByName : {})
      .sort((a, b) => b[1] - a[1])
      .slice(0, 15)
    const failed = runs.filter((run) => run.round > 0 && (run.non2xx > 0 || run.errors > 0 || run.timeouts > 0))
    const unflushed = runs.filter((run) => run.flushed === false)
    // Another process (tests, a build) competing for the cores shows as "other" CPU.
    const disturbed = runs.filter((run) => run.round > 0 && (run.cpu.other ?? 0) > OTHER_CPU_LIMIT)
    const disturbedText = `WARNING: other CPU above ${OTHER_CPU_LIMIT}% of a core (something else was running) in ${disturbed
      .map((run) => `tracing ${run.tracing} round ${run.round}`)
      .join(", ")}: compare those rounds with care`
    const protobuf = final.protobufRequests > 0
    const verdict = `tracing on/off req/s: ${ratio.toFixed(2)} (rounds: ${roundRatios.map((r) => r.toFixed(2)).join(", ")}); server CPU per request on/off: ${cpuRatio.toFixed(2)}`
    const spansLine = protobuf
      ? `spans: not counted (protobuf export: ${final.protobufRequests} requests, ${fixed(final.traceBytes / 1024, 0)} KB)`
      : `spans received in the measured rounds: ${onSummary.spans} (${fixed(onSummary.spansPerTracedRequest, 1)} per traced request; ${fixed(onSummary.tracedShare, 1)}% of the ${onSummary.requests} requests served traced); ${onSummary.exportRequests} export requests, ${fixed(onSummary.exportBytes / 1024 / 1024, 1)} MB; the whole run: ${final.spans} spans, ${final.traceRequests} trace and ${final.metricRequests} metric export requests; spans from the untraced process: ${fromOff}`
    const summaryRows = [summaryRow(offSummary), summaryRow(onSummary)]

    log("")
    log(formatTable(runColumns, runs.map(runRow)))
    log("")
    log(formatTable(summaryColumns, summaryRows))
    log("")
    log(verdict)
    log(spansLine)
    if (topSpans.length > 0) log(`top spans: ${topSpans.map(([name, n]) => `${name} ${n}`).join("; ")}`)
    if (failed.length > 0) log(`WARNING: ${failed.length} measured run(s) had non-2xx responses or errors`)
    if (unflushed.length > 0)
      log(`WARNING: no export seen after ${unflushed.length} traced run(s): span counts may be short`)
    if (fromOff > 0) log(`WARNING: the process with tracing off exported ${fromOff} spans`)
    if (disturbed.length > 0) log(disturbedText)

    const env = environment()
    const json = {
      benchmark: "tracing",
      endpoint: `POST ${BASE}/sessions/:session_id/messages`,
      startedAt: startedAt.toISOString(),
      environment: { ...env, database: { kind: database.kind, version: database.serverVersion } },
      options: { ...options, sampler: samplerText, otel },
      runs,
      summary: {
        off: offSummary,
        on: onSummary,
        ratio,
        roundRatios,
        cpuPerRequestRatio: cpuRatio,
        protobuf,
        receiver: final,
        spansFromUntracedProcess: fromOff
      },
      valid: failed.length === 0 && fromOff === 0,
      disturbed: disturbed.map((run) => ({ tracing: run.tracing, round: run.round }))
    }
    const markdown = [
      `# tracing benchmark, ${startedAt.toISOString()}`,
      "",
      `POST ${BASE}/sessions/:session_id/messages on two Parley processes on the same database: tracing off (no OTEL_EXPORTER_OTLP_ENDPOINT) and on (OTLP/HTTP to a receiver in the benchmark process that responds 200 and counts spans). Sampler: ${samplerText}${
        Object.keys(otel).length > 0
          ? `; ${Object.entries(otel)
              .map(([k, v]) => `${k}=${v}`)
              .join(", ")}`
          : ""
      }.`,
      `${options.rounds} round(s) x ${options.durationSeconds} s at ${options.connections} connections, alternating the order each round, after a ${options.warmupSeconds} s warmup of each.`,
      `Node ${env.node}, ${env.cpus} CPU (${env.cpuModel}), ${env.platform}; PostgreSQL ${database.serverVersion} (${database.kind}); commit ${env.commit ?? "?"}.`,
      "",
      "## Summary (mean of the measured rounds)",
      "",
      markdownTable(summaryColumns, summaryRows),
      "",
      `**${verdict}**`,
      "",
      spansLine,
      ...(topSpans.length > 0
        ? ["", "Spans by name (whole run):", "", ...topSpans.map(([name, n]) => `- \`${name}\`: ${n}`)]
        : []),
      ...(failed.length > 0 ? ["", `WARNING: ${failed.length} measured run(s) had non-2xx responses or errors.`] : []),
      ...(unflushed.length > 0 ? ["", `WARNING: no export seen after ${unflushed.length} traced run(s).`] : []),
      ...(disturbed.length > 0 ? ["", disturbedText] : []),
      "",
      "## Runs",
      "",
      markdownTable(runColumns, runs.map(runRow)),
      "",
      "CPU% is of one core over the run (srv = the server process); pg CPU% sums the PostgreSQL server's processes; bench CPU% is this process (autocannon and the OTLP receiver); other CPU% is the rest of the machine's busy time. spans and exports of a traced run count what arrived from its start until the export after its end; served = messages stored in the run's session (requests the server completed, those in flight when the load stopped included); traced req % = server spans of the run's session path received / served (the requests abandoned by the load generator when it stops, status 499, may add up to the number of connections); spans and exports are counted over the run's window (from its start to the export after its end), so spans of a neighbouring traced run's tail may shift between windows."
    ].join("\n")
    const written = writeResults("tracing", json, markdown, startedAt)
    log(`\nresults: ${path.relative(rootDirectory, written.json)}, ${path.relative(rootDirectory, written.markdown)}`)
    if (failed.length > 0) process.exitCode = 1
  } catch (error) {
    for (const parley of started) {
      const child = parley.server.child
      const state = child.exitCode !== null || child.signalCode !== null ? "exited" : "running"
      log(
        `--- ${parley.server.name} pid ${parley.server.pid} (${state}), last output:\n${parley.server.output().split("\n").slice(-30).join("\n")}`
      )
    }
    throw error
  } finally {
    await cleanup.run()
  }
}
