/**
 * `npm run bench -- encoding`: what it costs to turn one export page of 3,000
 * messages into the response JSON (issue 7 item 3), for the ways one could do it:
 *
 * - `schema`: read raw columns (Dates, jsonb objects), format the Dates, encode
 *   every row with the `Message` schema, `JSON.stringify` the array;
 * - `plain`: read raw columns, format the Dates, `JSON.stringify` without the schema;
 * - `plain, timestamps formatted by PostgreSQL`: the columns in wire order with the
 *   timestamps already ISO 8601 text (microseconds kept), `JSON.stringify` of the rows;
 * - `postgres` (what Parley does): PostgreSQL renders each row with the shared
 *   JSON fragment and joins the page; Node passes one string through.
 *
 * Each variant is measured end to end (query + Node work) over the same 3,000 rows,
 * `BENCH_REPEAT` times (default 30); medians are reported.
 */
import { Effect, ManagedRuntime, Redacted, Schema } from "effect"
import { SqlClient } from "effect/sql"
import * as Database from "../../src/Database/Database.ts"
import { isoTimestamp, messageJson } from "../../src/Database/Json.ts"
import { Message } from "../../src/Domain/Message.ts"
import { makeCleanup } from "../lib/cleanup.ts"
import { runStatement, startDatabase } from "../lib/database.ts"
import { envInt } from "../lib/env.ts"
import { environment, writeResults } from "../lib/results.ts"
import { median } from "../lib/stats.ts"
import { type Column, fixed, formatTable, markdownTable } from "../lib/table.ts"

const log = (line: string) => process.stdout.write(`${line}\n`)

const iso = (date: Date | null) => (date === null ? null : date.toISOString())

