-- Parley's triggers as they work on Citus 13.2 (docs/citus-notes.md): the fan-out without
-- pg_notify (the application notifies on the coordinator), every statement of a trigger
-- filtered by NEW/OLD.organization_id (a router statement on the co-located shard, run
-- locally), the run roll-up as a row trigger (no transition table).
SET citus.enable_unsafe_triggers = on;

CREATE FUNCTION parley_fan_out() RETURNS trigger LANGUAGE plpgsql AS $$
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
  RETURN NULL;
END
$$;
CREATE TRIGGER events_fan_out AFTER INSERT ON events FOR EACH ROW EXECUTE FUNCTION parley_fan_out();

CREATE FUNCTION parley_session_closed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  UPDATE session_schedules SET status = 'canceled', error = 'Session closed'
    WHERE organization_id = NEW.organization_id AND session_id = NEW.id AND status = 'pending';
  DELETE FROM reply_jobs WHERE organization_id = NEW.organization_id AND session_id = NEW.id AND status = 'pending';
  RETURN NULL;
END
$$;
CREATE TRIGGER sessions_closed AFTER UPDATE OF status ON sessions
  FOR EACH ROW WHEN (OLD.status = 'open' AND NEW.status = 'closed') EXECUTE FUNCTION parley_session_closed();

CREATE FUNCTION parley_app_deleted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  DELETE FROM deliveries WHERE organization_id = OLD.organization_id AND app_id = OLD.id;
  RETURN NULL;
END
$$;
CREATE TRIGGER apps_deleted AFTER DELETE ON apps FOR EACH ROW EXECUTE FUNCTION parley_app_deleted();

CREATE FUNCTION parley_roll_up_run() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE r runs;
BEGIN
  r := CASE WHEN TG_OP = 'INSERT' THEN NEW ELSE OLD END;
  IF r.assistant_id IS NULL OR r.commit_id IS NULL THEN RETURN NULL; END IF;
  INSERT INTO run_rollups AS u (organization_id, assistant_id, hour, commit_id, branch_name, duration_ms, runs, succeeded,
    input_tokens, output_tokens)
  VALUES (r.organization_id, r.assistant_id, parley_run_hour(r.started_at), r.commit_id, coalesce(r.branch_name, ''), r.duration_ms,
    CASE WHEN TG_OP = 'INSERT' THEN 1 ELSE -1 END, CASE WHEN r.status = 'succeeded' THEN CASE WHEN TG_OP = 'INSERT' THEN 1 ELSE -1 END ELSE 0 END,
    CASE WHEN TG_OP = 'INSERT' THEN 1 ELSE -1 END * coalesce(r.input_tokens, 0), CASE WHEN TG_OP = 'INSERT' THEN 1 ELSE -1 END * coalesce(r.output_tokens, 0))
  ON CONFLICT (organization_id, assistant_id, hour, commit_id, branch_name, duration_ms) DO UPDATE SET
    runs = u.runs + EXCLUDED.runs, succeeded = u.succeeded + EXCLUDED.succeeded,
    input_tokens = u.input_tokens + EXCLUDED.input_tokens, output_tokens = u.output_tokens + EXCLUDED.output_tokens;
  RETURN NULL;
END
$$;
CREATE TRIGGER runs_roll_up AFTER INSERT OR DELETE ON runs FOR EACH ROW EXECUTE FUNCTION parley_roll_up_run();
ALTER TABLE deliveries ALTER COLUMN sequence_number SET DEFAULT nextval('deliveries_sequence_number_seq');
