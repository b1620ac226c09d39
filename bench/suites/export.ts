/**
 * `npm run bench -- export`: bulk export at volume (issue 7 item 5). One
 * organization with `BENCH_EXPORT_ROWS` messages (default 1,000,000) over 1,000
 * sessions; a walk of every page of GET /data/messages at limit 3000, page after
 * page as a client syncing a warehouse would; and, in the same run, the same rows
 * rendered by the same SQL through `psql -c "\copy (...) to /dev/null"` as the
 * floor. Reports rows/s, the ratio to the floor, page latency p50/p99 and the
 * server's RSS over the walk, and the plan of a page (EXPLAIN ANALYZE).
 * Goals: >= 0.6x the floor, RSS growth under 50 MB.
 */
import { execFileSync } from "node:child_process"
import { messageJson } from "../../src/Database/Json.ts"
import { makeCleanup } from "../lib/cleanup.ts"
import { runStatement, startDatabase } from "../lib/database.ts"
import { envInt } from "../lib/env.ts"
import { expectJson } from "../lib/http.ts"
import { startParley } from "../lib/parley.ts"
import { rssBytes, sampleRss } from "../lib/proc.ts"
import { environment, writeResults } from "../lib/results.ts"
import { type Column, fixed, formatTable, markdownTable } from "../lib/table.ts"

const log = (line: string) => process.stdout.write(`${line}\n`)

const percentile = (values: ReadonlyArray<number>, p: number) => {
  const sorted = [...values].sort((a, b) => a - b)
  return sorted[Math.min(sorted.length - 1, Math.floor((sorted.length * p) / 100))]!
}

