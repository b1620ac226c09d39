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
import { emptyDatabase } from "../support/Database.ts"
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
        })
      )
  )
})
