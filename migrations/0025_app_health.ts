/**
 * Endpoint health (DECISIONS.md W10):
 *
 * - `apps.disabled_reason` (`failing`, or null: enabled, or disabled by a
 *   PATCH) and `apps.disabled_at`: set when Parley disables an app whose
 *   deliveries have all failed for `APP_DISABLE_AFTER`.
 * - `apps.failing_since`: the moment of the first failed attempt after the
 *   app's last success, creation or re-enabling (null while it is not
 *   failing); `apps.failing_warned_at`: when that period's `app.failing` was
 *   written (once per period). Both are written by the delivery worker's
 *   completion (`src/Webhooks/Repo.ts` `completeStatement`) and cleared by a
 *   success and by re-enabling.
 * - `events.app_id`: the app an `app.failing` or `app.disabled` event is
 *   about; the fan-out never makes a delivery of such an event to that app
 *   ("the organization's other apps"). Null for every other event.
 * - `parley_app_subscribed`: an app disabled for failing still subscribes, so
 *   new events still make its deliveries; they are held (the claims require
 *   `enabled`), made with no due time (`next_attempt_at` null) so the due
 *   index never holds them, and made due when the app is enabled again
 *   (`src/Webhooks/Repo.ts` `updateApp`). An app disabled by a PATCH gets no
 *   new deliveries, as before.
 */
import { Effect } from "effect"
import { SqlClient } from "effect/sql"

/** The channel the delivery workers LISTEN on (as in `0002_webhooks.ts`). */
const deliveriesChannel = "parley_deliveries"

const statements = [
  `ALTER TABLE apps ADD COLUMN disabled_reason text CHECK (disabled_reason IN ('failing')),
  ADD COLUMN disabled_at timestamptz, ADD COLUMN failing_since timestamptz, ADD COLUMN failing_warned_at timestamptz`,
  `ALTER TABLE events ADD COLUMN app_id uuid`,
  `CREATE OR REPLACE FUNCTION parley_app_subscribed(app apps, organization_id uuid, event_type text)
RETURNS boolean LANGUAGE sql IMMUTABLE AS $$
  SELECT $1.organization_id = $2 AND ($1.enabled OR $1.disabled_reason = 'failing') AND $3 = ANY ($1.events)
$$`,
  // 0017's function, without a delivery to the app an event is about, and with no due time for a held one.
  `CREATE OR REPLACE FUNCTION parley_fan_out() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO deliveries (id, organization_id, app_id, event_id, event_type, next_attempt_at, created_at,
    ordering_key, sequence_number)
  SELECT parley_uuid_v7(), NEW.organization_id, a.id, NEW.id, NEW.type,
    CASE WHEN a.enabled THEN statement_timestamp() END, statement_timestamp(),
    o.ordering_key, CASE WHEN o.ordering_key IS NOT NULL THEN nextval('deliveries_sequence_number_seq') END
  FROM apps a CROSS JOIN LATERAL (
    SELECT CASE WHEN a.ordering = 'conversation' THEN NEW.conversation_id END AS ordering_key
  ) o
  WHERE parley_app_subscribed(a, NEW.organization_id, NEW.type) AND a.id IS DISTINCT FROM NEW.app_id;
  IF FOUND AND current_setting('parley.fan_out_notify', true) IS DISTINCT FROM 'off' THEN
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
