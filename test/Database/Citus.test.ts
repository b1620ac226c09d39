/**
 * Parley's tables on Citus (O11; issue 43 item 2): the order tables are
 * distributed in, and on a cluster what the migrations leave (every
 * per-organization table distributed by `organization_id` in one co-location
 * group, the others reference tables, the migrator's table on the
 * coordinator), including for a database that was populated on one server
 * first and is then migrated on the coordinator (Citus moves its rows).
 * And Parley's triggers and wakeups on the cluster (issue 43 item 4;
 * migrations/0031_citus_triggers.ts, docs/citus-notes.md (a), (b), (g)).
 */
import { PgClient } from "@effect/sql-pg"
import { assert, describe, it } from "@effect/vitest"
import { Effect, Queue, Redacted, type Scope } from "effect"
import { SqlClient } from "effect/sql"
import { inject } from "vitest"
import { distribute, foreignKeyOrder } from "../../src/Database/Citus.ts"
import * as Database from "../../src/Database/Database.ts"
import { deliveriesChannel, insertEvents, notifyDeliveriesIf, wroteSubscribedSql } from "../../src/Outbox/Outbox.ts"
import { emptyDatabase, insertApp } from "../support/Database.ts"
import { serversOf } from "../support/Servers.ts"

const servers = await serversOf(inject("serverUrl"))
const onCluster = servers.nodes !== undefined
if (!onCluster) {
  process.stderr.write(
    "[test/Database/Citus.test.ts] the cluster tests skipped: TEST_DATABASE_URL is one PostgreSQL server, not a Citus coordinator (O11); .ci/run runs them on a cluster\n"
  )
}

const table = (name: string, perOrganization: boolean, references: ReadonlyArray<string> = []) => ({
  name,
  per_organization: perOrganization,
  references
})

describe("foreignKeyOrder (O11)", () => {
  it("puts reference tables first and every table after the tables it references", () => {
    const order = foreignKeyOrder([
      table("deliveries", true, ["events", "apps", "organizations"]),
      table("api_keys", false, ["organizations"]),
      table("events", true, ["organizations"]),
      table("apps", true, ["organizations"]),
      table("organizations", false)
    ]).map((t) => t.name)
    assert.isBelow(order.indexOf("organizations"), order.indexOf("api_keys"))
    assert.isBelow(order.indexOf("events"), order.indexOf("deliveries"))
    assert.isBelow(order.indexOf("apps"), order.indexOf("deliveries"))
    assert.deepStrictEqual(order.slice(0, 2).sort(), ["api_keys", "organizations"])
  })

  it("ignores references to tables already distributed and fails on a cycle", () => {
    assert.deepStrictEqual(
      foreignKeyOrder([table("messages", true, ["sessions"])]).map((t) => t.name),
      ["messages"]
    )
    assert.throws(() => foreignKeyOrder([table("a", true, ["b"]), table("b", true, ["a"])]), /cycle/)
  })
})

/** `body` on a new empty database of the run's servers (on a cluster: with Citus and its nodes), dropped afterwards. */
const onOwnDatabase = <A>(
  prefix: string,
  body: Effect.Effect<A, unknown, SqlClient.SqlClient | PgClient.PgClient | Scope.Scope>,
  connections = 1
) =>
  Effect.acquireUseRelease(
    Effect.promise(() => emptyDatabase(prefix)),
    (database) =>
      // The body's scope (a listener's connection) closes before the pool does.
      body.pipe(
        Effect.scoped,
        Effect.provide(Database.clientLayer(Redacted.make(database.url), connections)),
        Effect.scoped
      ),
    (database) => Effect.promise(database.drop)
  )

/** Per table: how Citus holds it (`distributed`, `reference`, or `local` when it does not). */
const placement = Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  return yield* sql<{ name: string; kind: string; column: string | null; colocation: number | null }>`
    SELECT c.relname AS name,
      CASE WHEN p.partmethod = 'h' THEN 'distributed' WHEN p.partmethod = 'n' THEN 'reference' ELSE 'local' END AS kind,
      CASE WHEN p.partmethod = 'h' THEN column_to_column_name(p.logicalrelid, p.partkey) END AS column,
      p.colocationid AS colocation
    FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
      LEFT JOIN pg_dist_partition p ON p.logicalrelid = c.oid
    WHERE n.nspname = 'public' AND c.relkind = 'r' ORDER BY c.relname`
})

