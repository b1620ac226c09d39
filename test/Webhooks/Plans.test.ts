/**
 * The delivery worker's statements as `deliveries` grows (issue 16 item 4;
 * DECISIONS.md W2, W5; src/Webhooks/Repo.ts `WORKER_PLANNER_SETTINGS`). A new
 * installation starts with an empty table: a claim or completion prepared
 * then, and planned once for every later call, scanned the whole table on
 * each call once it held thousands of rows (the webhooks benchmark found it).
 * Here the worker claims and completes, prepared, on a connection of its own
 * pool (`workerClientLayer`) while the table is small, the table grows to
 * thousands of finished deliveries (statistics not refreshed: autovacuum is
 * off for it), and the next claims and completions must deliver without a
 * sequential scan of `deliveries`, for an app with `ordering: none` and for
 * one with `ordering: conversation` (W7: the claim's walk over the queues'
 * heads, which PostgreSQL planned as a hash join over the whole table at these
 * sizes even per call), the claim planned for its organization on every call
 * (a generic plan, made once while the table was small, read all of the
 * organization's deliveries by its primary key on every claim: O11). The
 * sweep of deleted apps'
 * deliveries (migrations/0017) must not scan it either. One connection, so the
 * statistics counters and prepared statements read are those of the backend
 * that ran the statements.
 */
import { assert, layer } from "@effect/vitest"
import { Effect, Layer, Redacted } from "effect"
import { SqlClient, type Statement } from "effect/sql"
import { claimStatement, completeStatement, WebhooksRepo } from "../../src/Webhooks/Repo.ts"
import { workerClientLayer } from "../../src/Webhooks/Worker.ts"
import {
  FileDatabase,
  growingTable,
  indexEntriesRead,
  insertApp,
  sequentialScans,
  TestDatabaseUrl
} from "../support/Database.ts"
import { deliverDue } from "../support/Deliveries.ts"

/** How many times the claim prepared on this connection ran on a generic plan and on a custom plan so far. */
const claimPlans = Effect.flatMap(
  Effect.service(SqlClient.SqlClient),
  (sql) =>
    sql<{
      generic: number
      custom: number
    }>`SELECT generic_plans::int AS generic, custom_plans::int AS custom FROM pg_prepared_statements
      WHERE statement = ${claimStatement.text}`
).pipe(Effect.map((rows) => rows[0] ?? { generic: 0, custom: 0 }))

/** One turn of the worker ({@link deliverDue}, successes); returns how many deliveries it took. */
const deliverRound = Effect.map(deliverDue(), (claimed) => claimed.length)

/**
 * The scenario: `addEvents(n)` writes n message.created events for one app
 * (the fan-out makes a pending delivery of each); `perRound` events are
 * delivered in each of eight rounds while the table is small, then 6,000
 * events are written and marked succeeded, then eight more rounds must not
 * scan `deliveries` sequentially.
 */
const deliversWithoutScans = (addEvents: (n: number) => Statement.Statement<unknown>, perRound: number) =>
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    // While the table is small: more calls than PostgreSQL's five before it settles on a plan.
    for (let i = 0; i < 8; i++) {
      yield* addEvents(perRound)
      assert.strictEqual(yield* deliverRound, perRound)
    }
    // The table grows: 6,000 deliveries already succeeded.
    yield* addEvents(6_000)
    yield* sql`UPDATE deliveries SET status = 'succeeded', attempts = 1, next_attempt_at = NULL WHERE status = 'pending'`
    const before = yield* sequentialScans("deliveries")
    const entriesBefore = yield* indexEntriesRead("deliveries_pkey")
    const plansBefore = yield* claimPlans
    for (let i = 0; i < 8; i++) {
      yield* addEvents(perRound)
      assert.strictEqual(yield* deliverRound, perRound)
    }
    const after = yield* sequentialScans("deliveries")
    assert.strictEqual(after - before, 0, "claims and completions scanned deliveries sequentially")
    // Nor through its primary key, all of the organization's 6,000 (O11: with the organization bound to a parameter,
    // a plan made while the table was small read them all on every claim to find the batch it leased by ids).
    const entries = (yield* indexEntriesRead("deliveries_pkey")) - entriesBefore
    assert.isBelow(entries, 8 * 1_000, "claims and completions read the organization's deliveries by its primary key")
    // The claim is planned for its organization on every call (plan_cache_mode force_custom_plan): a generic plan,
    // made once while the table was small, estimated one row per organization and read all of its deliveries.
    const plans = yield* claimPlans
    assert.strictEqual(plans.generic, 0, "claims on a generic plan")
    assert.strictEqual(plans.custom - plansBefore.custom, 8, "claims after the growth on a custom plan")
    // The completion is prepared on this connection too (PostgreSQL keeps custom plans for it: they cost less).
    const completion = yield* sql`SELECT 1 FROM pg_prepared_statements WHERE statement = ${completeStatement.text}`
    assert.strictEqual(completion.length, 1, "the completion is prepared")
  })

