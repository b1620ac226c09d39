/**
 * The sweep of expired Idempotency-Key responses (D19, `Idempotency/Repo.ts`
 * `sweep`) as the table grows: swept while it is small (more calls than
 * PostgreSQL's five before it settles on a plan), then again after it holds
 * thousands of live responses; the later sweeps delete only what expired and
 * never scan the table whole.
 */
import { assert, layer } from "@effect/vitest"
import { Effect, Layer } from "effect"
import { SqlClient } from "effect/sql"
import { IdempotencyRepo } from "../../src/Idempotency/Repo.ts"
import { FileDatabase, fileDatabaseClient, growingTable, sequentialScans } from "../support/Database.ts"

// One connection to the file's database, so every sweep runs on the same prepared-statement cache.
layer(IdempotencyRepo.layer.pipe(Layer.provideMerge(fileDatabaseClient(1)), Layer.provide(FileDatabase)), {
  timeout: "120 seconds"
})("the sweep of expired responses as the table grows (D19)", (it) => {
  it.effect(
    "sweeps after the table grew from 3 responses to 20,000 delete the expired ones with no sequential scan",
    () =>
      Effect.gen(function* () {
        const sql = yield* SqlClient.SqlClient
        const repo = yield* IdempotencyRepo
        const organizationId = "01a21bbc-0000-7000-8000-000000000003"
        yield* growingTable("idempotency_keys", organizationId, "sweep")
        /** `n` responses under keys `prefix`1..n, expired (`expired`) or live for 24 hours. */
        const addResponses = (prefix: string, n: number, expired: boolean) =>
          sql`INSERT INTO idempotency_keys (organization_id, key, fingerprint, status, content_type, body, expires_at)
          SELECT ${organizationId}, ${prefix} || g, '\\x00', 201, 'application/json', '\\x7b7d',
            CASE WHEN ${expired} THEN now() - interval '1 second' ELSE now() + interval '24 hours' END
          FROM generate_series(1, ${n}) g`

        // While the table is small (analyzed, as autovacuum does): more sweeps than PostgreSQL's five before it
        // settles on a plan.
        yield* addResponses("live-", 3, false)
        yield* sql`ANALYZE idempotency_keys`
        for (let i = 0; i < 8; i++) {
          yield* addResponses(`small-${i}-`, 1, true)
          assert.strictEqual(yield* repo.sweep(1_000), 1)
        }
        // The table grows (not analyzed again): 20,000 live responses, and 10 expired ones.
        yield* addResponses("grown-", 20_000, false)
        yield* addResponses("expired-", 10, true)
        const before = yield* sequentialScans("idempotency_keys")
        assert.strictEqual(yield* repo.sweep(1_000), 10)
        assert.strictEqual(yield* repo.sweep(1_000), 0)
        assert.strictEqual(
          (yield* sequentialScans("idempotency_keys")) - before,
          0,
          "a sweep scanned idempotency_keys sequentially"
        )
        const rows = yield* sql<{ n: number }>`SELECT count(*)::int AS n FROM idempotency_keys`
        assert.strictEqual(rows[0]!.n, 20_003)
      })
  )
})