describe.skipIf(!onCluster)("Parley's tables on a Citus cluster (O11)", () => {
  it.live(
    "migrations distribute every per-organization table by organization_id, co-located; the others are reference tables",
    () =>
      onOwnDatabase(
        "citus_placement",
        Effect.gen(function* () {
          yield* Database.migrate
          const tables = yield* placement
          const byName = new Map(tables.map((t) => [t.name, t]))
          assert.strictEqual(byName.get("parley_migrations")?.kind, "local")
          for (const name of ["organizations", "api_keys"])
            assert.strictEqual(byName.get(name)?.kind, "reference", name)
          const distributed = tables.filter((t) => t.kind === "distributed")
          for (const name of ["sessions", "messages", "events", "deliveries", "reply_jobs", "runs", "assistants"]) {
            assert.strictEqual(byName.get(name)?.kind, "distributed", name)
          }
          assert.deepStrictEqual([...new Set(distributed.map((t) => t.column))], ["organization_id"])
          assert.strictEqual(new Set(distributed.map((t) => t.colocation)).size, 1)
          assert.deepStrictEqual(
            tables.filter((t) => t.kind === "local").map((t) => t.name),
            ["parley_migrations"]
          )
          // Running the migrations again changes nothing.
          assert.deepStrictEqual(yield* Database.migrate, [])
          assert.deepStrictEqual(yield* placement, tables)

          // The triggers came back and run on the shards' nodes with what they call there
          // (parley_app_subscribes, the sequence of ordered deliveries: migrations/0028).
          const sql = yield* SqlClient.SqlClient
          // The database's new sessions run without JIT (src/Database/Citus.ts withoutJit).
          const [settings] = yield* sql<{ setconfig: ReadonlyArray<string> }>`SELECT setconfig FROM pg_db_role_setting
            WHERE setdatabase = (SELECT oid FROM pg_database WHERE datname = current_database()) AND setrole = 0`
          assert.include(settings?.setconfig ?? [], "jit=off")
          const organizationId = crypto.randomUUID()
          const conversationId = crypto.randomUUID()
          yield* sql`INSERT INTO organizations (id, name, created_at) VALUES (${organizationId}, 'fan-out', now())`
          yield* insertApp(organizationId, "ordered", "conversation")
          yield* sql`INSERT INTO conversations (id, organization_id, contact_id, created_at)
            VALUES (${conversationId}, ${organizationId}, '+1555', now())`
          // One event per statement: a statement Citus routes through the coordinator runs the
          // trigger's NOTIFY inside a prepared transaction, which PostgreSQL refuses
          // (docs/citus-notes.md; the fan-out's NOTIFY on a cluster is issue 43 item 4, open).
          for (let i = 0; i < 3; i++) {
            yield* sql`INSERT INTO events (id, organization_id, conversation_id, type, body, created_at)
              VALUES (gen_random_uuid(), ${organizationId}, ${conversationId}, 'message.created', '{}', now())`
          }
          const deliveries = yield* sql<{ sequence_number: string }>`SELECT sequence_number::text FROM deliveries
            WHERE organization_id = ${organizationId} ORDER BY sequence_number`
          assert.strictEqual(deliveries.length, 3)
          const numbers = deliveries.map((d) => BigInt(d.sequence_number))
          assert.isTrue(numbers[0]! < numbers[1]! && numbers[1]! < numbers[2]!)
        })
      )
  )

  it.live(
    "a database populated on one server keeps every row when the coordinator's migrations distribute it (docs/operations.md)",
    () =>
      onOwnDatabase(
        "citus_move",
        Effect.gen(function* () {
          const sql = yield* SqlClient.SqlClient
          // As a single server leaves it: every migration applied, nothing distributed.
          yield* Database.migrateThrough()
          assert.deepStrictEqual([...new Set((yield* placement).map((t) => t.kind))], ["local"])
          const organizationId = crypto.randomUUID()
          const conversationId = crypto.randomUUID()
          const sessionId = crypto.randomUUID()
          yield* sql`INSERT INTO organizations (id, name, created_at) VALUES (${organizationId}, 'moved', now())`
          yield* insertApp(organizationId, "receiver")
          yield* sql`INSERT INTO conversations (id, organization_id, contact_id, created_at)
            VALUES (${conversationId}, ${organizationId}, '+1555', now())`
          yield* sql`INSERT INTO sessions (id, organization_id, conversation_id, contact_id, status, created_at)
            VALUES (${sessionId}, ${organizationId}, ${conversationId}, '+1555', 'open', now())`
          yield* sql`INSERT INTO messages (id, organization_id, session_id, conversation_id, role, content, created_at)
            SELECT gen_random_uuid(), ${organizationId}, ${sessionId}, ${conversationId}, 'user',
              json_build_object('type', 'text', 'text', 'message ' || n), now()
            FROM generate_series(1, 50) n`
          yield* sql`INSERT INTO events (id, organization_id, type, body, created_at)
            SELECT gen_random_uuid(), ${organizationId}, 'message.created', '{}', now() FROM generate_series(1, 5)`
          const counts = sql<{ table: string; n: number }>`SELECT 'messages' AS table, count(*)::int AS n FROM messages
            UNION ALL SELECT 'events', count(*)::int FROM events UNION ALL SELECT 'deliveries', count(*)::int FROM deliveries
            UNION ALL SELECT 'sessions', count(*)::int FROM sessions UNION ALL SELECT 'apps', count(*)::int FROM apps
            ORDER BY 1`
          const before = yield* counts
          assert.deepStrictEqual(
            before.find((row) => row.table === "deliveries"),
            { table: "deliveries", n: 5 }
          )

          // Parley started on the coordinator: nothing to apply, the tables distributed, every row kept.
          assert.deepStrictEqual(yield* Database.migrate, [])
          const after = yield* placement
          assert.strictEqual(after.find((t) => t.name === "messages")?.kind, "distributed")
          assert.deepStrictEqual(yield* counts, before)
          // The coordinator's own copies were emptied (Citus moved the rows into shards).
          const [local] = yield* sql<{
            bytes: number
          }>`SELECT (pg_relation_size('messages') + pg_relation_size('sessions'))::int AS bytes`
          assert.strictEqual(local!.bytes, 0)
          const [one] = yield* sql<{ n: number }>`SELECT count(*)::int AS n FROM messages
            WHERE organization_id = ${organizationId} AND session_id = ${sessionId}`
          assert.strictEqual(one!.n, 50)
        })
      )
  )
})

