/**
 * SQL of bulk export (conversations.md "Data export", DECISIONS.md D14).
 *
 * A page is read in keyset reads (`page`), each one index range scan over
 * (organization_id, sort key, id) returning wire-ordered columns that
 * `JSON.stringify` turns into the same JSON as every other endpoint
 * (`Database/Json.ts`).
 *
 * No loss while records are being written: a page only returns rows whose
 * sort key is below the *horizon*, the start of the oldest transaction still
 * running that has written to the exported table (it holds the table's
 * `RowExclusiveLock` until it ends: `pg_locks`, `pg_stat_activity`). Every row
 * such a transaction writes is stamped at or after its start
 * (`statement_timestamp()`), so once a page has passed a key, no row can later
 * appear before it. For the same reason the rows below a horizon taken once
 * (`horizon`) stay the rows below it, so the reads of one page under that
 * horizon return what one statement would have (a record updated meanwhile
 * moves above the horizon and comes in a later page, as between pages).
 */
import { PgClient } from "@effect/sql-pg"
import { Context, Effect, Layer } from "effect"
import type { SqlError } from "effect/sql"
import { columnsOf, messageMembers, sessionJson, sessionMembers } from "../Database/Json.ts"
import { isUuid } from "../Domain/Common.ts"

/** A row of a page: the wire members of a session or message; `id`, `created_at`, `updated_at` as text. */
export interface WireRow {
  readonly id: string
  readonly created_at: string
  readonly updated_at: string | null
}

/** What is exported. */
export type ExportKind = "sessions" | "messages"

/** `created_at`: (created_at, id); `updated_at`: (coalesce(updated_at, created_at), id) (D14). */
export type SortBy = "created_at" | "updated_at"

/**
 * Filters, cursor and horizon of one read. Moments are ISO 8601 texts; `after.key`
 * (a sort key) and `horizon` are timestamptz texts.
 */
export interface PageQuery {
  readonly organizationId: string
  readonly sortBy: SortBy
  readonly createdAfter?: string | undefined
  readonly createdBefore?: string | undefined
  readonly updatedAfter?: string | undefined
  readonly updatedBefore?: string | undefined
  readonly sessionId?: string | undefined
  readonly after?: { readonly key: string; readonly id: string } | undefined
  readonly horizon: string
  readonly limit: number
}

/**
 * The export repository: SQL only, no rules. Every method may fail with
 * `SqlError`. Sort keys and the horizon are timestamptz texts, passed back
 * as they were returned.
 */
export class ExportRepo extends Context.Service<
  ExportRepo,
  {
    /**
     * The sort key to resume after `recordId` (D14): for `updated_at`, the key
     * under which the latest page that ended with it was served (the record may
     * have been updated since), else its current key. Undefined when the record
     * is unknown, of another organization, or its id is not a UUID.
     */
    readonly cursorKey: (
      kind: ExportKind,
      organizationId: string,
      sortBy: SortBy,
      recordId: string
    ) => Effect.Effect<string | undefined, SqlError.SqlError>
    /** The horizon of `kind`'s table now: a page reads only keys below it (module docs). */
    readonly horizon: (kind: ExportKind) => Effect.Effect<string, SqlError.SqlError>
    /**
     * Up to `limit` rows of the organization after `after` in (sort key, id)
     * order, below the horizon, within the filters: rows whose members are the
     * wire members in wire order (`JSON.stringify` of a row is its JSON).
     */
    readonly page: (kind: ExportKind, query: PageQuery) => Effect.Effect<ReadonlyArray<WireRow>, SqlError.SqlError>
    /** Records that a `sort_by=updated_at` page ended with `recordId` at `key`; the latest page wins. */
    readonly rememberCursor: (
      kind: ExportKind,
      organizationId: string,
      recordId: string,
      key: string
    ) => Effect.Effect<void, SqlError.SqlError>
    /** The Session JSON texts of the organization's sessions among `ids` (UUIDs), in the order of `ids`. */
    readonly sessionsByIds: (
      organizationId: string,
      ids: ReadonlyArray<string>
    ) => Effect.Effect<ReadonlyArray<{ readonly body: string }>, SqlError.SqlError>
  }
>()("parley/Export/ExportRepo") {
  /** The repository on PostgreSQL. Requires `PgClient`. */
  static readonly layer = Layer.effect(
    ExportRepo,
    Effect.gen(function* () {
      return ExportRepo.of(makeSqlRepo(yield* PgClient.PgClient))
    })
  )
}

const tables = {
  sessions: {
    table: "sessions",
    alias: "s",
    columns: columnsOf(sessionMembers("s", "a")),
    join: "LEFT JOIN agents a ON a.organization_id = s.organization_id AND a.id = s.agent_id",
    // D22: the sessions of a contact being erased are left out.
    visible: "s.erasure_id IS NULL"
  },
  messages: {
    table: "messages",
    alias: "m",
    columns: columnsOf(messageMembers("m")),
    join: "",
    // D22: so are their messages (a probe of sessions_erased_idx, which holds only sessions being erased).
    visible: `NOT EXISTS (SELECT 1 FROM sessions x WHERE x.organization_id = m.organization_id AND x.id = m.session_id
      AND x.erasure_id IS NOT NULL)`
  }
} as const

const keyOf = (alias: string, sortBy: SortBy) =>
  sortBy === "created_at" ? `${alias}.created_at` : `coalesce(${alias}.updated_at, ${alias}.created_at)`

