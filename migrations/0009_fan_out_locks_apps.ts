/**
 * The webhook fan-out (W2) locks the apps it fans out to (`FOR KEY SHARE`),
 * as the foreign-key check of each delivery would: an app being deleted while
 * an event is written is waited for, then skipped when the delete commits
 * (before, the event's statement failed with a foreign-key violation, found by
 * the fuzz test: a POST /sessions racing a DELETE of an app got 500). A
 * delete that rolls back leaves the app subscribed, and it gets its delivery.
 */
import { Effect } from "effect"
import { SqlClient } from "effect/sql"

/** The channel the delivery workers LISTEN on (as in `0002_webhooks.ts`). */
const deliveriesChannel = "parley_deliveries"

export default Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  yield* sql.unsafe(`CREATE OR REPLACE FUNCTION parley_fan_out() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO deliveries (id, organization_id, app_id, event_id, event_type, next_attempt_at, created_at)
  SELECT parley_uuid_v7(), NEW.organization_id, a.id, NEW.id, NEW.type, statement_timestamp(), statement_timestamp()
  FROM apps a
  WHERE a.organization_id = NEW.organization_id AND a.enabled AND NEW.type = ANY (a.events)
  FOR KEY SHARE OF a;
  IF FOUND THEN
    PERFORM pg_notify('${deliveriesChannel}', '');
  END IF;
  RETURN NULL;
END
$$`)
})
