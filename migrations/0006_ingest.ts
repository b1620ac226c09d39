/**
 * Unified ingest (issue 6; conversations.md "Unified ingest", DECISIONS.md D9, D10):
 *
 * - `ingest_receipts`: one row per (conversation, provider_message_id) that
 *   ingest stored a message for. The primary key is what makes ingest
 *   idempotent (D10): the ingest transaction claims the pair with
 *   `INSERT ... ON CONFLICT DO NOTHING` before it changes anything, and a call
 *   that finds the pair taken returns the first call's ids. `messages` keeps no
 *   unique index on `provider_message_id`, since POST message and delivery
 *   PATCHes may legitimately repeat one. `message_id` and `session_id` carry no
 *   foreign key: the receipt is written before the message in the same
 *   transaction, and both commit or neither does.
 */
import { Effect } from "effect"
import { SqlClient } from "effect/sql"

const statements = [
  `CREATE TABLE ingest_receipts (
  organization_id uuid NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
  conversation_id uuid NOT NULL REFERENCES conversations (id) ON DELETE CASCADE,
  provider_message_id text NOT NULL,
  message_id uuid NOT NULL,
  session_id uuid NOT NULL,
  created_at timestamptz NOT NULL,
  PRIMARY KEY (conversation_id, provider_message_id)
)`
]

export default Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  for (const statement of statements) yield* sql.unsafe(statement)
})
