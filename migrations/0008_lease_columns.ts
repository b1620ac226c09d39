/**
 * One name for leases (issue 13 item 9): deliveries' `claimed_by` and
 * `claimed_until` become `leased_by` and `lease_until`, as reply jobs and
 * schedules name theirs (a worker's lease on work it claimed, O5).
 */
import { Effect } from "effect"
import { SqlClient } from "effect/sql"

const statements = [
  `ALTER TABLE deliveries RENAME COLUMN claimed_by TO leased_by`,
  `ALTER TABLE deliveries RENAME COLUMN claimed_until TO lease_until`
]

export default Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  for (const statement of statements) yield* sql.unsafe(statement)
})
