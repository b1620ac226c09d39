/**
 * `npm run bench -- lifecycle`: what letting data go costs (issue 40 item 5).
 * Retention part (D21): one organization with `BENCH_LIFECYCLE_MESSAGES`
 * messages (default 1,000,000, each with an ingest receipt) in 1,000 sessions
 * closed 40 days ago and `message_retention_days` 30; another organization's
 * contacts' POST message (one open session each, as many as connections) at
 * `BENCH_LIFECYCLE_CONNECTIONS` connections (default 50) for
 * `BENCH_LIFECYCLE_SECONDS` (default 20) on an API-role server, first alone,
 * then while a worker-role process (`RETENTION_SWEEP_INTERVAL=1s`) sweeps.
 * Reports the messages and rows (of every table swept) deleted per second,
 * over the whole sweep (from the first to the last seen gone, polled every
 * 200 ms) and during the neighbour's load, and the POST message p99 alone and
 * during the sweep. Goals: >= 20,000 rows/s, p99 within 1.5x.
 *
 * Erasure part (D22): a contact of the neighbour's organization with
 * `BENCH_LIFECYCLE_ERASED_MESSAGES` messages (default 100,000) and as many
 * message.created events in 1,000 sessions of its conversation; DELETE
 * /contacts/{id} while the neighbour's POST message runs again, and the time
 * from the DELETE to `GET /erasures/{id}` answering `completed` (polled every
 * 100 ms), the same worker doing the job. Goals: <= 10 s, p99 within 1.5x of
 * the run alone.
 *
 * Steady part (D21, "sizes stop growing"): a third organization with
 * `message_retention_days` 1 receives `BENCH_LIFECYCLE_STEADY_RATE` messages
 * a second (default 2,000, each with a receipt, in closed sessions of 100
 * messages written by SQL two days old, so they age out as they arrive) for
 * `BENCH_LIFECYCLE_STEADY_CYCLES` cycles (default 4) of
 * `BENCH_LIFECYCLE_STEADY_SECONDS` (default 60), the worker sweeping every
 * second and autovacuum at PostgreSQL's defaults. Reported: the swept tables'
 * sizes with their indexes at the start and after each cycle.
 */
import { makeCleanup } from "../lib/cleanup.ts"
import { runStatement, startDatabase } from "../lib/database.ts"
import { envInt } from "../lib/env.ts"
import { expectJson } from "../lib/http.ts"
import { type LoadResult, runLoad } from "../lib/load.ts"
import { startParley } from "../lib/parley.ts"
import { freePort, rootDirectory, sleep, startServer } from "../lib/process.ts"
import { environment, writeResults } from "../lib/results.ts"
import { type Column, fixed, formatTable, markdownTable } from "../lib/table.ts"

const log = (line: string) => process.stdout.write(`${line}\n`)

