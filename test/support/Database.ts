/**
 * A database of each test file's own (issue 13 item 7): a clone of the run's
 * migrated template database (test/support/globalSetup.ts), created with
 * `CREATE DATABASE ... TEMPLATE` and dropped when the file is done. So the
 * workers of one file (webhook deliveries, reply jobs, schedules: they claim
 * every organization's work) never see another file's, and production SQL
 * needs no test-only filter.
 */
import { Context, Effect, Layer, Redacted } from "effect"
import { SqlClient } from "effect/sql"
import type postgres from "postgres"
import { afterAll, beforeAll, inject } from "vitest"
import * as Database from "../../src/Database/Database.ts"
import { generateSecret } from "../../src/Webhooks/Signing.ts"
import { type Servers, serversOf, urlOf } from "./Servers.ts"

declare module "vitest" {
  export interface ProvidedContext {
    /** URL of the run's server (a database on it that the tests may use for administration). */
    serverUrl: string
    /** Name of the run's migrated template database; nobody connects to it. */
    templateDatabase: string
  }
}

let clones = 0

/** The run's servers (one PostgreSQL server or a Citus cluster: test/support/Servers.ts), found once per worker. */
let servers: Promise<Servers> | undefined
const runServers = () => {
  servers ??= serversOf(inject("serverUrl"))
  return servers
}

/** A database name of this run's own, after `prefix`. */
const databaseName = (prefix: string) => `${prefix}_${process.pid}_${Date.now()}_${clones++}`

/**
 * A new database cloned from the migrated template, named after `prefix`;
 * returns its URL and how to drop it.
 */
export const cloneDatabase = async (prefix: string) => {
  const name = databaseName(prefix)
  const { create } = await runServers()
  for (let attempt = 1; ; attempt++) {
    try {
      await create(name, inject("templateDatabase"))
      break
    } catch (error) {
      // Two clones starting at the same moment can see each other on the template: try again.
      if (attempt >= 10 || !String(error).includes("being accessed by other users")) throw error
      await (await runServers()).drop(name).catch(() => undefined)
      await new Promise((resolve) => setTimeout(resolve, 100 * attempt))
    }
  }
  return ownedDatabase(name)
}

/** The URL of `name` on the run's server and how to drop it. */
const ownedDatabase = (name: string) => ({
  url: urlOf(inject("serverUrl"), name),
  drop: async () => {
    await (await runServers()).drop(name).catch(() => undefined)
  }
})

/**
 * A new empty database (no migration applied; on a Citus cluster one with
 * the extension and the nodes), named after `prefix`, for tests that migrate
 * it themselves; returns its URL and how to drop it.
 */
export const emptyDatabase = async (prefix: string) => {
  const name = databaseName(prefix)
  await (await runServers()).create(name)
  return ownedDatabase(name)
}

/** The URL of the test file's database (see module docs). */
export class TestDatabaseUrl extends Context.Service<TestDatabaseUrl, string>()("test/TestDatabaseUrl") {}

/** A database of the file's own for the layer's lifetime: cloned when built, dropped when released. */
export const FileDatabase = Layer.effect(
  TestDatabaseUrl,
  Effect.acquireRelease(
    Effect.promise(() => cloneDatabase("parley_file")),
    (database) => Effect.promise(database.drop)
  ).pipe(Effect.map((database) => database.url))
)

/** A pool of `connections` connections to the file's database (`TestDatabaseUrl`). */
export const fileDatabaseClient = (connections: number) =>
  Layer.unwrap(
    Effect.map(Effect.service(TestDatabaseUrl), (url) => Database.clientLayer(Redacted.make(url), connections))
  )

/**
 * A database of the calling test file's own for `beforeAll`/`afterAll` style
 * tests (server processes, the CLI): created before its tests, dropped after.
 * Returns a getter of its URL (set once `beforeAll` ran).
 */
export const ownDatabase = (prefix: string): (() => string) => {
  let database: Awaited<ReturnType<typeof cloneDatabase>> | undefined
  beforeAll(async () => {
    database = await cloneDatabase(prefix)
  }, 120_000)
  afterAll(async () => {
    await database?.drop()
  })
  return () => database!.url
}

