/**
 * Bulk export (issue 7; conversations.md "Data export", DECISIONS.md D14):
 * keyset indexes on (organization, sort key, id) for sessions and messages, so
 * every page is one index range scan, and the sort keys under which pages of
 * `sort_by=updated_at` ended (`export_cursors`), so a cursor whose record was
 * updated after its page still resumes where that page ended.
 */
import { Effect } from "effect"
import { SqlClient } from "effect/sql"

const statements = [
  `CREATE INDEX sessions_export_created_idx ON sessions (organization_id, created_at, id)`,
  `CREATE INDEX sessions_export_updated_idx ON sessions (organization_id, (coalesce(updated_at, created_at)), id)`,
  `CREATE INDEX messages_export_created_idx ON messages (organization_id, created_at, id)`,
  `CREATE INDEX messages_export_updated_idx ON messages (organization_id, (coalesce(updated_at, created_at)), id)`,
  `CREATE INDEX messages_export_session_updated_idx ON messages (session_id, (coalesce(updated_at, created_at)), id)`,
  `CREATE TABLE export_cursors (
  organization_id uuid NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
  kind text NOT NULL CHECK (kind IN ('sessions', 'messages')),
  record_id uuid NOT NULL,
  sort_key timestamptz NOT NULL,
  created_at timestamptz NOT NULL,
  PRIMARY KEY (organization_id, kind, record_id)
)`
]

export default Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  for (const statement of statements) yield* sql.unsafe(statement)
})
