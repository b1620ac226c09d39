/**
 * Fixtures for the rules of bulk export on PostgreSQL (conversations.md "Data
 * export", DECISIONS.md D14; issue 37 item 1): sessions and messages stamped
 * at chosen moments, written as rows of an organization so the export's own
 * SQL (keyset reads below the horizon) reads them; the keyset reads a page
 * makes, seen as the statements `ExportRepo.page` sends; the sort keys
 * remembered for `sort_by=updated_at` cursors. All require `SqlClient`, run
 * over the file's database (test/support/RulesDatabase.ts).
 */
import { Effect } from "effect"
import { SqlClient, Statement } from "effect/sql"
import { isoTimestamp } from "../../src/Database/Json.ts"
import type { ExportKind } from "../../src/Export/Repo.ts"
import { makeIdGenerator } from "../../src/Shared/Ids.ts"

/** Ids for the fixtures (UUIDv7, as the application makes them). */
const newId = makeIdGenerator()

/** Second `second` of 2025-01-01 as the wire writes it (ISO 8601 UTC, microseconds). */
export const at = (second: number) => new Date(Date.UTC(2025, 0, 1) + second * 1000).toISOString().replace("Z", "000Z")

/** A session or message to be written: its id and wire timestamps; a message also its session's id. */
export interface ExportRecord {
  readonly id: string
  readonly created_at: string
  readonly updated_at: string | null
  readonly session_id?: string
}

/** A record created at second `created` of a fixed day (2025-01-01), updated at second `updated` or never. */
export const record = (
  created: number,
  updated: number | null = null,
  fields: Partial<ExportRecord> = {}
): ExportRecord => ({
  id: newId(),
  created_at: at(created),
  updated_at: updated === null ? null : at(updated),
  ...fields
})

/** Runs `statement` on the file's database; SQL errors are defects. */
const run = <A extends object>(statement: (sql: SqlClient.SqlClient) => Effect.Effect<ReadonlyArray<A>, unknown>) =>
  Effect.flatMap(Effect.service(SqlClient.SqlClient), (sql) => Effect.orDie(statement(sql)))

/** `records` as the rows of a FROM item `r` (one JSON parameter). */
const rowsOf = (records: ReadonlyArray<ExportRecord>) => (sql: SqlClient.SqlClient) =>
  sql`jsonb_to_recordset(${JSON.stringify(records)}::jsonb)
    AS r(id uuid, session_id uuid, created_at timestamptz, updated_at timestamptz)`

/**
 * Writes `records` as open sessions of `organizationId` in one statement,
 * each in a conversation of its own (a contact named by its id; the
 * conversation has the session's id), with the
 * records' ids and timestamps.
 */
export const addSessions = (organizationId: string, ...records: ReadonlyArray<ExportRecord>) =>
  run(
    (sql) => sql`WITH r AS (
        SELECT * FROM ${rowsOf(records)(sql)}
      ), c AS (
        INSERT INTO conversations (id, organization_id, contact_id, created_at)
        SELECT id, ${organizationId}, id::text, created_at FROM r
      )
      INSERT INTO sessions (id, organization_id, conversation_id, contact_id, status, created_at, updated_at)
      SELECT id, ${organizationId}, id, id::text, 'open', created_at, updated_at FROM r
      RETURNING id`
  )

/** Writes `records` as user text messages of `organizationId` in one statement, each in its `session_id`'s session. */
export const addMessages = (organizationId: string, ...records: ReadonlyArray<ExportRecord>) =>
  run(
    (sql) => sql`INSERT INTO messages (id, organization_id, session_id, conversation_id, role, content, created_at,
        updated_at)
      SELECT r.id, ${organizationId}, s.id, s.conversation_id, 'user', '{"type":"text","text":"hi"}', r.created_at,
        r.updated_at
      FROM ${rowsOf(records)(sql)} JOIN sessions s ON s.id = r.session_id AND s.organization_id = ${organizationId}
      RETURNING id`
  )

/** One keyset read of a page (`ExportRepo.page`): its limit, its cursor, its horizon, as sent to PostgreSQL. */
export interface KeysetRead {
  readonly kind: ExportKind
  readonly query: {
    readonly limit: number
    /** The (sort key, id) the read resumes after. */
    readonly after: { readonly key: string; readonly id: string } | undefined
    readonly horizon: string
  }
}

/** `statement` as a keyset read of a page, if it is one (`ExportRepo.page`'s text: `... FROM "<kind>" ... LIMIT $n`). */
const keysetRead = (statement: Statement.Statement<unknown>): KeysetRead | undefined => {
  const [text, params] = statement.compile()
  const page = /FROM "(sessions|messages)" [sm] .* ORDER BY .* LIMIT \$(\d+)\s*$/s.exec(text)
  if (page === null) return undefined
  const param = (position: string) => params[Number(position) - 1]
  const horizon = /< \$(\d+)::timestamptz/.exec(text)!
  const after = /\) > \(\$(\d+)::timestamptz, \$(\d+)::uuid\)/.exec(text)
  return {
    kind: page[1] as ExportKind,
    query: {
      limit: Number(param(page[2]!)),
      after: after === null ? undefined : { key: String(param(after[1]!)), id: String(param(after[2]!)) },
      horizon: String(param(horizon[1]!))
    }
  }
}

/**
 * Runs `f` with a log of the keyset reads of pages it makes (in order), seen
 * as the statements sent (`Statement.CurrentTransformer`), so a test sees how
 * a page was read while the real repository reads it.
 */
export const recordingReads = <A, E, R>(f: (reads: ReadonlyArray<KeysetRead>) => Effect.Effect<A, E, R>) => {
  const reads: Array<KeysetRead> = []
  return f(reads).pipe(
    Effect.provideService(Statement.CurrentTransformer, (statement) => {
      const read = keysetRead(statement)
      if (read !== undefined) reads.push(read)
      return Effect.succeed(statement)
    })
  )
}

/**
 * The sort keys remembered for the organization's `sort_by=updated_at`
 * cursors (`export_cursors`, D14), oldest first, as the wire writes moments.
 */
export const cursorKeys = (organizationId: string) =>
  Effect.map(
    run(
      (sql) => sql<{ key: string }>`SELECT ${sql.literal(isoTimestamp("sort_key"))} AS key FROM export_cursors
        WHERE organization_id = ${organizationId} ORDER BY created_at, record_id`
    ),
    (rows) => rows.map((row) => row.key)
  )
