/**
 * `npm run bench -- replies`: AI replies end to end (issue 5; DECISIONS.md R1,
 * R2) on the echo model (R3), one Parley process, a dedicated database.
 *
 * BENCH_REPLY_SESSIONS (1,000) sessions of an AI agent, each with one user
 * message; then every session gets POST /reply with `debounce_time: 0`, sent
 * at BENCH_REPLY_CONNECTIONS (50) concurrent requests. Measured: replies/s
 * from the first trigger to the last reply message committed, and
 * trigger-to-message latency (the trigger request's start to the reply
 * message's `created_at`, one machine's clock) p50/p99. Each reply is a full
 * run: job claim, snapshot read, history read, model call, the reply and its
 * message.created event, the run record, in one transaction.
 *
 * Prints a table and writes bench/results/replies-<timestamp>.{json,md};
 * `--cpu-prof` adds the server's CPU profile.
 * BENCH_DATABASE_URL as in the messages benchmark.
 */
import * as fs from "node:fs"
import * as path from "node:path"
import { makeCleanup } from "../lib/cleanup.ts"
import { analyzeProfile, findProfile, formatProfile, type ProfileSummary } from "../lib/cpuprofile.ts"
import { runStatement, startDatabase } from "../lib/database.ts"
import { envInt } from "../lib/env.ts"
import { aiAgent, startParley } from "../lib/parley.ts"
import { cpuSeconds } from "../lib/proc.ts"
import { rootDirectory, sleep } from "../lib/process.ts"
import { environment, resultsDirectory, writeResults } from "../lib/results.ts"
import { percentile, pool } from "../lib/stats.ts"
import { type Column, fixed, formatTable, markdownTable } from "../lib/table.ts"

const log = (line: string) => process.stdout.write(`${line}\n`)

