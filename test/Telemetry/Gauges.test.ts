/**
 * The database-wide gauges (`Telemetry/Metrics.ts` `sampleGauges`, issue 8
 * item 2) over a `deliveries` table that holds far more delivered than pending
 * rows, as it does after months: a sample reads the pending deliveries
 * through their partial indexes and never scans the table, and it still counts
 * both kinds (`ordering: none` and W7 queues) and the age of the oldest.
 */
import { assert, layer } from "@effect/vitest"
import { Effect, Layer, Metric } from "effect"
import { SqlClient } from "effect/sql"
import { sampleGauges } from "../../src/Telemetry/Metrics.ts"
import { FileDatabase, fileDatabaseClient, growingTable, insertApp, sequentialScans } from "../support/Database.ts"

layer(fileDatabaseClient(1).pipe(Layer.provide(FileDatabase)), { timeout: "120 seconds" })(
  "the database-wide gauges",
  (it) => {
    it.effect(
      "a sample counts what is pending without scanning deliveries (parley.queue.depth, parley.outbox.lag)",
      () =>
        Effect.gen(function* () {
          const sql = yield* SqlClient.SqlClient
          const organizationId = "01a21bbc-0000-7000-8000-000000000002"
          yield* growingTable("deliveries", organizationId, "gauges")
          yield* insertApp(organizationId, "none", "none")
          yield* insertApp(organizationId, "conversation", "conversation")
          /** `n` message.created events of conversations of their own: the fan-out makes a delivery for each app. */
          const addEvents = (n: number) =>
            sql`INSERT INTO events (id, organization_id, type, body, created_at, conversation_id)
            SELECT gen_random_uuid(), ${organizationId}, 'message.created', '{}', now(), gen_random_uuid()
            FROM generate_series(1, ${n})`
          // 4,000 deliveries already delivered, then 3 pending for each app, the oldest a minute old.
          yield* addEvents(2_000)
          yield* sql`UPDATE deliveries SET status = 'succeeded', attempts = 1, next_attempt_at = NULL`
          yield* addEvents(3)
          yield* sql`UPDATE deliveries SET created_at = now() - interval '60 seconds'
          WHERE id = (SELECT id FROM deliveries WHERE status = 'pending' AND ordering_key IS NOT NULL LIMIT 1)`
          yield* sql`ANALYZE deliveries`

          const before = yield* sequentialScans("deliveries")
          yield* sampleGauges
          assert.strictEqual(
            (yield* sequentialScans("deliveries")) - before,
            0,
            "the sample scanned deliveries sequentially"
          )

          const gauge = (id: string, queue?: string) =>
            Effect.map(Metric.snapshot, (snapshots) => {
              const found = snapshots.find(
                (snapshot) => snapshot.id === id && (queue === undefined || snapshot.attributes?.queue === queue)
              )
              return found?.type === "Gauge" ? Number(found.state.value) : undefined
            })
          assert.strictEqual(yield* gauge("parley.queue.depth", "deliveries"), 6)
          const lag = yield* gauge("parley.outbox.lag")
          assert.isAtLeast(lag!, 60)
          assert.isBelow(lag!, 120)
        })
    )
  }
)
