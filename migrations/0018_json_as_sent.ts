/**
 * One rendering for one shape (issue 39 item 8): a message's `content` and
 * `metadata` and a session's `metadata` are stored as `json`, the compact text
 * the service writes (`src/Database/Json.ts` `jsonColumnText`, `contentColumnText`),
 * instead of `jsonb`.
 *
 * Statements that build the wire JSON in PostgreSQL (POST message, ingest, the
 * webhook events) embed a `json` value as it is stored, and the service reads it
 * back with `JSON.parse`, so every response and every webhook renders such a
 * value alike: compact, members in the order the client sent them (`type` first
 * in content). A `jsonb` value was rendered by PostgreSQL with its own key order
 * and spaces (`{"text": "Hello!", "type": "text"}`) where the service rendered
 * `{"type":"text","text":"Hello!"}`.
 *
 * The metadata search of D2 (`@>`) keeps its GIN index, now on `metadata::jsonb`.
 * Existing rows are rewritten in their canonical text, a thousand at a time.
 */
import { Effect } from "effect"
import { SqlClient } from "effect/sql"

const statements = [
  `DROP INDEX sessions_metadata_idx`,
  `ALTER TABLE sessions ALTER COLUMN metadata DROP DEFAULT,
  ALTER COLUMN metadata TYPE json USING metadata::json,
  ALTER COLUMN metadata SET DEFAULT '{}'::json`,
  `CREATE INDEX sessions_metadata_idx ON sessions USING gin ((metadata::jsonb) jsonb_path_ops)`,
  `ALTER TABLE messages ALTER COLUMN content TYPE json USING content::json,
  ALTER COLUMN metadata DROP DEFAULT,
  ALTER COLUMN metadata TYPE json USING metadata::json,
  ALTER COLUMN metadata SET DEFAULT '{}'::json`
]

/** Content as the service writes it: `type` first, the other members as they were (as of this migration). */
const contentText = (content: { readonly type: unknown }) => {
  const { type, ...rest } = content
  return JSON.stringify({ type, ...rest })
}

/** Rewrites `table`'s `columns` of every row in the service's text, a thousand rows at a time, by id. */
const rewrite = (
  sql: SqlClient.SqlClient,
  table: string,
  columns: Readonly<Record<string, (value: never) => string>>
) =>
  Effect.gen(function* () {
    const names = Object.keys(columns)
    let after = "00000000-0000-0000-0000-000000000000"
    while (true) {
      const rows = yield* sql.unsafe<Record<string, unknown> & { id: string }>(
        `SELECT id, ${names.join(", ")} FROM ${table} WHERE id > $1 ORDER BY id LIMIT 1000`,
        [after]
      )
      if (rows.length === 0) return
      for (const name of names) {
        const texts = rows.map((row) => columns[name]!(row[name] as never))
        yield* sql.unsafe(
          `UPDATE ${table} t SET ${name} = v.text::json FROM unnest($1::uuid[], $2::text[]) AS v(id, text) WHERE t.id = v.id`,
          [rows.map((row) => row.id), texts]
        )
      }
      after = rows[rows.length - 1]!.id
    }
  })

export default Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  for (const statement of statements) yield* sql.unsafe(statement)
  yield* rewrite(sql, "sessions", { metadata: JSON.stringify })
  yield* rewrite(sql, "messages", { content: contentText, metadata: JSON.stringify })
})
