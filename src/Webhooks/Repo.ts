/**
 * SQL of the webhooks domain (DECISIONS.md W2, W5, W7, O5, O6): apps, the admin
 * view of deliveries with their attempts, and the delivery workers' claim,
 * completion, release and sweep statements. Deliveries are created by the fan-out
 * trigger of migrations/0002_webhooks.ts, never here.
 *
 * The worker statements are fixed texts run with `unsafe` and positional
 * parameters, prepared once per connection of the worker's own pool, whose
 * planner settings keep their plans on index probes (`WORKER_PLANNER_SETTINGS`).
 */
import { PgClient } from "@effect/sql-pg"
import { Context, Effect, Layer } from "effect"
import type { SqlError, Statement } from "effect/sql"
import type { DatabaseHealth } from "../Database/Health.ts"
import { immutableIsoTimestamp, membersOf, objectJson } from "../Database/Json.ts"
import { fixedStatement } from "../Database/Statement.ts"
import { listenForever } from "../Database/Workers.ts"
import { type AppOrdering, AppWithoutSecret } from "../Domain/App.ts"
import type { JsonText } from "../Domain/Common.ts"
import { isUuid } from "../Domain/Common.ts"
import type { EventType } from "../Domain/EventType.ts"
import { deliveriesChannel, insertEvents, notifyDeliveriesIf, wroteSubscribedAnySql } from "../Outbox/Outbox.ts"
import { type App, Delivery, DeliveryAttempt, type DeliveryStatus, type SecretRotation } from "./Api.ts"

/** The channel the delivery workers LISTEN on, which the writers of events notify (`Outbox.ts` `notifyDeliveries`). */
export { deliveriesChannel }

/**
 * SQL text of a boolean: whether the event `eventId` of the organization
 * `organizationId` (uuid expressions) is not yet delivered (D23): it has no delivery, or one that has not succeeded
 * (`pending`, or `failed`, which the admin retry and W9's recovery send
 * again). The events a redaction rewrites (`src/Messages/Repo.ts`).
 */
export const notDeliveredSql = (organizationId: string, eventId: string): string =>
  `(NOT EXISTS (SELECT 1 FROM deliveries d WHERE d.organization_id = ${organizationId} AND d.event_id = ${eventId})
    OR EXISTS (SELECT 1 FROM deliveries d WHERE d.organization_id = ${organizationId} AND d.event_id = ${eventId}
      AND d.status <> 'succeeded'))`

/** A delivery claimed by a worker: what one attempt needs. */
export interface ClaimedDelivery {
  /** The delivery's organization (O11: with `id`, its key). */
  readonly organization_id: string
  readonly id: string
  readonly app_id: string
  readonly event_id: string
  /** Attempts made before this one. */
  readonly attempts: number
  readonly webhook_url: string
  readonly signing_secret: string
  /** The app's previous secret while it still signs after a rotation (W8), else null. */
  readonly previous_signing_secret: string | null
  /** The stored envelope text, sent byte-identical (W3). */
  readonly body: string
  /** The event's stored trace context (`{traceparent}`), if any. */
  readonly traceparent: string | null
}

/** The outcome of one attempt, as recorded (W5). */
export interface AttemptResult {
  /** The delivery's organization and id, as claimed. */
  readonly organizationId: string
  readonly id: string
  readonly statusCode: number | null
  readonly error: string | null
  readonly durationMs: number
  readonly startedAt: Date
  /** The delivery's status after the attempt. */
  readonly status: DeliveryStatus
  /** With `pending`: milliseconds until the next attempt. */
  readonly delayMs: number
}

/**
 * The commit setting of the delivery worker's connections (its own pool,
 * `Worker.ts` `workerClientLayer`): every transaction of theirs (the
 * discovery, the claims, the completions, the release and the sweep) commits
 * without waiting for its WAL flush (`synchronous_commit = off`). Safe for
 * at least once (W2): a database crash (not a process crash) can lose the
 * last such commits, so leases vanish and attempts are forgotten, and those
 * deliveries are attempted again; events and deliveries themselves are
 * written by the API's synchronous commits. In WAL order, a lost completion
 * takes every later one with it, so W7's order holds. Speed tactic measured
 * by `npm run bench -- webhooks` (end to end, one app; bench/README.md
 * "webhooks: delivery"; measured in "Webhooks past Svix" of
 * `git show 73e3eb4:bench/README.md`). Set for the connection rather than
 * by a `set_config` in the claim (as it was): Citus plans no modification
 * that calls a volatile function as a router statement, and the claim's
 * walk of the W7 queues (`WITH RECURSIVE`) runs only as one (O11). On Citus
 * the setting holds for the coordinator's transactions; the workers commit
 * their part synchronously.
 */
const WORKER_COMMIT_SETTINGS: Readonly<Record<string, string>> = { synchronous_commit: "off" }

/**
 * The planner settings of the delivery worker's connections (its own pool,
 * `Worker.ts` `workerClientLayer`): no sequential scans, hash joins or merge joins
 * where an index probe or a nested loop can do. The claim and the completion
 * are prepared once per connection, and after five calls PostgreSQL may keep a
 * generic plan made with the statistics of that moment. Made while
 * `deliveries` was small, that plan was a hash join over a sequential scan of
 * the whole table, which every later claim and completion repeated as the
 * table grew (auto_explain in `npm run bench -- webhooks`: 2.2 of a claim's
 * 3.2 ms scanning 14,000 rows). Under these settings every plan of theirs
 * stays on index probes at any size (test/Webhooks/Plans.test.ts). And the
 * statements are planned for their values on every call
 * (`plan_cache_mode`): since the claim is one organization's (O11), a generic
 * plan made while the table was small estimated one delivery for the
 * organization and, rather than probe the batch's ids, read every delivery
 * of it on every claim (auto_explain in `npm run bench -- webhooks`: 4.2 ms
 * per claim over 20,000 rows, against 0.7 ms for the claim of every
 * organization before O11; with custom plans burst, ordered and latency came
 * back near that build, bench/README.md "webhooks: delivery").
 * Only the worker's connections carry them: the API's statements and
 * export's bulk reads keep the planner's full choice. Speed tactic measured by
 * `npm run bench -- webhooks` (end to end, one app; bench/README.md "webhooks:
 * delivery"; measured in "The delivery worker's own pool" of
 * `git show 73e3eb4:bench/README.md`).
 */
