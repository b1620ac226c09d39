/**
 * Parley's metrics (issue 8 item 2), Effect `Metric`s exported over OTLP by
 * the OpenTelemetry SDK when `OTEL_EXPORTER_OTLP_ENDPOINT` is set
 * (`Telemetry.ts`). Names follow the OpenTelemetry semantic conventions where
 * one exists (`http.server.request.duration`), else `parley.*`; durations are
 * in seconds.
 *
 * - `http.server.request.duration` (histogram, s): every request, by
 *   `http.request.method`, `http.route` (the template, `unmatched` for unknown
 *   paths) and `http.response.status_code`.
 * - `parley.webhook.attempts` (counter): attempts by `outcome`
 *   (`succeeded`, `retry`, `failed`: W5) and
 *   `parley.webhook.attempt.duration` (histogram, s).
 * - `parley.reply.latency` (histogram, s): from a reply job's due time to its
 *   run's end (R1), by `status`; `parley.runs` (counter) by `trigger`, `status`.
 * - `parley.retention.deleted` (counter): rows the retention sweeper deleted
 *   (D21), by `table`.
 * - Sampled every {@link SAMPLE_INTERVAL_MS} by each worker process (gauges,
 *   database-wide): `parley.outbox.lag` (s, age of the oldest undelivered
 *   webhook delivery), `parley.queue.depth` by `queue` (`deliveries`,
 *   `reply_jobs`, `reply_jobs_running`, `schedules`), and
 *   `parley.db.connections` by `state` (Parley's connections to the database,
 *   every process, from `pg_stat_activity`).
 */

import { PgClient } from "@effect/sql-pg"
import { Effect, Layer, Metric } from "effect"
import { parleyConnection } from "../Database/Database.ts"
import { logUnlessOutage } from "../Database/Health.ts"

/** How often the worker processes sample the database-wide gauges, in ms. */
const SAMPLE_INTERVAL_MS = 10_000

/** The OpenTelemetry default boundaries for HTTP durations, in seconds. */
const DURATION_BOUNDARIES = [0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10]

/** `http.server.request.duration`, seconds. */
export const requestDuration = Metric.histogram("http.server.request.duration", {
  description: "Duration of HTTP server requests, in seconds",
  boundaries: DURATION_BOUNDARIES
})

/** `parley.webhook.attempts` by `outcome`. */
export const webhookAttempts = Metric.counter("parley.webhook.attempts", {
  description: "Webhook delivery attempts by outcome (succeeded, retry, failed)"
})

/** `parley.webhook.attempt.duration`, seconds. */
export const webhookAttemptDuration = Metric.histogram("parley.webhook.attempt.duration", {
  description: "Duration of webhook delivery attempts, in seconds",
  boundaries: DURATION_BOUNDARIES
})

/** `parley.reply.latency`, seconds from a reply job's due time to its run's end. */
export const replyLatency = Metric.histogram("parley.reply.latency", {
  description: "Reply job latency from due time to the end of its run, in seconds",
  boundaries: [0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120]
})

/** `parley.runs` by `trigger` and `status`. */
export const runs = Metric.counter("parley.runs", { description: "AI runtime runs by trigger and status" })

/** `parley.retention.deleted` by `table`: rows deleted by the retention sweeper (D21). */
export const retentionDeleted = Metric.counter("parley.retention.deleted", {
  description: "Rows deleted by the retention sweeper (D21), by table"
})

/** `parley.outbox.lag`, seconds. */
const outboxLag = Metric.gauge("parley.outbox.lag", {
  description: "Age of the oldest undelivered webhook delivery, in seconds (0 when none)"
})

/** `parley.queue.depth` by `queue`. */
const queueDepth = Metric.gauge("parley.queue.depth", { description: "Pending work by queue" })

/** `parley.db.connections` by `state`. */
const dbConnections = Metric.gauge("parley.db.connections", {
  description: "Parley's connections to the database (all processes) by state"
})

/** Records one value of `metric` with `attributes`. */
export const record = <Input, State>(
  metric: Metric.Metric<Input, State>,
  value: Input,
  attributes: Record<string, string | number>
) => Metric.update(Metric.withAttributes(metric, attributes as Metric.Metric.Attributes), value)

/**
 * One sample of the database-wide gauges (`parley.outbox.lag`,
 * `parley.queue.depth`, `parley.db.connections`), recorded in the process's
 * metrics. Requires `PgClient`; fails with `SqlError`.
 *
 * Pending deliveries are read through the two partial indexes that hold
 * exactly them (`deliveries_due_idx` for `ordering: none`,
 * `deliveries_queue_idx` for W7 queues, migrations/0013), so a sample costs
 * what is pending, not what was ever delivered: `status = 'pending'` alone
 * matches neither index, and each sample scanned the whole table twice
 * (EXPLAIN ANALYZE on 500,000 delivered and 70 pending deliveries: 114 ms
 * with two parallel sequential scans, 0.5 ms this way;
 * test/Telemetry/Gauges.test.ts checks that no sample scans `deliveries`).
 */
export const sampleGauges = Effect.gen(function* () {
  const sql = yield* PgClient.PgClient
  const [row] = yield* sql<{
    lag: number
    deliveries: number
    reply_jobs: number
    reply_jobs_running: number
    schedules: number
  }>`WITH pending AS (
      SELECT created_at FROM deliveries WHERE status = 'pending' AND ordering_key IS NULL
      UNION ALL
      SELECT created_at FROM deliveries WHERE status = 'pending' AND ordering_key IS NOT NULL
    )
    SELECT
      coalesce(extract(epoch FROM statement_timestamp() - (SELECT min(created_at) FROM pending)), 0)::float8 AS lag,
      (SELECT count(*) FROM pending)::int AS deliveries,
      (SELECT count(*) FROM reply_jobs WHERE status = 'pending')::int AS reply_jobs,
      (SELECT count(*) FROM reply_jobs WHERE status = 'running')::int AS reply_jobs_running,
      (SELECT count(*) FROM session_schedules WHERE status = 'pending')::int AS schedules`
  const connections = yield* sql<{ state: string; n: number }>`
    SELECT coalesce(state, 'unknown') AS state, count(*)::int AS n FROM pg_stat_activity
    WHERE datname = current_database() AND ${sql.literal(parleyConnection)} GROUP BY 1`
  yield* Metric.update(outboxLag, row!.lag)
  for (const queue of ["deliveries", "reply_jobs", "reply_jobs_running", "schedules"] as const) {
    yield* record(queueDepth, row![queue], { queue })
  }
  for (const state of ["active", "idle", "idle in transaction"]) {
    yield* record(dbConnections, connections.find((c) => c.state === state)?.n ?? 0, { state })
  }
})

/**
 * The sampler of the database-wide gauges ({@link sampleGauges}), run by worker processes (O1):
 * every {@link SAMPLE_INTERVAL_MS}, failures logged and retried next time.
 * Requires `PgClient`.
 */
export const GaugeSamplerLive = Layer.effectDiscard(
  Effect.forkScoped(
    Effect.forever(
      sampleGauges.pipe(
        Effect.catchCause((cause) => logUnlessOutage("Metrics sample failed", cause)),
        Effect.andThen(Effect.sleep(SAMPLE_INTERVAL_MS))
      )
    )
  )
)