export const run = async (args: ReadonlyArray<string>) => {
  const cpuProf = args.includes("--cpu-prof")
  const profileDirectory = path.join(resultsDirectory, "profiles")
  if (cpuProf) fs.mkdirSync(profileDirectory, { recursive: true })
  const sessions = envInt("BENCH_REPLY_SESSIONS", 1_000)
  const connections = envInt("BENCH_REPLY_CONNECTIONS", 50)
  const startedAt = new Date()
  const cleanup = makeCleanup()
  try {
    const database = await startDatabase("parley_bench_replies")
    cleanup.add("database", database.close)
    log(
      `replies: ${sessions} sessions, debounce 0, ${connections} connections, echo model; database ${database.name} (${database.kind}, PostgreSQL ${database.serverVersion})`
    )
    const parley = await startParley(
      database.url,
      cleanup,
      { AI_PROVIDER: "echo" },
      cpuProf ? ["--cpu-prof", `--cpu-prof-dir=${profileDirectory}`] : []
    )
    const api = parley.api
    const agent = { id: (await aiAgent(parley, "Answer briefly.")).agentId }
    const C = "/conversations/v2/api/v1"
    const ids = await pool(
      Array.from({ length: sessions }, (_, i) => i),
      connections,
      async (i) => {
        const session = await api(201, "POST", `${C}/sessions`, {
          contact_id: `+1555${String(i).padStart(7, "0")}`,
          contact_name: "Bench",
          agent_id: agent.id
        })
        await api(201, "POST", `${C}/sessions/${session.id}/messages`, {
          role: "user",
          content: { type: "text", text: `Question number ${i}` }
        })
        return session.id as string
      }
    )
    await sleep(500)

    const triggeredAt = new Map<string, number>()
    const cpuBefore = cpuSeconds(parley.server.pid) ?? 0
    const first = Date.now()
    await pool(ids, connections, async (id) => {
      triggeredAt.set(id, Date.now())
      await api(200, "POST", `${C}/sessions/${id}/reply`, { debounce_time: 0 })
    })
    const triggersDone = Date.now()
    const countSql = `SELECT count(*)::int AS n FROM messages WHERE organization_id = '${parley.organizationId}' AND role = 'assistant'`
    const deadline = Date.now() + 300_000
    for (;;) {
      const [row] = await runStatement<{ n: number }>(database.url, countSql)
      if (row!.n >= sessions) break
      if (Date.now() > deadline) throw new Error(`Only ${row!.n}/${sessions} replies within 300 s`)
      await sleep(20)
    }
    const cpu = (cpuSeconds(parley.server.pid) ?? 0) - cpuBefore
    const replies = await runStatement<{ session_id: string; at: number; n: number }>(
      database.url,
      `SELECT session_id, (extract(epoch FROM max(created_at)) * 1000)::float8 AS at, count(*)::int AS n FROM messages
       WHERE organization_id = '${parley.organizationId}' AND role = 'assistant' GROUP BY session_id`
    )
    const [runs] = await runStatement<{ n: number; failed: number }>(
      database.url,
      `SELECT count(*)::int AS n, count(*) FILTER (WHERE status <> 'succeeded')::int AS failed FROM runs
       WHERE organization_id = '${parley.organizationId}'`
    )
    const last = Math.max(...replies.map((r) => r.at))
    const seconds = (last - first) / 1000
    const repliesPerSecond = sessions / seconds
    const latencies = replies.map((r) => Math.max(0, r.at - triggeredAt.get(r.session_id)!)).sort((a, b) => a - b)
    const p50 = percentile(latencies, 50)
    const p99 = percentile(latencies, 99)
    const duplicates = replies.filter((r) => r.n !== 1).length
    const triggerSeconds = (triggersDone - first) / 1000
    let profile: ProfileSummary | undefined
    if (cpuProf) {
      await parley.server.stop()
      const file = findProfile(profileDirectory, parley.server.pid)
      profile = file === undefined ? undefined : analyzeProfile(file, 25)
    }

    const columns: ReadonlyArray<Column> = [{ header: "measure", align: "left" }, { header: "value" }]
    const rows = [
      [`replies/s (${sessions} sessions, first trigger to last reply)`, fixed(repliesPerSecond, 0)],
      ["trigger-to-message p50 ms", fixed(p50, 1)],
      ["trigger-to-message p99 ms", fixed(p99, 1)],
      ["trigger-to-message max ms", fixed(latencies[latencies.length - 1], 1)],
      ["triggers/s (POST /reply)", fixed(sessions / triggerSeconds, 0)],
      ["server CPU ms/reply", fixed((cpu * 1000) / sessions, 2)],
      ["runs recorded / failed", `${runs!.n} / ${runs!.failed}`],
      ["sessions with != 1 reply", duplicates]
    ]
    log("")
    log(formatTable(columns, rows))
    if (profile !== undefined) log(`\nParley ${formatProfile(profile)}`)
    const env = environment()
    const json = {
      benchmark: "replies",
      startedAt: startedAt.toISOString(),
      environment: { ...env, database: { kind: database.kind, version: database.serverVersion } },
      options: { sessions, connections, debounce: 0, model: "echo" },
      repliesPerSecond,
      latency: { p50, p99, max: latencies[latencies.length - 1] },
      triggersPerSecond: sessions / triggerSeconds,
      serverCpuMsPerReply: (cpu * 1000) / sessions,
      runs: runs!.n,
      failedRuns: runs!.failed,
      sessionsWithoutExactlyOneReply: duplicates
    }
    const markdown = [
      `# replies benchmark, ${startedAt.toISOString()}`,
      "",
      `One Parley process, echo model; ${sessions} sessions each triggering a reply with debounce 0 over ${connections} connections.`,
      `Node ${env.node}, ${env.cpus} CPU (${env.cpuModel}); PostgreSQL ${database.serverVersion} (${database.kind}); commit ${env.commit ?? "?"}.`,
      "",
      markdownTable(columns, rows),
      ...(profile !== undefined ? ["", "## Parley CPU profile", "", "```", formatProfile(profile), "```"] : [])
    ].join("\n")
    const written = writeResults("replies", json, markdown, startedAt)
    log(`\nresults: ${path.relative(rootDirectory, written.json)}, ${path.relative(rootDirectory, written.markdown)}`)
  } finally {
    await cleanup.run()
  }
}