export const WORKER_PLANNER_SETTINGS: Readonly<Record<string, string>> = {
  enable_seqscan: "off",
  enable_hashjoin: "off",
  enable_mergejoin: "off",
  plan_cache_mode: "force_custom_plan"
}

/**
 * The settings the delivery worker's connections start with:
 * {@link WORKER_PLANNER_SETTINGS} and {@link WORKER_COMMIT_SETTINGS}.
 */
export const WORKER_SESSION_SETTINGS: Readonly<Record<string, string>> = {
  ...WORKER_PLANNER_SETTINGS,
  ...WORKER_COMMIT_SETTINGS
}

/**
 * The discovery of the delivery worker's claims (O11; `Database/Workers.ts`
 * `makeOrganizationRotation`): up to `organizations` ids of organizations
 * with deliveries the claim may take, those after `after` first in id order,
 * then the others (a rotation over the ids). A plain read without row locks,
 * so on Citus one multi-shard SELECT (refused with `FOR UPDATE`); on one server
 * two index scans. It finds:
 *
 * - the organizations of the `limit` unordered deliveries due first (due,
 *   lease free, app enabled and not `saturated`): `deliveries_due_idx`, the
 *   rows the claim over all organizations took first, so an organization is
 *   discovered, at the latest, when its oldest due delivery is among the
 *   `limit` oldest of all (first come, first found: no organization waits
 *   for another's newer backlog);
 * - the organizations of the enabled apps not `saturated` with a due pending
 *   delivery of an ordered queue (W7) whose lease is free: one probe of
 *   `deliveries_queue_idx` per enabled app. It may be a delivery waiting
 *   behind its queue's head (in flight or waiting for a retry): the
 *   organization is then discovered and its claim takes nothing, which costs
 *   one empty claim per round, never a delivery out of order.
 *
 * May be stale by the time its organizations are claimed: a claim finds
 * what is due then. Returns organization ids (text).
 */
export const discoverStatement = fixedStatement(
  { after: "uuid", limit: "int4", saturated: "uuid[]", organizations: "int4" },
  (p) => `SELECT w.organization_id::text AS organization_id FROM (
  (SELECT d.organization_id FROM deliveries d
    JOIN apps a ON a.organization_id = d.organization_id AND a.id = d.app_id
    WHERE d.status = 'pending' AND d.ordering_key IS NULL AND d.next_attempt_at <= now()
      AND (d.lease_until IS NULL OR d.lease_until < now())
      AND a.enabled AND NOT (d.app_id = ANY (${p.saturated}))
    ORDER BY d.next_attempt_at
    LIMIT ${p.limit})
  UNION
  SELECT a.organization_id FROM apps a
  WHERE a.enabled AND NOT (a.id = ANY (${p.saturated})) AND EXISTS (
    SELECT 1 FROM deliveries q WHERE q.organization_id = a.organization_id AND q.app_id = a.id
      AND q.status = 'pending' AND q.ordering_key IS NOT NULL AND q.next_attempt_at <= now()
      AND (q.lease_until IS NULL OR q.lease_until < now()))
) w
ORDER BY w.organization_id <= ${p.after}, w.organization_id
LIMIT ${p.organizations}`
)

/**
 * The claim of one organization's deliveries (W5, W7, O1, O11): leases up to
 * `limit` due pending deliveries of the organization `organizationId` of
 * enabled apps to `workerId` for `leaseMs` (both parts join `apps`: a delivery
 * of an app deleted while its event fanned out is never claimed, which the
 * sweep relies on; migrations/0017), oldest due first, skipping rows
 * other workers hold (`FOR UPDATE SKIP LOCKED`) and apps this process has
 * saturated, at most `perApp - in flight` per app (`busyApps`/`busyCounts`:
 * app ids and their in-flight counts in this process). It looks at two kinds:
 *
 * - `unordered`: deliveries without an ordering key (`ordering: none`), up to
 *   `4 x limit` by due time (`deliveries_organization_due_idx`, migrations/0031);
 * - `ordered` (W7): per queue (app, ordering key = conversation) only its
 *   head: the lowest-numbered delivery already started (leased or attempted:
 *   a retry is never overtaken, even by an event whose transaction overlapped
 *   and committed later), else the lowest-numbered one; the queues of each
 *   app of the organization are walked one index probe each (`queues`, a
 *   loose index scan of `deliveries_queue_idx` from each app), so a queue
 *   waiting behind a retry costs one probe, not one per delivery behind it. A
 *   head in flight or waiting for its retry holds its queue; when it ends
 *   `succeeded` or `failed` the next one heads it.
 *   The `limit x 4` due heads of enabled apps that are due first are locked
 *   (`SKIP LOCKED`: heads other workers hold are skipped, not replaced). Each
 *   head is read in a LATERAL subquery (the started one, else the first: a
 *   probe of a queue index each) and locked in another by its primary key
 *   (organization_id, id), whatever the table's size; joined to `deliveries`
 *   instead, it was planned as a hash join over a sequential scan of the whole
 *   table from a few thousand rows up, on every claim
 *   (test/Webhooks/Plans.test.ts). Speed tactic measured by `npm run bench --
 *   webhooks` (ordered burst, 1,947 -> 4,004 deliveries/s; bench/README.md
 *   "webhooks: delivery"; measured in "The ordered claim's heads" of
 *   `git show 73e3eb4:bench/README.md`).
 *
 * A delivery of an event of a conversation being erased (D22) is never
 * leased, so never sent from the erasure's 202 on: one probe of
 * `conversations_erased_idx` (migrations/0020), which holds only the
 * conversations being erased, per delivery leased. The erasure's job deletes
 * such deliveries first (`src/Erasures/Erasures.ts`); until then they may be
 * picked and left again.
 *
 * The previous secret is returned while it still signs (W8): its expiry is
 * after the statement's moment, written `expires - lease_until > -leaseMs`
 * (`lease_until` is that moment plus `leaseMs`): Citus refuses a function
 * that is not IMMUTABLE in the RETURNING list (`now()`), and plans a
 * modification with one as a multi-shard statement, which the recursive walk
 * cannot be; the difference of two moments and the comparison of intervals
 * are IMMUTABLE.
 *
 * The rows to lease are found by their ids (`d.id = ANY (ARRAY(...))`, an
 * index probe each): with `d.organization_id` bound to the parameter rather
 * than joined to the picked rows' (as on one server it was), a plan that
 * estimates the organization's deliveries from stale statistics drives the
 * update from every delivery of the organization (auto_explain in `npm run
 * bench -- webhooks`: 80 ms per claim over 3,500 rows); the worker's
 * connections plan it for its organization on every call
 * ({@link WORKER_PLANNER_SETTINGS}).
 *
 * One organization per statement (O11): every table reference is filtered by
 * `organizationId`, so on Citus it is a router statement on that
 * organization's shard, where `FOR UPDATE SKIP LOCKED` and the recursive walk
 * work as on one server (Citus refuses both across shards). Every rule above
 * (one worker per delivery, leases, W7's heads) concerns one organization's
 * rows, so claiming organization by organization keeps them; which
 * organizations are claimed, and how the batch is shared between them, is
 * {@link discoverStatement} and `Database/Workers.ts` `makeOrganizationRotation`.
 */
