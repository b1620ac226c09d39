/**
 * Resources an integrator can find again (issue 39 item 6; DECISIONS.md O6,
 * docs/behaviour.md "Admin API"):
 *
 * - `agents.deleted_at`: DELETE of an agent marks it instead of removing the
 *   row, so the sessions it served still read back their agent (their
 *   history); a marked agent is left out of the admin API's reads and cannot
 *   be assigned any more (D6: `Agent not found`).
 * - `api_keys.token_last4`: the last 4 characters of a key's token, the one
 *   part of it the key list shows (the token itself is never stored, only its
 *   SHA-256). Null for keys made before this migration: their tokens were
 *   never kept.
 * - `assistants_organization_id_idx`: the assistant list pages by id within
 *   an organization (keyset, as the delivery list).
 * - `sessions_open_agent_idx`: whether an open session has an agent (DELETE
 *   of an agent in use is a 409), on open sessions only.
 */
import { Effect } from "effect"
import { SqlClient } from "effect/sql"

const statements = [
  `ALTER TABLE agents ADD COLUMN deleted_at timestamptz`,
  `ALTER TABLE api_keys ADD COLUMN token_last4 text`,
  `CREATE INDEX assistants_organization_id_idx ON assistants (organization_id, id)`,
  `CREATE INDEX sessions_open_agent_idx ON sessions (organization_id, agent_id) WHERE status = 'open'`
]

export default Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  for (const statement of statements) yield* sql.unsafe(statement)
})
