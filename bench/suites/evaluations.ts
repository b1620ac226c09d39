/**
 * `npm run bench -- evaluations`: evaluations (issue 41 item 6; DECISIONS.md
 * A16) against an OpenAI-compatible test server that answers at once
 * (`bench/lib/openaiTestServer.ts`), one Parley process (`AI_PROVIDER=openai`),
 * a dedicated database.
 *
 * Setup: BENCH_EVAL_TURNS (1,000) sessions of an AI agent, each with one
 * user message and one recorded reply run; a branch whose draft changes the
 * llm node's instructions (so every candidate answer differs).
 *
 * 1. Alone, BENCH_EVAL_ROUNDS (3) times: an evaluation of all those turns
 *    (main against the draft): seconds from its `created_at` to its
 *    `completed_at` (the server's clock) and the server's CPU per turn and
 *    side (CPU time of the Parley process while it ran / (turns x 2)).
 *    Targets: <= 10 s, <= 2 ms.
 * 2. Live replies side by side: BENCH_EVAL_LIVE_RATE (20) new user messages
 *    a second, each followed by POST /reply (debounce 0) in a fresh session,
 *    for BENCH_EVAL_LIVE_SECONDS (10) s; trigger-to-reply latency p50 and p99
 *    (the trigger request's start to the reply message's `created_at`, one
 *    machine's clock), without an evaluation and with evaluations running
 *    back to back the whole time, alternated over BENCH_EVAL_LIVE_ROUNDS (5)
 *    rounds each; p50 and p99 of all rounds' samples pooled (a round's own
 *    p99 is its second-slowest of 200 replies, too few to compare; the
 *    median of the rounds' p99s is printed beside). Target: no more than 10%
 *    slower. Also printed: the slowest 1% of each side, and how many of the
 *    slow replies beside evaluations overlap an evaluation's creation (the
 *    POST) or completion (the 100 ms before `completed_at`).
 *
 * Prints a table and writes bench/results/evaluations-<timestamp>.{json,md}.
 * BENCH_DATABASE_URL as in the messages benchmark.
 */
import * as path from "node:path"
import { makeCleanup } from "../lib/cleanup.ts"
import { runStatement, startDatabase } from "../lib/database.ts"
import { envInt } from "../lib/env.ts"
import { startOpenAiTestServer } from "../lib/openaiTestServer.ts"
import { aiAgent, startParley } from "../lib/parley.ts"
import { cpuSeconds } from "../lib/proc.ts"
import { rootDirectory, sleep } from "../lib/process.ts"
import { environment, writeResults } from "../lib/results.ts"
import { median, percentile, pool } from "../lib/stats.ts"
import { type Column, fixed, formatTable, markdownTable } from "../lib/table.ts"

const log = (line: string) => process.stdout.write(`${line}\n`)

const C = "/conversations/v2/api/v1"