export const claimStatement = fixedStatement(
  {
    organizationId: "uuid",
    workerId: "uuid",
    leaseMs: "int4",
    limit: "int4",
    perApp: "int4",
    busyApps: "uuid[]",
    busyCounts: "int4[]",
    saturated: "uuid[]"
  },
  (p) => `WITH RECURSIVE busy AS (
  SELECT * FROM unnest(${p.busyApps}, ${p.busyCounts}) AS b(app_id, n)
), unordered AS (
  SELECT d.organization_id, d.id, d.app_id, d.event_id, d.next_attempt_at FROM deliveries d
  JOIN apps a ON a.organization_id = d.organization_id AND a.id = d.app_id
  WHERE d.organization_id = ${p.organizationId} AND a.organization_id = ${p.organizationId}
    AND d.status = 'pending' AND d.ordering_key IS NULL AND d.next_attempt_at <= now()
    AND (d.lease_until IS NULL OR d.lease_until < now())
    AND a.enabled AND NOT (d.app_id = ANY (${p.saturated}))
  ORDER BY d.next_attempt_at
  LIMIT ${p.limit} * 4
  FOR UPDATE OF d SKIP LOCKED
), queues AS (
  SELECT f.app_id, f.ordering_key FROM apps a CROSS JOIN LATERAL (
    SELECT q.app_id, q.ordering_key FROM deliveries q
    WHERE q.organization_id = ${p.organizationId} AND q.app_id = a.id AND q.status = 'pending'
      AND q.ordering_key IS NOT NULL
    ORDER BY q.ordering_key LIMIT 1
  ) f
  WHERE a.organization_id = ${p.organizationId}
  UNION ALL
  SELECT n.app_id, n.ordering_key FROM queues u CROSS JOIN LATERAL (
    SELECT q.app_id, q.ordering_key FROM deliveries q
    WHERE q.organization_id = ${p.organizationId} AND q.app_id = u.app_id AND q.status = 'pending'
      AND q.ordering_key IS NOT NULL AND q.ordering_key > u.ordering_key
    ORDER BY q.ordering_key LIMIT 1
  ) n
), heads AS (
  SELECT h.organization_id, h.id, h.app_id, h.next_attempt_at FROM queues u CROSS JOIN LATERAL (
    (SELECT s.organization_id, s.id, s.app_id, s.next_attempt_at, s.lease_until FROM deliveries s
      WHERE s.organization_id = ${p.organizationId} AND s.app_id = u.app_id AND s.ordering_key = u.ordering_key
        AND s.status = 'pending' AND (s.attempts > 0 OR s.lease_until IS NOT NULL)
      ORDER BY s.sequence_number LIMIT 1)
    UNION ALL
    (SELECT f.organization_id, f.id, f.app_id, f.next_attempt_at, f.lease_until FROM deliveries f
      WHERE f.organization_id = ${p.organizationId} AND f.app_id = u.app_id AND f.ordering_key = u.ordering_key
        AND f.status = 'pending'
      ORDER BY f.sequence_number LIMIT 1)
    LIMIT 1
  ) h
  WHERE NOT (u.app_id = ANY (${p.saturated})) AND h.next_attempt_at <= now()
    AND (h.lease_until IS NULL OR h.lease_until < now())
), ordered AS (
  SELECT d.organization_id, d.id, d.app_id, d.event_id, d.next_attempt_at FROM (
    SELECT h.organization_id, h.id FROM heads h
    JOIN apps a ON a.organization_id = h.organization_id AND a.id = h.app_id
    WHERE a.organization_id = ${p.organizationId} AND a.enabled
    ORDER BY h.next_attempt_at LIMIT ${p.limit} * 4
  ) c CROSS JOIN LATERAL (
    SELECT d.organization_id, d.id, d.app_id, d.event_id, d.next_attempt_at FROM deliveries d
    WHERE d.organization_id = ${p.organizationId} AND d.id = c.id AND d.status = 'pending'
      AND d.next_attempt_at <= now() AND (d.lease_until IS NULL OR d.lease_until < now())
    FOR UPDATE SKIP LOCKED
  ) d
), picked AS (
  SELECT r.organization_id, r.id, r.app_id, r.event_id FROM (
    SELECT s.organization_id, s.id, s.app_id, s.event_id, s.next_attempt_at,
      row_number() OVER (PARTITION BY s.app_id ORDER BY s.next_attempt_at, s.id) AS rn
    FROM (SELECT * FROM unordered UNION ALL SELECT * FROM ordered) s
  ) r LEFT JOIN busy b ON b.app_id = r.app_id
  WHERE r.rn <= ${p.perApp} - coalesce(b.n, 0)
  ORDER BY r.next_attempt_at
  LIMIT ${p.limit}
)
UPDATE deliveries d SET leased_by = ${p.workerId}, lease_until = now() + ${p.leaseMs} * interval '1 millisecond'
FROM picked p CROSS JOIN LATERAL (
  SELECT a.webhook_url, a.signing_secret, a.previous_signing_secret, a.previous_secret_expires_at FROM apps a
  WHERE a.organization_id = ${p.organizationId} AND a.id = p.app_id
) a CROSS JOIN LATERAL (
  SELECT e.body, e.trace_context FROM events e
  WHERE e.organization_id = ${p.organizationId} AND e.id = p.event_id
    AND NOT EXISTS (SELECT 1 FROM conversations c WHERE c.organization_id = ${p.organizationId}
      AND c.id = e.conversation_id AND c.erasure_id IS NOT NULL)
) e
WHERE d.organization_id = ${p.organizationId} AND d.id = ANY (ARRAY(SELECT k.id FROM picked k)) AND d.id = p.id
RETURNING d.organization_id::text, d.id::text, d.app_id::text, d.event_id::text, d.attempts, a.webhook_url, a.signing_secret,
  CASE WHEN a.previous_secret_expires_at - d.lease_until > ${p.leaseMs} * interval '-1 millisecond'
    THEN a.previous_signing_secret END AS previous_signing_secret, e.body,
  e.trace_context->>'traceparent' AS traceparent`
)

