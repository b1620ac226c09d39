-- (e) Data-modifying CTEs and INSERT ... SELECT ... ON CONFLICT, one organization's rows.
\set A '''00000000-0000-0000-0000-00000000000a'''
\echo == (e1) UPDATE and DELETE CTEs of one organization (the shape of the erasure request statement)
EXPLAIN (COSTS OFF)
WITH v AS (UPDATE conversations SET contact_id = contact_id WHERE organization_id = :A AND contact_id = 'alice' RETURNING 1),
  s AS (UPDATE sessions SET status = status WHERE organization_id = :A AND id = 'aaaaaaaa-0000-0000-0000-0000000000f1' RETURNING 1),
  c AS (DELETE FROM session_schedules WHERE organization_id = :A AND status = 'none' RETURNING 1)
SELECT (SELECT count(*) FROM v) AS conversations, (SELECT count(*) FROM s) AS sessions, (SELECT count(*) FROM c) AS schedules;

\echo == (e2) INSERT CTEs of one organization (POST message: the message and its event in one statement)
EXPLAIN (COSTS OFF)
WITH m AS (INSERT INTO runs (organization_id, id, session_id, status, started_at, duration_ms)
    VALUES (:A, gen_random_uuid(), 'aaaaaaaa-0000-0000-0000-0000000000f1', 'succeeded', now(), 1) RETURNING id),
  e AS (INSERT INTO events (organization_id, id, type, body, created_at)
    SELECT :A, gen_random_uuid(), 'message.created', '{}', statement_timestamp() FROM m RETURNING id)
SELECT (SELECT id FROM m) AS message, (SELECT id FROM e) AS event;

\echo == (e3) snapshot: the parts of one statement do not see the writes of each other on one server; on Citus?
WITH e AS (INSERT INTO events (organization_id, id, type, body, created_at)
    VALUES (:A, 'eeeeeeee-0000-0000-0000-000000000003', 'message.created', '{}', now()) RETURNING id)
SELECT (SELECT count(*) FROM e) AS inserted,
  (SELECT count(*) FROM events WHERE organization_id = :A AND id = 'eeeeeeee-0000-0000-0000-000000000003') AS outer_query_sees_event,
  (SELECT count(*) FROM deliveries WHERE organization_id = :A AND event_id = 'eeeeeeee-0000-0000-0000-000000000003') AS outer_query_sees_trigger_deliveries;
\echo   the same on a local (undistributed) copy of the tables, for comparison:
CREATE TEMP TABLE le (LIKE events INCLUDING DEFAULTS); CREATE TEMP TABLE ld (LIKE deliveries INCLUDING DEFAULTS);
CREATE FUNCTION pg_temp.lf() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN
  INSERT INTO ld (organization_id, id, app_id, event_id, event_type, created_at) VALUES (NEW.organization_id, gen_random_uuid(), gen_random_uuid(), NEW.id, NEW.type, now());
  RETURN NULL; END $$;
CREATE TRIGGER lt AFTER INSERT ON le FOR EACH ROW EXECUTE FUNCTION pg_temp.lf();
WITH e AS (INSERT INTO le (organization_id, id, type, body, created_at)
    VALUES (:A, 'eeeeeeee-0000-0000-0000-000000000003', 'message.created', '{}', now()) RETURNING id)
SELECT (SELECT count(*) FROM e) AS inserted,
  (SELECT count(*) FROM le WHERE id = 'eeeeeeee-0000-0000-0000-000000000003') AS outer_query_sees_event,
  (SELECT count(*) FROM ld WHERE event_id = 'eeeeeeee-0000-0000-0000-000000000003') AS outer_query_sees_trigger_deliveries;

\echo == (e4) an INSERT CTE beside a SELECT CTE of the same table (ingest receipts: r inserts, d reads unless r did)
WITH r AS (INSERT INTO idempotency_keys (organization_id, key, fingerprint, status, body, expires_at)
    VALUES (:A, 'k-e4', '\x01', 200, '\x', now() + interval '1 day') ON CONFLICT (organization_id, key) DO NOTHING RETURNING key),
  d AS (SELECT key FROM idempotency_keys WHERE organization_id = :A AND key = 'k-e4')
SELECT (SELECT count(*) FROM r) AS inserted, (SELECT count(*) FROM d) AS d_sees;

\echo == (e5) INSERT ... SELECT ... ON CONFLICT DO UPDATE (the rate-limit lease, src/RateLimits/RateLimiter.ts leaseSql)
INSERT INTO organization_settings (organization_id, rate_limit_per_second) VALUES (:A, 10);
EXPLAIN (COSTS OFF)
INSERT INTO rate_limit_buckets AS b (organization_id, rate, burst, tokens, granted, updated_at)
SELECT s.organization_id, s.rate_limit_per_second, s.burst, s.burst - least(s.burst, 5), least(s.burst, 5), clock_timestamp()
FROM (SELECT organization_id, rate_limit_per_second, coalesce(rate_limit_burst, 2 * rate_limit_per_second) AS burst
  FROM organization_settings WHERE organization_id = :A AND rate_limit_per_second IS NOT NULL) s
