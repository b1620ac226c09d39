-- (i) Telling a router query from a multi-shard one.
\set A '''00000000-0000-0000-0000-00000000000a'''
\echo == (i1) router (fast path): one organization
EXPLAIN (COSTS OFF) SELECT * FROM sessions WHERE organization_id = :A AND status = 'open';
\echo == (i2) router: a join of two co-located tables of one organization
EXPLAIN (COSTS OFF) SELECT s.id FROM sessions s JOIN conversations c ON c.organization_id = s.organization_id AND c.id = s.conversation_id WHERE s.organization_id = :A;
\echo == (i3) router with a reference table join
EXPLAIN (COSTS OFF) SELECT s.id, o.name FROM sessions s JOIN organizations o ON o.id = s.organization_id WHERE s.organization_id = :A;
\echo == (i4) a join on id alone (no organization_id equality on the second table)
EXPLAIN (COSTS OFF) SELECT s.id FROM sessions s JOIN conversations c ON c.id = s.conversation_id WHERE s.organization_id = :A;
\echo == (i5) multi-shard
EXPLAIN (COSTS OFF) SELECT count(*) FROM sessions WHERE status = 'open';
\echo == (i6) recursively planned: INSERT CTEs (subplans, each a router task)
EXPLAIN (COSTS OFF)
WITH e AS (INSERT INTO events (organization_id, id, type, body, created_at) VALUES (:A, gen_random_uuid(), 'x', '{}', now()) RETURNING id)
SELECT count(*) FROM e;
\echo == (i7) JSON: the members a test can walk
EXPLAIN (COSTS OFF, FORMAT JSON) SELECT * FROM sessions WHERE organization_id = :A;
\echo == (i8) citus.multi_task_query_log_level = error: a multi-task statement fails, a router one runs
SET citus.multi_task_query_log_level = error;
SELECT count(*) FROM sessions WHERE organization_id = :A;
SELECT count(*) FROM sessions;
WITH e AS (INSERT INTO events (organization_id, id, type, body, created_at) VALUES (:A, gen_random_uuid(), 'x', '{}', now()) RETURNING id)
SELECT count(*) FROM e;
RESET citus.multi_task_query_log_level;
\echo == (i9) citus.log_remote_commands: the commands sent to workers
SET citus.log_remote_commands = on;
SET client_min_messages = notice;
SELECT count(*) FROM sessions WHERE organization_id = :A;
WITH e AS (INSERT INTO events (organization_id, id, type, body, created_at) VALUES (:A, gen_random_uuid(), 'x', '{}', now()) RETURNING id)
SELECT count(*) FROM e;