/**
 * The app's wire JSON without its secret (W10: the `data.object` of
 * `app.failing` and `app.disabled`), over the apps row `h`.
 */
const APP_WITHOUT_SECRET_JSON = objectJson(membersOf(AppWithoutSecret, "h"))

/**
 * Records a batch of attempts (W5): each delivery's status, counters and next
 * attempt, its lease cleared and the attempt appended to its `attempt_log`
 * (one update per delivery, no other row: migrations/0016_delivery_writes.ts,
 * measured by `npm run bench -- webhooks`, bench/README.md "webhooks: delivery";
 * "Fewer writes per delivery" of `git show 73e3eb4:bench/README.md`), for
 * deliveries still leased to `workerId`. Arrays of one entry per attempt: ids,
 * status codes ('' = none), errors ('' = none), durations (ms), starts (ISO
 * 8601), statuses, delays (ms).
 *
 * In the same statement, the health of each enabled app of the batch (W10,
 * migrations/0025_app_health.ts), at the statement's moment: a success
 * (any in the batch) ends its failing period (`failing_since`,
 * `failing_warned_at` cleared); a failure starts one if none runs. A failure
 * when the period has lasted `disableAfterMs` disables the app (`enabled`
 * false, `disabled_reason` 'failing', `disabled_at`) and writes `app.disabled`;
 * one when it has lasted a fifth of that, the first of the period, writes
 * `app.failing` (not both: a disable needs no warning). The events carry
 * the app without its secret and go to the organization's other subscribed
 * apps (`events.app_id`, the outbox's `appId`). An app's row is written only
 * when one of these changes happens, so a healthy or steadily failing app
 * costs an index probe per batch and no write. The events commit with the
 * statement's asynchronous commit (the worker's connections, {@link WORKER_COMMIT_SETTINGS}): a database crash may lose the change and
 * its event together, never one of them (W2). Returns how many deliveries it
 * recorded. The statement's moment is selected once (`r.at`) and carried as
 * a column: Citus refuses STABLE functions over columns and any in a CASE
 * of an UPDATE's SET (O11).
 */
