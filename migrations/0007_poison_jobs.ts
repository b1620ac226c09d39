/**
 * Poison jobs and stranded sessions (issue 12 items 4 and 6; DECISIONS.md R1,
 * R2, D15, A13):
 *
 * - `reply_jobs.attempts`, `last_error`: a reply job whose run died of a defect
 *   (not a model or tool failure) is retried a few times with backoff, then
 *   ends with a failed run; the attempts made and the last defect are kept.
 * - `session_schedules.attempts`, `retry_at`: the same for schedules; a retry
 *   is due at `retry_at` while `scheduled_for` keeps the moment the client
 *   asked for. The due index follows `coalesce(retry_at, scheduled_for)`.
 * - `runs.missing_node_id`: a run whose session stood on a node the published
 *   version no longer has starts at `initial_node_id` and records that node.
 */
import { Effect } from "effect"
import { SqlClient } from "effect/sql"

const statements = [
  `ALTER TABLE reply_jobs ADD COLUMN attempts integer NOT NULL DEFAULT 0, ADD COLUMN last_error text`,
  `ALTER TABLE session_schedules ADD COLUMN attempts integer NOT NULL DEFAULT 0, ADD COLUMN retry_at timestamptz`,
  `DROP INDEX session_schedules_due_idx`,
  `CREATE INDEX session_schedules_due_idx ON session_schedules ((coalesce(retry_at, scheduled_for)))
  WHERE status = 'pending'`,
  `ALTER TABLE runs ADD COLUMN missing_node_id text`
]

export default Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  for (const statement of statements) yield* sql.unsafe(statement)
})