/**
 * For tests of how a statement's plan holds up as a table grows (the file's
 * database, `SqlClient` required): the organization `organizationId` named
 * `name`, written directly, and autovacuum off for `table`, so that no ANALYZE
 * re-plans prepared statements behind the test's back.
 */
export const growingTable = (table: string, organizationId: string, name: string) =>
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    yield* sql.unsafe(`ALTER TABLE ${table} SET (autovacuum_enabled = false)`)
    yield* sql`INSERT INTO organizations (id, name, created_at) VALUES (${organizationId}, ${name}, now())`
  })

/**
 * An app of `organizationId` named `name`, subscribed to `message.created`,
 * with `ordering` (W7), written directly (`SqlClient` required): the fan-out
 * makes a delivery for it of each such event.
 */
export const insertApp = (organizationId: string, name: string, ordering: "none" | "conversation" = "none") =>
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    yield* sql`INSERT INTO apps (id, organization_id, name, webhook_url, events, signing_secret, created_at, ordering)
      VALUES (gen_random_uuid(), ${organizationId}, ${name}, 'https://example.com/hook', ARRAY['message.created'],
        ${generateSecret()}, now(), ${ordering})`
  })

/** Sequential scans of `table` so far (each rescan of a nested loop counts), this backend's counts flushed first. */
export const sequentialScans = (table: string) =>
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    yield* sql`SELECT pg_stat_force_next_flush()`
    const rows = yield* sql<{ n: string }>`SELECT seq_scan::text AS n FROM pg_stat_user_tables WHERE relname = ${table}`
    return Number(rows[0]!.n)
  })

/** A row when the database has the `citus` extension (a Citus coordinator's database). */
const CITUS_INSTALLED = "SELECT 1 FROM pg_extension WHERE extname = 'citus'"

/** How many waits between distributed transactions a Citus coordinator's database has now (`n`). */
const CITUS_LOCK_WAITS = "SELECT count(*)::int AS n FROM citus_lock_waits"

/**
 * How many sessions wait for a lock in the database of `sql` now: on one
 * server its sessions waiting for a lock (`pg_stat_activity`, this database
 * only); on a Citus coordinator the waits between distributed transactions
 * (`citus_lock_waits`), since a statement routed to a worker waits there, not
 * on the coordinator (O11). Fails with `SqlError`.
 */
export const sessionLockWaits = (sql: SqlClient.SqlClient) =>
  Effect.gen(function* () {
    const citus = yield* sql.unsafe(CITUS_INSTALLED)
    const [row] =
      citus.length > 0
        ? yield* sql.unsafe<{ n: number }>(CITUS_LOCK_WAITS)
        : yield* sql<{ n: number }>`SELECT count(*)::int AS n FROM pg_stat_activity
            WHERE datname = current_database() AND wait_event_type = 'Lock'`
    return row!.n
  })

/**
 * How many index entries the scans of the index `index` have read so far
 * (`pg_stat_user_indexes.idx_tup_read`; statistics flushed first): with
 * {@link sequentialScans}, how a statement found its rows.
 */
export const indexEntriesRead = (index: string) =>
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    yield* sql`SELECT pg_stat_force_next_flush()`
    const rows = yield* sql<{ n: string }>`SELECT idx_tup_read::text AS n FROM pg_stat_user_indexes
      WHERE indexrelname = ${index}`
    return Number(rows[0]!.n)
  })

/**
 * How many lock waits the database of `db` (a postgres.js client) has now: on
 * one server the locks not granted (`pg_locks`); on a Citus coordinator the
 * waits between distributed transactions (`citus_lock_waits`), since a
 * statement routed to a worker waits there, not in the coordinator's
 * `pg_locks` (O11). `relation` keeps only waits for that table (one server).
 */
export const lockWaits = async (db: postgres.Sql, relation?: string): Promise<number> => {
  const citus = await db.unsafe(CITUS_INSTALLED)
  const [row] =
    citus.length > 0
      ? await db.unsafe<Array<{ n: number }>>(CITUS_LOCK_WAITS)
      : relation === undefined
        ? await db<Array<{ n: number }>>`SELECT count(*)::int AS n FROM pg_locks WHERE NOT granted`
        : await db<
            Array<{ n: number }>
          >`SELECT count(*)::int AS n FROM pg_locks WHERE NOT granted AND relation = ${relation}::regclass`
  return row!.n
}