export const completeStatement = fixedStatement(
  {
    organizationIds: "uuid[]",
    ids: "uuid[]",
    statusCodes: "text[]",
    errors: "text[]",
    durationsMs: "int4[]",
    startedAt: "text[]",
    statuses: "text[]",
    delaysMs: "int4[]",
    workerId: "uuid",
    disableAfterMs: "text"
  },
  (p) => `WITH r AS (
  SELECT u.organization_id, u.id, nullif(u.status_code, '')::int AS status_code, nullif(u.error, '') AS error,
    u.duration_ms, u.started_at::timestamptz AS started_at, u.status,
    CASE WHEN u.status = 'pending' THEN statement_timestamp() + u.delay_ms * interval '1 millisecond' END
      AS next_attempt_at,
    statement_timestamp() AS at
  FROM unnest(${p.organizationIds}, ${p.ids}, ${p.statusCodes}, ${p.errors}, ${p.durationsMs}, ${p.startedAt},
    ${p.statuses}, ${p.delaysMs}) AS u(organization_id, id, status_code, error, duration_ms, started_at, status, delay_ms)
), done AS (
  UPDATE deliveries d SET attempts = d.attempts + 1, status = r.status, next_attempt_at = r.next_attempt_at,
    last_status_code = r.status_code, last_error = r.error,
    attempt_log = d.attempt_log || ROW(d.attempts + 1, r.status_code, r.error, r.duration_ms, r.started_at)::delivery_attempt,
    leased_by = NULL, lease_until = NULL, updated_at = r.at
  FROM r WHERE d.organization_id = r.organization_id AND d.id = r.id AND d.leased_by = ${p.workerId}
  RETURNING d.organization_id, d.app_id, r.status, r.at
), outcome AS (
  SELECT o.organization_id, o.app_id, bool_or(o.status = 'succeeded') AS ok, min(o.at) AS at,
    ${p.disableAfterMs}::bigint * interval '1 millisecond' AS disable_after
  FROM done o GROUP BY o.organization_id, o.app_id
), health AS (
  UPDATE apps a SET
    failing_since = CASE WHEN o.ok THEN NULL ELSE coalesce(a.failing_since, o.at) END,
    failing_warned_at = CASE
      WHEN o.ok THEN NULL
      WHEN o.at - a.failing_since >= o.disable_after / 5 AND a.failing_warned_at IS NULL
        AND o.at - a.failing_since < o.disable_after THEN o.at
      ELSE a.failing_warned_at END,
    enabled = o.ok OR a.failing_since IS NULL OR o.at - a.failing_since < o.disable_after,
    disabled_reason = CASE WHEN NOT o.ok AND o.at - a.failing_since >= o.disable_after
      THEN 'failing' END,
    disabled_at = CASE WHEN NOT o.ok AND o.at - a.failing_since >= o.disable_after
      THEN o.at END,
    updated_at = o.at
  FROM outcome o
  WHERE a.organization_id = o.organization_id AND a.id = o.app_id AND a.enabled AND CASE
    WHEN o.ok THEN a.failing_since IS NOT NULL
    ELSE a.failing_since IS NULL OR o.at - a.failing_since >= o.disable_after
      OR (a.failing_warned_at IS NULL AND o.at - a.failing_since >= o.disable_after / 5) END
  RETURNING a.*, o.at AS at
), health_events AS (
  ${insertEvents({
    id: "h.event_id",
    type: "CASE WHEN h.enabled THEN 'app.failing' ELSE 'app.disabled' END",
    organizationId: "h.organization_id",
    conversationId: "NULL::uuid",
    appId: "h.id",
    at: "h.at",
    object: APP_WITHOUT_SECRET_JSON,
    traceContext: "NULL::jsonb",
    // The event's id made beside the row, not in health's RETURNING (Citus allows only IMMUTABLE functions there).
    from: "(SELECT health.*, parley_uuid_v7() AS event_id FROM health) h",
    where: "NOT h.enabled OR h.failing_warned_at = h.at",
    orderBy: "h.id"
  })}
)
SELECT count(*)::int AS n, ${wroteSubscribedAnySql("health_events")} AS subscribed FROM done`
)

/**
 * Deletes the deliveries of apps of the organization `organizationId` that no
 * longer exist (W2; migrations/0017): an event written while its app was
 * being deleted may have fanned out to it after the delete took the app's
 * deliveries. The app ids of the organization's deliveries are walked one
 * index probe each (a loose index scan of `deliveries_organization_app_idx`,
 * migrations/0033), so it costs one probe per app that has deliveries,
 * whatever their number, and one for an organization without any. One
 * organization per statement (O11): every table reference is filtered by it,
 * so on Citus it is a router statement on the organization's worker, where
 * the recursive walk is accepted (Citus refuses it across shards). Returns
 * how many deliveries it deleted.
 */
const sweepStatement = fixedStatement(
  { organizationId: "uuid" },
  (p) => `WITH RECURSIVE app_ids AS (
  (SELECT d.app_id FROM deliveries d WHERE d.organization_id = ${p.organizationId} ORDER BY d.app_id LIMIT 1)
  UNION ALL
  SELECT n.app_id FROM app_ids i CROSS JOIN LATERAL (
    SELECT d.app_id FROM deliveries d WHERE d.organization_id = ${p.organizationId} AND d.app_id > i.app_id
    ORDER BY d.app_id LIMIT 1
  ) n
), swept AS (
  DELETE FROM deliveries d USING app_ids i
  WHERE d.organization_id = ${p.organizationId} AND d.app_id = i.app_id
    AND NOT EXISTS (SELECT 1 FROM apps a WHERE a.organization_id = ${p.organizationId} AND a.id = i.app_id)
  RETURNING d.id
)
SELECT count(*)::int AS n FROM swept`,
  // Runs rarely (`Worker.ts` SWEEP_MS): planned with the tables' sizes of the moment.
  { plannedPerCall: true }
)

/**
 * The organizations {@link sweepStatement} visits: every organization, in id
 * order (`organizations`, a reference table on Citus, read without a worker).
 * Every one, not only those with deliveries: on Citus that question is a
 * correlated subquery over a reference table, which it refuses, or a read of
 * every delivery (O11).
 */
const sweptOrganizationsStatement = fixedStatement({}, () => `SELECT id::text AS id FROM organizations ORDER BY id`, {
  plannedPerCall: true
})

/** Clears the leases a worker still holds on pending deliveries (O5: released for another process). */
const releaseStatement = fixedStatement(
  { workerId: "uuid" },
  (p) =>
    `UPDATE deliveries SET leased_by = NULL, lease_until = NULL WHERE leased_by = ${p.workerId} AND status = 'pending'`
)

/** An app row as inserted. */
export interface NewApp {
  readonly id: string
  readonly organizationId: string
  readonly name: string
  readonly webhookUrl: string
  readonly events: ReadonlyArray<EventType>
  readonly enabled: boolean
  readonly ordering: AppOrdering
  readonly signingSecret: string
}

/** An app in a failing period (W10): its id and when the period began (ISO 8601). */
export interface FailingApp {
  readonly id: string
  readonly failing_since: string
}

/** Changed members of an app (PATCH). */
export interface AppChanges {
  readonly name?: string
  readonly webhook_url?: string
  readonly events?: ReadonlyArray<EventType>
  readonly enabled?: boolean
  readonly ordering?: AppOrdering
}

/** Filters of the delivery listing (O6). */
export interface DeliveryFilter {
  readonly status?: DeliveryStatus | undefined
  readonly limit: number
  readonly afterId?: string | undefined
}

