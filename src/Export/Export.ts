/**
 * The export service (conversations.md "Data export"; DECISIONS.md D14):
 * keyset-paginated sessions and messages, and sessions by ids.
 */
import { Context, Effect, Layer, Option, Stream } from "effect"
import { isUuid, type JsonText } from "../Domain/Common.ts"
import type { Session } from "../Domain/Session.ts"
import { InvalidCursor } from "./Errors.ts"
import { type ExportKind, ExportRepo, type PageQuery, type SortBy, type WireRow } from "./Repo.ts"

/** Query of an export page: the spec's parameters, moments as ISO 8601 texts. */
export interface ExportQuery {
  readonly sort_by: SortBy
  readonly created_after?: string | undefined
  readonly created_before?: string | undefined
  readonly updated_after?: string | undefined
  readonly updated_before?: string | undefined
  readonly after_id?: string | undefined
  readonly session_id?: string | undefined
  readonly limit: number
}

/**
 * Rows a page reads per statement. A page is sent as it is read, so the server
 * holds about two reads of it at a time (one being sent, the next one read
 * ahead): holding whole 3000-row pages grew the server by 257 MB over a
 * 1,000,000-row walk (`npm run bench -- export`, bench/README.md "export").
 */
const READ_ROWS = 500

/** The sort key of `row` as text (`Repo.ts` `SortBy`). */
const sortKey = (row: WireRow, sortBy: SortBy) =>
  sortBy === "created_at" ? row.created_at : (row.updated_at ?? row.created_at)

/** Where the reading of a page stands: the cursor, the rows still wanted, the last row read so far. */
interface Reading {
  readonly after: PageQuery["after"]
  readonly remaining: number
  readonly last: WireRow | undefined
}

const makeService = Effect.gen(function* () {
  const repo = yield* ExportRepo

  /**
   * A page as a stream of rows, to be run once: keyset reads of at most
   * `READ_ROWS` rows under one horizon, the first one before the response starts
   * (so a failure there is a 500), each next one while the previous is sent.
   * For `sort_by=updated_at` the key of the last row is recorded before the
   * last read is sent, so a client that has the whole page can resume from it
   * at once.
   */
  const walk = Effect.fnUntraced(function* (kind: ExportKind, organizationId: string, query: ExportQuery) {
    let after: PageQuery["after"]
    if (query.after_id !== undefined) {
      const key = yield* repo.cursorKey(kind, organizationId, query.sort_by, query.after_id)
      if (key === undefined) return yield* new InvalidCursor({ after_id: query.after_id })
      after = { key, id: query.after_id }
    }
    if (query.session_id !== undefined && !isUuid(query.session_id)) return Stream.empty
    const horizon = yield* repo.horizon(kind)
    const read = (reading: Reading) =>
      repo.page(kind, {
        organizationId,
        sortBy: query.sort_by,
        createdAfter: query.created_after,
        createdBefore: query.created_before,
        updatedAfter: query.updated_after,
        updatedBefore: query.updated_before,
        sessionId: query.session_id,
        after: reading.after,
        horizon,
        limit: Math.min(READ_ROWS, reading.remaining)
      })
    /** `rows`, read at `reading`, and the reading after them if the page goes on. */
    const step = Effect.fnUntraced(function* (reading: Reading, rows: ReadonlyArray<WireRow>) {
      const last = rows[rows.length - 1] ?? reading.last
      const remaining = reading.remaining - rows.length
      if (last !== undefined && rows.length === Math.min(READ_ROWS, reading.remaining) && remaining > 0) {
        const next = { after: { key: sortKey(last, query.sort_by), id: last.id }, remaining, last }
        return [rows, Option.some<Reading>(next)] as const
      }
      if (last !== undefined && query.sort_by === "updated_at") {
        yield* repo.rememberCursor(kind, organizationId, last.id, sortKey(last, query.sort_by))
      }
      return [rows, Option.none<Reading>()] as const
    })
    const start: Reading = { after, remaining: query.limit, last: undefined }
    const [rows, next] = yield* Effect.flatMap(read(start), (rows) => step(start, rows))
    if (Option.isNone(next)) return Stream.fromArray(rows)
    // The first read is handed over once, not kept by the stream for the whole
    // page: kept, its rows outlived young-generation collections (+100 MB over
    // the walk). One read ahead lets PostgreSQL read while Node sends.
    let first: ReadonlyArray<WireRow> | undefined = rows
    return Stream.orDie(
      Stream.paginate(start, (reading) => {
        if (first === undefined) return Effect.flatMap(read(reading), (rows) => step(reading, rows))
        const taken = first
        first = undefined
        return Effect.succeed([taken, next] as const)
      }).pipe(Stream.bufferArray({ capacity: 1 }))
    )
  })

  const sessions = Effect.fn("Export.sessions")(
    (organizationId: string, query: ExportQuery) => walk("sessions", organizationId, query),
    Effect.catchTag("SqlError", Effect.die)
  )

  const messages = Effect.fn("Export.messages")(
    (organizationId: string, query: ExportQuery) => walk("messages", organizationId, query),
    Effect.catchTag("SqlError", Effect.die)
  )

  const sessionsBatch = Effect.fn("Export.sessionsBatch")(
    function* (organizationId: string, ids: ReadonlyArray<string>) {
      const wanted = [...new Set(ids.filter(isUuid))]
      if (wanted.length === 0) return "[]" as JsonText<ReadonlyArray<Session>>
      const rows = yield* repo.sessionsByIds(organizationId, wanted)
      return `[${rows.map((row) => row.body).join(",")}]` as JsonText<ReadonlyArray<Session>>
    },
    Effect.catchTag("SqlError", Effect.die)
  )

  return { sessions, messages, sessionsBatch }
})

/**
 * The export service. Pages are streams of rows whose members are the wire
 * members (`JSON.stringify` of a row is the Session or Message JSON), read as
 * the stream is consumed. Fails with
 * InvalidCursor (400 `Invalid cursor`) for an unknown or foreign `after_id` (D14).
 */
export class Export extends Context.Service<
  Export,
  {
    /**
     * A page of the organization's sessions (D14): up to `query.limit` wire
     * rows in `sort_by` order after `after_id`, read as the stream is consumed.
     * Fails with InvalidCursor for an unknown or foreign `after_id`.
     */
    readonly sessions: (
      organizationId: string,
      query: ExportQuery
    ) => Effect.Effect<Stream.Stream<WireRow>, InvalidCursor>
    /** A page of the organization's messages (D14), as `sessions`; `session_id` filters by session. */
    readonly messages: (
      organizationId: string,
      query: ExportQuery
    ) => Effect.Effect<Stream.Stream<WireRow>, InvalidCursor>
    /**
     * The organization's sessions among `ids` (D14), as a JSON array text in the
     * order of the ids, each once at its first position; others omitted.
     */
    readonly sessionsBatch: (
      organizationId: string,
      ids: ReadonlyArray<string>
    ) => Effect.Effect<JsonText<ReadonlyArray<Session>>>
  }
>()("parley/Export") {
  /** The service on PostgreSQL. Requires `PgClient`. */
  static readonly layer = Layer.effect(Export, makeService).pipe(Layer.provide(ExportRepo.layer))
}
