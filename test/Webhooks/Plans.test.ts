/**
 * The delivery worker's statements as `deliveries` grows (issue 16 item 4;
 * DECISIONS.md W2, W5; src/Webhooks/Repo.ts `WORKER_STATEMENT`). A new installation
 * starts with an empty table: a claim or completion prepared then, and planned
 * once for every later call, scanned the whole table on each call once it held
 * thousands of rows (the webhooks benchmark found it). Here the worker claims
 * and completes while the table is small, the table grows to thousands of
 * finished deliveries (statistics not refreshed: autovacuum is off for it),
 * and the next claims and completions must deliver without a sequential scan
 * of `deliveries`. One connection, so the statistics counters read are those
 * of the backend that ran the statements once it flushed them.
 */
import { assert, layer } from "@effect/vitest"
import { Effect, Layer } from "effect"
import { SqlClient } from "effect/sql"
import { type AttemptResult, WebhooksRepo } from "../../src/Webhooks/Repo.ts"
import { attemptVerdict } from "../../src/Webhooks/Worker.ts"
import { FileDatabase, fileDatabaseClient, growingTable, insertApp, sequentialScans } from "../support/Database.ts"

const workerId = "01a21bbc-b215-734e-a34c-edfb1bf5ba73"

// One connection to the file's database, and the webhooks repository over it.
layer(WebhooksRepo.layer.pipe(Layer.provideMerge(fileDatabaseClient(1)), Layer.provide(FileDatabase)), {
  timeout: "120 seconds"
})("the delivery worker's statements as deliveries grow", (it) => {
  it.effect("claims and completions after the table grew from a few rows to 6,000 scan none of it whole (W5)", () =>
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      const repo = yield* WebhooksRepo
      const organizationId = "01a21bbc-0000-7000-8000-000000000001"
      yield* growingTable("deliveries", organizationId, "plans")
      yield* insertApp(organizationId, "plans")
      /** `n` message.created events: the fan-out makes one pending delivery each. */
      const addEvents = (n: number) =>
        sql`INSERT INTO events (id, organization_id, type, body, created_at)
          SELECT gen_random_uuid(), ${organizationId}, 'message.created', '{}', now() FROM generate_series(1, ${n})`
      /** Claims what is due and records a success for each; answers how many. */
      const deliverDue = Effect.gen(function* () {
        const claimed = yield* repo.claim({
          workerId,
          leaseMs: 30_000,
          limit: 16,
          perApp: 16,
          busyApps: [],
          busyCounts: [],
          saturated: []
        })
        const results: Array<AttemptResult> = claimed.map((delivery) => ({
          id: delivery.id,
          durationMs: 1,
          startedAt: new Date(),
          ...attemptVerdict({ statusCode: 200 }, delivery.attempts + 1, [])
        }))
        if (results.length > 0) yield* repo.complete(workerId, results)
        return claimed.length
      })

      // While the table is small: more calls than PostgreSQL's five before it settles on a plan.
      for (let i = 0; i < 8; i++) {
        yield* addEvents(2)
        assert.strictEqual(yield* deliverDue, 2)
      }
      // The table grows: 6,000 deliveries already succeeded.
      yield* addEvents(6_000)
      yield* sql`UPDATE deliveries SET status = 'succeeded', attempts = 1, next_attempt_at = NULL WHERE status = 'pending'`
      const before = yield* sequentialScans("deliveries")
      for (let i = 0; i < 8; i++) {
        yield* addEvents(3)
        assert.strictEqual(yield* deliverDue, 3)
      }
      const after = yield* sequentialScans("deliveries")
      assert.strictEqual(after - before, 0, "claims and completions scanned deliveries sequentially")
      const rows = yield* sql<{ n: number }>`SELECT count(*)::int AS n FROM deliveries WHERE status = 'succeeded'`
      assert.strictEqual(rows[0]!.n, 16 + 6_000 + 24)
    })
  )
})
