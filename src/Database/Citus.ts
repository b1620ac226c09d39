/**
 * Parley on Citus (DECISIONS.md O11; issue 43 item 2): when the database has
 * the `citus` extension and is a coordinator, Parley's migrations end by
 * distributing its tables, so an operator only points `DATABASE_URL` at the
 * coordinator. Which table is which is read from the schema, not listed:
 *
 * - a per-organization table (its primary key starts with `organization_id`,
 *   O11) is distributed by `organization_id`, co-located with every other one
 *   (one shard group holds an organization's sessions, messages, events and
 *   deliveries);
 * - every other table of the `public` schema is a reference table (a copy on
 *   every node: organizations, API keys looked up by token hash), except the
 *   migrator's own table, which stays on the coordinator.
 *
 * Tables are distributed in the order of their foreign keys (a referenced
 * table first), and only those not yet distributed: running it again does
 * nothing, and a table a later migration creates is distributed by the next
 * run. Citus moves a populated table's rows into its shards; the local copy
 * it leaves behind is truncated at the end (`truncate_local_data_after_distributing_table`).
 * On plain PostgreSQL (no extension) and on a Citus worker it does nothing.
 */
import { Effect } from "effect"
import { SqlClient } from "effect/sql"

/** The tables Citus does not manage: the migrator's table (`Database.ts` `migrationsTable`) stays on the coordinator. */
const LOCAL_TABLES: ReadonlyArray<string> = ["parley_migrations"]

/** The distribution column of every per-organization table (O11). */
const DISTRIBUTION_COLUMN = "organization_id"

/** A table of the schema as {@link distribute} sees it. */
interface TableRow {
  readonly name: string
  /** Its primary key starts with `organization_id`. */
  readonly per_organization: boolean
  /** The tables its foreign keys reference (other than itself). */
  readonly references: ReadonlyArray<string>
}

/**
 * Whether the connected database is a Citus coordinator: the `citus`
 * extension is installed in it and this node is its coordinator.
 * Fails with `SqlError`.
 */
const isCoordinator = Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  const [row] = yield* sql<{
    citus: boolean
  }>`SELECT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'citus') AS citus`
  if (row?.citus !== true) return false
  const [node] = yield* sql<{ coordinator: boolean }>`SELECT citus_is_coordinator() AS coordinator`
  return node?.coordinator === true
})

/**
 * Distributes the tables not yet distributed (see module docs) and returns
 * their names in the order it did, `[]` when there is nothing to do or no
 * Citus; in one transaction, serialized across processes by a transaction
 * advisory lock on the coordinator. Fails with `SqlError`.
 */
export const distribute = Effect.gen(function* () {
  if (!(yield* isCoordinator)) return []
  const sql = yield* SqlClient.SqlClient
  return yield* sql.withTransaction(
    Effect.gen(function* () {
      yield* sql`SELECT pg_advisory_xact_lock(hashtext('parley_distribute'))`
      const tables = yield* sql<TableRow>`
        SELECT c.relname AS name,
          coalesce((SELECT a.attname = ${DISTRIBUTION_COLUMN} FROM pg_index i
            JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = i.indkey[0]
            WHERE i.indrelid = c.oid AND i.indisprimary), false) AS per_organization,
          coalesce((SELECT array_agg(DISTINCT r.relname::text) FROM pg_constraint f JOIN pg_class r ON r.oid = f.confrelid
            WHERE f.conrelid = c.oid AND f.contype = 'f' AND f.confrelid <> c.oid), '{}') AS references
        FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
        WHERE n.nspname = 'public' AND c.relkind IN ('r', 'p')
          AND c.relname <> ALL (${LOCAL_TABLES})
          AND NOT EXISTS (SELECT 1 FROM pg_dist_partition p WHERE p.logicalrelid = c.oid)
        ORDER BY c.relname`
      const order = tables.length === 0 ? [] : yield* distributeTables(tables)
      yield* distributeFunctions
      yield* withoutJit
      return order
    })
  )
})

/**
 * Turns JIT compilation off for the database's new sessions (`ALTER DATABASE
 * ... SET jit = off`, propagated to the workers), inside {@link distribute}'s
 * transaction. The coordinator costs a CTE's intermediate result
 * (`read_intermediate_result`) at 1,000 rows, so a statement with several
 * INSERT CTEs, which Citus runs as steps over such results (ingest's), is
 * estimated huge and JIT-compiled: 200-500 ms of an ingest call that takes
 * 35-65 ms without (measured on Citus 13.2, PostgreSQL 15, issue 43). Parley's
 * statements are single-organization and small; none gains from JIT.
 */
const withoutJit = Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  const [row] = yield* sql<{ name: string }>`SELECT current_database() AS name`
  yield* sql`ALTER DATABASE ${sql(row!.name)} SET jit = off`
})

