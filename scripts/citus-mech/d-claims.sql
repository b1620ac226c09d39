-- (d) Claims across organizations: Parley's shapes (src/Replies/Repo.ts claimJobs,
-- src/Erasures/Repo.ts claim, src/Webhooks/Repo.ts claimStatement's unordered part and
-- its recursive walk of the queues) on distributed tables, then the alternatives.
\set A '''00000000-0000-0000-0000-00000000000a'''
\set B '''00000000-0000-0000-0000-00000000000e'''
\set W '''11111111-1111-1111-1111-111111111111'''
INSERT INTO events (organization_id, id, type, body, created_at)
SELECT o, gen_random_uuid(), 'message.created', '{}', now() FROM unnest(ARRAY[:A, :B]::uuid[]) o, generate_series(1, 5);
INSERT INTO reply_jobs (organization_id, id, session_id, status, due_at, created_at)
SELECT o, gen_random_uuid(), gen_random_uuid(), 'pending', now() - interval '1 minute', now() FROM unnest(ARRAY[:A, :B]::uuid[]) o, generate_series(1, 3);
INSERT INTO erasures (organization_id, id, status, requested_at) SELECT o, gen_random_uuid(), 'pending', now() FROM unnest(ARRAY[:A, :B]::uuid[]) o;
SELECT organization_id, count(*) AS pending_deliveries FROM deliveries WHERE status = 'pending' GROUP BY 1 ORDER BY 1;

\echo == (d1) Replies claimJobs, as it is: a CTE with ORDER BY ... LIMIT ... FOR UPDATE OF j SKIP LOCKED, then UPDATE ... FROM it
WITH due AS (
  SELECT j.id FROM reply_jobs j
  WHERE j.status = 'pending' AND j.due_at <= now()
    AND NOT EXISTS (SELECT 1 FROM reply_jobs r WHERE r.session_id = j.session_id AND r.status = 'running')
  ORDER BY j.due_at LIMIT 2
  FOR UPDATE OF j SKIP LOCKED
)
UPDATE reply_jobs j SET status = 'running', leased_by = :W, lease_until = now() + interval '1 minute'
FROM due WHERE j.id = due.id
RETURNING j.organization_id, j.id;

\echo == (d2) Erasures claim, as it is: UPDATE ... FROM (SELECT ... ORDER BY ... LIMIT 1 FOR UPDATE SKIP LOCKED)
UPDATE erasures e SET leased_by = :W, attempts = e.attempts + 1, lease_until = statement_timestamp() + interval '1 minute'
FROM (SELECT organization_id, id FROM erasures WHERE status = 'pending' AND (lease_until IS NULL OR lease_until < statement_timestamp())
  ORDER BY requested_at LIMIT 1 FOR UPDATE SKIP LOCKED) p
WHERE e.organization_id = p.organization_id AND e.id = p.id
RETURNING e.organization_id, e.id;

\echo == (d3) the webhook claim, its unordered part, as it is (a join of apps, FOR UPDATE OF d SKIP LOCKED in a CTE)
WITH unordered AS (
  SELECT d.id, d.app_id, d.next_attempt_at FROM deliveries d JOIN apps a ON a.id = d.app_id
  WHERE d.status = 'pending' AND d.ordering_key IS NULL AND d.next_attempt_at <= now()
    AND (d.lease_until IS NULL OR d.lease_until < now()) AND a.enabled
  ORDER BY d.next_attempt_at LIMIT 4
  FOR UPDATE OF d SKIP LOCKED
)
UPDATE deliveries d SET leased_by = :W, lease_until = now() + interval '1 minute'
FROM unordered p WHERE d.id = p.id RETURNING d.organization_id, d.id;

\echo == (d4) the multi-shard SELECT ... FOR UPDATE SKIP LOCKED alone
SELECT id FROM deliveries WHERE status = 'pending' ORDER BY next_attempt_at LIMIT 2 FOR UPDATE SKIP LOCKED;

\echo == (d5) per organization: the same claims with organization_id = $org on every table (router)
EXPLAIN (COSTS OFF)
WITH due AS (
  SELECT j.id FROM reply_jobs j
  WHERE j.organization_id = :A AND j.status = 'pending' AND j.due_at <= now()
    AND NOT EXISTS (SELECT 1 FROM reply_jobs r WHERE r.organization_id = :A AND r.session_id = j.session_id AND r.status = 'running')
  ORDER BY j.due_at LIMIT 2
  FOR UPDATE OF j SKIP LOCKED
)
UPDATE reply_jobs j SET status = 'running', leased_by = :W, lease_until = now() + interval '1 minute'
FROM due WHERE j.organization_id = :A AND j.id = due.id
RETURNING j.organization_id, j.id;
WITH due AS (
  SELECT j.id FROM reply_jobs j
  WHERE j.organization_id = :A AND j.status = 'pending' AND j.due_at <= now()
    AND NOT EXISTS (SELECT 1 FROM reply_jobs r WHERE r.organization_id = :A AND r.session_id = j.session_id AND r.status = 'running')
  ORDER BY j.due_at LIMIT 2
  FOR UPDATE OF j SKIP LOCKED
)
UPDATE reply_jobs j SET status = 'running', leased_by = :W, lease_until = now() + interval '1 minute'
FROM due WHERE j.organization_id = :A AND j.id = due.id
RETURNING j.organization_id, j.id;
EXPLAIN (COSTS OFF)
WITH unordered AS (
  SELECT d.id, d.app_id, d.next_attempt_at FROM deliveries d JOIN apps a ON a.organization_id = d.organization_id AND a.id = d.app_id
  WHERE d.organization_id = :A AND d.status = 'pending' AND d.ordering_key IS NULL AND d.next_attempt_at <= now()
    AND (d.lease_until IS NULL OR d.lease_until < now()) AND a.enabled
  ORDER BY d.next_attempt_at LIMIT 4
  FOR UPDATE OF d SKIP LOCKED
)
UPDATE deliveries d SET leased_by = :W, lease_until = now() + interval '1 minute'
FROM unordered p WHERE d.organization_id = :A AND d.id = p.id RETURNING d.organization_id, d.id;