/**
 * What a worker discovers with (O11; {@link discoverStatement}): the rotation's
 * cursor `after` (an organization id), how many unordered due deliveries to
 * look at (`limit`), the apps this process has `saturated`, and how many
 * organizations at most.
 */
export interface DiscoverOptions {
  readonly after: string
  readonly limit: number
  readonly saturated: ReadonlyArray<string>
  readonly organizations: number
}

/**
 * What a worker claims with (W5, O1; {@link claimStatement}): its id, the
 * lease in ms, at most `limit` deliveries and `perApp` per app counting the
 * `busyCounts` of `busyApps` already in flight in this process, none of the
 * `saturated` apps.
 */
export interface ClaimOptions {
  readonly workerId: string
  readonly leaseMs: number
  readonly limit: number
  readonly perApp: number
  readonly busyApps: ReadonlyArray<string>
  readonly busyCounts: ReadonlyArray<number>
  readonly saturated: ReadonlyArray<string>
}

/**
 * The webhooks repository: SQL only, no rules. Every method but `listen` may
 * fail with `SqlError`; ids that are not UUIDs find nothing. Timestamps it
 * returns are ISO 8601 with microseconds (`Database/Json.ts` `immutableIsoTimestamp`).
 */
export class WebhooksRepo extends Context.Service<
  WebhooksRepo,
  {
    /** Whether the organization exists. */
    readonly organizationExists: (organizationId: string) => Effect.Effect<boolean, SqlError.SqlError>
    /** Inserts an app created now; returns it (O6). */
    readonly insertApp: (app: NewApp) => Effect.Effect<App, SqlError.SqlError>
    /** The organization's apps, oldest first (created_at, id). */
    readonly listApps: (organizationId: string) => Effect.Effect<ReadonlyArray<App>, SqlError.SqlError>
    /**
     * The organization's apps in a failing period (W10): each id with the
     * start of its period (ISO 8601), oldest app first.
     */
    readonly listFailing: (organizationId: string) => Effect.Effect<ReadonlyArray<FailingApp>, SqlError.SqlError>
    /** The organization's app, or undefined. */
    readonly findApp: (organizationId: string, appId: string) => Effect.Effect<App | undefined, SqlError.SqlError>
    /** Changes the members present in `changes`; returns the app, or undefined when the organization has none such. */
    readonly updateApp: (
      organizationId: string,
      appId: string,
      changes: AppChanges
    ) => Effect.Effect<App | undefined, SqlError.SqlError>
    /**
     * Rotates the app's signing secret to `secret` (W8): the current one
     * becomes the previous one, signing too until `previousHours` from now.
     * Returns the new secret and that moment (ISO 8601), or undefined when the
     * organization has no such app.
     */
    readonly rotateSecret: (
      organizationId: string,
      appId: string,
      secret: string,
      previousHours: number
    ) => Effect.Effect<SecretRotation | undefined, SqlError.SqlError>
    /**
     * Deletes the app; its deliveries go with it by the `apps_deleted` trigger
     * (migrations/0017). Returns whether it existed in the organization.
     */
    readonly deleteApp: (organizationId: string, appId: string) => Effect.Effect<boolean, SqlError.SqlError>
    /**
     * An app's deliveries, newest first (id descending), after `afterId` in that
     * order (keyset), at most `limit`, as a JSON array text of {@link Delivery}
     * with every attempt oldest first (O6).
     */
    readonly listDeliveries: (
      organizationId: string,
      appId: string,
      filter: DeliveryFilter
    ) => Effect.Effect<JsonText<ReadonlyArray<Delivery>>, SqlError.SqlError>
    /**
     * Admin retry (W5): the delivery becomes pending and due now (its lease, if
     * an attempt is in flight, is kept) and the workers are notified. Returns
     * whether the delivery exists for the app.
     */
    readonly retryDelivery: (
      organizationId: string,
      appId: string,
      deliveryId: string
    ) => Effect.Effect<boolean, SqlError.SqlError>
    /**
     * Recovery (W9): every `failed` delivery of the app created in
     * [`since`, `until`) (`until` null: no end) becomes pending and due now, and
     * the workers are notified. Returns how many.
     */
    readonly recover: (
      organizationId: string,
      appId: string,
      since: string,
      until: string | null
    ) => Effect.Effect<number, SqlError.SqlError>
    /**
     * Up to `organizations` ids of organizations with deliveries a claim may
     * take, those after `after` first (O11; {@link discoverStatement}): no row
     * locks, `limit` unordered due deliveries looked at, none of `saturated`'s.
     */
    readonly discover: (options: DiscoverOptions) => Effect.Effect<ReadonlyArray<string>, SqlError.SqlError>
    /** Leases due deliveries of one organization to a worker ({@link claimStatement}). */
    readonly claim: (
      organizationId: string,
      options: ClaimOptions
    ) => Effect.Effect<ReadonlyArray<ClaimedDelivery>, SqlError.SqlError>
    /**
     * Records attempts of deliveries still leased to `workerId`, and the
     * health of their apps with `disableAfterMs` as `APP_DISABLE_AFTER` in ms
     * (W5, W10; {@link completeStatement}).
     */
    readonly complete: (
      workerId: string,
      results: ReadonlyArray<AttemptResult>,
      disableAfterMs: number
    ) => Effect.Effect<void, SqlError.SqlError>
    /** Clears `workerId`'s leases on pending deliveries (O5). */
    readonly release: (workerId: string) => Effect.Effect<void, SqlError.SqlError>
    /**
     * Deletes the deliveries of apps that no longer exist, organization by
     * organization, one statement each ({@link sweepStatement}; O11); returns
     * how many.
     */
    readonly sweep: Effect.Effect<number, SqlError.SqlError>
    /**
     * Calls `onNotification` with the payload of every notification on
     * {@link deliveriesChannel} (the writers of events notify after their
     * statement, `Outbox.ts` `notifyDeliveries`: an organization id, or empty)
     * and once with `undefined` when listening starts; after a lost connection,
     * listens again after `retryMs` (logged unless `DatabaseHealth` reports an
     * outage). Runs until interrupted.
     */
    readonly listen: (
      onNotification: (payload?: string) => void,
      retryMs: number
    ) => Effect.Effect<never, never, DatabaseHealth>
  }