/**
 * Distributes `tables` (none distributed yet) in the order of their foreign
 * keys and returns their names in that order; inside {@link distribute}'s
 * transaction. Citus turns a local table that references a new reference
 * table into a "Citus local" table, which then cannot reference a distributed
 * one, and copying an existing event into its shard would fire the fan-out
 * again: the foreign keys and triggers of these tables are dropped first and
 * put back once every table is in place (a failure leaves the schema as it
 * was). Measured on Citus 13.2 (`test/Database/Citus.test.ts`).
 */
const distributeTables = (tables: ReadonlyArray<TableRow>) =>
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const names = tables.map((table) => table.name)
    const keys = yield* sql<{ table: string; name: string; definition: string }>`
      SELECT c.relname AS table, f.conname AS name, pg_get_constraintdef(f.oid) AS definition
      FROM pg_constraint f JOIN pg_class c ON c.oid = f.conrelid JOIN pg_class r ON r.oid = f.confrelid
      WHERE f.contype = 'f' AND (c.relname = ANY (${names}) OR r.relname = ANY (${names}))
      ORDER BY c.relname, f.conname`
    const triggers = yield* sql<{ table: string; name: string; definition: string }>`
      SELECT c.relname AS table, t.tgname AS name, pg_get_triggerdef(t.oid) AS definition
      FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid
      WHERE NOT t.tgisinternal AND c.relname = ANY (${names})
      ORDER BY c.relname, t.tgname`
    yield* sql`SET LOCAL citus.multi_shard_modify_mode TO 'sequential'`
    // Parley's triggers (the fan-out, roll-ups) fire on the shards, where every row they
    // read or write is of the same organization, on the same node (O11).
    yield* sql`SET LOCAL citus.enable_unsafe_triggers TO on`
    for (const key of keys) yield* sql`ALTER TABLE ${sql(key.table)} DROP CONSTRAINT ${sql(key.name)}`
    for (const trigger of triggers) yield* sql`DROP TRIGGER ${sql(trigger.name)} ON ${sql(trigger.table)}`
    const order = foreignKeyOrder(tables)
    const populated: Array<string> = []
    for (const table of order) {
      const [rows] = yield* sql<{ any: boolean }>`SELECT EXISTS (SELECT 1 FROM ${sql(table.name)}) AS any`
      if (rows?.any === true) populated.push(table.name)
      yield* table.per_organization
        ? sql`SELECT create_distributed_table(${table.name}, ${DISTRIBUTION_COLUMN})`
        : sql`SELECT create_reference_table(${table.name})`
    }
    for (const key of keys) {
      yield* sql`ALTER TABLE ${sql(key.table)} ADD CONSTRAINT ${sql(key.name)} ${sql.literal(key.definition)}`
    }
    for (const trigger of triggers) yield* sql.unsafe(trigger.definition)
    for (const name of populated) yield* sql`SELECT truncate_local_data_after_distributing_table(${name})`
    return order.map((table) => table.name)
  })

/**
 * Makes every function of the `public` schema that is not yet a Citus object
 * exist on every node (`create_distributed_function`): the triggers run on
 * the nodes of the shards and call Parley's functions there
 * (`parley_app_subscribes` from the fan-out). Citus propagates a function
 * created on the coordinator by itself only when what it depends on is
 * distributed already; those created before the tables were are taken here.
 * Functions of extensions are left to their extension.
 */
const distributeFunctions = Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  const functions = yield* sql<{ signature: string }>`
    SELECT p.oid::regprocedure::text AS signature FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
    WHERE n.nspname = 'public' AND p.prokind = 'f'
      AND NOT EXISTS (SELECT 1 FROM pg_depend d WHERE d.classid = 'pg_proc'::regclass AND d.objid = p.oid AND d.deptype = 'e')
      AND NOT EXISTS (SELECT 1 FROM pg_dist_object o WHERE o.classid = 'pg_proc'::regclass AND o.objid = p.oid)
    ORDER BY 1`
  for (const { signature } of functions) yield* sql`SELECT create_distributed_function(${signature})`
})

/**
 * `tables` ordered so that a table comes after every table of `tables` it
 * references, reference tables first (Citus distributes a table only once
 * what its foreign keys reference is distributed). Tables outside `tables`
 * (already distributed) impose nothing.
 */
export const foreignKeyOrder = <T extends TableRow>(tables: ReadonlyArray<T>): ReadonlyArray<T> => {
  const pending = new Map(tables.map((table) => [table.name, table]))
  const ordered: Array<T> = []
  const visit = (table: T, path: ReadonlySet<string>) => {
    if (!pending.has(table.name)) return
    if (path.has(table.name)) throw new Error(`Foreign keys form a cycle through ${table.name}`)
    for (const name of table.references) {
      const referenced = pending.get(name)
      if (referenced !== undefined) visit(referenced, new Set([...path, table.name]))
    }
    pending.delete(table.name)
    ordered.push(table)
  }
  for (const table of tables.filter((t) => !t.per_organization)) visit(table, new Set())
  for (const table of tables) visit(table, new Set())
  return ordered
}