/** A new organization of `name` with an app subscribed to message.created; its id. */
const organizationWithApp = (name: string, id: string = crypto.randomUUID()) =>
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    yield* sql`INSERT INTO organizations (id, name, created_at) VALUES (${id}, ${name}, now())`
    yield* insertApp(id, `${name} app`)
    return id
  })

/** The port of the worker that holds the organization's shard of `events` (O11: every table's shard of it is there). */
const workerOf = (organizationId: string) =>
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const [row] = yield* sql<{ port: number }>`SELECT n.nodeport AS port FROM pg_dist_placement p
      JOIN pg_dist_node n ON n.groupid = p.groupid
      WHERE p.shardid = get_shard_id_for_distribution_column('events', ${organizationId}::uuid)`
    return row!.port
  })

/**
 * The events of `organizationIds` (one message.created each) in one statement
 * (the outbox's `insertEvents`) and, when they fanned out, the wakeup as a
 * statement of its own (`notifyDeliveriesIf`), as every writer of events does;
 * whether they fanned out.
 */
const writeEvents = (organizationIds: ReadonlyArray<string>) =>
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const [row] = yield* sql.unsafe<{ subscribed: boolean }>(
      `WITH w AS (${insertEvents({
        id: "ev.id",
        type: "'message.created'",
        organizationId: "ev.organization_id",
        conversationId: "NULL::uuid",
        at: "statement_timestamp()",
        object: "'{}'::json",
        traceContext: "NULL::jsonb",
        from: "unnest($1::uuid[], $2::uuid[]) AS ev(organization_id, id)"
      })})
      SELECT ${wroteSubscribedSql(["w"], "($1::uuid[])[1]")} AS subscribed`,
      [organizationIds, organizationIds.map(() => crypto.randomUUID())]
    )
    yield* notifyDeliveriesIf(sql, row!.subscribed, undefined)
    return row!.subscribed
  })

/** How many deliveries each organization has. */
const deliveriesOf = (organizationIds: ReadonlyArray<string>) =>
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const rows = yield* sql<{ organization_id: string; n: number }>`SELECT organization_id::text, count(*)::int AS n
      FROM deliveries WHERE organization_id = ANY (${organizationIds}::uuid[]) GROUP BY organization_id`
    return organizationIds.map((id) => rows.find((row) => row.organization_id === id)?.n ?? 0)
  })

/**
 * How many roll-ups (A14) differ from the sums of the runs they count (rows at
 * 0 runs, which the statistics skip, aside); 0 when they match.
 */
