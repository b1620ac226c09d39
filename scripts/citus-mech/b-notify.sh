#!/usr/bin/env bash
# (b) Where pg_notify lands: a listener on each node (coordinator, worker 1, worker 2),
# then each of Parley's shapes of NOTIFY run on the coordinator, one at a time.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
. "$here/lib.sh"
A="'00000000-0000-0000-0000-00000000000a'"
listen() { # $1 label, $2 port
  psql_at "$2" -d "$db" -q <<SQL 2>&1 | sed "s/^/  [$1] /" | grep -i notification || echo "  [$1] (nothing)"
LISTEN parley_deliveries; LISTEN parley_replies; LISTEN parley_erasures; LISTEN parley_test;
SELECT pg_sleep(2.5);
SELECT 1;
SQL
}
case_() { # $1 title, $2 SQL
  echo "== $1"
  echo "$2" | sed 's/^/   /'
  listen coordinator "$port" & listen worker1 $((port + 1)) & listen worker2 $((port + 2)) &
  sleep 1
  c -q -v ON_ERROR_STOP=1 -c "$2" >/dev/null 2>"$here/.err" || sed 's/^/   ERROR: /' "$here/.err"
  wait
}
case_ "(b1) fan-out trigger on the shard (INSERT INTO events, router)" \
  "INSERT INTO events (organization_id, id, type, body, created_at) VALUES ($A, gen_random_uuid(), 'message.created', '{}', now())"
case_ "(b2) Replies enqueue: WITH j AS (INSERT ... ON CONFLICT ... RETURNING 1) SELECT pg_notify(...) FROM j" \
  "WITH j AS (INSERT INTO reply_jobs (organization_id, id, session_id, status, due_at, created_at)
  SELECT $A, gen_random_uuid(), 'aaaaaaaa-0000-0000-0000-0000000000f1', 'pending', now(), statement_timestamp()
  ON CONFLICT (organization_id, session_id) WHERE status = 'pending' DO UPDATE SET due_at = EXCLUDED.due_at, triggers = reply_jobs.triggers + 1
  RETURNING 1) SELECT pg_notify('parley_replies', 'job') FROM j"
case_ "(b3) Erasures: WITH v AS (UPDATE ... RETURNING 1), c AS (DELETE ... RETURNING 1) SELECT ..., pg_notify(...)" \
  "WITH v AS (UPDATE conversations SET contact_id = contact_id WHERE organization_id = $A AND contact_id = 'alice' RETURNING 1),
  c AS (DELETE FROM session_schedules WHERE organization_id = $A AND status = 'none' RETURNING 1)
  SELECT (SELECT count(*) FROM v)::int AS conversations, (SELECT count(*) FROM c)::int AS c, pg_notify('parley_erasures', '') IS NULL AS notified"
case_ "(b4) a router SELECT with pg_notify in its target list" \
  "SELECT pg_notify('parley_test', 'router-select') FROM apps WHERE organization_id = $A LIMIT 1"
case_ "(b5) a router INSERT, then SELECT pg_notify(...) alone, in one transaction" \
  "BEGIN; INSERT INTO events (organization_id, id, type, body, created_at) SELECT $A, gen_random_uuid(), 'message.created', '{}', now() FROM (SELECT set_config('parley.fan_out_notify', 'off', true)) f; SELECT pg_notify('parley_deliveries', 'from-coordinator'); COMMIT;"
case_ "(b6) Outbox's fan_out_notify off: INSERT INTO events ... SELECT ... CROSS JOIN (SELECT set_config('parley.fan_out_notify', 'off', true))" \
  "INSERT INTO events (organization_id, id, type, body, created_at) SELECT $A, gen_random_uuid(), 'message.created', '{}', now() FROM (SELECT 1) one CROSS JOIN (SELECT set_config('parley.fan_out_notify', 'off', true)) fan_out"
rm -f "$here/.err"
case_ "(b7) a transaction writing both workers, then SELECT pg_notify(...) alone (2PC)" \
  "BEGIN; INSERT INTO events (organization_id, id, type, body, created_at) VALUES ($A, gen_random_uuid(), 'message.created', '{}', now()), ('00000000-0000-0000-0000-00000000000e', gen_random_uuid(), 'message.created', '{}', now()); SELECT pg_notify('parley_deliveries', 'from-coordinator-2pc'); COMMIT;"
rm -f "$here/.err"
