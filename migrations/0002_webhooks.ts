/**
 * Webhooks (issue 4; DECISIONS.md W1-W6, O5, O6): apps, deliveries, delivery
 * attempts, and the fan-out trigger that turns every committed event into one
 * delivery per enabled, subscribed app of its organization, in the
 * transaction that writes the event (W2: no relay that could skip an event).
 *
 * Delivery ids are made by PostgreSQL in the trigger (the application never sees
 * the fan-out), as UUIDv7 built from `gen_random_uuid()` (PostgreSQL 13+) and
 * the clock, so they sort by creation time like the application's ids (O2:
 * PostgreSQL 14 has no `uuidv7()`).
 */
import { Effect } from "effect"
import { SqlClient } from "effect/sql"

/** The channel a committed fan-out notifies; the delivery workers LISTEN on it. */
const deliveriesChannel = "parley_deliveries"

const statements = [
  `CREATE FUNCTION parley_uuid_v7() RETURNS uuid LANGUAGE sql VOLATILE AS $$
  SELECT encode(set_bit(set_bit(overlay(uuid_send(gen_random_uuid())
    PLACING substring(int8send(floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint) FROM 3) FROM 1 FOR 6),
    52, 1), 53, 1), 'hex')::uuid
$$`,
  `-- O6: webhook apps. \`events\` holds the subscribed event types (W1).
CREATE TABLE apps (
  id uuid PRIMARY KEY,
  organization_id uuid NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
  name text NOT NULL,
  webhook_url text NOT NULL,
  events text[] NOT NULL,
  enabled boolean NOT NULL DEFAULT true,
  signing_secret text NOT NULL,
  created_at timestamptz NOT NULL,
  updated_at timestamptz
)`,
  `CREATE INDEX apps_organization_idx ON apps (organization_id, created_at, id)`,
  `-- W2/W5: one row per (event, app); \`claimed_by\`/\`claimed_until\` is a worker's lease (O5).
CREATE TABLE deliveries (
  id uuid PRIMARY KEY,
  organization_id uuid NOT NULL,
  app_id uuid NOT NULL REFERENCES apps (id) ON DELETE CASCADE,
  event_id uuid NOT NULL REFERENCES events (id) ON DELETE CASCADE,
  event_type text NOT NULL,
  status text NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'succeeded', 'failed')),
  attempts integer NOT NULL DEFAULT 0,
  next_attempt_at timestamptz,
  last_status_code integer,
  last_error text,
  claimed_by uuid,
  claimed_until timestamptz,
  created_at timestamptz NOT NULL,
  updated_at timestamptz
)`,
  `-- The workers' claim: due pending deliveries in order of due time.
CREATE INDEX deliveries_due_idx ON deliveries (next_attempt_at) WHERE status = 'pending'`,
  `-- O6: an app's deliveries, newest first, keyset by id.
CREATE INDEX deliveries_app_idx ON deliveries (app_id, id)`,
  `CREATE INDEX deliveries_event_idx ON deliveries (event_id)`,
  `-- W5: every attempt of a delivery.
CREATE TABLE delivery_attempts (
  delivery_id uuid NOT NULL REFERENCES deliveries (id) ON DELETE CASCADE,
  attempt integer NOT NULL,
  organization_id uuid NOT NULL,
  status_code integer,
  error text,
  duration_ms integer NOT NULL,
  started_at timestamptz NOT NULL,
  PRIMARY KEY (delivery_id, attempt)
)`,
  `-- W2: the fan-out, in the transaction that writes the event; the notification is sent at commit.
CREATE FUNCTION parley_fan_out() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO deliveries (id, organization_id, app_id, event_id, event_type, next_attempt_at, created_at)
  SELECT parley_uuid_v7(), NEW.organization_id, a.id, NEW.id, NEW.type, statement_timestamp(), statement_timestamp()
  FROM apps a
  WHERE a.organization_id = NEW.organization_id AND a.enabled AND NEW.type = ANY (a.events);
  IF FOUND THEN
    PERFORM pg_notify('${deliveriesChannel}', '');
  END IF;
  RETURN NULL;
END
$$`,
  `CREATE TRIGGER events_fan_out AFTER INSERT ON events FOR EACH ROW EXECUTE FUNCTION parley_fan_out()`
]

export default Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  for (const statement of statements) yield* sql.unsafe(statement)
})