const rollUpMismatches = Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  const [row] = yield* sql<{ n: number }>`SELECT count(*)::int AS n FROM (
      SELECT organization_id, assistant_id, parley_run_hour(started_at) AS hour, commit_id,
        coalesce(branch_name, '') AS branch_name, duration_ms, count(*)::int AS runs,
        (count(*) FILTER (WHERE status = 'succeeded'))::int AS succeeded,
        coalesce(sum(input_tokens), 0)::bigint AS input_tokens, coalesce(sum(output_tokens), 0)::bigint AS output_tokens
      FROM runs GROUP BY 1, 2, 3, 4, 5, 6
    ) r FULL JOIN (SELECT * FROM run_rollups WHERE runs <> 0) u
      ON (u.organization_id, u.assistant_id, u.hour, u.commit_id, u.branch_name, u.duration_ms)
        = (r.organization_id, r.assistant_id, r.hour, r.commit_id, r.branch_name, r.duration_ms)
    WHERE (u.runs, u.succeeded, u.input_tokens, u.output_tokens)
      IS DISTINCT FROM (r.runs, r.succeeded, r.input_tokens, r.output_tokens)`
  return row!.n
})

/** A conversation and an open session of the organization; the session's id. */
const openSession = (organizationId: string) =>
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const conversationId = crypto.randomUUID()
    const sessionId = crypto.randomUUID()
    yield* sql`INSERT INTO conversations (id, organization_id, contact_id, created_at)
      VALUES (${conversationId}, ${organizationId}, '+1555', now())`
    yield* sql`INSERT INTO sessions (id, organization_id, conversation_id, contact_id, status, created_at)
      VALUES (${sessionId}, ${organizationId}, ${conversationId}, '+1555', 'open', now())`
    return sessionId
  })

/** Inserts `n` runs of the session in one statement, of two durations, one in three failed. */
const insertRuns = (organizationId: string, sessionId: string, n: number) =>
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    yield* sql`INSERT INTO runs (id, organization_id, session_id, trigger, assistant_id, commit_id, status,
        input_tokens, output_tokens, started_at, finished_at, duration_ms)
      SELECT gen_random_uuid(), ${organizationId}, ${sessionId}, 'reply', 'bot', 'c1',
        CASE WHEN g % 3 = 0 THEN 'failed' ELSE 'succeeded' END, 10 * g, g,
        TIMESTAMPTZ '2026-01-01 10:00:00+00' + g * interval '20 minutes',
        TIMESTAMPTZ '2026-01-01 10:00:00+00' + g * interval '20 minutes', CASE WHEN g % 2 = 0 THEN 100 ELSE 200 END
      FROM generate_series(1, ${n}) g`
  })

describe("migration 0031 on a database populated through 0030 (any server: one, or a cluster; O11, A14, W2)", () => {
  it.live(
    "keeps the roll-ups, which the row trigger then keeps; the fan-out still makes deliveries; on a cluster, distributed first",
    () =>
      onOwnDatabase(
        "triggers_upgrade",
        Effect.gen(function* () {
          const sql = yield* SqlClient.SqlClient
          yield* Database.migrateThrough(30)
          const organizationId = yield* organizationWithApp("upgraded")
          const sessionId = yield* openSession(organizationId)
          yield* insertRuns(organizationId, sessionId, 7)
          yield* sql`INSERT INTO events (id, organization_id, type, body, created_at)
          VALUES (gen_random_uuid(), ${organizationId}, 'message.created', '{}', now())`
          assert.strictEqual(yield* rollUpMismatches, 0)
          const rollUps = sql`SELECT assistant_id, hour, duration_ms, runs, succeeded, input_tokens::int, output_tokens::int
          FROM run_rollups ORDER BY hour, duration_ms`
          const before = yield* rollUps

          // On a cluster, the tables distributed as 0030 left them (Parley started on the coordinator before 0031),
          // then 0031 replaces triggers of distributed tables. On one server: 0031 alone.
          yield* distribute
          // 0031 and the ones after it, in order.
          const applied = (yield* Database.migrate).map(([id]) => id)
          assert.strictEqual(applied[0], 31)
          assert.deepStrictEqual(
            applied,
            applied.map((_, i) => 31 + i)
          )
          assert.deepStrictEqual(yield* rollUps, before)
          const triggers = yield* sql<{ name: string }>`SELECT tgname AS name FROM pg_trigger
          WHERE tgrelid = 'runs'::regclass AND NOT tgisinternal ORDER BY 1`
          assert.deepStrictEqual(
            triggers.map((t) => t.name),
            ["runs_roll_up"]
          )
          yield* insertRuns(organizationId, sessionId, 5)
          yield* sql`DELETE FROM runs WHERE organization_id = ${organizationId} AND input_tokens IN (10, 40, 70)`
          assert.strictEqual(yield* rollUpMismatches, 0)
          yield* sql.withTransaction(writeEvents([organizationId]))
          assert.deepStrictEqual(yield* deliveriesOf([organizationId]), [2])
        })
      )
  )
})