\echo == (d6) the recursive walk of the queues (WITH RECURSIVE), per organization and across them
UPDATE apps SET ordering = 'conversation';
INSERT INTO events (organization_id, id, type, body, conversation_id, created_at)
SELECT o, gen_random_uuid(), 'message.created', '{}', c, now() FROM unnest(ARRAY[:A, :B]::uuid[]) o, unnest(ARRAY[gen_random_uuid(), gen_random_uuid()]) c;
UPDATE apps SET ordering = 'none';
EXPLAIN (COSTS OFF)
WITH RECURSIVE queues AS (
  (SELECT q.app_id, q.ordering_key FROM deliveries q WHERE q.organization_id = :A AND q.status = 'pending' AND q.ordering_key IS NOT NULL
    ORDER BY q.app_id, q.ordering_key LIMIT 1)
  UNION ALL
  SELECT n.app_id, n.ordering_key FROM queues u CROSS JOIN LATERAL (
    SELECT q.app_id, q.ordering_key FROM deliveries q
    WHERE q.organization_id = :A AND q.status = 'pending' AND q.ordering_key IS NOT NULL AND (q.app_id, q.ordering_key) > (u.app_id, u.ordering_key)
    ORDER BY q.app_id, q.ordering_key LIMIT 1) n
), heads AS (
  SELECT h.id FROM queues u CROSS JOIN LATERAL (
    SELECT d.id FROM deliveries d WHERE d.organization_id = :A AND d.app_id = u.app_id AND d.ordering_key = u.ordering_key
      AND d.status = 'pending' ORDER BY d.sequence_number LIMIT 1 FOR UPDATE SKIP LOCKED) h
)
UPDATE deliveries d SET leased_by = :W, lease_until = now() + interval '1 minute'
FROM heads p WHERE d.organization_id = :A AND d.id = p.id RETURNING d.organization_id, d.id;
WITH RECURSIVE queues AS (
  (SELECT q.app_id, q.ordering_key FROM deliveries q WHERE q.status = 'pending' AND q.ordering_key IS NOT NULL
    ORDER BY q.app_id, q.ordering_key LIMIT 1)
  UNION ALL
  SELECT n.app_id, n.ordering_key FROM queues u CROSS JOIN LATERAL (
    SELECT q.app_id, q.ordering_key FROM deliveries q
    WHERE q.status = 'pending' AND q.ordering_key IS NOT NULL AND (q.app_id, q.ordering_key) > (u.app_id, u.ordering_key)
    ORDER BY q.app_id, q.ordering_key LIMIT 1) n
)
SELECT count(*) FROM queues;

\echo == (d7) discovery across organizations without locks (multi-shard, read only): who has due work
EXPLAIN (COSTS OFF)
SELECT organization_id, min(next_attempt_at) AS due FROM deliveries
WHERE status = 'pending' AND ordering_key IS NULL AND next_attempt_at <= now() AND (lease_until IS NULL OR lease_until < now())
GROUP BY organization_id ORDER BY due LIMIT 16;
SELECT organization_id, min(next_attempt_at) AS due FROM deliveries
WHERE status = 'pending' AND ordering_key IS NULL AND next_attempt_at <= now() AND (lease_until IS NULL OR lease_until < now())
GROUP BY organization_id ORDER BY due LIMIT 16;

\echo == (d8) one multi-shard UPDATE, at most n per organization (window over organization_id), no FOR UPDATE
EXPLAIN (COSTS OFF)
UPDATE deliveries d SET leased_by = :W, lease_until = now() + interval '1 minute'
FROM (SELECT organization_id, id, row_number() OVER (PARTITION BY organization_id ORDER BY next_attempt_at, id) AS rn
  FROM deliveries WHERE status = 'pending' AND ordering_key IS NULL AND next_attempt_at <= now() AND (lease_until IS NULL OR lease_until < now())) p
WHERE d.organization_id = p.organization_id AND d.id = p.id AND p.rn <= 2 AND (d.lease_until IS NULL OR d.lease_until < now())
RETURNING d.organization_id, d.id;

\echo == (d9) one multi-shard UPDATE of the n due first overall (subquery with LIMIT), no FOR UPDATE
EXPLAIN (COSTS OFF)
UPDATE deliveries d SET leased_by = :W, lease_until = now() + interval '1 minute'
WHERE (d.organization_id, d.id) IN (SELECT organization_id, id FROM deliveries
  WHERE status = 'pending' AND ordering_key IS NULL AND next_attempt_at <= now() AND (lease_until IS NULL OR lease_until < now())
  ORDER BY next_attempt_at LIMIT 4)
  AND (d.lease_until IS NULL OR d.lease_until < now())
RETURNING d.organization_id, d.id;
