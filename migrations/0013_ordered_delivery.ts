/**
 * Ordered delivery per conversation (W7, issue 16 item 1).
 *
 * - `apps.ordering`: `none` (every delivery independent, W5) or `conversation`.
 * - `events.conversation_id`: the conversation an event is about (every W1
 *   event is about one), written by the outbox (`src/Outbox/Outbox.ts`).
 * - `deliveries.ordering_key` and `sequence_number`: set by the fan-out for an
 *   app whose `ordering` is `conversation` (the ordering key is the event's
 *   conversation; the sequence number comes from one sequence, taken in the
 *   transaction that writes the event), null otherwise. The deliveries of one
 *   (app, ordering key) form a queue: the claim (`src/Webhooks/Repo.ts`
 *   `claimStatement`) attempts only its head.
 * - The due index of the unordered claim leaves ordered deliveries out, so a
 *   conversation waiting behind a retry is never scanned by it; the queues
 *   have their own index, and one for the deliveries already started (leased
 *   or attempted at least once), which head their queue whatever their number.
 */
import { Effect } from "effect"
import { SqlClient } from "effect/sql"

/** The channel the delivery workers LISTEN on (as in `0002_webhooks.ts`). */
const deliveriesChannel = "parley_deliveries"

const statements = [
  `ALTER TABLE apps ADD COLUMN ordering text NOT NULL DEFAULT 'none' CHECK (ordering IN ('none', 'conversation'))`,
  `ALTER TABLE events ADD COLUMN conversation_id uuid`,
  `ALTER TABLE deliveries ADD COLUMN ordering_key uuid, ADD COLUMN sequence_number bigint`,
  `CREATE SEQUENCE deliveries_sequence_number_seq AS bigint`,
  `DROP INDEX deliveries_due_idx`,
  `CREATE INDEX deliveries_due_idx ON deliveries (next_attempt_at) WHERE status = 'pending' AND ordering_key IS NULL`,
  `CREATE INDEX deliveries_queue_idx ON deliveries (app_id, ordering_key, sequence_number)
  WHERE status = 'pending' AND ordering_key IS NOT NULL`,
  `CREATE INDEX deliveries_queue_started_idx ON deliveries (app_id, ordering_key, sequence_number)
  WHERE status = 'pending' AND ordering_key IS NOT NULL AND (attempts > 0 OR lease_until IS NOT NULL)`,
  `CREATE OR REPLACE FUNCTION parley_fan_out() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO deliveries (id, organization_id, app_id, event_id, event_type, next_attempt_at, created_at,
    ordering_key, sequence_number)
  SELECT parley_uuid_v7(), NEW.organization_id, a.id, NEW.id, NEW.type, statement_timestamp(), statement_timestamp(),
    o.ordering_key, CASE WHEN o.ordering_key IS NOT NULL THEN nextval('deliveries_sequence_number_seq') END
  FROM apps a CROSS JOIN LATERAL (
    SELECT CASE WHEN a.ordering = 'conversation' THEN NEW.conversation_id END AS ordering_key
  ) o
  WHERE a.organization_id = NEW.organization_id AND a.enabled AND NEW.type = ANY (a.events)
  FOR KEY SHARE OF a;
  IF FOUND THEN
    PERFORM pg_notify('${deliveriesChannel}', '');
  END IF;
  RETURN NULL;
END
$$`
]

export default Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  for (const statement of statements) yield* sql.unsafe(statement)
})