>()("parley/Webhooks/WebhooksRepo") {
  /**
   * The repository on PostgreSQL. Requires `PgClient`. The delivery worker
   * builds a fresh one over its own pool (`Worker.ts` `workerRepoLayer`).
   */
  static readonly layer = Layer.effect(
    WebhooksRepo,
    Effect.gen(function* () {
      return WebhooksRepo.of(makeSqlRepo(yield* PgClient.PgClient))
    })
  )
}

/** The admin shape of an app (`Api.ts` App), in wire order, over `apps`. */
const APP_COLUMNS = `id::text, name, webhook_url, events, enabled, disabled_reason,
  ${immutableIsoTimestamp("disabled_at")} AS disabled_at, ordering, signing_secret, ${immutableIsoTimestamp("created_at")} AS created_at`

/**
 * The Delivery JSON of the deliveries row `d` (O6), its members derived from
 * the schema: `attempts` the count, `attempt_log` every attempt of the
 * composite array, oldest first, each a DeliveryAttempt derived likewise.
 */
const DELIVERY_JSON = objectJson(
  membersOf(Delivery, "d", {
    attempt_log: `coalesce((SELECT json_agg(${objectJson(membersOf(DeliveryAttempt, "x"))} ORDER BY x.attempt)
      FROM unnest(d.attempt_log) x), '[]'::json)`
  })
)