describe.skipIf(!onCluster)("Parley's triggers and wakeups on a Citus cluster (O11, W2; issue 43 item 4)", () => {
  it.live(
    "the fan-out writes deliveries on the shard and a listener on the coordinator gets the wakeup; a transaction writing two workers commits",
    () =>
      onOwnDatabase(
        "citus_fan_out",
        Effect.gen(function* () {
          yield* Database.migrate
          const sql = yield* SqlClient.SqlClient
          const pg = yield* PgClient.PgClient
          const notifications = yield* pg.listen(deliveriesChannel)
          const first = yield* organizationWithApp("first")
          const firstWorker = yield* workerOf(first)
          // Another organization whose shards are on the other worker.
          let second = crypto.randomUUID()
          while ((yield* workerOf(second)) === firstWorker) second = crypto.randomUUID()
          yield* organizationWithApp("second", second)

          // One organization, its own transaction (W2): one delivery, one wakeup on the coordinator.
          assert.isTrue(yield* sql.withTransaction(writeEvents([first])))
          assert.deepStrictEqual(yield* deliveriesOf([first]), [1])
          yield* Queue.take(notifications).pipe(Effect.timeout("10 seconds"))

          // Both organizations in one transaction: Citus commits the two workers with two-phase commit,
          // which a NOTIFY on a worker (the fan-out's, before 0031) made PostgreSQL refuse.
          assert.isTrue(
            yield* sql.withTransaction(
              Effect.gen(function* () {
                yield* writeEvents([first])
                return yield* writeEvents([second])
              })
            )
          )
          assert.deepStrictEqual(yield* deliveriesOf([first, second]), [2, 1])
          // One statement writing both workers.
          yield* sql.withTransaction(writeEvents([first, second]))
          assert.deepStrictEqual(yield* deliveriesOf([first, second]), [3, 2])
          yield* Queue.take(notifications).pipe(Effect.timeout("10 seconds"))
          yield* Queue.take(notifications).pipe(Effect.timeout("10 seconds"))
          const [prepared] = yield* sql<{ n: number }>`SELECT count(*)::int AS n FROM pg_prepared_xacts`
          assert.strictEqual(prepared!.n, 0)

          // No subscribed app: no wakeup (the cost-avoidance of W5 kept).
          const quiet = crypto.randomUUID()
          yield* sql`INSERT INTO organizations (id, name, created_at) VALUES (${quiet}, 'quiet', now())`
          assert.isFalse(yield* sql.withTransaction(writeEvents([quiet])))
          assert.deepStrictEqual(yield* deliveriesOf([quiet]), [0])
        }),
        4
      )
  )

  it.live(
    "closing a session cancels its pending schedules and drops its pending reply job; deleting an app deletes its deliveries (D15, R1, W2)",
    () =>
      onOwnDatabase(
        "citus_closed",
        Effect.gen(function* () {
          yield* Database.migrate
          const sql = yield* SqlClient.SqlClient
          const organizationId = yield* organizationWithApp("closing")
          const conversationId = crypto.randomUUID()
          const sessionId = crypto.randomUUID()
          yield* sql`INSERT INTO conversations (id, organization_id, contact_id, created_at)
            VALUES (${conversationId}, ${organizationId}, '+1555', now())`
          yield* sql`INSERT INTO sessions (id, organization_id, conversation_id, contact_id, status, created_at)
            VALUES (${sessionId}, ${organizationId}, ${conversationId}, '+1555', 'open', now())`
          yield* sql`INSERT INTO session_schedules (id, organization_id, session_id, scheduled_for, config, status, created_at)
            SELECT gen_random_uuid(), ${organizationId}, ${sessionId}, now() + interval '1 hour', '{}', 'pending', now()
            FROM generate_series(1, 2)`
          yield* sql`INSERT INTO reply_jobs (id, organization_id, session_id, status, due_at, created_at)
            VALUES (gen_random_uuid(), ${organizationId}, ${sessionId}, 'pending', now(), now())`

          yield* sql`UPDATE sessions SET status = 'closed' WHERE organization_id = ${organizationId} AND id = ${sessionId}`
          const schedules = yield* sql<{ status: string; error: string | null }>`SELECT status, error
            FROM session_schedules WHERE organization_id = ${organizationId} AND session_id = ${sessionId}`
          assert.deepStrictEqual(schedules, [
            { status: "canceled", error: "Session closed" },
            { status: "canceled", error: "Session closed" }
          ])
          const [jobs] = yield* sql<{ n: number }>`SELECT count(*)::int AS n FROM reply_jobs
            WHERE organization_id = ${organizationId} AND session_id = ${sessionId}`
          assert.strictEqual(jobs!.n, 0)

          yield* sql.withTransaction(writeEvents([organizationId]))
          assert.deepStrictEqual(yield* deliveriesOf([organizationId]), [1])
          yield* sql`DELETE FROM apps WHERE organization_id = ${organizationId}`
          assert.deepStrictEqual(yield* deliveriesOf([organizationId]), [0])
        })
      )
  )

  it.live(
    "run roll-ups match the runs after single, multi-organization and multi-shard inserts and deletes (A14)",
    () =>
      onOwnDatabase(
        "citus_rollups",
        Effect.gen(function* () {
          yield* Database.migrate
          const sql = yield* SqlClient.SqlClient
          const first = yield* organizationWithApp("first")
          const firstWorker = yield* workerOf(first)
          let second = crypto.randomUUID()
          while ((yield* workerOf(second)) === firstWorker) second = crypto.randomUUID()
          yield* organizationWithApp("second", second)
          const sessions = new Map<string, string>()
          for (const organizationId of [first, second]) {
            const conversationId = crypto.randomUUID()
            const sessionId = crypto.randomUUID()
            sessions.set(organizationId, sessionId)
            yield* sql`INSERT INTO conversations (id, organization_id, contact_id, created_at)
              VALUES (${conversationId}, ${organizationId}, '+1555', now())`
            yield* sql`INSERT INTO sessions (id, organization_id, conversation_id, contact_id, status, created_at)
              VALUES (${sessionId}, ${organizationId}, ${conversationId}, '+1555', 'open', now())`
          }
          const run = (organizationId: string, n: number) =>
            sql`(gen_random_uuid(), ${organizationId}::uuid, ${sessions.get(organizationId)!}::uuid, 'reply', 'bot',
              'c1', ${n % 3 === 0 ? "failed" : "succeeded"}, ${10 * n}, ${n},
              TIMESTAMPTZ '2026-01-01 10:00:00+00' + ${n} * interval '20 minutes',
              TIMESTAMPTZ '2026-01-01 10:00:00+00' + ${n} * interval '20 minutes', ${n % 2 === 0 ? 100 : 200})`
          const insertRuns = (rows: ReadonlyArray<[string, number]>) =>
            sql`INSERT INTO runs (id, organization_id, session_id, trigger, assistant_id, commit_id, status,
                input_tokens, output_tokens, started_at, finished_at, duration_ms)
              VALUES ${sql.csv(rows.map(([organizationId, n]) => run(organizationId, n)))}`
          const total = sql<{ runs: number }>`SELECT coalesce(sum(runs), 0)::int AS runs FROM run_rollups`

          yield* insertRuns([[first, 1]])
          yield* insertRuns([
            [first, 2],
            [second, 3],
            [second, 4],
            [first, 5]
          ])
          yield* sql.withTransaction(insertRuns([[second, 6]]).pipe(Effect.andThen(insertRuns([[first, 7]]))))
          // Multi-shard INSERT ... SELECT and DELETE.
          yield* sql`INSERT INTO runs (id, organization_id, session_id, trigger, assistant_id, commit_id, status,
              input_tokens, output_tokens, started_at, finished_at, duration_ms)
            SELECT gen_random_uuid(), organization_id, session_id, trigger, assistant_id, commit_id, status,
              input_tokens, output_tokens, started_at, finished_at, duration_ms FROM runs`
          assert.strictEqual((yield* total)[0]!.runs, 14)
          assert.strictEqual(yield* rollUpMismatches, 0)
          yield* sql`DELETE FROM runs WHERE duration_ms = 100`
          yield* sql`DELETE FROM runs WHERE organization_id = ${first} AND input_tokens = 10`
          const [left] = yield* sql<{ n: number }>`SELECT count(*)::int AS n FROM runs`
          assert.strictEqual((yield* total)[0]!.runs, left!.n)
          assert.strictEqual(yield* rollUpMismatches, 0)
        })
      )
  )
})
