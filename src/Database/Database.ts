/**
 * The database (DECISIONS.md O2): one code path, `@effect/sql-pg`, against the
 * server at `DATABASE_URL`, or the embedded server under `DATA_DIR` when it is
 * unset. Migrations from `migrations/` run with {@link migrate}.
 */
import * as fs from "node:fs"
import * as path from "node:path"
import * as NodeServices from "@effect/platform-node/NodeServices"
import { PgClient, PgMigrator } from "@effect/sql-pg"
import { Context, Duration, Effect, Layer, type Redacted } from "effect"
import { SqlClient, type SqlError } from "effect/sql"
import * as MigratorFileSystem from "effect/sql/MigratorFileSystem"
import { AppConfig, type AppConfigShape } from "../Config.ts"
import * as Citus from "./Citus.ts"
import * as Embedded from "./Embedded.ts"

/** The folder of numbered migrations (`0001_name.ts`, each exporting an Effect). */
const migrationsDirectory = path.resolve(import.meta.dirname, "../../migrations")

/** The table where applied migrations are recorded. */
const migrationsTable = "parley_migrations"

/** How many migrations `migrations/` holds. */
const migrationCount = fs.readdirSync(migrationsDirectory).filter((file) => /^\d+_[^.]+\.ts$/.test(file)).length

/** Connections per process in the pool. */
const POOL_SIZE = 20

/** The `application_name` of Parley's connections in `pg_stat_activity`. */
const APPLICATION_NAME = "parley"

/**
 * The `application_name` of the connections of a pool that `part` of Parley
 * has to itself (`parley/<part>`, {@link ClientSession}), or of the
 * application's pool (`parley`).
 */
export const applicationName = (part?: string) =>
  part === undefined ? APPLICATION_NAME : `${APPLICATION_NAME}/${part}`

/**
 * A SQL condition on `pg_stat_activity` that holds for Parley's connections,
 * every pool's ({@link applicationName}), and no one else's.
 */
export const parleyConnection = `(application_name = '${APPLICATION_NAME}' OR starts_with(application_name, '${APPLICATION_NAME}/'))`

/**
 * How long a pool's connections wait on PostgreSQL (issue 38 item 1, O9), in
 * ms: a database that does not respond within these bounds cannot be reached.
 * From `DATABASE_CONNECT_TIMEOUT`, `DATABASE_STATEMENT_TIMEOUT` and
 * `DATABASE_LOCK_TIMEOUT` ({@link timeoutsOf}).
 */
export interface DatabaseTimeouts {
  /** Opening a connection: TCP, TLS, startup and authentication; then the statement fails with `SqlError`. */
  readonly connectMs: number
  /** PostgreSQL `statement_timeout` (SQLSTATE 57014 past it); absent: none (migrations). */
  readonly statementMs?: number
  /** PostgreSQL `lock_timeout` (SQLSTATE 55P03 past it); absent: none (migrations). */
  readonly lockMs?: number
}

/** The bounds of the API's and the workers' pools, from the configuration. */
export const timeoutsOf = (config: AppConfigShape): DatabaseTimeouts => ({
  connectMs: Duration.toMillis(config.databaseConnectTimeout),
  statementMs: Duration.toMillis(config.databaseStatementTimeout),
  lockMs: Duration.toMillis(config.databaseLockTimeout)
})

/** Without a configuration (tests, benchmarks, the CLI's own tools): a connection within 10 s, no statement bound. */
const DEFAULT_TIMEOUTS: DatabaseTimeouts = { connectMs: 10_000 }

/** What sets a pool's connections apart, beyond its URL and size ({@link clientLayer}). */
export interface ClientSession {
  /**
   * The part of Parley that has the pool to itself: its connections show as
   * `parley/<part>` in `pg_stat_activity`; none (the default): `parley`.
   */
  readonly part?: string
  /** Settings each connection starts with (PostgreSQL GUC name -> value), sent in its startup packet. */
  readonly startupParameters?: Readonly<Record<string, string>>
  /** How long its connections wait on PostgreSQL; default: 10 s to connect, no statement or lock bound. */
  readonly timeouts?: DatabaseTimeouts
}

/**
 * A `PgClient` (and `SqlClient`) layer for `url` with at most `poolSize`
 * connections, opened on demand and closed after 60 s idle, each started as
 * `session` says (its `statement_timeout` and `lock_timeout` in the startup
 * packet, so they cost no statement). It builds without connecting; its
 * statements fail with `SqlError` when no connection can be made within the
 * connect timeout.
 */
export const clientLayer = (url: Redacted.Redacted<string>, poolSize = POOL_SIZE, session: ClientSession = {}) => {
  const timeouts = session.timeouts ?? DEFAULT_TIMEOUTS
  return PgClient.layer({
    url,
    applicationName: applicationName(session.part),
    startupParameters: {
      ...(timeouts.statementMs === undefined ? {} : { statement_timeout: String(timeouts.statementMs) }),
      ...(timeouts.lockMs === undefined ? {} : { lock_timeout: String(timeouts.lockMs) }),
      ...session.startupParameters
    },
    maxConnections: poolSize,
    minConnections: 0,
    idleTimeout: "60 seconds",
    connectTimeout: Duration.millis(timeouts.connectMs),
    transformJson: false,
    // Statements of different requests share connections and go out in one write.
    multiplex: true
  })
}

