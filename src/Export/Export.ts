/**
 * The export service (conversations.md "Data export"; DECISIONS.md D14):
 * keyset-paginated sessions and messages, and sessions by ids.
 */
import { Context, Effect, Layer } from "effect"
import { isUuid, type JsonText } from "../Domain/Common.ts"
import { BadRequest } from "../Domain/Errors.ts"
import type { Session } from "../Domain/Session.ts"
import { type ExportKind, ExportRepo, type PageQuery, type SortBy } from "./Repo.ts"

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

const invalidCursor = () => new BadRequest({ detail: "Invalid cursor" })

const makeService = Effect.gen(function* () {
  const repo = yield* ExportRepo

  const walk = Effect.fnUntraced(function* (kind: ExportKind, organizationId: string, query: ExportQuery) {
    let after: PageQuery["after"]
    if (query.after_id !== undefined) {
      const key = yield* repo.cursorKey(kind, organizationId, query.sort_by, query.after_id)
      if (key === undefined) return yield* invalidCursor()
      after = { key, id: query.after_id }
    }
    if (query.session_id !== undefined && !isUuid(query.session_id)) return []
    const page = yield* repo.page(kind, {
      organizationId,
      sortBy: query.sort_by,
      createdAfter: query.created_after,
      createdBefore: query.created_before,
      updatedAfter: query.updated_after,
      updatedBefore: query.updated_before,
      sessionId: query.session_id,
      after,
      limit: query.limit
    })
    const last = page[page.length - 1]
    if (last !== undefined && query.sort_by === "updated_at") {
      yield* repo.rememberCursor(kind, organizationId, last.id, last.updated_at ?? last.created_at)
    }
    return page
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
 * The export service. Pages are rows whose members are the wire members
 * (`JSON.stringify` of a row is the Session or Message JSON). Fails with
 * BadRequest `Invalid cursor` for an unknown or foreign `after_id` (D14).
 */
export class Export extends Context.Service<Export, Effect.Success<typeof makeService>>()("parley/Export") {
  static readonly layer = Layer.effect(Export, makeService).pipe(Layer.provide(ExportRepo.layer))
}
