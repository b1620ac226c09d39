/**
 * Run records (issue 41 item 1; DECISIONS.md A15): `runs.tool_calls`, every
 * tool call a run made, in order (`src/Runtime/Records.ts`: `{node_id,
 * tool_id, arguments, result | error, truncated?}`, results over 64 KiB cut
 * with the mark). Runs written before keep an empty list: on replay (A16)
 * their tool calls count as unrecorded. Adding a column with a constant
 * default rewrites no row.
 */
import { Effect } from "effect"
import { SqlClient } from "effect/sql"

export default Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  yield* sql.unsafe(`ALTER TABLE runs ADD COLUMN tool_calls jsonb NOT NULL DEFAULT '[]'`)
})
