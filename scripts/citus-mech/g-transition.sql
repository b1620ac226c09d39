-- (g) Statement triggers with transition tables (0015's run roll-ups, with organization_id).
\set A '''00000000-0000-0000-0000-00000000000a'''
\set B '''00000000-0000-0000-0000-00000000000e'''
\echo == (g1) a router INSERT of one run
INSERT INTO runs (organization_id, id, session_id, assistant_id, commit_id, status, started_at, duration_ms, input_tokens, output_tokens)
VALUES (:A, gen_random_uuid(), gen_random_uuid(), 'asst', 'c1', 'succeeded', '2026-01-01 10:00Z', 100, 5, 7);
SELECT organization_id, hour, runs, succeeded, input_tokens FROM run_rollups ORDER BY 1;
\echo == (g2) one INSERT of runs of two organizations on two workers (one statement per shard)
INSERT INTO runs (organization_id, id, session_id, assistant_id, commit_id, status, started_at, duration_ms, input_tokens, output_tokens)
VALUES (:A, gen_random_uuid(), gen_random_uuid(), 'asst', 'c1', 'failed', '2026-01-01 10:05Z', 100, 1, 1),
       (:B, gen_random_uuid(), gen_random_uuid(), 'asst', 'c1', 'succeeded', '2026-01-01 10:05Z', 100, 1, 1),
       (:B, gen_random_uuid(), gen_random_uuid(), 'asst', 'c1', 'succeeded', '2026-01-01 10:06Z', 100, 1, 1);
SELECT organization_id, hour, runs, succeeded, input_tokens FROM run_rollups ORDER BY 1;
\echo == (g3) INSERT ... SELECT (pushed down, every shard)
INSERT INTO runs (organization_id, id, session_id, assistant_id, commit_id, status, started_at, duration_ms)
SELECT organization_id, gen_random_uuid(), gen_random_uuid(), 'asst', 'c1', 'succeeded', '2026-01-01 10:30Z', 100 FROM runs;
SELECT organization_id, hour, runs, succeeded, input_tokens FROM run_rollups ORDER BY 1;
SELECT organization_id, count(*) AS runs_rows FROM runs GROUP BY 1 ORDER BY 1;
\echo == (g4) a multi-shard DELETE
DELETE FROM runs WHERE status = 'failed' OR started_at = '2026-01-01 10:30Z';
SELECT organization_id, hour, runs, succeeded, input_tokens FROM run_rollups ORDER BY 1;
SELECT organization_id, count(*) AS runs_rows FROM runs GROUP BY 1 ORDER BY 1;
