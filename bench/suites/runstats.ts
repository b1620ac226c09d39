/**
 * `npm run bench -- runstats`: run statistics (issue 17 item 3; DECISIONS.md
 * A14) over BENCH_RUNS (1,000,000) runs of one assistant, all started within
 * the last 24 hours so the default range covers every one of them, spread
 * over two commits (`main` 90%, a rolled-out branch 10%), beside
 * BENCH_OTHER_RUNS (200,000) runs of another assistant in the same table.
 * Each query is a GET /assistants/{id}/runs/stats to a Parley process, run
 * BENCH_REPEAT (10) times after one warm-up; median and maximum reported.
 * Goal: <= 200 ms for the default range (every run). The runs are inserted
 * by one statement (the triggers of `runs` fill `run_rollups`), then both
 * tables are vacuumed and analyzed, as autovacuum would.
 */
import { makeCleanup } from "../lib/cleanup.ts"
import { runStatement, startDatabase } from "../lib/database.ts"
import { envInt } from "../lib/env.ts"
import { expectJson } from "../lib/http.ts"
import { startParley } from "../lib/parley.ts"
import { environment, writeResults } from "../lib/results.ts"
import { median } from "../lib/stats.ts"
import { type Column, fixed, formatTable, markdownTable } from "../lib/table.ts"

const log = (line: string) => process.stdout.write(`${line}\n`)

/**
 * Inserts `n` runs of `assistantId` over the sessions of `organizationId`,
 * started in the last 23 hours: the share `featureShare` on `featureCommit`
 * (branch `feature`), the rest on `mainCommit` (`main`); durations 200-5,200
 * ms, one in ten failed, tokens as a model reports them.
 */
const insertRuns = (
  url: string,
  organizationId: string,
  sessionIds: ReadonlyArray<string>,
  assistantId: string,
  n: number,
  commits: { readonly main: string; readonly feature: string; readonly featureShare: number }
) =>
  runStatement(
    url,
    `INSERT INTO runs (id, organization_id, session_id, trigger, assistant_id, commit_id, branch_name, nodes, model,
       input_tokens, output_tokens, status, started_at, finished_at, duration_ms)
     SELECT gen_random_uuid(), '${organizationId}', s.ids[(1 + i % array_length(s.ids, 1))::int], 'reply', '${assistantId}',
       CASE WHEN f THEN '${commits.feature}' ELSE '${commits.main}' END,
       CASE WHEN f THEN 'feature' ELSE 'main' END, '["start"]', 'echo', 300 + i % 700, 20 + i % 180,
       CASE WHEN i % 10 = 0 THEN 'failed' ELSE 'succeeded' END,
       now() - (i % 82800) * interval '1 second', now() - (i % 82800) * interval '1 second', 200 + (i * 7919) % 5000
     FROM generate_series(1::bigint, ${n}) AS i
       CROSS JOIN (SELECT ARRAY[${sessionIds.map((id) => `'${id}'::uuid`).join(", ")}] AS ids) s
       CROSS JOIN LATERAL (SELECT (i * 2654435761 % 1000) < ${Math.round(commits.featureShare * 1000)} AS f) x`
  )

