/**
 * The running schedules, indexed (DECISIONS.md D15, O5; found by the EXPLAIN
 * review of issue 43 item 1). The replies worker gives back the leases of
 * schedules whose lease expired every few seconds (`RepliesRepo.releaseSchedules`
 * with `expiredBefore`) and its own at shutdown (`workerId`): both look for
 * `status = 'running'`, a handful of rows, and scanned the whole
 * `session_schedules` table (every schedule ever made, done ones included)
 * each time. A partial index holds only the running ones.
 */
import { Effect } from "effect"
import { SqlClient } from "effect/sql"

export default Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  yield* sql`CREATE INDEX session_schedules_running_idx ON session_schedules (lease_until) WHERE status = 'running'`
})