ON CONFLICT (organization_id) DO UPDATE SET rate = EXCLUDED.rate, burst = EXCLUDED.burst,
  granted = least(floor(least(EXCLUDED.burst, b.tokens + EXCLUDED.rate * greatest(0, extract(epoch FROM EXCLUDED.updated_at - b.updated_at))))::int4, 5),
  tokens = least(EXCLUDED.burst, b.tokens + EXCLUDED.rate * greatest(0, extract(epoch FROM EXCLUDED.updated_at - b.updated_at)))
    - least(floor(least(EXCLUDED.burst, b.tokens + EXCLUDED.rate * greatest(0, extract(epoch FROM EXCLUDED.updated_at - b.updated_at))))::int4, 5),
  updated_at = greatest(b.updated_at, EXCLUDED.updated_at)
RETURNING granted, tokens, rate, burst;
INSERT INTO rate_limit_buckets AS b (organization_id, rate, burst, tokens, granted, updated_at)
SELECT s.organization_id, s.rate_limit_per_second, s.burst, s.burst - least(s.burst, 5), least(s.burst, 5), clock_timestamp()
FROM (SELECT organization_id, rate_limit_per_second, coalesce(rate_limit_burst, 2 * rate_limit_per_second) AS burst
  FROM organization_settings WHERE organization_id = :A AND rate_limit_per_second IS NOT NULL) s
ON CONFLICT (organization_id) DO UPDATE SET granted = 1, tokens = b.tokens - 1, updated_at = greatest(b.updated_at, EXCLUDED.updated_at)
RETURNING granted, tokens, rate, burst;

\echo == (e6) INSERT ... VALUES ... ON CONFLICT DO UPDATE ... WHERE (the Idempotency-Key store)
EXPLAIN (COSTS OFF)
INSERT INTO idempotency_keys (organization_id, key, fingerprint, status, body, expires_at)
VALUES (:A, 'k-e6', '\x01', 201, '\x7b7d', statement_timestamp() + interval '24 hours')
ON CONFLICT (organization_id, key) DO UPDATE SET fingerprint = EXCLUDED.fingerprint, status = EXCLUDED.status, body = EXCLUDED.body,
  created_at = statement_timestamp(), expires_at = EXCLUDED.expires_at
WHERE idempotency_keys.expires_at <= statement_timestamp()
RETURNING 1 AS stored;

\echo == (e7) the Idempotency-Key storeUnchangedSql: WITH live AS (SELECT), stored AS (INSERT ... WHERE NOT EXISTS live ON CONFLICT) SELECT FROM live
EXPLAIN (COSTS OFF)
WITH live AS (SELECT fingerprint, status, body FROM idempotency_keys WHERE organization_id = :A AND key = 'k-e7' AND expires_at > statement_timestamp()),
stored AS (
  INSERT INTO idempotency_keys (organization_id, key, fingerprint, status, body, expires_at)
  SELECT :A, 'k-e7', '\x01', 400, '\x', statement_timestamp() + interval '24 hours'
  WHERE NOT EXISTS (SELECT 1 FROM live)
  ON CONFLICT (organization_id, key) DO UPDATE SET status = EXCLUDED.status WHERE idempotency_keys.expires_at <= statement_timestamp()
)
SELECT fingerprint, status, body FROM live;

\echo == (e8) reply upsert: INSERT ... SELECT ... FROM (a router SELECT with FOR SHARE) ON CONFLICT (organization_id, session_id) WHERE status = 'pending'
EXPLAIN (COSTS OFF)
WITH s AS (SELECT id FROM sessions WHERE organization_id = :A AND id = 'aaaaaaaa-0000-0000-0000-0000000000f1' FOR SHARE),
j AS (INSERT INTO reply_jobs (organization_id, id, session_id, status, due_at, created_at)
  SELECT :A, gen_random_uuid(), s.id, 'pending', now() + interval '3 seconds', statement_timestamp() FROM s
  ON CONFLICT (organization_id, session_id) WHERE status = 'pending' DO UPDATE SET due_at = EXCLUDED.due_at, triggers = reply_jobs.triggers + 1
  RETURNING 1)
SELECT (SELECT count(*) FROM j) AS enqueued;

\echo == (e9) the Idempotency-Key store without a function in DO UPDATE / its WHERE: the moment comes in as EXCLUDED.created_at
INSERT INTO idempotency_keys (organization_id, key, fingerprint, status, body, created_at, expires_at)
VALUES (:A, 'k-e6', '\x01', 201, '\x7b7d', statement_timestamp(), statement_timestamp() + interval '24 hours')
ON CONFLICT (organization_id, key) DO UPDATE SET fingerprint = EXCLUDED.fingerprint, status = EXCLUDED.status, body = EXCLUDED.body,
  created_at = EXCLUDED.created_at, expires_at = EXCLUDED.expires_at
WHERE idempotency_keys.expires_at <= EXCLUDED.created_at
RETURNING 1 AS stored;
\echo == (e10) the reply upsert as Parley writes it (updated_at = statement_timestamp() in DO UPDATE SET)
INSERT INTO reply_jobs (organization_id, id, session_id, status, due_at, created_at)
SELECT :A, gen_random_uuid(), 'aaaaaaaa-0000-0000-0000-0000000000f1', 'pending', now(), statement_timestamp()
ON CONFLICT (organization_id, session_id) WHERE status = 'pending' DO UPDATE SET due_at = EXCLUDED.due_at, created_at = statement_timestamp();
