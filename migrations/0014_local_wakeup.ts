/**
 * The fan-out (W2, W7) notifies the delivery workers at commit unless the
 * writing statement set `parley.fan_out_notify` to `off` for its transaction
 * (`src/Outbox/Outbox.ts` `EventRows.notify`): POST message does in a process
 * whose own delivery worker runs, and wakes that worker in memory once it
 * committed (`src/Webhooks/Wakeup.ts`; issue 16 item 4, measured by
 * `npm run bench -- webhooks`, end to end). The function is otherwise
 * `0013_ordered_delivery.ts`'s.
 *
 * Which apps an event fans out to is now one SQL function,
 * `parley_app_subscribed(app, organization, type)`, which the fan-out and
 * POST message's statement (whether to wake the worker, `src/Outbox/Outbox.ts`
 * `subscribedSql`) both call.
 */
import { Effect } from "effect"
import { SqlClient } from "effect/sql"

/** The channel the delivery workers LISTEN on (as in `0002_webhooks.ts`). */
const deliveriesChannel = "parley_deliveries"

export default Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  // Inlined by the planner: the fan-out's and POST message's lookups use apps_organization_idx.
  yield* sql.unsafe(`CREATE FUNCTION parley_app_subscribed(app apps, organization_id uuid, event_type text)
RETURNS boolean LANGUAGE sql IMMUTABLE AS $$
  SELECT $1.organization_id = $2 AND $1.enabled AND $3 = ANY ($1.events)
$$`)
  yield* sql.unsafe(`CREATE OR REPLACE FUNCTION parley_fan_out() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO deliveries (id, organization_id, app_id, event_id, event_type, next_attempt_at, created_at,
    ordering_key, sequence_number)
  SELECT parley_uuid_v7(), NEW.organization_id, a.id, NEW.id, NEW.type, statement_timestamp(), statement_timestamp(),
    o.ordering_key, CASE WHEN o.ordering_key IS NOT NULL THEN nextval('deliveries_sequence_number_seq') END
  FROM apps a CROSS JOIN LATERAL (
    SELECT CASE WHEN a.ordering = 'conversation' THEN NEW.conversation_id END AS ordering_key
  ) o
  WHERE parley_app_subscribed(a, NEW.organization_id, NEW.type)
  FOR KEY SHARE OF a;
  IF FOUND AND current_setting('parley.fan_out_notify', true) IS DISTINCT FROM 'off' THEN
    PERFORM pg_notify('${deliveriesChannel}', '');
  END IF;
  RETURN NULL;
END
$$`)
})
