/**
 * A dedicated, migrated database for one benchmark run: a fresh database on
 * the server of `BENCH_DATABASE_URL` when set, else on an embedded PostgreSQL
 * started for the run in a temporary directory under /tmp (as the tests do,
 * test/support/globalSetup.ts). When `BENCH_DATABASE_URL` is a Citus
 * coordinator (`scripts/citus.sh start`), the database is made on every node
 * as the tests make theirs (test/support/Servers.ts: the extension on each,
 * the nodes in its metadata) and Parley's migrations distribute its tables
 * (O11). `close()` drops the database and stops the embedded server.
 */
import * as fs from "node:fs"
import * as path from "node:path"
import { Effect, Layer, ManagedRuntime, Redacted, References } from "effect"
import { SqlClient } from "effect/sql"
import * as Database from "../../src/Database/Database.ts"
import * as Embedded from "../../src/Database/Embedded.ts"
import { serversOf } from "../../test/support/Servers.ts"
import { parentPid } from "./proc.ts"

export interface BenchDatabase {
  /** URL of the fresh, migrated database. */
  readonly url: string
  readonly name: string
  /** `embedded` or `BENCH_DATABASE_URL`. */
  readonly kind: "embedded" | "BENCH_DATABASE_URL"
  readonly serverVersion: string
  /** Settings applied to the database (`ALTER DATABASE ... SET`), e.g. `synchronous_commit`. */
  readonly settings: Readonly<Record<string, string>>
  /** The postmaster's pid when the server runs on this machine (parent of a backend), for CPU accounting. */
  readonly postmasterPid: number | undefined
  /** Drops the database and stops the embedded server (idempotent). */
  readonly close: () => Promise<void>
}

const withDatabase = (url: string, database: string) => {
  const parsed = new URL(url)
  parsed.pathname = `/${database}`
  return parsed.toString()
}

/** Runs `statement` on `url` over a one-connection client; returns the rows. */
export const runStatement = <A extends object>(url: string, statement: string): Promise<ReadonlyArray<A>> =>
  Effect.runPromise(
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      return (yield* sql.unsafe(statement)) as unknown as ReadonlyArray<A>
    }).pipe(Effect.provide(Database.clientLayer(Redacted.make(url), 1)), Effect.scoped)
  )

const Quiet = Layer.succeed(References.MinimumLogLevel, "Warn")

/**
 * Creates (and migrates with Parley's migrations) a database named
 * `<prefix>_<timestamp>`, with `settings` applied to every later session.
 */
export const startDatabase = async (
  prefix: string,
  settings: Readonly<Record<string, string>> = {}
): Promise<BenchDatabase> => {
  let serverUrl = process.env.BENCH_DATABASE_URL
  let embedded: ManagedRuntime.ManagedRuntime<Embedded.EmbeddedDatabase, unknown> | undefined
  let dataDir: string | undefined
  const stopEmbedded = async () => {
    if (embedded !== undefined) await embedded.dispose().catch(() => undefined)
    embedded = undefined
    if (dataDir !== undefined) fs.rmSync(dataDir, { recursive: true, force: true })
    dataDir = undefined
  }
  const kind = serverUrl === undefined || serverUrl === "" ? "embedded" : "BENCH_DATABASE_URL"
  if (kind === "embedded") {
    // A temporary folder of its own (any folder works, O10).
    dataDir = fs.mkdtempSync(path.join("/tmp", "parley-bench-"))
    embedded = ManagedRuntime.make(Embedded.layer({ dataDir }).pipe(Layer.provide(Quiet)))
    try {
      const started = await embedded.runPromise(
        Effect.gen(function* () {
          return yield* Embedded.EmbeddedDatabase
        })
      )
      serverUrl = Redacted.value(started.url)
    } catch (error) {
      await stopEmbedded()
      throw error
    }
  }
  const name = `${prefix}_${Date.now()}`
  let servers: Awaited<ReturnType<typeof serversOf>>
  try {
    servers = await serversOf(serverUrl!)
    await servers.create(name)
  } catch (error) {
    await stopEmbedded()
    throw error
  }
  const url = withDatabase(serverUrl!, name)
  let closed = false
  const close = async () => {
    if (closed) return
    closed = true
    await servers
      .drop(name)
      .catch((error) => process.stderr.write(`[bench] could not drop database ${name}: ${String(error)}\n`))
    await stopEmbedded()
  }
  try {
    for (const [setting, value] of Object.entries(settings)) {
      if (!/^[a-z_]+$/.test(setting) || !/^[\w.-]+$/.test(value)) throw new Error(`Bad setting ${setting}=${value}`)
      await runStatement(serverUrl!, `ALTER DATABASE "${name}" SET ${setting} = '${value}'`)
    }
    await Effect.runPromise(Database.migrate.pipe(Effect.provide(Database.clientLayer(Redacted.make(url), 1))))
    const [info] = await runStatement<{ version: string; pid: number }>(
      url,
      "SELECT current_setting('server_version') AS version, pg_backend_pid() AS pid"
    )
    // The backend is a child of the postmaster; only meaningful when the server is local.
    const local = ["127.0.0.1", "localhost", "[::1]"].includes(new URL(url).hostname)
    const postmasterPid = local && info !== undefined ? parentPid(info.pid) : undefined
    return { url, name, kind, serverVersion: info?.version ?? "?", settings, postmasterPid, close }
  } catch (error) {
    await close()
    throw error
  }
}
