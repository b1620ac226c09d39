-- (g5) The roll-up as a row trigger (no transition table): one upsert per run, on the shard.
\set A '''00000000-0000-0000-0000-00000000000a'''
\set B '''00000000-0000-0000-0000-00000000000e'''
SET citus.enable_unsafe_triggers = on;
DROP TRIGGER runs_roll_up_inserted ON runs;
DROP TRIGGER runs_roll_up_deleted ON runs;
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
INSERT INTO runs (organization_id, id, session_id, assistant_id, commit_id, status, started_at, duration_ms, input_tokens, output_tokens)
VALUES (:A, gen_random_uuid(), gen_random_uuid(), 'asst', 'c1', 'succeeded', '2026-01-01 10:00Z', 100, 5, 7);
BEGIN;
INSERT INTO runs (organization_id, id, session_id, assistant_id, commit_id, status, started_at, duration_ms, input_tokens, output_tokens)
VALUES (:A, gen_random_uuid(), gen_random_uuid(), 'asst', 'c1', 'failed', '2026-01-01 10:05Z', 100, 1, 1),
       (:B, gen_random_uuid(), gen_random_uuid(), 'asst', 'c1', 'succeeded', '2026-01-01 10:05Z', 100, 1, 1),
       (:B, gen_random_uuid(), gen_random_uuid(), 'asst', 'c1', 'succeeded', '2026-01-01 10:06Z', 100, 1, 1);
COMMIT;
INSERT INTO runs (organization_id, id, session_id, assistant_id, commit_id, status, started_at, duration_ms)
SELECT organization_id, gen_random_uuid(), gen_random_uuid(), 'asst', 'c1', 'succeeded', '2026-01-01 10:30Z', 100 FROM runs;
SELECT organization_id, hour, runs, succeeded, input_tokens FROM run_rollups ORDER BY 1, 2;
DELETE FROM runs WHERE status = 'failed' OR started_at = '2026-01-01 10:30Z';
SELECT organization_id, hour, runs, succeeded, input_tokens FROM run_rollups ORDER BY 1, 2;
SELECT organization_id, count(*) AS runs_rows FROM runs GROUP BY 1 ORDER BY 1;
