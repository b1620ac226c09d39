/**
 * Erasure of a contact (DECISIONS.md D22, issue 40 item 2).
 *
 * - `erasures`: one row per erasure request, a durable job leased like reply
 *   jobs (`leased_by`, `lease_until`: a crashed worker's erasure is taken up
 *   again when its lease expires). `organization_id` leads its primary key
 *   (O11). `counts` holds the rows deleted so far per kind (jsonb object of
 *   integers), written in the same transaction as each batch's deletes.
 * - `sessions.erasure_id` and `conversations.erasure_id`: the marks the
 *   DELETE request sets in its own transaction; every read of a session
 *   leaves marked sessions out (they 404 at once), the delivery claim skips
 *   the events of marked conversations (`src/Webhooks/Repo.ts`), and the job
 *   finds the rows to delete by them (`src/Erasures/Repo.ts`). No foreign key
 *   to `erasures`: the mark of a thousand sessions would lock the erasure
 *   row a thousand times. Partial indexes hold only marked rows, so probing
 *   them costs almost nothing while no erasure is in progress.
 * - `events_conversation_idx`: the events of a conversation (those that carry
 *   its data), which the job deletes. Their deliveries are found by
 *   `deliveries_event_idx`, deleting a conversation checks its sessions with
 *   `sessions_conversation_idx`, and `messages.conversation_id` has no foreign
 *   key any more: all three from 0019_retention.ts.
 */
import { Effect } from "effect"
import { SqlClient } from "effect/sql"

const statements = [
  `CREATE TABLE erasures (
  organization_id uuid NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
  id uuid NOT NULL,
  contact_id text NOT NULL,
  status text NOT NULL CHECK (status IN ('pending', 'completed')),
  counts jsonb NOT NULL DEFAULT '{}',
  request_id text,
  attempts integer NOT NULL DEFAULT 0,
  leased_by uuid,
  lease_until timestamptz,
  requested_at timestamptz NOT NULL,
  completed_at timestamptz,
  PRIMARY KEY (organization_id, id)
)`,
  `CREATE INDEX erasures_pending_idx ON erasures (requested_at) WHERE status = 'pending'`,
  `CREATE INDEX erasures_contact_idx ON erasures (organization_id, contact_id) WHERE status = 'pending'`,
  `ALTER TABLE sessions ADD COLUMN erasure_id uuid`,
  `ALTER TABLE conversations ADD COLUMN erasure_id uuid`,
  `CREATE INDEX sessions_erased_idx ON sessions (id) WHERE erasure_id IS NOT NULL`,
  `CREATE INDEX conversations_erased_idx ON conversations (id) WHERE erasure_id IS NOT NULL`,
  `CREATE INDEX conversations_erasure_idx ON conversations (organization_id, erasure_id) WHERE erasure_id IS NOT NULL`,
  `CREATE INDEX events_conversation_idx ON events (conversation_id) WHERE conversation_id IS NOT NULL`
]

export default Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  for (const statement of statements) yield* sql.unsafe(statement)
})
