/**
 * `npm run bench -- lifecycle`: what letting data go costs (issue 40 item 5).
 * Retention part (D21): one organization with `BENCH_LIFECYCLE_MESSAGES`
 * messages (default 1,000,000, each with an ingest receipt) in 1,000 sessions
 * closed 40 days ago and `message_retention_days` 30; another organization's
 * POST message at `BENCH_LIFECYCLE_CONNECTIONS` connections (default 50) for
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
    /** The old organization's rows left: messages, and every table retention deletes from (its events: none). */
    const left = async () => {
      const [row] = await runStatement<{ messages: number; rows: number }>(
        database.url,
        `SELECT (SELECT count(*) FROM messages WHERE organization_id = '${old.id}')::int AS messages,
           ((SELECT count(*) FROM messages WHERE organization_id = '${old.id}')
            + (SELECT count(*) FROM ingest_receipts WHERE organization_id = '${old.id}')
            + (SELECT count(*) FROM sessions WHERE organization_id = '${old.id}')
            + (SELECT count(*) FROM conversations WHERE organization_id = '${old.id}')
            + (SELECT count(*) FROM contacts WHERE organization_id = '${old.id}'))::int AS rows`
      )
      return row!
    }
    const loaded = await left()
    const total = loaded.messages
    log(`lifecycle: loaded ${total} messages in ${fixed((performance.now() - loadStart) / 1000, 1)} s`)

    // The neighbour: POST message into an open session of the benchmark's organization.
    const session = await expectJson(201, "POST", `${api.baseUrl}/conversations/v2/api/v1/sessions`, {
      token,
      body: { contact_id: "neighbour", contact_name: "Neighbour" }
    })
    const load = () =>
      runLoad({
        url: `${api.baseUrl}/conversations/v2/api/v1/sessions/${session.id}/messages`,
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
        if (rows.messages === 0) {
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

    const columns: ReadonlyArray<Column> = [
      { header: "run", align: "left" },
      { header: "requests/s" },
      { header: "p50 ms" },
      { header: "p99 ms" },
      { header: "p99 ratio" },
      { header: "non-2xx" }
    ]
    const tableRows = [
      ["POST message alone", fixed(alone.requestsPerSecond, 0), alone.p50, alone.p99, "1.00", alone.non2xx],
      [
        "POST message during the sweep",
        fixed(during.requestsPerSecond, 0),
        during.p50,
        during.p99,
        fixed(during.p99 / alone.p99, 2),
        during.non2xx
      ],
      [
        "POST message during the erasure",
        fixed(duringErasure.requestsPerSecond, 0),
        duringErasure.p50,
        duringErasure.p99,
        fixed(duringErasure.p99 / alone.p99, 2),
        duringErasure.non2xx
      ]
    ]
    const erasureSummary = `erasure: a contact of ${erasedMessages} messages and as many events in 1,000 sessions in ${fixed(erasureSeconds, 2)} s from the DELETE to completed (goal <= 10 s); POST message p99 ${fixed(duringErasure.p99 / alone.p99, 2)}x (goal <= 1.5x)`
    const summary = `retention: ${total} messages with their receipts, sessions, conversations and contacts (${loaded.rows} rows) in ${fixed(sweepSeconds, 1)} s = ${fixed(messagesPerSecond, 0)} messages/s, ${fixed(rowsPerSecond, 0)} rows/s; during the neighbour's load ${fixed(messagesInLoad, 0)} messages/s, ${fixed(rowsInLoad, 0)} rows/s (goal >= 20,000 rows/s); POST message p99 ${fixed(during.p99 / alone.p99, 2)}x (goal <= 1.5x), ${connections} connections, ${seconds} s each`
    log(formatTable(columns, tableRows))
    log(summary)
    log(erasureSummary)
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
        duringErasure
      },
      `# lifecycle\n\n${summary}\n\n${erasureSummary}\n\n${markdownTable(columns, tableRows)}\n`
    )
    log(`lifecycle: results in ${files.markdown}`)
  } finally {
    await cleanup.run()
  }
}
