/**
 * The test run's database servers (O11; issue 43 item 5): one PostgreSQL
 * server, or a Citus cluster whose coordinator is the server of
 * `TEST_DATABASE_URL` (`scripts/citus.sh start`). On a cluster a database is
 * made, cloned and dropped on every node:
 *
 * - a new database gets the `citus` extension on each node and the cluster's
 *   nodes in its own metadata (Citus keeps them per database);
 * - a clone is `CREATE DATABASE ... TEMPLATE` on each node: the template's
 *   metadata on the coordinator and its shards on the workers are copied
 *   alike, so the clone is a cluster database of its own, and it gets the
 *   template's database settings (which a copy does not take). Citus's maintenance
 *   daemon holds a connection to every database with the extension, which
 *   `CREATE DATABASE ... TEMPLATE` refuses: the template's other sessions are
 *   ended first (nobody else uses a template).
 *
 * On one server the same calls are one plain statement each.
 */
import { Effect, Redacted } from "effect"
import { SqlClient } from "effect/sql"
import * as Database from "../../src/Database/Database.ts"

/** The URL of `database` on the server of `url`, or at `host:port` when given. */
export const urlOf = (url: string, database: string, node?: { host: string; port: number }) => {
  const parsed = new URL(url)
  parsed.pathname = `/${database}`
  if (node !== undefined) {
    parsed.hostname = node.host
    parsed.port = String(node.port)
  }
  return parsed.toString()
}

/** Runs `statements` one after the other on the database of `url` (one connection). */
export const runOn = (url: string, ...statements: ReadonlyArray<string>) =>
  Effect.runPromise(
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      const results: Array<ReadonlyArray<Record<string, unknown>>> = []
      for (const statement of statements) results.push(yield* sql.unsafe<Record<string, unknown>>(statement))
      return results
    }).pipe(Effect.provide(Database.clientLayer(Redacted.make(url), 1)), Effect.scoped)
  )

/** `CREATE DATABASE name`, empty or a copy of `template`. */
const createDatabase = (name: string, template?: string) =>
  `CREATE DATABASE "${name}"${template === undefined ? "" : ` TEMPLATE "${template}"`}`

/** `DROP DATABASE name`, its sessions ended. */
const dropDatabase = (name: string) => `DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`

/** The servers of a test run: where databases are made and how. */
export interface Servers {
  /** The Citus cluster's nodes (coordinator first), or undefined on one server. */
  readonly nodes: ReadonlyArray<{ host: string; port: number }> | undefined
  /** Creates `name`: empty, or a copy of `template`. */
  readonly create: (name: string, template?: string) => Promise<void>
  /** Drops `name` (on every node), ending its sessions. */
  readonly drop: (name: string) => Promise<void>
}

/**
 * The servers of `serverUrl` (a database on the single server or on the
 * coordinator that the tests may use for administration): a cluster when
 * that database has the `citus` extension and nodes in its metadata.
 */
export const serversOf = async (serverUrl: string): Promise<Servers> => {
  const [citus] = await runOn(serverUrl, "SELECT 1 FROM pg_extension WHERE extname = 'citus'")
  const [rows] =
    citus !== undefined && citus.length > 0
      ? await runOn(
          serverUrl,
          "SELECT nodename AS host, nodeport AS port FROM pg_dist_node WHERE noderole = 'primary' ORDER BY groupid, nodeid"
        )
      : [[]]
  const nodes = (rows ?? []).map((row) => ({ host: String(row.host), port: Number(row.port) }))
  if (nodes.length === 0) {
    return {
      nodes: undefined,
      create: async (name, template) => {
        await runOn(serverUrl, createDatabase(name, template))
      },
      drop: async (name) => {
        await runOn(serverUrl, dropDatabase(name))
      }
    }
  }
  const nodeUrl = (node: { host: string; port: number }) => urlOf(serverUrl, "postgres", node)
  const [coordinator, ...workers] = nodes
  return {
    nodes,
    create: async (name, template) => {
      for (const node of nodes) {
        if (template !== undefined) {
          await runOn(
            nodeUrl(node),
            `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '${template}' AND pid <> pg_backend_pid()`
          )
        }
        await runOn(nodeUrl(node), createDatabase(name, template))
      }
      if (template !== undefined) {
        // A copy does not take the template's own settings (`ALTER DATABASE ... SET`, such as the
        // `jit = off` of src/Database/Citus.ts), which an operator's migrated database has.
        const [settings] = await runOn(
          nodeUrl(coordinator!),
          `SELECT unnest(setconfig) AS setting FROM pg_db_role_setting
            WHERE setrole = 0 AND setdatabase = (SELECT oid FROM pg_database WHERE datname = '${template}')`
        )
        for (const { setting } of settings ?? []) {
          const [key, ...value] = String(setting).split("=")
          await runOn(nodeUrl(coordinator!), `ALTER DATABASE "${name}" SET ${key} = '${value.join("=")}'`)
        }
        return
      }
      for (const node of nodes) await runOn(urlOf(serverUrl, name, node), "CREATE EXTENSION citus")
      await runOn(
        urlOf(serverUrl, name, coordinator),
        `SELECT citus_set_coordinator_host('${coordinator!.host}', ${coordinator!.port})`,
        ...workers.map((worker) => `SELECT citus_add_node('${worker.host}', ${worker.port})`)
      )
    },
    drop: async (name) => {
      for (const node of nodes) await runOn(nodeUrl(node), dropDatabase(name))
    }
  }
}
