/**
 * Parley's triggers as they run on Citus (DECISIONS.md O11, W2; issue 43 item
 * 4; measured in docs/citus-notes.md (a), (b), (g)). On a cluster a row
 * trigger fires on the shard, on the worker that holds the row; these
 * functions work there and keep their meaning on one server:
 *
 * - `parley_fan_out` (last in `0025_app_health.ts`) no longer notifies the
 *   delivery workers: a NOTIFY on a shard reaches only the listeners of that
 *   worker, and PostgreSQL refuses to PREPARE a transaction that executed
 *   NOTIFY, which broke every transaction that wrote two workers. The code
 *   that writes events sends the wakeup instead, as a statement of its own
 *   (`src/Outbox/Outbox.ts` `notifyDeliveries`), where it runs on the
 *   coordinator. Its apps are filtered by `organization_id` in the
 *   statement's own text, and the subscription rule (W10's, as
 *   `parley_app_subscribed` of 0025 had it) is `parley_app_subscribes` over
 *   the app's columns: Citus sends a statement to a worker as text over the
 *   shard's table (`apps_102059 a`), where a function of the whole row `a`
 *   of type `apps` does not resolve, so the outbox's own check
 *   (`Outbox.ts` `subscribedSql`, the same rule) failed on a worker. The
 *   function of the row goes.
 * - `parley_session_closed` and `parley_app_deleted` filter every statement by
 *   the row's organization already (`0027_organization_keys.ts`), so they run
 *   on the local shard: unchanged.
 * - The run roll-ups (A14, `0015_rollouts.ts`, `0027_organization_keys.ts`):
 *   statement triggers reading transition tables fail on shards ("executor
 *   could not find named tuplestore"), so one row trigger,
 *   `parley_roll_up_run`, does the same per run: an inserted run adds itself
 *   to its roll-up row (made when missing), a deleted run takes itself off
 *   its row (never made: a deleted run was counted when inserted). The sums
 *   are those of the statement triggers, a statement's runs one at a time.
 *
 * On a database Citus already distributed, replacing triggers of distributed
 * tables needs `citus.enable_unsafe_triggers` (the functions only touch the
 * row's own organization, on the same node: O11) and, in the migrator's one
 * transaction, sequential mode; both are set only when Citus is installed.
 */
import { Effect } from "effect"
import { SqlClient } from "effect/sql"

const statements = [
  `CREATE FUNCTION parley_app_subscribes(enabled boolean, disabled_reason text, events text[], event_type text)
RETURNS boolean LANGUAGE sql IMMUTABLE AS $$
  SELECT ($1 OR $2 = 'failing') AND $4 = ANY ($3)
$$`,
  // 0025's function without the NOTIFY, the apps of the event's organization named in the statement.
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
  WHERE a.organization_id = NEW.organization_id AND parley_app_subscribes(a.enabled, a.disabled_reason, a.events, NEW.type)
    AND a.id IS DISTINCT FROM NEW.app_id;
  RETURN NULL;
END
$$`,
  `DROP FUNCTION parley_app_subscribed(apps, uuid, text)`,
  `CREATE FUNCTION parley_roll_up_run() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP = 'INSERT' THEN
    IF NEW.assistant_id IS NULL OR NEW.commit_id IS NULL THEN RETURN NULL; END IF;
    INSERT INTO run_rollups AS r (organization_id, assistant_id, hour, commit_id, branch_name, duration_ms, runs,
      succeeded, input_tokens, output_tokens)
    VALUES (NEW.organization_id, NEW.assistant_id, parley_run_hour(NEW.started_at), NEW.commit_id,
      coalesce(NEW.branch_name, ''), NEW.duration_ms, 1, CASE WHEN NEW.status = 'succeeded' THEN 1 ELSE 0 END,
      coalesce(NEW.input_tokens, 0), coalesce(NEW.output_tokens, 0))
    ON CONFLICT (organization_id, assistant_id, hour, commit_id, branch_name, duration_ms) DO UPDATE SET
      runs = r.runs + EXCLUDED.runs, succeeded = r.succeeded + EXCLUDED.succeeded,
      input_tokens = r.input_tokens + EXCLUDED.input_tokens, output_tokens = r.output_tokens + EXCLUDED.output_tokens;
  ELSE
    IF OLD.assistant_id IS NULL OR OLD.commit_id IS NULL THEN RETURN NULL; END IF;
    UPDATE run_rollups SET runs = runs - 1,
      succeeded = succeeded - CASE WHEN OLD.status = 'succeeded' THEN 1 ELSE 0 END,
      input_tokens = input_tokens - coalesce(OLD.input_tokens, 0),
      output_tokens = output_tokens - coalesce(OLD.output_tokens, 0)
    WHERE organization_id = OLD.organization_id AND assistant_id = OLD.assistant_id
      AND hour = parley_run_hour(OLD.started_at) AND commit_id = OLD.commit_id
      AND branch_name = coalesce(OLD.branch_name, '') AND duration_ms = OLD.duration_ms;
  END IF;
  RETURN NULL;
END
$$`,
  `DROP TRIGGER runs_roll_up_inserted ON runs`,
  `DROP TRIGGER runs_roll_up_deleted ON runs`,
  `DROP FUNCTION parley_roll_up_runs()`,
  `CREATE TRIGGER runs_roll_up AFTER INSERT OR DELETE ON runs FOR EACH ROW EXECUTE FUNCTION parley_roll_up_run()`
]

export default Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  const [installed] = yield* sql<{
    citus: boolean
  }>`SELECT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'citus') AS citus`
  if (installed?.citus === true) {
    yield* sql`SET LOCAL citus.multi_shard_modify_mode TO 'sequential'`
    yield* sql`SET LOCAL citus.enable_unsafe_triggers TO on`
  }
  for (const statement of statements) yield* sql.unsafe(statement)
})