/** Runs the benchmark; `args` are ignored. */
export const run = async (_args: ReadonlyArray<string>) => {
  const runs = envInt("BENCH_RUNS", 1_000_000)
  const otherRuns = envInt("BENCH_OTHER_RUNS", 200_000)
  const repeat = envInt("BENCH_REPEAT", 10)
  const cleanup = makeCleanup()
  try {
    const database = await startDatabase("parley_bench_runstats")
    cleanup.add("database", database.close)
    log(
      `runstats: ${runs} runs of one assistant, ${otherRuns} of another; database ${database.name} (${database.kind}, PostgreSQL ${database.serverVersion})`
    )
    const { server, organizationId, token, admin } = await startParley(database.url, cleanup)
    const assistantsBase = `${server.baseUrl}/assistants/api/v2/assistants`
    const call = (expected: number, method: string, path: string, body?: unknown) =>
      expectJson(expected, method, `${assistantsBase}${path}`, { token, body })

    /** An assistant with `main` and `feature` published; returns its id and both commits. */
    const assistantWithTwoCommits = async (name: string) => {
      const assistant = await admin(201, "POST", `/organizations/${organizationId}/assistants`, {
        name,
        snapshot: {
          graph: { initial_node_id: "start", nodes: [{ id: "start", name: "Start", type: "llm", config: {} }] }
        }
      })
      const main = await call(200, "POST", `/${assistant.id}/branches/main/publish`, { message: "v1" })
      await call(201, "POST", `/${assistant.id}/branches`, { name: "feature" })
      await call(200, "PATCH", `/${assistant.id}/branches/feature/draft/nodes/start`, { name: "Friendlier start" })
      const feature = await call(200, "POST", `/${assistant.id}/branches/feature/publish`, { message: "v2" })
      return { id: assistant.id as string, main: main.commit.id as string, feature: feature.commit.id as string }
    }
    const measured = await assistantWithTwoCommits("measured")
    const other = await assistantWithTwoCommits("other")
    const sessionIds: Array<string> = []
    for (let i = 0; i < 20; i++) {
      const session = await expectJson(201, "POST", `${server.baseUrl}/conversations/v2/api/v1/sessions`, {
        token,
        body: { contact_id: `+1555000${String(i).padStart(4, "0")}`, contact_name: "Bench" }
      })
      sessionIds.push(session.id)
    }

    let start = performance.now()
    await insertRuns(database.url, organizationId, sessionIds, measured.id, runs, { ...measured, featureShare: 0.1 })
    await insertRuns(database.url, organizationId, sessionIds, other.id, otherRuns, { ...other, featureShare: 0.5 })
    await runStatement(database.url, "VACUUM ANALYZE runs, run_rollups")
    log(`  inserted, rolled up and vacuumed in ${fixed((performance.now() - start) / 1000, 1)} s`)

    const queries: ReadonlyArray<{ readonly name: string; readonly path: string; readonly runs: number | undefined }> =
      [
        { name: "default range (last 24 h): every run", path: "", runs },
        {
          name: "last hour",
          path: `?since=${encodeURIComponent(new Date(Date.now() - 3_600_000).toISOString())}`,
          runs: undefined
        }
      ]
    const timings: Record<string, Array<number>> = {}
    for (const query of queries) {
      const path = `/${measured.id}/runs/stats${query.path}`
      const stats = await call(200, "GET", path)
      const counted = stats.commits.reduce((sum: number, entry: { runs: number }) => sum + entry.runs, 0)
      if (query.runs !== undefined && counted !== query.runs) {
        throw new Error(`${query.name}: counted ${counted} runs, expected ${query.runs}`)
      }
      log(`  ${query.name}: ${JSON.stringify(stats.commits.map((c: any) => [c.branch_name, c.runs, c.duration_ms]))}`)
      const times: Array<number> = []
      for (let i = 0; i < repeat; i++) {
        start = performance.now()
        await call(200, "GET", path)
        times.push(performance.now() - start)
      }
      timings[query.name] = times
    }

    const goals: Record<string, number> = { "default range (last 24 h): every run": 200 }
    const columns: ReadonlyArray<Column> = [
      { header: "GET /runs/stats", align: "left" },
      { header: "median ms" },
      { header: "max ms" },
      { header: "goal ms" },
      { header: "met" }
    ]
    const rows = Object.entries(timings).map(([name, values]) => {
      const goal = goals[name]
      return [
        name,
        fixed(median(values), 1),
        fixed(Math.max(...values), 1),
        goal ?? "-",
        goal === undefined ? "" : median(values) <= goal ? "yes" : "NO"
      ]
    })
    log(`\n${formatTable(columns, rows)}`)
    const markdown = [
      `# runstats benchmark, ${new Date().toISOString()}`,
      "",
      `${runs} runs of one assistant (90% on main's commit, 10% on a branch's) started in the last 23 hours, beside ${otherRuns} runs of another assistant; each query is one HTTP request to Parley, ${repeat} times after a warm-up.`,
      `PostgreSQL ${database.serverVersion} (${database.kind}).`,
      "",
      markdownTable(columns, rows),
      ""
    ].join("\n")
    const written = writeResults("runstats", { environment: environment(), runs, otherRuns, repeat, timings }, markdown)
    log(`\nresults: ${written.json}, ${written.markdown}`)
  } finally {
    await cleanup.run()
  }
}
