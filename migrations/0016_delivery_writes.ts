/**
 * Fewer writes per webhook delivery (issue 16 item 4, end to end):
 *
 * - `deliveries.attempt_log`: every attempt of the delivery (W5), oldest
 *   first, as an array of the composite type `delivery_attempt` (attempt
 *   number from 1, HTTP status or null, error or null, duration in ms, start).
 *   The worker's completion appends to it in the update it makes anyway
 *   (`src/Webhooks/Repo.ts` `completeStatement`), where a `delivery_attempts`
 *   row cost a heap insert, an index insert and a foreign-key check (a lock
 *   of the delivery row) per attempt. The rows of `delivery_attempts` move
 *   here and the table goes.
 * - `deliveries.event_id` loses its foreign key to `events` and its index.
 *   Deliveries are inserted only by the fan-out trigger, for the event its
 *   statement has just inserted, and events are never deleted but with their
 *   organization, whose apps take the deliveries with them
 *   (`deliveries.app_id ON DELETE CASCADE`). Nothing reads deliveries by
 *   event; the index was there for the key's cascade. The key cost a check
 *   (a query and a lock of the event row) per delivery, the index an entry
 *   per insert, lease and completion.
 *
 * Per delivery, in PostgreSQL 15 (instructions counted by `valgrind
 * --tool=callgrind` in a single-user server: the fan-out of 2,000 events, then
 * their claims and completions in batches of 32): 1,095,000 -> 885,000
 * instructions beyond what the event's insert costs with no app subscribed
 * (-19%), and 2,942 -> 2,523 bytes of WAL. Speed tactic measured by `npm run
 * bench -- webhooks` (bench/README.md "webhooks: delivery"; measured in "Fewer
 * writes per delivery" of `git show 73e3eb4:bench/README.md`).
 */
import { Effect } from "effect"
import { SqlClient } from "effect/sql"

const statements = [
  `CREATE TYPE delivery_attempt AS (
  attempt integer,
  status_code integer,
  error text,
  duration_ms integer,
  started_at timestamptz
)`,
  `ALTER TABLE deliveries ADD COLUMN attempt_log delivery_attempt[] NOT NULL DEFAULT '{}'`,
  `UPDATE deliveries d SET attempt_log = x.log
FROM (
  SELECT delivery_id,
    array_agg(ROW(attempt, status_code, error, duration_ms, started_at)::delivery_attempt ORDER BY attempt) AS log
  FROM delivery_attempts GROUP BY delivery_id
) x
WHERE d.id = x.delivery_id`,
  `DROP TABLE delivery_attempts`,
  `ALTER TABLE deliveries DROP CONSTRAINT deliveries_event_id_fkey`,
  `DROP INDEX deliveries_event_idx`
]

export default Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  for (const statement of statements) yield* sql.unsafe(statement)
})