export const run = async (_args: ReadonlyArray<string>) => {
  const turns = envInt("BENCH_EVAL_TURNS", 1_000)
  const rounds = envInt("BENCH_EVAL_ROUNDS", 3)
  const liveRate = envInt("BENCH_EVAL_LIVE_RATE", 20)
  const liveSeconds = envInt("BENCH_EVAL_LIVE_SECONDS", 10)
  const liveRounds = envInt("BENCH_EVAL_LIVE_ROUNDS", 5)
  const startedAt = new Date()
  const cleanup = makeCleanup()
  try {
    const database = await startDatabase("parley_bench_evaluations")
    cleanup.add("database", database.close)
    const model = await startOpenAiTestServer()
    cleanup.add("model", model.close)
    log(
      `evaluations: ${turns} recorded turns, OpenAI-compatible test server; database ${database.name} (${database.kind}, PostgreSQL ${database.serverVersion})`
    )
    const parley = await startParley(database.url, cleanup, {
      AI_PROVIDER: "openai",
      OPENAI_BASE_URL: model.baseUrl,
      OPENAI_API_KEY: "test",
      AI_MODEL: "test"
    })
    const api = parley.api
    const { assistantId, agentId } = await aiAgent(parley, "Answer briefly.")
    const A = `/assistants/api/v2/assistants/${assistantId}`
    await api(201, "POST", `${A}/branches`, { name: "candidate" })
    await api(200, "PATCH", `${A}/branches/candidate/draft`, {
      nodes: {
        upsert: [{ id: "start", name: "Start", type: "llm", config: { instructions: "Answer in one word." } }]
      }
    })
    let contacts = 0
    /** A new session with one user message; its id. */
    const newSession = async () => {
      const n = contacts++
      const session = await api(201, "POST", `${C}/sessions`, {
        contact_id: `+1555${String(n).padStart(7, "0")}`,
        contact_name: "Bench",
        agent_id: agentId
      })
      await api(201, "POST", `${C}/sessions/${session.id}/messages`, {
        role: "user",
        content: { type: "text", text: `Question number ${n}` }
      })
      return session.id as string
    }
    const repliesSql = `SELECT count(*)::int AS n FROM messages WHERE organization_id = '${parley.organizationId}' AND role = 'assistant'`
    const replies = async () => (await runStatement<{ n: number }>(database.url, repliesSql))[0]!.n
    const waitForReplies = async (n: number) => {
      const deadline = Date.now() + 300_000
      while ((await replies()) < n) {
        if (Date.now() > deadline) throw new Error(`Only ${await replies()}/${n} replies within 300 s`)
        await sleep(50)
      }
    }

    // The recorded conversations.
    const recorded = await pool(
      Array.from({ length: turns }, (_, i) => i),
      50,
      async () => {
        const id = await newSession()
        await api(200, "POST", `${C}/sessions/${id}/reply`, { debounce_time: 0 })
        return id
      }
    )
    await waitForReplies(recorded.length)
    // Statistics of the recorded tables, as autovacuum gathers them on a production server after 1,000
    // inserts: a server with autovacuum = off (this machine's CI PostgreSQL) has none, and the creation's
    // INSERT ... SELECT then plans nested loops over runs and sessions (360 ms instead of 13 ms in the
    // first 27-round run: a third of the slowest live replies overlapped a creation).
    await runStatement(database.url, "ANALYZE")
    await runStatement(database.url, "CHECKPOINT")
    log(`recorded ${recorded.length} turns`)

    const evaluationBody = {
      baseline: { branch_name: "main" },
      candidate: { branch_name: "candidate", draft: true },
      sessions: { limit: Math.min(turns, 1_000) }
    }
    /** Runs one evaluation to completion; its server-side seconds and the process's CPU seconds meanwhile. */
    /** When evaluations were created (bench clock, request start to end) and completed (server clock). */
    const phases: Array<{ kind: "create" | "complete"; from: number; to: number }> = []
    const evaluate = async () => {
      const cpuBefore = cpuSeconds(parley.server.pid) ?? 0
      const createFrom = Date.now()
      const created = await api(202, "POST", `${A}/evaluations`, evaluationBody)
      phases.push({ kind: "create", from: createFrom, to: Date.now() })
      for (;;) {
        const evaluation = await api(200, "GET", `${A}/evaluations/${created.id}`)
        if (evaluation.status === "completed") {
          const at = Date.parse(evaluation.completed_at)
          phases.push({ kind: "complete", from: at - 100, to: at })
          const cpu = (cpuSeconds(parley.server.pid) ?? 0) - cpuBefore
          const seconds = (Date.parse(evaluation.completed_at) - Date.parse(evaluation.created_at)) / 1000
          return {
            seconds,
            cpu,
            turns: evaluation.turns_total as number,
            changed: evaluation.summary.changed as number
          }
        }
        if (evaluation.status !== "queued" && evaluation.status !== "running") {
          throw new Error(`evaluation ${evaluation.status}: ${evaluation.error}`)
        }
        await sleep(100)
      }
    }

    // 1. Alone.
    const alone: Array<{ seconds: number; cpuMsPerTurnSide: number }> = []
    for (let round = 0; round < rounds; round++) {
      const result = await evaluate()
      if (result.changed !== result.turns) throw new Error(`${result.changed}/${result.turns} turns changed`)
      alone.push({ seconds: result.seconds, cpuMsPerTurnSide: (result.cpu * 1000) / (result.turns * 2) })
      log(
        `  alone ${round + 1}: ${result.turns} turns in ${fixed(result.seconds, 2)} s, ${fixed((result.cpu * 1000) / (result.turns * 2), 3)} ms CPU per turn and side`
      )
    }

    // 2. Live replies, without and with evaluations running.
    const liveRound = async (withEvaluations: boolean) => {
      const count = liveRate * liveSeconds
      const sessions = await pool(
        Array.from({ length: count }, () => 0),
        20,
        () => newSession()
      )
      const before = await replies()
      let stop = false
      let evaluated = 0
      const background = withEvaluations
        ? (async () => {
            while (!stop) {
              await evaluate()
              evaluated++
            }
          })()
        : Promise.resolve()
      if (withEvaluations) await sleep(500)
      const triggeredAt = new Map<string, number>()
      const first = Date.now()
      await Promise.all(
        sessions.map(async (id, i) => {
          await sleep(Math.max(0, first + (i * 1000) / liveRate - Date.now()))
          triggeredAt.set(id, Date.now())
          await api(200, "POST", `${C}/sessions/${id}/reply`, { debounce_time: 0 })
        })
      )
      await waitForReplies(before + count)
      stop = true
      await background
      const rows = await runStatement<{ session_id: string; at: number }>(
        database.url,
        `SELECT session_id::text AS session_id, (extract(epoch FROM created_at) * 1000)::float8 AS at FROM messages
         WHERE organization_id = '${parley.organizationId}' AND role = 'assistant'
           AND session_id IN (${sessions.map((id) => `'${id}'`).join(",")})`
      )
      const samples = rows.map((row) => ({
        at: triggeredAt.get(row.session_id)!,
        latency: Math.max(0, row.at - triggeredAt.get(row.session_id)!)
      }))
      const latencies = samples.map((s) => s.latency).sort((a, b) => a - b)
      return { p50: percentile(latencies, 50), p99: percentile(latencies, 99), evaluated, latencies, samples }
    }
    const without: Array<{ p50: number; p99: number; latencies: ReadonlyArray<number> }> = []
    const withEvaluations: Array<{
      p50: number
      p99: number
      evaluated: number
      latencies: ReadonlyArray<number>
      samples: ReadonlyArray<{ at: number; latency: number }>
    }> = []
    for (let round = 0; round < liveRounds; round++) {
      const plain = await liveRound(false)
      without.push(plain)
      log(`  live ${round + 1} without an evaluation: p50 ${fixed(plain.p50, 1)} ms, p99 ${fixed(plain.p99, 1)} ms`)
      const busy = await liveRound(true)
      withEvaluations.push(busy)
      log(
        `  live ${round + 1} with evaluations (${busy.evaluated} completed): p50 ${fixed(busy.p50, 1)} ms, p99 ${fixed(busy.p99, 1)} ms`
      )
    }

    {
      const all = withEvaluations.flatMap((r) => r.samples).sort((a, b) => b.latency - a.latency)
      const slow = all.slice(0, Math.max(1, Math.ceil(all.length / 100)))
      const near = (kind: string) =>
        slow.filter((s) => phases.some((p) => p.kind === kind && s.at <= p.to + 50 && s.at + s.latency >= p.from - 50))
          .length
      log(
        `  slowest 1% with evaluations (${slow.length}): ${near("create")} overlap an evaluation's creation, ${near("complete")} its completion; latencies ${slow.map((s) => fixed(s.latency, 0)).join(" ")}`
      )
      const plainSlow = without
        .flatMap((r) => r.latencies)
        .sort((a, b) => b - a)
        .slice(0, slow.length)
      log(`  slowest 1% without: ${plainSlow.map((l) => fixed(l, 0)).join(" ")}`)
      const creations = phases
        .filter((p) => p.kind === "create")
        .map((p) => p.to - p.from)
        .sort((a, b) => a - b)
      log(
        `  evaluation creations (${creations.length}), POST to 202 in ms: median ${fixed(percentile(creations, 50), 0)}, max ${fixed(creations.at(-1) ?? 0, 0)}`
      )
    }
    const seconds = median(alone.map((r) => r.seconds))
    const cpuPerTurnSide = median(alone.map((r) => r.cpuMsPerTurnSide))
    // The percentiles of all rounds' samples pooled: a round's p99 is its
    // second-slowest reply of 200 and swings with one hiccup of the machine;
    // the pooled p99 rests on liveRounds x 2 samples.
    const pooled = (results: ReadonlyArray<{ latencies: ReadonlyArray<number> }>) =>
      results.flatMap((r) => r.latencies).sort((a, b) => a - b)
    const p50Without = percentile(pooled(without), 50)
    const p99Without = percentile(pooled(without), 99)
    const p50With = percentile(pooled(withEvaluations), 50)
    const p99With = percentile(pooled(withEvaluations), 99)
    const roundMedians = {
      without: { p50: median(without.map((r) => r.p50)), p99: median(without.map((r) => r.p99)) },
      with: { p50: median(withEvaluations.map((r) => r.p50)), p99: median(withEvaluations.map((r) => r.p99)) }
    }
    const columns: ReadonlyArray<Column> = [
      { header: "measure", align: "left" },
      { header: "value" },
      { header: "target" }
    ]
    const rows = [
      [`evaluation of ${turns} turns, s (median of ${rounds})`, fixed(seconds, 2), "<= 10"],
      ["server CPU ms per turn and side", fixed(cpuPerTurnSide, 3), "<= 2"],
      [
        `live replies p50 ms without / with evaluations (${liveRate}/s, ${liveRounds} rounds pooled)`,
        `${fixed(p50Without, 1)} / ${fixed(p50With, 1)}`,
        ""
      ],
      ["live replies p50 ratio", fixed(p50With / p50Without, 2), "<= 1.10"],
      ["live replies p99 ms without / with evaluations", `${fixed(p99Without, 1)} / ${fixed(p99With, 1)}`, ""],
      ["live replies p99 ratio", fixed(p99With / p99Without, 2), "<= 1.10"],
      [
        "live replies p99 ratio, median of per-round p99s",
        fixed(roundMedians.with.p99 / roundMedians.without.p99, 2),
        ""
      ],
      ["model calls answered by the test server", model.calls(), ""]
    ]
    log("")
    log(formatTable(columns, rows))
    const env = environment()
    const json = {
      benchmark: "evaluations",
      startedAt: startedAt.toISOString(),
      environment: { ...env, database: { kind: database.kind, version: database.serverVersion } },
      options: { turns, rounds, liveRate, liveSeconds, liveRounds },
      alone,
      live: {
        without: without.map(({ latencies: _, ...round }) => round),
        with: withEvaluations.map(({ latencies: _, samples: __, ...round }) => round),
        roundMedians
      },
      seconds,
      cpuMsPerTurnSide: cpuPerTurnSide,
      liveRatio: { p50: p50With / p50Without, p99: p99With / p99Without }
    }
    const markdown = [
      `# evaluations benchmark, ${startedAt.toISOString()}`,
      "",
      `One Parley process on an OpenAI-compatible test server; ${turns} recorded turns, main against a draft with other instructions.`,
      `Node ${env.node}, ${env.cpus} CPU (${env.cpuModel}); PostgreSQL ${database.serverVersion} (${database.kind}); commit ${env.commit ?? "?"}.`,
      "",
      markdownTable(columns, rows)
    ].join("\n")
    const written = writeResults("evaluations", json, markdown, startedAt)
    log(`\nresults: ${path.relative(rootDirectory, written.json)}, ${path.relative(rootDirectory, written.markdown)}`)
  } finally {
    await cleanup.run()
  }
}
