-- Parley's triggers as its migrations write them (0025 fan-out, 0005 sessions_closed,
-- 0017 apps_deleted, 0015 run roll-ups), on the toy schema of schema.sql.
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
  IF FOUND AND current_setting('parley.fan_out_notify', true) IS DISTINCT FROM 'off' THEN
    PERFORM pg_notify('parley_deliveries', '');
  END IF;
  RETURN NULL;
END
$$;
CREATE TRIGGER events_fan_out AFTER INSERT ON events FOR EACH ROW EXECUTE FUNCTION parley_fan_out();

CREATE FUNCTION parley_session_closed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  UPDATE session_schedules SET status = 'canceled', error = 'Session closed'
    WHERE session_id = NEW.id AND status = 'pending';
  DELETE FROM reply_jobs WHERE session_id = NEW.id AND status = 'pending';
  RETURN NULL;
END
$$;
CREATE TRIGGER sessions_closed AFTER UPDATE OF status ON sessions
  FOR EACH ROW WHEN (OLD.status = 'open' AND NEW.status = 'closed') EXECUTE FUNCTION parley_session_closed();

CREATE FUNCTION parley_app_deleted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  DELETE FROM deliveries WHERE app_id = OLD.id;
  RETURN NULL;
END
$$;
CREATE TRIGGER apps_deleted AFTER DELETE ON apps FOR EACH ROW EXECUTE FUNCTION parley_app_deleted();

CREATE FUNCTION parley_roll_up_runs() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP = 'INSERT' THEN
    INSERT INTO run_rollups AS r (organization_id, assistant_id, hour, commit_id, branch_name, duration_ms, runs, succeeded,
      input_tokens, output_tokens)
    SELECT organization_id, assistant_id, parley_run_hour(started_at), commit_id, coalesce(branch_name, ''), duration_ms, count(*),
      count(*) FILTER (WHERE status = 'succeeded'), coalesce(sum(input_tokens), 0), coalesce(sum(output_tokens), 0)
    FROM changed_runs WHERE assistant_id IS NOT NULL AND commit_id IS NOT NULL
    GROUP BY 1, 2, 3, 4, 5, 6
    ON CONFLICT (organization_id, assistant_id, hour, commit_id, branch_name, duration_ms) DO UPDATE SET
      runs = r.runs + EXCLUDED.runs, succeeded = r.succeeded + EXCLUDED.succeeded,
      input_tokens = r.input_tokens + EXCLUDED.input_tokens, output_tokens = r.output_tokens + EXCLUDED.output_tokens;
  ELSE
    UPDATE run_rollups AS r SET runs = r.runs - d.runs, succeeded = r.succeeded - d.succeeded
    FROM (
      SELECT organization_id, assistant_id, parley_run_hour(started_at) AS hour, commit_id, coalesce(branch_name, '') AS branch_name,
        duration_ms, count(*) AS runs, count(*) FILTER (WHERE status = 'succeeded') AS succeeded
      FROM changed_runs WHERE assistant_id IS NOT NULL AND commit_id IS NOT NULL
      GROUP BY 1, 2, 3, 4, 5, 6
    ) d
    WHERE (r.organization_id, r.assistant_id, r.hour, r.commit_id, r.branch_name, r.duration_ms)
      = (d.organization_id, d.assistant_id, d.hour, d.commit_id, d.branch_name, d.duration_ms);
  END IF;
  RETURN NULL;
END
$$;
CREATE TRIGGER runs_roll_up_inserted AFTER INSERT ON runs REFERENCING NEW TABLE AS changed_runs
  FOR EACH STATEMENT EXECUTE FUNCTION parley_roll_up_runs();
CREATE TRIGGER runs_roll_up_deleted AFTER DELETE ON runs REFERENCING OLD TABLE AS changed_runs
  FOR EACH STATEMENT EXECUTE FUNCTION parley_roll_up_runs();
