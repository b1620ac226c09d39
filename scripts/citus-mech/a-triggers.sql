-- (a) Row triggers on distributed tables (triggers.sql, Parley's exact functions).
\set A '''00000000-0000-0000-0000-00000000000a'''
\set B '''00000000-0000-0000-0000-00000000000e'''
\echo == triggers on the shards (worker 1):
SELECT * FROM run_command_on_workers($$SELECT count(*) FROM pg_trigger WHERE tgname = 'events_fan_out'$$);
\echo == (a1) fan-out: a router INSERT INTO events, unordered app
INSERT INTO events (organization_id, id, type, body, conversation_id, created_at)
VALUES (:A, gen_random_uuid(), 'message.created', '{}', 'aaaaaaaa-0000-0000-0000-0000000000c1', statement_timestamp());
SELECT organization_id, app_id, sequence_number, next_attempt_at IS NOT NULL AS due FROM deliveries ORDER BY 1;
\echo == (a2) fan-out: a multi-row INSERT INTO events of two organizations (two workers)
INSERT INTO events (organization_id, id, type, body, conversation_id, created_at)
VALUES (:A, gen_random_uuid(), 'message.created', '{}', 'aaaaaaaa-0000-0000-0000-0000000000c1', statement_timestamp()),
       (:B, gen_random_uuid(), 'message.created', '{}', 'bbbbbbbb-0000-0000-0000-0000000000c1', statement_timestamp());
SELECT organization_id, count(*) FROM deliveries GROUP BY 1 ORDER BY 1;
\echo == (a3) fan-out to an ordered app: nextval('deliveries_sequence_number_seq') on the worker
UPDATE apps SET ordering = 'conversation' WHERE organization_id = :A;
SELECT * FROM run_command_on_workers($$SELECT to_regclass('deliveries_sequence_number_seq')::text$$);
INSERT INTO events (organization_id, id, type, body, conversation_id, created_at)
VALUES (:A, gen_random_uuid(), 'message.created', '{}', 'aaaaaaaa-0000-0000-0000-0000000000c1', statement_timestamp());
SELECT organization_id, app_id, ordering_key IS NOT NULL AS ordered, sequence_number FROM deliveries WHERE organization_id = :A ORDER BY sequence_number NULLS FIRST;
UPDATE apps SET ordering = 'none' WHERE organization_id = :A;
\echo == (a4) sessions_closed: the trigger UPDATE/DELETE filter by session_id only
INSERT INTO session_schedules (organization_id, id, session_id, scheduled_for, status)
VALUES (:A, gen_random_uuid(), 'aaaaaaaa-0000-0000-0000-0000000000f1', now() + interval '1 hour', 'pending');
INSERT INTO reply_jobs (organization_id, id, session_id, status, due_at, created_at)
VALUES (:A, gen_random_uuid(), 'aaaaaaaa-0000-0000-0000-0000000000f1', 'pending', now() + interval '1 hour', now());
UPDATE sessions SET status = 'closed' WHERE organization_id = :A AND id = 'aaaaaaaa-0000-0000-0000-0000000000f1';
\echo == (a4b) the same trigger with organization_id in its statements
CREATE OR REPLACE FUNCTION parley_session_closed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  UPDATE session_schedules SET status = 'canceled', error = 'Session closed'
    WHERE organization_id = NEW.organization_id AND session_id = NEW.id AND status = 'pending';
  DELETE FROM reply_jobs WHERE organization_id = NEW.organization_id AND session_id = NEW.id AND status = 'pending';
  RETURN NULL;
END
$$;
UPDATE sessions SET status = 'closed' WHERE organization_id = :A AND id = 'aaaaaaaa-0000-0000-0000-0000000000f1';
SELECT status, error FROM session_schedules WHERE organization_id = :A;
SELECT count(*) AS pending_reply_jobs FROM reply_jobs WHERE organization_id = :A AND status = 'pending';
\echo == (a5) apps_deleted: DELETE FROM deliveries WHERE app_id = OLD.id
DELETE FROM apps WHERE organization_id = :B AND id = 'bbbbbbbb-0000-0000-0000-000000000001';
\echo == (a5b) with organization_id
CREATE OR REPLACE FUNCTION parley_app_deleted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  DELETE FROM deliveries WHERE organization_id = OLD.organization_id AND app_id = OLD.id;
  RETURN NULL;
END
$$;
DELETE FROM apps WHERE organization_id = :B AND id = 'bbbbbbbb-0000-0000-0000-000000000001';
SELECT organization_id, count(*) FROM deliveries GROUP BY 1 ORDER BY 1;
\echo == (a6) cascade from the reference table: DELETE FROM organizations deletes apps on the shards, whose trigger runs
INSERT INTO apps (organization_id, id, events) VALUES (:B, 'bbbbbbbb-0000-0000-0000-000000000002', '{message.created}');
INSERT INTO events (organization_id, id, type, body, created_at) VALUES (:B, gen_random_uuid(), 'message.created', '{}', now());
SELECT organization_id, count(*) FROM deliveries GROUP BY 1 ORDER BY 1;
BEGIN;
DELETE FROM organizations WHERE id = :B;
SELECT organization_id, count(*) FROM deliveries GROUP BY 1 ORDER BY 1;
ROLLBACK;
