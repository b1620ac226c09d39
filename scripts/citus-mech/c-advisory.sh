#!/usr/bin/env bash
# (c) Which node takes Parley's advisory transaction locks: ingest's lock statement
# (src/Ingest/Repo.ts ingestLockStatement) and the Idempotency-Key claim
# (src/Idempotency/Repo.ts claimSql), each held open in one session while pg_locks of
# every node is read, then the same lock tried from a second session.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
. "$here/lib.sh"
A="00000000-0000-0000-0000-00000000000a"
ingest="SELECT 1 AS locked FROM pg_advisory_xact_lock(hashtextextended(json_build_array('$A', 'whatsapp', '+100', '+200')::text, 0))"
claim="SELECT pg_try_advisory_xact_lock(hashtextextended(json_build_array('idempotency', '$A'::text, 'key-1'::text)::text, 0)) AS acquired,
  k.fingerprint, k.status FROM (SELECT 1) one LEFT JOIN (SELECT fingerprint, status, body FROM idempotency_keys
  WHERE organization_id = '$A'::uuid AND key = 'key-1' AND expires_at > statement_timestamp()) k ON true"
locks() {
  for n in 0 1 2; do
    printf '  node %s (port %s): ' "$n" $((port + n))
    psql_at $((port + n)) -d "$db" -tA -c "SELECT coalesce(string_agg(locktype || ' ' || mode || ' granted=' || granted, ', '), 'no advisory lock') FROM pg_locks WHERE locktype = 'advisory'"
  done
}
for shape in ingest claim; do
  sql=${!shape}
  echo "== $shape: held in a transaction"
  echo "$sql" | sed 's/^/   /'
  c -q -c "BEGIN" -c "$sql" -c "SELECT pg_sleep(3)" -c "COMMIT" >/dev/null &
  sleep 1.5
  locks
  echo "  EXPLAIN:"; c -tA -c "EXPLAIN (COSTS OFF) $sql" | sed 's/^/    /'
  echo "  a second session, meanwhile (lock_timeout 500ms):"
  c -tA -c "SET lock_timeout = '500ms'" -c "$sql" 2>&1 | sed 's/^/    /' || true
  wait
done