/** Runs the benchmark; `args` are ignored. */
export const run = async (_args: ReadonlyArray<string>) => {
  const messages = envInt("BENCH_LIFECYCLE_MESSAGES", 1_000_000)
  const connections = envInt("BENCH_LIFECYCLE_CONNECTIONS", 50)
  const seconds = envInt("BENCH_LIFECYCLE_SECONDS", 20)
  const erasedMessages = envInt("BENCH_LIFECYCLE_ERASED_MESSAGES", 100_000)
  const steadyRate = envInt("BENCH_LIFECYCLE_STEADY_RATE", 2_000)
  const steadyCyclesCount = envInt("BENCH_LIFECYCLE_STEADY_CYCLES", 4)
  const steadySeconds = envInt("BENCH_LIFECYCLE_STEADY_SECONDS", 60)
  const cleanup = makeCleanup()
  try {
    const database = await startDatabase("parley_bench_lifecycle")
    cleanup.add("database", database.close)
    log(
      `lifecycle: database ${database.name} (${database.kind}, PostgreSQL ${database.serverVersion}), ${messages} messages to let go`
    )
    // The API server sweeps nothing (PARLEY_ROLE=api); the worker started below does.
    const {
      server: api,
      token,
      admin,
      organizationId
    } = await startParley(database.url, cleanup, { PARLEY_ROLE: "api" })
    const old = await admin(201, "POST", "/organizations", { name: "old" })
    await admin(200, "PATCH", `/organizations/${old.id}/settings`, {
      message_retention_days: 30,
      event_retention_days: null
    })

    const loadStart = performance.now()
    await runStatement(
      database.url,
      `INSERT INTO contacts (organization_id, contact_id, created_at)
       SELECT '${old.id}', 'old-' || i, now() - interval '60 days' FROM generate_series(1, 1000) AS i`
    )
    await runStatement(
      database.url,
      `INSERT INTO conversations (id, organization_id, contact_id, created_at)
       SELECT gen_random_uuid(), '${old.id}', 'old-' || i, now() - interval '60 days' FROM generate_series(1, 1000) AS i`
    )
    await runStatement(
      database.url,
      `INSERT INTO sessions (id, organization_id, conversation_id, contact_id, status, created_at, updated_at)
       SELECT gen_random_uuid(), c.organization_id, c.id, c.contact_id, 'closed', now() - interval '60 days',
         now() - interval '40 days'
       FROM conversations c WHERE c.organization_id = '${old.id}'`
    )
    await runStatement(
      database.url,
      `INSERT INTO messages (id, organization_id, session_id, conversation_id, role, content, created_at)
       SELECT gen_random_uuid(), s.organization_id, s.id, s.conversation_id, 'user',
         '{"type":"text","text":"An old message of the benchmark"}', now() - interval '50 days'
       FROM sessions s CROSS JOIN generate_series(1, ${Math.ceil(messages / 1000)})
       WHERE s.organization_id = '${old.id}'`
    )
    await runStatement(
      database.url,
      `INSERT INTO ingest_receipts (organization_id, conversation_id, provider_message_id, message_id, session_id, created_at)
       SELECT organization_id, conversation_id, id::text, id, session_id, created_at FROM messages
       WHERE organization_id = '${old.id}'`
    )
    await runStatement(database.url, "VACUUM ANALYZE")
    // The load's dirty pages written now, not during the run alone.
    await runStatement(database.url, "CHECKPOINT")
    /**
     * Rows deleted so far from the tables retention sweeps (PostgreSQL's
     * cumulative statistics: no table is read, so polling costs the machine
     * nothing; only the sweeper deletes while it runs), and messages among them.
     */
    const retentionTables = ["messages", "ingest_receipts", "sessions", "conversations", "contacts"]
    const deletedSoFar = async () => {
      const rows = await runStatement<{ relname: string; n: string }>(
        database.url,
        `SELECT relname, n_tup_del::text AS n FROM pg_stat_user_tables
         WHERE relname IN (${retentionTables.map((table) => `'${table}'`).join(", ")})`
      )
      const of = (table: string) => Number(rows.find((row) => row.relname === table)?.n ?? 0)
      return { messages: of("messages"), rows: retentionTables.reduce((sum, table) => sum + of(table), 0) }
    }
    const [counted] = await runStatement<{ messages: number; rows: number }>(
      database.url,
      `SELECT (SELECT count(*) FROM messages WHERE organization_id = '${old.id}')::int AS messages,
         ((SELECT count(*) FROM messages WHERE organization_id = '${old.id}')
          + (SELECT count(*) FROM ingest_receipts WHERE organization_id = '${old.id}')
          + (SELECT count(*) FROM sessions WHERE organization_id = '${old.id}')
          + (SELECT count(*) FROM conversations WHERE organization_id = '${old.id}')
          + (SELECT count(*) FROM contacts WHERE organization_id = '${old.id}'))::int AS rows`
    )
    const deletedAtStart = await deletedSoFar()
    const left = async () => {
      const deleted = await deletedSoFar()
      return {
        messages: loaded.messages - (deleted.messages - deletedAtStart.messages),
        rows: loaded.rows - (deleted.rows - deletedAtStart.rows)
      }
    }
    const loaded = counted!
    const total = loaded.messages
    log(`lifecycle: loaded ${total} messages in ${fixed((performance.now() - loadStart) / 1000, 1)} s`)

    // The neighbour: other contacts of the benchmark's organization POST messages, one open session per
    // connection, each request to the next session in turn.
    const neighbours: Array<string> = []
    for (let i = 0; i < connections; i++) {
      const session = await expectJson(201, "POST", `${api.baseUrl}/conversations/v2/api/v1/sessions`, {
        token,
        body: { contact_id: `neighbour-${i}`, contact_name: `Neighbour ${i}` }
      })
      neighbours.push(`/conversations/v2/api/v1/sessions/${session.id}/messages`)
    }
    let next = 0
    const load = () =>
      runLoad({
        url: `${api.baseUrl}${neighbours[0]}`,
        pathPerRequest: () => neighbours[next++ % neighbours.length]!,
        method: "POST",
        headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
        body: JSON.stringify({ role: "user", content: { type: "text", text: "Still here" } }),
        connections,
        duration: seconds,
        serverPid: api.pid
      })
    const alone = await load()
    log(`lifecycle: POST message alone: ${fixed(alone.requestsPerSecond, 0)}/s, p99 ${alone.p99} ms`)

    // The sweeper: a worker process sweeping every second.
    const workerPort = await freePort()
    const worker = await startServer({
      name: "parley-worker",
      args: ["src/main.ts"],
      port: workerPort,
      env: {
        DATABASE_URL: database.url,
        PORT: String(workerPort),
        HOST: "127.0.0.1",
        PARLEY_ROLE: "worker",
        RETENTION_SWEEP_INTERVAL: "1s",
        LOG_LEVEL: "warn",
        LOG_FORMAT: "json"
      },
      readyPath: "/readyz",
      cwd: rootDirectory
    })
    cleanup.add("parley-worker", () => worker.stop())
    let first: number | undefined
    let last: number | undefined
    let polling = true
    const poll = (async () => {
      while (polling) {
        const now = performance.now()
        const rows = await left()
        if (rows.messages < total && first === undefined) first = now
        if (rows.messages <= 0) {
          last = now
          return
        }
        await sleep(200)
      }
    })()
    const loadStarted = performance.now()
    const beforeLoad = await left()
    const during: LoadResult = await load()
    const afterLoad = await left()
    const loadSeconds = (performance.now() - loadStarted) / 1000
    const messagesInLoad = (beforeLoad.messages - afterLoad.messages) / loadSeconds
    const rowsInLoad = (beforeLoad.rows - afterLoad.rows) / loadSeconds
    log(
      `lifecycle: during the load, retention deleted ${fixed(messagesInLoad, 0)} messages/s, ${fixed(rowsInLoad, 0)} rows/s of every table`
    )
    // Without load, wait for the sweep to end (at most 10 minutes).
    for (let waited = 0; last === undefined && waited < 600_000; waited += 500) await sleep(500)
    polling = false
    await poll
    if (first === undefined || last === undefined) throw new Error("the sweep did not delete every message in time")
    const [gone] = await runStatement<{ n: number }>(
      database.url,
      `SELECT count(*)::int AS n FROM messages WHERE organization_id = '${old.id}'`
    )
    if (gone!.n !== 0) throw new Error(`the statistics counted every message deleted, but ${gone!.n} are left`)
    const sweepSeconds = (last - first) / 1000
    const messagesPerSecond = total / sweepSeconds
    const rowsPerSecond = loaded.rows / sweepSeconds
    log(
      `lifecycle: retention deleted ${total} messages (${loaded.rows} rows) in ${fixed(sweepSeconds, 1)} s (${fixed(messagesPerSecond, 0)} messages/s, ${fixed(rowsPerSecond, 0)} rows/s)`
    )

    // Erasure (D22): a contact of the neighbour's organization with its sessions, messages and events.
    const erasedStart = performance.now()
    await runStatement(
      database.url,
      `WITH ct AS (INSERT INTO contacts (organization_id, contact_id, created_at)
         VALUES ('${organizationId}', 'erased', now()) RETURNING organization_id),
       c AS (INSERT INTO conversations (id, organization_id, contact_id, created_at)
         SELECT gen_random_uuid(), organization_id, 'erased', now() FROM ct RETURNING id, organization_id)
       INSERT INTO sessions (id, organization_id, conversation_id, contact_id, status, created_at, updated_at)
       SELECT gen_random_uuid(), c.organization_id, c.id, 'erased', CASE WHEN i = 1 THEN 'open' ELSE 'closed' END,
         now(), now()
       FROM c CROSS JOIN generate_series(1, 1000) AS i`
    )
    await runStatement(
      database.url,
      `INSERT INTO messages (id, organization_id, session_id, conversation_id, role, content, created_at)
       SELECT gen_random_uuid(), s.organization_id, s.id, s.conversation_id, 'user',
         '{"type":"text","text":"A message of the contact to erase"}', now()
       FROM sessions s CROSS JOIN generate_series(1, ${Math.ceil(erasedMessages / 1000)})
       WHERE s.organization_id = '${organizationId}' AND s.contact_id = 'erased'`
    )
    await runStatement(
      database.url,
      `INSERT INTO events (id, organization_id, type, body, created_at, conversation_id)
       SELECT gen_random_uuid(), m.organization_id, 'message.created',
         '{"type":"message.created","data":{"object":{"id":"' || m.id || '"}}}', m.created_at, m.conversation_id
       FROM messages m JOIN sessions s ON s.id = m.session_id
       WHERE s.organization_id = '${organizationId}' AND s.contact_id = 'erased'`
    )
    await runStatement(database.url, "VACUUM ANALYZE")
    await runStatement(database.url, "CHECKPOINT")
    log(`lifecycle: loaded the contact to erase in ${fixed((performance.now() - erasedStart) / 1000, 1)} s`)
    const base = `${api.baseUrl}/conversations/v2/api/v1`
    let erasureSeconds: number | undefined
    const erase = (async () => {
      await sleep(Math.min(2, seconds / 4) * 1000)
      const started = performance.now()
      const erasure = await expectJson(202, "DELETE", `${base}/contacts/erased`, { token })
      for (let waited = 0; waited < 120_000; waited += 100) {
        const now = await expectJson(200, "GET", `${base}/erasures/${erasure.id}`, { token })
        if (now.status === "completed") {
          erasureSeconds = (performance.now() - started) / 1000
          log(`lifecycle: erasure counts ${JSON.stringify(now.counts)}`)
          return
        }
        await sleep(100)
      }
    })()
    const duringErasure = await load()
    await erase
    if (erasureSeconds === undefined) throw new Error("the erasure did not complete within 120 s")
    log(`lifecycle: erasure of ${erasedMessages} messages completed in ${fixed(erasureSeconds, 2)} s`)

    // Steady load with retention on: messages that age out arrive at a steady rate (written by SQL as
    // closed sessions of two days ago, `message_retention_days` 1), the worker sweeping every second;
    // the swept tables' sizes (with their indexes) after each cycle show whether they stop growing.
    const steady = await admin(201, "POST", "/organizations", { name: "steady" })
    await admin(200, "PATCH", `/organizations/${steady.id}/settings`, {
      message_retention_days: 1,
      event_retention_days: null
    })
    const steadyTables = ["messages", "ingest_receipts", "sessions", "conversations", "contacts"]
    const sizes = async () => {
      const rows = await runStatement<{ relname: string; bytes: string }>(
        database.url,
        `SELECT relname, pg_total_relation_size(relid)::text AS bytes FROM pg_stat_user_tables
         WHERE relname IN (${steadyTables.map((table) => `'${table}'`).join(", ")})`
      )
      return Object.fromEntries(
        steadyTables.map((table) => [table, Number(rows.find((row) => row.relname === table)?.bytes ?? 0)])
      )
    }
    const sessionsPerSecond = Math.max(1, Math.round(steadyRate / 100))
    const steadyCycles: Array<{ cycle: number; written: number; left: number; sizes: Record<string, number> }> = []
    const sizesAtStart = await sizes()
    let written = 0
    for (let cycle = 1; cycle <= steadyCyclesCount; cycle++) {
      const cycleEnd = performance.now() + steadySeconds * 1000
      for (let tick = 0; performance.now() < cycleEnd; tick++) {
        const tickStart = performance.now()
        await runStatement(
          database.url,
          `WITH ct AS (
             INSERT INTO contacts (organization_id, contact_id, created_at)
             SELECT '${steady.id}', 'steady-${cycle}-${tick}-' || i, now() - interval '3 days'
             FROM generate_series(1, ${sessionsPerSecond}) AS i RETURNING contact_id),
           cv AS (
             INSERT INTO conversations (id, organization_id, contact_id, created_at)
             SELECT gen_random_uuid(), '${steady.id}', contact_id, now() - interval '3 days' FROM ct
             RETURNING id, contact_id),
           se AS (
             INSERT INTO sessions (id, organization_id, conversation_id, contact_id, status, created_at, updated_at)
             SELECT gen_random_uuid(), '${steady.id}', id, contact_id, 'closed', now() - interval '3 days',
               now() - interval '2 days' FROM cv RETURNING id, conversation_id),
           me AS (
             INSERT INTO messages (id, organization_id, session_id, conversation_id, role, content, created_at)
             SELECT gen_random_uuid(), '${steady.id}', se.id, se.conversation_id, 'user',
               '{"type":"text","text":"A message that ages out"}', now() - interval '3 days'
             FROM se CROSS JOIN generate_series(1, 100) RETURNING id, session_id, conversation_id, created_at)
           INSERT INTO ingest_receipts (organization_id, conversation_id, provider_message_id, message_id, session_id,
             created_at)
           SELECT '${steady.id}', conversation_id, id::text, id, session_id, created_at FROM me`
        )
        written += sessionsPerSecond * 100
        await sleep(Math.max(0, 1000 - (performance.now() - tickStart)))
      }
      const [leftRow] = await runStatement<{ n: number }>(
        database.url,
        `SELECT count(*)::int AS n FROM messages WHERE organization_id = '${steady.id}'`
      )
      steadyCycles.push({ cycle, written, left: leftRow!.n, sizes: await sizes() })
      log(
        `lifecycle: steady cycle ${cycle}: ${written} messages written, ${leftRow!.n} left, swept tables ${fixed(
          Object.values(steadyCycles.at(-1)!.sizes).reduce((a, b) => a + b, 0) / 1048576,
          1
        )} MB`
      )
    }

    const columns: ReadonlyArray<Column> = [
      { header: "run", align: "left" },
      { header: "requests/s" },
      { header: "p50 ms" },
      { header: "p99 ms" },
      { header: "p99 ratio" },
      { header: "non-2xx" }
    ]
    /** A row of the table: the run's rate and latencies, and its p99 over p99 alone. */
    const loadRow = (name: string, result: LoadResult) => [
      name,
      fixed(result.requestsPerSecond, 0),
      result.p50,
      result.p99,
      fixed(result.p99 / alone.p99, 2),
      result.non2xx
    ]
    const tableRows = [
      loadRow("POST message alone", alone),
      loadRow("POST message during the sweep", during),
      loadRow("POST message during the erasure", duringErasure)
    ]
    const erasureSummary = `erasure: a contact of ${erasedMessages} messages and as many events in 1,000 sessions in ${fixed(erasureSeconds, 2)} s from the DELETE to completed (goal <= 10 s); POST message p99 ${fixed(duringErasure.p99 / alone.p99, 2)}x (goal <= 1.5x)`
    const summary = `retention: ${total} messages with their receipts, sessions, conversations and contacts (${loaded.rows} rows) in ${fixed(sweepSeconds, 1)} s = ${fixed(messagesPerSecond, 0)} messages/s, ${fixed(rowsPerSecond, 0)} rows/s; during the neighbour's load ${fixed(messagesInLoad, 0)} messages/s, ${fixed(rowsInLoad, 0)} rows/s (goal >= 20,000 rows/s); POST message p99 ${fixed(during.p99 / alone.p99, 2)}x (goal <= 1.5x), ${connections} connections, ${seconds} s each`
    const mb = (bytes: number) => fixed(bytes / 1048576, 1)
    const sizeColumns: ReadonlyArray<Column> = [
      { header: "after", align: "left" },
      { header: "messages written" },
      { header: "left" },
      ...steadyTables.map((table) => ({ header: `${table} MB` })),
      { header: "total MB" }
    ]
    const sizeRows = [
      [
        "start",
        0,
        0,
        ...steadyTables.map((table) => mb(sizesAtStart[table]!)),
        mb(Object.values(sizesAtStart).reduce((a, b) => a + b, 0))
      ],
      ...steadyCycles.map((row) => [
        `cycle ${row.cycle} (${row.cycle * steadySeconds} s)`,
        row.written,
        row.left,
        ...steadyTables.map((table) => mb(row.sizes[table]!)),
        mb(Object.values(row.sizes).reduce((a, b) => a + b, 0))
      ])
    ]
    const steadySummary = `steady: ${steadyRate} messages/s (with receipts, in sessions of 100) aging out as they arrive, the worker sweeping every second, ${steadyCyclesCount} cycles of ${steadySeconds} s; the swept tables' sizes with their indexes after each cycle`
    log(formatTable(columns, tableRows))
    log(summary)
    log(erasureSummary)
    log(formatTable(sizeColumns, sizeRows))
    log(steadySummary)
    const files = writeResults(
      "lifecycle",
      {
        environment: environment(),
        messages: total,
        connections,
        seconds,
        sweepSeconds,
        rows: loaded.rows,
        messagesPerSecond,
        rowsPerSecond,
        messagesInLoad,
        rowsInLoad,
        alone,
        during,
        erasedMessages,
        erasureSeconds,
        duringErasure,
        steadyRate,
        steadySeconds,
        sizesAtStart,
        steadyCycles
      },
      `# lifecycle\n\n${summary}\n\n${erasureSummary}\n\n${markdownTable(columns, tableRows)}\n\n${steadySummary}\n\n${markdownTable(sizeColumns, sizeRows)}\n`
    )
    log(`lifecycle: results in ${files.markdown}`)
  } finally {
    await cleanup.run()
  }
}
