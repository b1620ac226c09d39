/**
 * Secret rotation (W8): an app keeps its previous signing secret for 24 hours
 * after a rotation, and requests are signed with both until then.
 */
import { Effect } from "effect"
import { SqlClient } from "effect/sql"

const statements = [
  `ALTER TABLE apps ADD COLUMN previous_signing_secret text, ADD COLUMN previous_secret_expires_at timestamptz`
]

export default Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  for (const statement of statements) yield* sql.unsafe(statement)
})
