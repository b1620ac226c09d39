/**
 * The export repository in memory (`ExportRepo.layerTest`, issue 13 item 8):
 * the same answers as the SQL of `Repo.ts` over an {@link ExportStore} the
 * test fills, so the `Export` service's rules (D14: cursors, `InvalidCursor`,
 * pages read in keyset reads, the remembered key of `sort_by=updated_at`
 * pages, the batch) run with no database.
 *
 * Records are stored as their wire objects (what `JSON.stringify` of a row
 * gives), timestamps ISO 8601 texts; sort keys and the horizon are compared
 * as moments (millisecond precision). Every keyset read is logged in
 * {@link ExportStore.reads} for tests to inspect.
 */
import { Effect } from "effect"
import { isUuid } from "../Domain/Common.ts"
import type { ExportKind, ExportRepo, PageQuery, SortBy, WireRow } from "./Repo.ts"

/** A session or message as exported: its wire members, `organization_id` (and for messages `session_id`) among them. */
export interface ExportRecord extends WireRow {
  readonly organization_id: string
  readonly session_id?: string
  readonly [member: string]: unknown
}

/** What the in-memory repository holds; tests fill it and read it. */
export interface ExportStore {
  /** The tables, in any order. */
  readonly sessions: Array<ExportRecord>
  readonly messages: Array<ExportRecord>
  /** The `export_cursors` table: `<organization>/<kind>/<record id>` -> the sort key its page ended at. */
  readonly cursors: Map<string, string>
  /**
   * The start of the oldest write transaction still running (ISO 8601), as the
   * `pg_locks` query of `Repo.ts` finds it; undefined when none is running.
   */
  horizon: string | undefined
  /** Every keyset read made (`page`), in order. */
  readonly reads: Array<{ readonly kind: ExportKind; readonly query: PageQuery }>
}

/** An empty store. */
export const makeMemoryStore = (): ExportStore => ({
  sessions: [],
  messages: [],
  cursors: new Map(),
  horizon: undefined,
  reads: []
})

/** What `horizon` answers when no write is running: PostgreSQL's `infinity`. */
const NO_HORIZON = "infinity"

const cursorId = (organizationId: string, kind: ExportKind, recordId: string) => `${organizationId}/${kind}/${recordId}`

/** The sort key of a record (`Repo.ts` `keyOf`, D14), as text. */
const keyOf = (record: WireRow, sortBy: SortBy) =>
  sortBy === "created_at" ? record.created_at : (record.updated_at ?? record.created_at)

/** A timestamptz text as epoch ms. */
const moment = (text: string) => (text === NO_HORIZON ? Number.POSITIVE_INFINITY : Date.parse(text))

/** (key, id) order. */
const compareKeys = (a: readonly [number, string], b: readonly [number, string]) =>
  a[0] - b[0] || (a[1] < b[1] ? -1 : a[1] > b[1] ? 1 : 0)

/** The repository over `store` (see module docs). */
export const makeMemoryRepo = (store: ExportStore): ExportRepo["Service"] => {
  const table = (kind: ExportKind) => (kind === "sessions" ? store.sessions : store.messages)

  return {
    cursorKey: (kind, organizationId, sortBy, recordId) =>
      Effect.sync(() => {
        if (!isUuid(recordId)) return undefined
        const record = table(kind).find((row) => row.id === recordId && row.organization_id === organizationId)
        if (record === undefined) return undefined
        const served = sortBy === "updated_at" ? store.cursors.get(cursorId(organizationId, kind, recordId)) : undefined
        return served ?? keyOf(record, sortBy)
      }),

    horizon: () => Effect.sync(() => store.horizon ?? NO_HORIZON),

    page: (kind, query) =>
      Effect.sync(() => {
        store.reads.push({ kind, query })
        const horizon = moment(query.horizon)
        const after = query.after === undefined ? undefined : ([moment(query.after.key), query.after.id] as const)
        const before = (text: string | undefined, value: number) => text === undefined || value < moment(text)
        const since = (text: string | undefined, value: number) => text === undefined || value > moment(text)
        return table(kind)
          .map((row) => ({ row, key: [moment(keyOf(row, query.sortBy)), row.id] as const }))
          .filter(({ row, key }) => {
            const created = moment(row.created_at)
            const updated = moment(keyOf(row, "updated_at"))
            return (
              row.organization_id === query.organizationId &&
              key[0] < horizon &&
              (after === undefined || compareKeys(key, after) > 0) &&
              since(query.createdAfter, created) &&
              before(query.createdBefore, created) &&
              since(query.updatedAfter, updated) &&
              before(query.updatedBefore, updated) &&
              (query.sessionId === undefined || row.session_id === query.sessionId)
            )
          })
          .sort((a, b) => compareKeys(a.key, b.key))
          .slice(0, query.limit)
          .map(({ row }) => row)
      }),

    rememberCursor: (kind, organizationId, recordId, key) =>
      Effect.sync(() => {
        store.cursors.set(cursorId(organizationId, kind, recordId), key)
      }),

    sessionsByIds: (organizationId, ids) =>
      Effect.sync(() =>
        ids.flatMap((id) => {
          const session = store.sessions.find((row) => row.id === id && row.organization_id === organizationId)
          return session === undefined ? [] : [{ body: JSON.stringify(session) }]
        })
      )
  }
}
