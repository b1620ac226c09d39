/**
 * Parley's tables on Citus (O11; issue 43 item 2): the order tables are
 * distributed in, and on a cluster what the migrations leave (every
 * per-organization table distributed by `organization_id` in one co-location
 * group, the others reference tables, the migrator's table on the
 * coordinator), including for a database that was populated on one server
 * first and is then migrated on the coordinator (Citus moves its rows).
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Redacted } from "effect"
import { SqlClient } from "effect/sql"
import { inject } from "vitest"
import { foreignKeyOrder } from "../../src/Database/Citus.ts"
import * as Database from "../../src/Database/Database.ts"
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
const onOwnDatabase = <A>(prefix: string, body: Effect.Effect<A, unknown, SqlClient.SqlClient>) =>
  Effect.acquireUseRelease(
    Effect.promise(() => emptyDatabase(prefix)),
    (database) => body.pipe(Effect.provide(Database.clientLayer(Redacted.make(database.url), 1)), Effect.scoped),
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
          // (parley_app_subscribed, the sequence of ordered deliveries: migrations/0028).
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