/** The repository over PostgreSQL client `sql`. */
const makeSqlRepo = (sql: PgClient.PgClient): ExportRepo["Service"] => {
  /**
   * The sort key to resume after `recordId` (D14): for `updated_at`, the key
   * under which the latest page that ended with it was served (the record may
   * have been updated since), else its current key. Undefined when the record is unknown or of another organization.
   */
  const cursorKey = (kind: ExportKind, organizationId: string, sortBy: SortBy, recordId: string) => {
    if (!isUuid(recordId)) return Effect.succeed(undefined)
    const { table, alias } = tables[kind]
    const key = sql.literal(keyOf(alias, sortBy))
    const served =
      sortBy === "updated_at"
        ? sql`(SELECT c.sort_key FROM export_cursors c WHERE c.organization_id = ${organizationId}
            AND c.kind = ${kind} AND c.record_id = ${recordId})`
        : sql`NULL::timestamptz`
    return sql<{ key: string }>`SELECT coalesce(${served}, ${key})::text AS key
      FROM ${sql(table)} ${sql.literal(alias)}
      WHERE ${sql.literal(alias)}.id = ${recordId} AND ${sql.literal(alias)}.organization_id = ${organizationId}`.pipe(
      Effect.map((rows) => rows[0]?.key)
    )
  }

  /**
   * The horizon of `kind`'s table now, as text: a page reads only keys below it
   * (see the top of this file). Taken once per page, so every read of the page
   * stops at the same key.
   */
  const horizon = (kind: ExportKind) =>
    sql<{ h: string }>`SELECT least(statement_timestamp(), min(a.xact_start))::text AS h
      FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
      WHERE l.locktype = 'relation' AND l.relation = ${tables[kind].table}::regclass AND l.mode = 'RowExclusiveLock'
        AND l.granted AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
        AND a.pid <> pg_backend_pid()`.pipe(Effect.map((rows) => rows[0]!.h))

  /**
   * Up to `limit` rows after `after` and below `horizon`: rows whose members are
   * the wire members in wire order, timestamps already ISO 8601 text
   * (`Database/Json.ts` `messageMembers`, `sessionMembers` as columns), so `JSON.stringify`
   * of the rows is the page's JSON. Measured the cheapest correct rendering
   * (`npm run bench -- encoding`): a third less time per page than rendering
   * rows to JSON in PostgreSQL or encoding them with the schema.
   */
  const page = (kind: ExportKind, query: PageQuery) => {
    const { table, alias, columns, join, visible } = tables[kind]
    const a = sql.literal(alias)
    const key = sql.literal(keyOf(alias, query.sortBy))
    const updatedKey = sql.literal(keyOf(alias, "updated_at"))
    const conditions = [
      sql`${a}.organization_id = ${query.organizationId}`,
      sql.literal(visible),
      sql`${key} < ${query.horizon}::timestamptz`
    ]
    if (query.after !== undefined) {
      conditions.push(sql`(${key}, ${a}.id) > (${query.after.key}::timestamptz, ${query.after.id}::uuid)`)
    }
    if (query.createdAfter !== undefined) conditions.push(sql`${a}.created_at > ${query.createdAfter}::timestamptz`)
    if (query.createdBefore !== undefined) conditions.push(sql`${a}.created_at < ${query.createdBefore}::timestamptz`)
    if (query.updatedAfter !== undefined) conditions.push(sql`${updatedKey} > ${query.updatedAfter}::timestamptz`)
    if (query.updatedBefore !== undefined) conditions.push(sql`${updatedKey} < ${query.updatedBefore}::timestamptz`)
    if (query.sessionId !== undefined) conditions.push(sql`${a}.session_id = ${query.sessionId}::uuid`)
    return sql<WireRow>`
      SELECT ${sql.literal(columns)}
      FROM ${sql(table)} ${a} ${sql.literal(join)}
      WHERE ${sql.and(conditions)}
      ORDER BY ${key}, ${a}.id
      LIMIT ${query.limit}`
  }

  /**
   * Records that a `sort_by=updated_at` page ended with `recordId` at `key`.
   * The latest page wins: a walker resumes from the page it was last given.
   */
  const rememberCursor = (kind: ExportKind, organizationId: string, recordId: string, key: string) =>
    sql`INSERT INTO export_cursors (organization_id, kind, record_id, sort_key, created_at)
      VALUES (${organizationId}, ${kind}, ${recordId}, ${key}::timestamptz, statement_timestamp())
      ON CONFLICT (organization_id, kind, record_id)
      DO UPDATE SET sort_key = EXCLUDED.sort_key, created_at = EXCLUDED.created_at`.pipe(Effect.asVoid)

  /** Sessions of the organization among `ids`, in the order of `ids` (first occurrence). */
  const sessionsByIds = (organizationId: string, ids: ReadonlyArray<string>) =>
    sql<{ body: string }>`SELECT ${sql.literal(sessionJson("s", "a"))}::text AS body
      FROM unnest(${[...ids]}::uuid[]) WITH ORDINALITY AS wanted(id, position)
      JOIN sessions s ON s.organization_id = ${organizationId} AND s.id = wanted.id AND s.erasure_id IS NULL
      LEFT JOIN agents a ON a.organization_id = s.organization_id AND a.id = s.agent_id
      ORDER BY wanted.position`

  return { cursorKey, horizon, page, rememberCursor, sessionsByIds }
}