/** Runs the benchmark; `args` are ignored. */
export const run = async (_args: ReadonlyArray<string>) => {
  const repeat = envInt("BENCH_REPEAT", 30)
  const cleanup = makeCleanup()
  try {
    const database = await startDatabase("parley_bench_encoding")
    cleanup.add("database", database.close)
    const organization = "01a20254-e46f-73c4-a817-d7a14c37efe6"
    await runStatement(
      database.url,
      `INSERT INTO organizations (id, name, created_at) VALUES ('${organization}', 'b', now())`
    )
    await runStatement(
      database.url,
      `INSERT INTO conversations (id, organization_id, contact_id, created_at)
       VALUES ('01a20254-e46f-73c4-a817-000000000002', '${organization}', 'c', now())`
    )
    await runStatement(
      database.url,
      `INSERT INTO sessions (id, organization_id, conversation_id, contact_id, status, created_at)
       VALUES ('01a20254-e46f-73c4-a817-000000000003', '${organization}', '01a20254-e46f-73c4-a817-000000000002', 'c', 'open', now())`
    )
    await runStatement(
      database.url,
      `INSERT INTO messages (id, organization_id, session_id, conversation_id, role, content, created_at)
       SELECT gen_random_uuid(), '${organization}', '01a20254-e46f-73c4-a817-000000000003',
         '01a20254-e46f-73c4-a817-000000000002', 'user',
         jsonb_build_object('type', 'text', 'text', 'Message number ' || i || ' of the benchmark conversation'),
         now() + i * interval '1 millisecond'
       FROM generate_series(1, 3000) AS i`
    )
    const runtime = ManagedRuntime.make(Database.clientLayer(Redacted.make(database.url), 2))
    cleanup.add("sql", () => runtime.dispose())
    const run = <A>(f: (sql: SqlClient.SqlClient) => Effect.Effect<A, unknown>) =>
      runtime.runPromise(Effect.flatMap(Effect.service(SqlClient.SqlClient), f))
    const encodeMessages = Schema.encodeSync(Schema.Array(Message))
    const raw = (sql: SqlClient.SqlClient) =>
      sql.unsafe<Record<string, any>>(
        `SELECT id::text, session_id::text, conversation_id::text, organization_id::text, role, content,
           provider_message_id, replied_provider_message_id, run_id, delivery_status, delivery_error_code,
           delivery_error_message, delivered_at, metadata, created_at, updated_at
         FROM messages WHERE organization_id = $1 ORDER BY created_at, id LIMIT 3000`,
        [organization]
      )
    const toMessage = (row: Record<string, any>) => ({
      id: row.id,
      session_id: row.session_id,
      conversation_id: row.conversation_id,
      organization_id: row.organization_id,
      role: row.role,
      content: row.content,
      provider_message_id: row.provider_message_id,
      replied_provider_message_id: row.replied_provider_message_id,
      run_id: row.run_id,
      delivery_status: row.delivery_status,
      delivery_error_code: row.delivery_error_code,
      delivery_error_message: row.delivery_error_message,
      delivered_at: iso(row.delivered_at),
      metadata: row.metadata,
      created_at: iso(row.created_at),
      updated_at: iso(row.updated_at)
    })
    const rawText = (sql: SqlClient.SqlClient) =>
      sql.unsafe<Record<string, any>>(
        `SELECT id::text, session_id::text, conversation_id::text, organization_id::text, role, content,
           provider_message_id, replied_provider_message_id, run_id, delivery_status, delivery_error_code,
           delivery_error_message, ${isoTimestamp("delivered_at")} AS delivered_at, metadata,
           ${isoTimestamp("created_at")} AS created_at, ${isoTimestamp("updated_at")} AS updated_at
         FROM messages WHERE organization_id = $1 ORDER BY created_at, id LIMIT 3000`,
        [organization]
      )
    const variants: Record<string, () => Promise<string>> = {
      "plain, timestamps formatted by PostgreSQL": () =>
        run((sql) => Effect.map(rawText(sql), (rows) => JSON.stringify(rows))),
      schema: () =>
        run((sql) => Effect.map(raw(sql), (rows) => JSON.stringify(encodeMessages(rows.map(toMessage) as any)))),
      plain: () => run((sql) => Effect.map(raw(sql), (rows) => JSON.stringify(rows.map(toMessage)))),
      postgres: () =>
        run((sql) =>
          Effect.map(
            sql.unsafe<{ body: string }>(
              `SELECT '[' || string_agg(body, ',' ORDER BY created_at, id) || ']' AS body FROM (
                 SELECT ${messageJson("m")}::text AS body, m.created_at, m.id FROM messages m
                 WHERE m.organization_id = $1 ORDER BY m.created_at, m.id LIMIT 3000) page`,
              [organization]
            ),
            (rows) => rows[0]!.body
          )
        )
    }
    const timings: Record<string, Array<number>> = {}
    const sizes: Record<string, number> = {}
    for (let i = 0; i < repeat + 3; i++) {
      for (const [name, variant] of Object.entries(variants)) {
        const start = performance.now()
        const body = await variant()
        const elapsed = performance.now() - start
        if (i >= 3) timings[name] = [...(timings[name] ?? []), elapsed]
        sizes[name] = body.length
      }
    }
    const columns: ReadonlyArray<Column> = [
      { header: "variant", align: "left" },
      { header: "median ms per 3,000-row page" },
      { header: "rows/s" },
      { header: "bytes" }
    ]
    const rows = Object.entries(timings).map(([name, values]) => [
      name,
      fixed(median(values), 1),
      fixed(3000 / (median(values) / 1000), 0),
      sizes[name]
    ])
    log(formatTable(columns, rows))
    const markdown = [
      `# encoding benchmark, ${new Date().toISOString()}`,
      "",
      `One export page of 3,000 messages, query plus Node work, median of ${repeat}; PostgreSQL ${database.serverVersion} (${database.kind}).`,
      "",
      markdownTable(columns, rows),
      ""
    ].join("\n")
    const written = writeResults("encoding", { environment: environment(), timings, sizes }, markdown)
    log(`\nresults: ${written.json}, ${written.markdown}`)
  } finally {
    await cleanup.run()
  }
}
