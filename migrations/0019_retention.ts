/**
 * Retention (issue 40 item 1; DECISIONS.md D21), swept by `src/Retention/`:
 *
 * - `organization_settings.message_retention_days` (null: keep forever, the
 *   default; 1-36500) and `event_retention_days` (1-3650; null: keep
 *   forever). Rows stored before take the default of D21 for events, 30 days
 *   (`Domain/Organization.ts` `defaultSettings`, which organizations without a
 *   row get).
 * - `sessions_closed_idx`: the closed sessions of an organization by the time
 *   they closed. A session has no column of its own for that: `updated_at` is
 *   stamped by every change of a session (`src/Sessions/Repo.ts` `update`)
 *   and a closed session cannot change any more (D5), so a closed session's
 *   `updated_at` is when it closed (`coalesce` with `created_at` for a row
 *   without one, as the export's index does).
 * - `sessions_conversation_idx`: whether a conversation has a session left (a
 *   conversation goes with its last session), and the check of
 *   `sessions.conversation_id`'s foreign key when a conversation is deleted,
 *   which without it read the whole table (only open sessions were indexed
 *   by conversation).
 * - `ingest_receipts_session_idx`: a session's ingest receipts, deleted with it.
 * - `deliveries_event_idx` (dropped by 0016 when nothing read deliveries by
 *   event): whether an old event has a delivery still `pending`, and its
 *   deliveries, deleted with it.
 * - `messages.conversation_id` loses its foreign key to `conversations`: a
 *   message's conversation is its session's (written from the session in the
 *   same statement), which `messages.session_id`'s key keeps alive, and the
 *   key's check when a conversation is deleted would read the whole of
 *   `messages` (nothing indexes messages by conversation, and an index would
 *   cost every message's insert).
 *
 * test/Retention/Plans.test.ts asserts that the sweep scans none of the grown
 * tables whole. The indexes are built without CONCURRENTLY, as every
 * migration's (they run in the migrator's transaction): on a large
 * installation the upgrade holds writes to these tables while they build.
 */
import { Effect } from "effect"
import { SqlClient } from "effect/sql"

const statements = [
  `ALTER TABLE organization_settings
  ADD COLUMN message_retention_days int4 CHECK (message_retention_days BETWEEN 1 AND 36500),
  ADD COLUMN event_retention_days int4 DEFAULT 30 CHECK (event_retention_days BETWEEN 1 AND 3650)`,
  `CREATE INDEX sessions_closed_idx ON sessions (organization_id, (coalesce(updated_at, created_at)), id)
  WHERE status = 'closed'`,
  `CREATE INDEX sessions_conversation_idx ON sessions (conversation_id)`,
  `CREATE INDEX ingest_receipts_session_idx ON ingest_receipts (session_id)`,
  `CREATE INDEX deliveries_event_idx ON deliveries (event_id)`,
  `ALTER TABLE messages DROP CONSTRAINT messages_conversation_id_fkey`
]

export default Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  for (const statement of statements) yield* sql.unsafe(statement)
})
