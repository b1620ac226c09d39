/**
 * The fan-out (W2) no longer locks the apps it fans out to (issue 16 item 4,
 * end to end):
 *
 * - `deliveries.app_id` loses its foreign key to `apps`, and the fan-out its
 *   `FOR KEY SHARE OF a` (0009). Every event of an organization with a
 *   subscribed app locked that app's row, so concurrent POST messages of one
 *   organization contended on it and made a new multixact on it per event
 *   ("A lighter receiver" in `git show 73e3eb4:bench/README.md`). The
 *   organization's row, which the event's own foreign key locks, still does.
 * - What the key's `ON DELETE CASCADE` did, an `AFTER DELETE` trigger on
 *   `apps` does: an app's deliveries go with it, whether the app is deleted
 *   alone or with its organization.
 * - What the locks bought was that an event written while its app was being
 *   deleted waited for the delete and then skipped the app. Now it does not
 *   wait: a fan-out whose snapshot still saw the app may insert a delivery
 *   after the delete took the app's deliveries. Such a delivery is never
 *   attempted (every claim joins `apps`, `src/Webhooks/Repo.ts`), and the
 *   delivery workers' sweep deletes it (`sweepStatement`, run by `Worker.ts`
 *   every SWEEP_MS).
 *
 * Speed tactic measured by `pgbench` on PostgreSQL 15 (the event insert alone for an
 * organization with one subscribed app, 50 clients: 7,447-7,941 -> 8,302-8,594
 * events/s, three alternating pairs) and by `npm run bench -- webhooks` (end to
 * end, one app: +3% and +6% messages/s in two sets of three alternating pairs,
 * within the machine's spread; bench/README.md "webhooks: delivery", measured
 * in "A third machine" of `git show 73e3eb4:bench/README.md`).
 */
import { Effect } from "effect"
import { SqlClient } from "effect/sql"

/** The channel the delivery workers LISTEN on (as in `0002_webhooks.ts`). */
const deliveriesChannel = "parley_deliveries"

const statements = [
  `ALTER TABLE deliveries DROP CONSTRAINT deliveries_app_id_fkey`,
  `CREATE FUNCTION parley_app_deleted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  DELETE FROM deliveries WHERE app_id = OLD.id;
  RETURN NULL;
END
$$`,
  `CREATE TRIGGER apps_deleted AFTER DELETE ON apps FOR EACH ROW EXECUTE FUNCTION parley_app_deleted()`,
  // 0014's function without FOR KEY SHARE OF a.
  `CREATE OR REPLACE FUNCTION parley_fan_out() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO deliveries (id, organization_id, app_id, event_id, event_type, next_attempt_at, created_at,
    ordering_key, sequence_number)
  SELECT parley_uuid_v7(), NEW.organization_id, a.id, NEW.id, NEW.type, statement_timestamp(), statement_timestamp(),
    o.ordering_key, CASE WHEN o.ordering_key IS NOT NULL THEN nextval('deliveries_sequence_number_seq') END
  FROM apps a CROSS JOIN LATERAL (
    SELECT CASE WHEN a.ordering = 'conversation' THEN NEW.conversation_id END AS ordering_key
  ) o
  WHERE parley_app_subscribed(a, NEW.organization_id, NEW.type);
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
