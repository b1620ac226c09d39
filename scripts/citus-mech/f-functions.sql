-- (f) Where functions run: inet_server_port() names the node (coordinator 5450, workers
-- 5451, 5452 with the default CITUS_PORT) in each place Parley calls parley_uuid_v7(),
-- statement_timestamp(), clock_timestamp().
\set A '''00000000-0000-0000-0000-00000000000a'''
\echo == parley_uuid_v7 and parley_app_subscribed on the workers (CREATE FUNCTION outside a transaction block):
SELECT * FROM run_command_on_workers($$SELECT to_regprocedure('parley_uuid_v7()')::text$$);
SELECT pg_identify_object(classid, objid, objsubid) FROM pg_dist_object WHERE classid = 'pg_proc'::regclass ORDER BY 1::text;
CREATE TABLE probe (organization_id uuid NOT NULL, id uuid NOT NULL, note text, port int, v uuid, at timestamptz, PRIMARY KEY (organization_id, id));
SELECT create_distributed_table('probe', 'organization_id', colocate_with => 'apps');
CREATE FUNCTION node_port() RETURNS int LANGUAGE sql VOLATILE AS $$ SELECT inet_server_port() $$;
\echo == (f1) INSERT ... VALUES (router): volatile functions in VALUES
INSERT INTO probe VALUES (:A, gen_random_uuid(), 'f1 values', node_port(), parley_uuid_v7(), statement_timestamp());
\echo == (f2) INSERT ... SELECT ... FROM a co-located distributed table (pushed down)
EXPLAIN (COSTS OFF) INSERT INTO probe SELECT organization_id, gen_random_uuid(), 'f2 insert-select', node_port(), parley_uuid_v7(), statement_timestamp() FROM apps WHERE organization_id = :A;
INSERT INTO probe SELECT organization_id, gen_random_uuid(), 'f2 insert-select', node_port(), parley_uuid_v7(), statement_timestamp() FROM apps WHERE organization_id = :A;
\echo == (f3) INSERT ... SELECT ... with no distributed table in the SELECT (the Outbox's FROM (SELECT 1))
EXPLAIN (COSTS OFF) INSERT INTO probe SELECT :A, gen_random_uuid(), 'f3 insert-select-constant', node_port(), parley_uuid_v7(), statement_timestamp() FROM (SELECT 1) one;
INSERT INTO probe SELECT :A, gen_random_uuid(), 'f3 insert-select-constant', node_port(), parley_uuid_v7(), statement_timestamp() FROM (SELECT 1) one;
\echo == (f4) UPDATE (router) SET a volatile function
UPDATE probe SET note = note || ' then f4 update', port = node_port() WHERE organization_id = :A AND note = 'f1 values';
\echo == (f5) a router SELECT
SELECT 'f5 select' AS note, node_port() AS port FROM probe WHERE organization_id = :A LIMIT 1;
\echo == (f6) inside the fan-out trigger on the shard (statement_timestamp() of the trigger vs of the event)
SELECT note, port, at FROM probe ORDER BY note;
\echo == (f7) CREATE FUNCTION inside a transaction block after a parallel distributed command
BEGIN;
CREATE TABLE probe2 (organization_id uuid NOT NULL, id uuid NOT NULL, PRIMARY KEY (organization_id, id));
SELECT create_distributed_table('probe2', 'organization_id', colocate_with => 'apps');
CREATE FUNCTION parley_later() RETURNS int LANGUAGE sql AS $$ SELECT 1 $$;
COMMIT;
SELECT * FROM run_command_on_workers($$SELECT to_regprocedure('parley_later()')::text$$);
INSERT INTO probe2 SELECT :A, gen_random_uuid() FROM apps WHERE organization_id = :A AND parley_later() = 1;
SELECT create_distributed_function('parley_later()');
SELECT * FROM run_command_on_workers($$SELECT to_regprocedure('parley_later()')::text$$);