/** Runs the benchmark; `args` are ignored. */
export const run = async (_args: ReadonlyArray<string>) => {
  const rows = envInt("BENCH_EXPORT_ROWS", 1_000_000)
  const cleanup = makeCleanup()
  try {
    const database = await startDatabase("parley_bench_export")
    cleanup.add("database", database.close)
    log(`export: database ${database.name} (${database.kind}, PostgreSQL ${database.serverVersion}), ${rows} messages`)
    const { server: parley, organizationId, token } = await startParley(database.url, cleanup)
    const session = await expectJson(201, "POST", `${parley.baseUrl}/conversations/v2/api/v1/sessions`, {
      token,
      body: { contact_id: "bench", contact_name: "Bench" }
    })

    const loadStart = performance.now()
    // 1,000 sessions of one conversation, then the messages spread over them, in time order.
    await runStatement(
      database.url,
      `INSERT INTO sessions (id, organization_id, conversation_id, contact_id, status, metadata, created_at)
       SELECT gen_random_uuid(), '${organizationId}', '${session.conversation_id}', 'bench-' || i, 'open', '{}',
         now() - interval '1 day' + i * interval '1 millisecond'
       FROM generate_series(1, 1000) AS i`
    )
    await runStatement(
      database.url,
      `INSERT INTO messages (id, organization_id, session_id, conversation_id, role, content, delivery_status, metadata, created_at)
       SELECT gen_random_uuid(), '${organizationId}', s.id, s.conversation_id,
         CASE WHEN i % 2 = 0 THEN 'user' ELSE 'assistant' END,
         jsonb_build_object('type', 'text', 'text', 'Message number ' || i || ' of the benchmark conversation'),
         'pending', '{}', now() - interval '20 hours' + i * interval '10 microseconds'
       FROM generate_series(1, ${rows}) AS i
       CROSS JOIN (SELECT array_agg(id ORDER BY created_at) AS ids FROM sessions
         WHERE organization_id = '${organizationId}' AND contact_id LIKE 'bench-%') all_sessions
       JOIN sessions s ON s.id = all_sessions.ids[i % 1000 + 1]`
    )
    await runStatement(database.url, "VACUUM ANALYZE messages")
    await runStatement(database.url, "VACUUM ANALYZE sessions")
    log(`loaded ${rows} messages in ${((performance.now() - loadStart) / 1000).toFixed(1)} s`)

    // The walk, as a client would do it.
    const rssStart = rssBytes(parley.pid) ?? 0
    const rss = sampleRss(parley.pid, 100)
    const latencies: Array<number> = []
    let count = 0
    let after: string | undefined
    let middleCursor: string | undefined
    const walkStart = performance.now()
    for (;;) {
      const url = `${parley.baseUrl}/conversations/v2/api/v1/data/messages?limit=3000${after ? `&after_id=${after}` : ""}`
      const start = performance.now()
      const response = await fetch(url, { headers: { authorization: `Bearer ${token}` } })
      const body = await response.text()
      latencies.push(performance.now() - start)
      if (response.status !== 200) throw new Error(`page responded ${response.status}: ${body.slice(0, 300)}`)
      if (body === "[]") break
      // The last id without parsing the whole page (a client would parse it; the server is what is measured).
      const lastId = body.slice(body.lastIndexOf('{"id":"') + 7, body.lastIndexOf('{"id":"') + 43)
      count += (body.match(/\{"id":"/g) ?? []).length
      after = lastId
      if (count >= rows / 2 && middleCursor === undefined) middleCursor = lastId
    }
    const walkSeconds = (performance.now() - walkStart) / 1000
    const rssMax = rss.stop() ?? rssStart
    if (count !== rows) throw new Error(`the walk returned ${count} messages, expected ${rows}`)

    // The floor: the same rows and JSON through psql's \copy, in the same run.
    const floorSql = `SELECT ${messageJson("m").replace(/\s+/g, " ")}::text FROM messages m WHERE m.organization_id = '${organizationId}' ORDER BY m.created_at, m.id`
    const floorStart = performance.now()
    execFileSync("psql", [database.url, "-X", "-q", "-c", `\\copy (${floorSql}) to '/dev/null'`], { stdio: "inherit" })
    const floorSeconds = (performance.now() - floorStart) / 1000

    // The plan of a page in the middle of the walk.
    const [cursor] = await runStatement<{ key: string }>(
      database.url,
      `SELECT created_at::text AS key FROM messages WHERE id = '${middleCursor}'`
    )
    const plan = await runStatement<{ "QUERY PLAN": string }>(
      database.url,
      `EXPLAIN (ANALYZE, BUFFERS, COSTS OFF) SELECT ${messageJson("m").replace(/\s+/g, " ")}::text FROM messages m
       WHERE m.organization_id = '${organizationId}' AND (m.created_at, m.id) > ('${cursor?.key}'::timestamptz, '${middleCursor}'::uuid)
       ORDER BY m.created_at, m.id LIMIT 3000`
    )
    const planText = plan.map((row) => row["QUERY PLAN"]).join("\n")

    const rowsPerSecond = count / walkSeconds
    const floorRowsPerSecond = rows / floorSeconds
    const columns: ReadonlyArray<Column> = [
      { header: "walk", align: "left" },
      { header: "rows" },
      { header: "seconds" },
      { header: "rows/s" },
      { header: "ratio to floor" },
      { header: "page p50 ms" },
      { header: "page p99 ms" },
      { header: "RSS start MB" },
      { header: "RSS max MB" },
      { header: "RSS growth MB" }
    ]
    const mb = (bytes: number) => bytes / 1024 / 1024
    const tableRows = [
      [
        "Parley GET /data/messages, limit 3000",
        count,
        fixed(walkSeconds, 1),
        fixed(rowsPerSecond, 0),
        fixed(rowsPerSecond / floorRowsPerSecond, 2),
        fixed(percentile(latencies, 50), 1),
        fixed(percentile(latencies, 99), 1),
        fixed(mb(rssStart), 0),
        fixed(mb(rssMax), 0),
        fixed(mb(rssMax - rssStart), 0)
      ],
      [
        "psql \\copy (floor)",
        rows,
        fixed(floorSeconds, 1),
        fixed(floorRowsPerSecond, 0),
        "1.00",
        "-",
        "-",
        "-",
        "-",
        "-"
      ]
    ]
    log(`\n${formatTable(columns, tableRows)}\n\nplan of a page in the middle:\n${planText}`)
    const markdown = [
      `# export benchmark, ${new Date().toISOString()}`,
      "",
      `${rows} messages of one organization; PostgreSQL ${database.serverVersion} (${database.kind}).`,
      "",
      markdownTable(columns, tableRows),
      "",
      "Plan of a page in the middle of the walk:",
      "",
      "```",
      planText,
      "```",
      ""
    ].join("\n")
    const written = writeResults(
      "export",
      {
        environment: environment(),
        rows,
        walkSeconds,
        floorSeconds,
        latencies,
        rssStart,
        rssMax: rssMax,
        plan: planText
      },
      markdown
    )
    log(`\nresults: ${written.json}, ${written.markdown}`)
  } finally {
    await cleanup.run()
  }
}