/** One connection of the worker's pool (its planner settings) to the file's database. */
const workerConnection = Layer.unwrap(
  Effect.map(Effect.service(TestDatabaseUrl), (url) => workerClientLayer(Redacted.make(url), 1))
)

// The webhooks repository over that connection.
layer(WebhooksRepo.layer.pipe(Layer.provideMerge(workerConnection), Layer.provide(FileDatabase)), {
  timeout: "120 seconds"
})("the delivery worker's statements as deliveries grow", (it) => {
  it.effect("claims and completions after the table grew from a few rows to 6,000 scan none of it whole (W5)", () =>
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      const organizationId = "01a21bbc-0000-7000-8000-000000000001"
      yield* growingTable("deliveries", organizationId, "plans")
      yield* insertApp(organizationId, "plans")
      yield* deliversWithoutScans(
        (n) => sql`INSERT INTO events (id, organization_id, type, body, created_at)
          SELECT gen_random_uuid(), ${organizationId}, 'message.created', '{}', now() FROM generate_series(1, ${n})`,
        2
      )
      const rows = yield* sql<{ n: number }>`SELECT count(*)::int AS n FROM deliveries
        WHERE organization_id = ${organizationId} AND status = 'succeeded'`
      assert.strictEqual(rows[0]!.n, 16 + 6_000 + 16)
    })
  )

  it.effect("ordered claims (W7) after the table grew scan none of it whole: one index probe per queue", () =>
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      const organizationId = "01a21bbc-0000-7000-8000-000000000002"
      yield* growingTable("deliveries", organizationId, "plans ordered")
      yield* insertApp(organizationId, "plans ordered", "conversation")
      // Events over 20 conversations, in turn: a round of 20 is one delivery at the head of each queue.
      yield* deliversWithoutScans(
        (n) => sql`INSERT INTO events (id, organization_id, type, body, created_at, conversation_id)
          SELECT gen_random_uuid(), ${organizationId}, 'message.created', '{}', now(), md5((g % 20)::text)::uuid
          FROM generate_series(1, ${n}) AS g`,
        20
      )
      const rows = yield* sql<{ n: number }>`SELECT count(*)::int AS n FROM deliveries
        WHERE organization_id = ${organizationId} AND status = 'succeeded' AND ordering_key IS NOT NULL`
      assert.strictEqual(rows[0]!.n, 160 + 6_000 + 160)
    })
  )

  it.effect("the sweep of deleted apps' deliveries (W2, migrations/0017) scans none of the table whole", () =>
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      const repo = yield* WebhooksRepo
      const organizationId = "01a21bbc-0000-7000-8000-000000000003"
      yield* growingTable("deliveries", organizationId, "plans sweep")
      yield* insertApp(organizationId, "plans sweep")
      yield* sql`INSERT INTO events (id, organization_id, type, body, created_at)
        SELECT gen_random_uuid(), ${organizationId}, 'message.created', '{}', now() FROM generate_series(1, 6000)`
      // What a fan-out racing an app's delete leaves: deliveries of an app that no longer exists.
      yield* sql`INSERT INTO deliveries (id, organization_id, app_id, event_id, event_type, next_attempt_at, created_at)
        SELECT gen_random_uuid(), ${organizationId}, '01a21bbc-0000-7000-8000-0000000000dd', gen_random_uuid(),
          'message.created', now(), now() FROM generate_series(1, 3)`
      const total = yield* sql<{ n: number }>`SELECT count(*)::int AS n FROM deliveries`
      const before = yield* sequentialScans("deliveries")
      assert.strictEqual(yield* repo.sweep, 3)
      assert.strictEqual(yield* repo.sweep, 0)
      assert.strictEqual((yield* sequentialScans("deliveries")) - before, 0, "the sweep scanned deliveries")
      const left = yield* sql<{ n: number }>`SELECT count(*)::int AS n FROM deliveries`
      assert.strictEqual(left[0]!.n, total[0]!.n - 3)
    })
  )
})
