#!/usr/bin/env bash
# (d10) Two workers claiming one organization's deliveries at once with the router claim
# (FOR UPDATE SKIP LOCKED): the second skips the rows the first holds. (d11) set_config
# (the claim's async_commit CTE) in a router UPDATE. (i10) whether EXPLAIN of an INSERT CTE
# writes.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
. "$here/lib.sh"
A="'00000000-0000-0000-0000-00000000000a'"
c -q -c "INSERT INTO events (organization_id, id, type, body, created_at) SELECT $A, gen_random_uuid(), 'message.created', '{}', now() FROM generate_series(1, 5)"
c -q -c "UPDATE deliveries SET leased_by = NULL, lease_until = NULL, status = 'pending', next_attempt_at = now() - interval '1 minute', ordering_key = NULL WHERE organization_id = $A"
claim="WITH unordered AS (
  SELECT d.id FROM deliveries d JOIN apps a ON a.organization_id = d.organization_id AND a.id = d.app_id
  WHERE d.organization_id = $A AND d.status = 'pending' AND d.ordering_key IS NULL AND d.next_attempt_at <= now()
    AND (d.lease_until IS NULL OR d.lease_until < now()) AND a.enabled
  ORDER BY d.next_attempt_at, d.id LIMIT 2 FOR UPDATE OF d SKIP LOCKED)
UPDATE deliveries d SET leased_by = '11111111-1111-1111-1111-111111111111', lease_until = now() + interval '1 minute'
FROM unordered p WHERE d.organization_id = $A AND d.id = p.id RETURNING d.id"
echo "== (d10) pending deliveries of A: $(c -tA -c "SELECT count(*) FROM deliveries WHERE organization_id = $A AND status = 'pending'")"
(c -tA -c "BEGIN" -c "$claim" -c "SELECT pg_sleep(2)" -c "COMMIT" | sed 's/^/  worker 1 claims: /' || true) &
sleep 1
c -tA -c "$claim" | sed 's/^/  worker 2 claims (meanwhile): /'
wait
echo "== (d10b) a volatile function in the router UPDATE's SET (gen_random_uuid())"
c -tA -c "UPDATE deliveries SET leased_by = gen_random_uuid() WHERE organization_id = $A" 2>&1 | sed 's/^/  /' || true
echo "== (d11) set_config in a router UPDATE (the claim's async_commit CTE)"
c -tA -c "WITH async_commit AS (SELECT set_config('synchronous_commit', 'off', true)) UPDATE deliveries SET attempts = attempts FROM async_commit WHERE organization_id = $A" 2>&1 | sed 's/^/  /' || true
c -tA -c "UPDATE deliveries SET attempts = attempts FROM (SELECT set_config('synchronous_commit', 'off', true)) async_commit WHERE organization_id = $A" 2>&1 | sed 's/^/  /' || true
echo "== (i10) does EXPLAIN (no ANALYZE) of an INSERT CTE write? events of A before: $(c -tA -c "SELECT count(*) FROM events WHERE organization_id = $A")"
c -q -c "EXPLAIN WITH e AS (INSERT INTO events (organization_id, id, type, body, created_at) VALUES ($A, gen_random_uuid(), 'x', '{}', now()) RETURNING id) SELECT count(*) FROM e" >/dev/null
echo "  after: $(c -tA -c "SELECT count(*) FROM events WHERE organization_id = $A")"