/**
 * Where the database is: its URL, whether it is the embedded server, and
 * `lost`: why this process has lost its database for good, `undefined` while
 * it has not. Only the embedded server can be lost: it could not be started
 * again after a crash (issue 38 item 2, `Embedded.ts`); `/healthz` answers 503
 * then, so a supervisor restarts the process. An external database is never
 * lost (an outage of it is O9's 503 of the API and `/readyz`).
 */
export class DatabaseLocation extends Context.Service<
  DatabaseLocation,
  {
    readonly url: Redacted.Redacted<string>
    readonly embedded: boolean
    readonly lost: Effect.Effect<string | undefined>
  }
>()("parley/Database/DatabaseLocation") {
  /** An external database at `url`: never lost. */
  static readonly external = (url: Redacted.Redacted<string>) =>
    DatabaseLocation.of({ url, embedded: false, lost: Effect.succeed(undefined) })

  /** `DATABASE_URL`, or the embedded server under `DATA_DIR` (started or attached to, and supervised). */
  static readonly layer = Layer.unwrap(
    Effect.gen(function* () {
      const config = yield* AppConfig
      if (config.databaseUrl !== undefined) {
        return Layer.succeed(DatabaseLocation, DatabaseLocation.external(config.databaseUrl))
      }
      return Layer.effect(
        DatabaseLocation,
        Effect.gen(function* () {
          const { url, lost } = yield* Embedded.EmbeddedDatabase
          return { url, embedded: true, lost }
        })
      ).pipe(Layer.provide(Embedded.layer({ dataDir: config.dataDir })))
    })
  )
}

/**
 * `SqlClient` and `PgClient` for the configured database, its connections
 * bounded by the configured {@link timeoutsOf}. Requires `AppConfig`.
 * Fails with `EmbeddedPostgresError` or `SqlError` when no connection can be made.
 */
export const layer = Layer.unwrap(
  Effect.gen(function* () {
    const { url } = yield* DatabaseLocation
    return clientLayer(url, POOL_SIZE, { timeouts: timeoutsOf(yield* AppConfig) })
  })
).pipe(Layer.provideMerge(DatabaseLocation.layer))

/**
 * Applies the pending migrations numbered up to `last` (all of them by
 * default), serialized across processes by the migrator's table lock.
 * Returns the `[id, name]` pairs applied. A `last` below the newest lets a
 * test build a database as an older release left it, to check what a later
 * migration does with its rows (test/Webhooks/AttemptLog.test.ts).
 */
export const migrateThrough = (last = Number.POSITIVE_INFINITY) =>
  PgMigrator.run({
    loader: MigratorFileSystem.fromFileSystem(migrationsDirectory).pipe(
      Effect.map((migrations) => migrations.filter(([id]) => id <= last))
    ),
    table: migrationsTable
  }).pipe(Effect.provide(NodeServices.layer), Effect.withSpan("Database.migrate"))

/**
 * Applies every pending migration ({@link migrateThrough}), then, on a Citus
 * coordinator, distributes the tables not yet distributed (O11,
 * `Citus.ts` `distribute`). Returns the migrations applied; the tables
 * distributed are logged.
 */
export const migrate = Effect.gen(function* () {
  const applied = yield* migrateThrough()
  const distributed = yield* Citus.distribute
  if (distributed.length > 0) yield* Effect.logInfo(`Distributed tables (Citus): ${distributed.join(", ")}`)
  return applied
})

/**
 * Applies pending migrations when the layer is built, on a connection of its
 * own (`parley/migrate`) without the statement and lock bounds of the
 * application's pool: a migration may build an index for minutes, and waits
 * for another process's migrations on the migrator's lock. Requires
 * `DatabaseLocation` and `AppConfig`.
 */
export const migrateLayer = Layer.effectDiscard(
  Effect.gen(function* () {
    const { url } = yield* DatabaseLocation
    const { connectMs } = timeoutsOf(yield* AppConfig)
    const applied = yield* migrate.pipe(
      Effect.provide(clientLayer(url, 1, { part: "migrate", timeouts: { connectMs } }))
    )
    if (applied.length > 0) {
      yield* Effect.logInfo(`Applied migrations: ${applied.map(([id, name]) => `${id}_${name}`).join(", ")}`)
    }
  })
)

/**
 * The configured database with pending migrations applied when built:
 * `SqlClient` and `PgClient` (the server's and the CLI's database). Requires
 * `AppConfig`; fails as {@link layer} does, or with the migration's `SqlError`.
 */
export const migratedLayer = migrateLayer.pipe(Layer.provideMerge(layer))

/** Whether the database responds and every migration in `migrations/` is applied (O4 `/readyz`). */
export const isReady = Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  const rows = yield* sql<{ applied: number }>`SELECT count(*)::int AS applied FROM ${sql(migrationsTable)}`
  return (rows[0]?.applied ?? 0) >= migrationCount
}).pipe(
  Effect.timeout("2 seconds"),
  Effect.catchCause(() => Effect.succeed(false))
)

/**
 * A repository's transaction (`sql.withTransaction`): runs `self` in one transaction that the
 * repository's statements join (nested: a savepoint); fails with `SqlError`
 * too. Repositories whose services compose several writes offer it.
 */
export type WithTransaction = <A, E, R>(self: Effect.Effect<A, E, R>) => Effect.Effect<A, E | SqlError.SqlError, R>