/** The repository over PostgreSQL client `sql`. */
const makeSqlRepo = (sql: PgClient.PgClient): WebhooksRepo["Service"] => {
  const appColumns = sql.literal(APP_COLUMNS)
  const deliveryJson = sql.literal(DELIVERY_JSON)

  /** Whether the organization exists. */
  const organizationExists = (organizationId: string) =>
    isUuid(organizationId)
      ? sql<{ found: boolean }>`SELECT EXISTS (SELECT 1 FROM organizations WHERE id = ${organizationId}) AS found`.pipe(
          Effect.map((rows) => rows[0]!.found)
        )
      : Effect.succeed(false)

  const insertApp = (app: NewApp) =>
    sql<App>`INSERT INTO apps (id, organization_id, name, webhook_url, events, enabled, ordering, signing_secret,
        created_at)
      VALUES (${app.id}, ${app.organizationId}, ${app.name}, ${app.webhookUrl}, ${[...app.events]}::text[], ${app.enabled},
        ${app.ordering}, ${app.signingSecret}, statement_timestamp())
      RETURNING ${appColumns}`.pipe(Effect.map((rows) => rows[0]!))

  const listApps = (organizationId: string) =>
    sql<App>`SELECT ${appColumns} FROM apps WHERE organization_id = ${organizationId} ORDER BY created_at, id`

  const listFailing = (organizationId: string) =>
    sql<FailingApp>`SELECT id::text, ${sql.literal(immutableIsoTimestamp("failing_since"))} AS failing_since FROM apps
      WHERE organization_id = ${organizationId} AND failing_since IS NOT NULL ORDER BY created_at, id`

  const findApp = (organizationId: string, appId: string) =>
    isUuid(appId)
      ? sql<App>`SELECT ${appColumns} FROM apps WHERE id = ${appId} AND organization_id = ${organizationId}`.pipe(
          Effect.map((rows) => rows[0])
        )
      : Effect.succeed(undefined)

  /**
   * PATCH (O6). `enabled: true` also clears the health of the app (W10:
   * `disabled_reason`, `disabled_at`, its failing period and warning), and
   * when the app was disabled, makes its held pending deliveries due now (those
   * made while it was disabled for failing have no due time; those waiting
   * for a retry wait no more) and notifies the workers: in one statement, so
   * the deliveries go out as soon as it commits, ordered queues in order (W7).
   */
  const updateApp = (organizationId: string, appId: string, changes: AppChanges) => {
    if (!isUuid(appId)) return Effect.succeed(undefined)
    const set: Record<string, unknown> = {}
    if (changes.name !== undefined) set.name = changes.name
    if (changes.webhook_url !== undefined) set.webhook_url = changes.webhook_url
    if (changes.enabled !== undefined) set.enabled = changes.enabled
    if (changes.ordering !== undefined) set.ordering = changes.ordering
    if (changes.enabled === true) {
      set.disabled_reason = null
      set.disabled_at = null
      set.failing_since = null
      set.failing_warned_at = null
    }
    const events = changes.events === undefined ? sql`` : sql`, events = ${[...changes.events]}::text[]`
    const assignments = Object.keys(set).length > 0 ? sql`${sql.update(set)},` : sql``
    const update = sql<App>`UPDATE apps SET ${assignments} updated_at = statement_timestamp() ${events}
      WHERE id = ${appId} AND organization_id = ${organizationId}
      RETURNING ${appColumns}`
    if (changes.enabled !== true) return update.pipe(Effect.map((rows) => rows[0]))
    return sql<App>`WITH was AS (
        SELECT enabled FROM apps WHERE id = ${appId} AND organization_id = ${organizationId}
      ), a AS (${update}), released AS (
        UPDATE deliveries d SET next_attempt_at = statement_timestamp(), updated_at = statement_timestamp()
        FROM was WHERE NOT was.enabled AND d.app_id = ${appId} AND d.organization_id = ${organizationId}
          AND d.status = 'pending' AND (d.next_attempt_at IS NULL OR d.next_attempt_at > statement_timestamp())
      )
      SELECT a.* FROM a`.pipe(
      // O11: the NOTIFY a statement of its own, which runs on the coordinator (docs/citus-notes.md (b)).
      Effect.flatMap(([app]) => Effect.as(notifyDeliveriesIf(sql, app !== undefined, organizationId), app))
    )
  }

  const rotateSecret = (organizationId: string, appId: string, secret: string, previousHours: number) =>
    isUuid(appId)
      ? sql<SecretRotation>`UPDATE apps SET previous_signing_secret = signing_secret, signing_secret = ${secret},
          previous_secret_expires_at = statement_timestamp() + ${previousHours} * interval '1 hour',
          updated_at = statement_timestamp()
        WHERE id = ${appId} AND organization_id = ${organizationId}
        RETURNING signing_secret, ${sql.literal(immutableIsoTimestamp("previous_secret_expires_at"))} AS previous_secret_expires_at`.pipe(
          Effect.map((rows) => rows[0])
        )
      : Effect.succeed(undefined)

  const deleteApp = (organizationId: string, appId: string) =>
    isUuid(appId)
      ? sql`DELETE FROM apps WHERE id = ${appId} AND organization_id = ${organizationId} RETURNING id`.pipe(
          Effect.map((rows) => rows.length > 0)
        )
      : Effect.succeed(false)

  /** An app's deliveries, newest first, after `afterId` in that order (keyset), as a JSON array text (O6). */
  const listDeliveries = (organizationId: string, appId: string, filter: DeliveryFilter) => {
    const conditions = [sql`d.app_id = ${appId}`, sql`d.organization_id = ${organizationId}`]
    if (filter.status !== undefined) conditions.push(sql`d.status = ${filter.status}`)
    if (filter.afterId !== undefined) {
      conditions.push(isUuid(filter.afterId) ? sql`d.id < ${filter.afterId}` : sql`false`)
    }
    return sql<{ body: string }>`SELECT ${deliveryJson}::text AS body FROM deliveries d
      WHERE ${sql.and(conditions)} ORDER BY d.id DESC LIMIT ${filter.limit}`.pipe(
      Effect.map((rows): JsonText<ReadonlyArray<Delivery>> => `[${rows.map((row) => row.body).join(",")}]`)
    )
  }

  /**
   * Makes the deliveries matching `conditions` pending and due now (a lease of
   * an attempt in flight is kept) and notifies the workers when there are any
   * (W5 admin retry, W9 recovery). Returns how many.
   */
  const requeue = (organizationId: string, conditions: Array<Statement.Fragment>) =>
    sql<{ n: number }>`WITH d AS (
        UPDATE deliveries SET status = 'pending', next_attempt_at = statement_timestamp(), updated_at = statement_timestamp()
        WHERE ${sql.and([sql`organization_id = ${organizationId}`, ...conditions])}
        RETURNING id
      )
      SELECT count(*)::int AS n FROM d`.pipe(
      // O11: the NOTIFY a statement of its own, which runs on the coordinator (docs/citus-notes.md (b)).
      Effect.flatMap(([row]) => Effect.as(notifyDeliveriesIf(sql, row!.n > 0, organizationId), row!.n))
    )

  const retryDelivery = (organizationId: string, appId: string, deliveryId: string) =>
    isUuid(deliveryId)
      ? requeue(organizationId, [sql`id = ${deliveryId}`, sql`app_id = ${appId}`]).pipe(Effect.map((n) => n > 0))
      : Effect.succeed(false)

  const recover = (organizationId: string, appId: string, since: string, until: string | null) =>
    requeue(organizationId, [
      sql`app_id = ${appId}`,
      sql`status = 'failed'`,
      sql`created_at >= ${since}::timestamptz`,
      sql`(${until}::timestamptz IS NULL OR created_at < ${until}::timestamptz)`
    ])

  const discover = (options: DiscoverOptions) =>
    discoverStatement
      .run<{ organization_id: string }>(sql, options)
      .pipe(Effect.map((rows) => rows.map((row) => row.organization_id)))

  const claim = (organizationId: string, options: ClaimOptions) =>
    claimStatement.run<ClaimedDelivery>(sql, { organizationId, ...options })

  /** Records attempts ({@link completeStatement}). */
  const complete = (workerId: string, results: ReadonlyArray<AttemptResult>, disableAfterMs: number) =>
    completeStatement
      .run<{ n: number; subscribed: boolean }>(sql, {
        organizationIds: results.map((r) => r.organizationId),
        ids: results.map((r) => r.id),
        statusCodes: results.map((r) => (r.statusCode === null ? "" : String(r.statusCode))),
        errors: results.map((r) => r.error ?? ""),
        durationsMs: results.map((r) => r.durationMs),
        startedAt: results.map((r) => r.startedAt.toISOString()),
        statuses: results.map((r) => r.status),
        delaysMs: results.map((r) => r.delayMs),
        workerId,
        disableAfterMs: String(Math.round(disableAfterMs))
      })
      .pipe(Effect.flatMap(([row]) => notifyDeliveriesIf(sql, row?.subscribed === true, undefined)))

  const release = (workerId: string) => releaseStatement.run(sql, { workerId }).pipe(Effect.asVoid)

  const sweep = sweptOrganizationsStatement.run<{ id: string }>(sql, {}).pipe(
    Effect.flatMap((organizations) =>
      Effect.reduce(
        organizations,
        () => 0,
        (n, { id }) =>
          sweepStatement
            .run<{ n: number }>(sql, { organizationId: id })
            .pipe(Effect.map((rows) => n + (rows[0]?.n ?? 0)))
      )
    )
  )

  const listen = (onNotification: (payload?: string) => void, retryMs: number) =>
    listenForever(deliveriesChannel, onNotification, retryMs).pipe(Effect.provideService(PgClient.PgClient, sql))

  return {
    organizationExists,
    insertApp,
    listApps,
    listFailing,
    findApp,
    updateApp,
    rotateSecret,
    deleteApp,
    listDeliveries,
    retryDelivery,
    recover,
    discover,
    claim,
    complete,
    release,
    sweep,
    listen
  }
}
