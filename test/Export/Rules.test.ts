/**
 * The rules of bulk export that live in TypeScript (conversations.md "Data
 * export", DECISIONS.md D14; issue 13 item 8), fast and with no database: the
 * `Export` service with `it.effect` over its in-memory repository
 * (`Export.layerTest(store)`). What is left to SQL (the horizon under
 * concurrent writers, the page statement's plan) is checked by the integration
 * suite (Export.test.ts) and the export benchmark. Each test has a store of
 * its own.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Exit, Schema, Stream } from "effect"
import { ExportQuery } from "../../src/Export/Api.ts"
import { Export } from "../../src/Export/Export.ts"
import { type ExportRecord, type ExportStore, makeMemoryStore } from "../../src/Export/MemoryRepo.ts"
import type { WireRow } from "../../src/Export/Repo.ts"
import { makeIdGenerator } from "../../src/Shared/Ids.ts"

/** Ids for the fixtures (UUIDv7, as the application makes them). */
const newId = makeIdGenerator()

const ORG = newId()

/** A record of `organizationId` created at second `created` of a fixed day, updated at second `updated` or never. */
const record = (created: number, updated: number | null = null, fields: Partial<ExportRecord> = {}): ExportRecord => ({
  id: newId(),
  organization_id: ORG,
  created_at: new Date(Date.UTC(2025, 0, 1) + created * 1000).toISOString().replace("Z", "000Z"),
  updated_at:
    updated === null ? null : new Date(Date.UTC(2025, 0, 1) + updated * 1000).toISOString().replace("Z", "000Z"),
  ...fields
})

/** Runs `f` with a fresh store and the Export service over it. */
const withExport = <A, E>(f: (exports: Export["Service"], store: ExportStore) => Effect.Effect<A, E>) => {
  const store = makeMemoryStore()
  return Effect.gen(function* () {
    return yield* f(yield* Export, store)
  }).pipe(Effect.provide(Export.layerTest(store)))
}

/** One page of `kind`, its rows collected. */
const page = (
  exports: Export["Service"],
  kind: "sessions" | "messages",
  query: Partial<Parameters<Export["Service"]["sessions"]>[1]> = {}
) => Effect.flatMap(exports[kind](ORG, { sort_by: "created_at", limit: 100, ...query }), Stream.runCollect)

/** The ids of `rows`. */
const ids = (rows: ReadonlyArray<WireRow>) => rows.map((row) => row.id)

/** `records` in D14's order for `sortBy`: (created_at, id) or (coalesce(updated_at, created_at), id). */
const sorted = (records: ReadonlyArray<ExportRecord>, sortBy: "created_at" | "updated_at") =>
  [...records]
    .sort((a, b) => {
      const key = (r: ExportRecord) => (sortBy === "created_at" ? r.created_at : (r.updated_at ?? r.created_at))
      return key(a) < key(b) ? -1 : key(a) > key(b) ? 1 : a.id < b.id ? -1 : a.id > b.id ? 1 : 0
    })
    .map((r) => r.id)

/** Walks `kind` to its end (an empty page) at `limit`, following `after_id`, answering every row and the page sizes. */
const walk = (
  exports: Export["Service"],
  kind: "sessions" | "messages",
  sortBy: "created_at" | "updated_at",
  limit: number
) =>
  Effect.gen(function* () {
    const rows: Array<WireRow> = []
    const sizes: Array<number> = []
    let after: string | undefined
    for (;;) {
      const next = yield* page(exports, kind, { sort_by: sortBy, limit, ...(after ? { after_id: after } : {}) })
      sizes.push(next.length)
      if (next.length === 0) return { rows, sizes }
      rows.push(...next)
      after = next.at(-1)!.id
    }
  })

describe("cursors (D14)", () => {
  it.effect(
    "D14: an after_id that is unknown, malformed, of another organization or of the other kind is InvalidCursor",
    () =>
      withExport((exports, store) =>
        Effect.gen(function* () {
          const foreignSession = record(1, null, { organization_id: newId() })
          const ownSession = record(2)
          const ownMessage = record(3, null, { session_id: ownSession.id })
          store.sessions.push(foreignSession, ownSession)
          store.messages.push(ownMessage)
          for (const [kind, afterId] of [
            ["sessions", newId()],
            ["sessions", "not-a-uuid"],
            ["sessions", foreignSession.id],
            ["sessions", ownMessage.id],
            ["messages", ownSession.id]
          ] as const) {
            for (const sortBy of ["created_at", "updated_at"] as const) {
              const error = yield* Effect.flip(page(exports, kind, { sort_by: sortBy, after_id: afterId }))
              assert.deepStrictEqual(
                [error._tag, error.detail, error.after_id],
                ["InvalidCursor", "Invalid cursor", afterId]
              )
            }
          }
          assert.deepStrictEqual(store.reads, [])
          // A known one of the organization is a cursor.
          assert.deepStrictEqual(yield* page(exports, "sessions", { after_id: ownSession.id }), [])
          assert.deepStrictEqual(ids(yield* page(exports, "messages", {})), [ownMessage.id])
        })
      )
  )

  it.effect(
    "D14: pages follow each other by after_id with no loss and no duplicate, in (created_at, id) order, until []",
    () =>
      withExport((exports, store) =>
        Effect.gen(function* () {
          // 1,234 sessions, several per second (so the id breaks ties), inserted out of order.
          const records = Array.from({ length: 1234 }, (_, i) => record((i * 7919) % 300))
          store.sessions.push(...records.reverse())
          const { rows, sizes } = yield* walk(exports, "sessions", "created_at", 1000)
          assert.deepStrictEqual(sizes, [1000, 234, 0])
          assert.deepStrictEqual(ids(rows), sorted(records, "created_at"))
        })
      )
  )

  it.effect(
    "D14: a page over 500 rows is read in keyset reads of at most 500, each after the last row of the one before",
    () =>
      withExport((exports, store) =>
        Effect.gen(function* () {
          const records = Array.from({ length: 1300 }, (_, i) => record(i % 97, (i * 31) % 400))
          store.sessions.push(...records)
          const rows = yield* page(exports, "sessions", { sort_by: "updated_at", limit: 1200 })
          assert.deepStrictEqual(ids(rows), sorted(records, "updated_at").slice(0, 1200))
          assert.deepStrictEqual(
            store.reads.map((read) => read.query.limit),
            [500, 500, 200]
          )
          // Each read resumes at the (coalesce(updated_at, created_at), id) of the row before it.
          const [, second, third] = store.reads
          const lastOf = (n: number) => rows[n - 1]!
          assert.deepStrictEqual(second!.query.after, {
            key: lastOf(500).updated_at ?? lastOf(500).created_at,
            id: lastOf(500).id
          })
          assert.deepStrictEqual(third!.query.after, {
            key: lastOf(1000).updated_at ?? lastOf(1000).created_at,
            id: lastOf(1000).id
          })
          // Every read of a page stops at the same horizon.
          assert.strictEqual(new Set(store.reads.map((read) => read.query.horizon)).size, 1)
        })
      )
  )

  it.effect("D14: a page of exactly the rows left ends with one read; the next page is []", () =>
    withExport((exports, store) =>
      Effect.gen(function* () {
        store.sessions.push(...Array.from({ length: 500 }, (_, i) => record(i)))
        const rows = yield* page(exports, "sessions", { limit: 500 })
        assert.strictEqual(rows.length, 500)
        assert.strictEqual(store.reads.length, 1)
        assert.deepStrictEqual(yield* page(exports, "sessions", { limit: 500, after_id: rows.at(-1)!.id }), [])
      })
    )
  )

  it.effect(
    "D14: sort_by=updated_at resumes after the key a record was served under, even when it was updated since",
    () =>
      withExport((exports, store) =>
        Effect.gen(function* () {
          // a, b, c never updated (keys 10, 20, 30); d updated at 40.
          const [a, b, c, d] = [record(10), record(20), record(30), record(5, 40)]
          store.sessions.push(a!, b!, c!, d!)
          const first = yield* page(exports, "sessions", { sort_by: "updated_at", limit: 2 })
          assert.deepStrictEqual(ids(first), [a!.id, b!.id])
          assert.deepStrictEqual([...store.cursors.values()], [b!.created_at])
          // b is updated after it was served: its key is now the latest of all.
          const updatedB = { ...b!, updated_at: record(50).created_at }
          store.sessions.splice(store.sessions.indexOf(b!), 1, updatedB)
          const next = yield* page(exports, "sessions", { sort_by: "updated_at", limit: 10, after_id: b!.id })
          assert.deepStrictEqual(ids(next), [c!.id, d!.id, b!.id])
          // created_at pages need no memory: a record's created_at never changes.
          const before = store.cursors.size
          yield* page(exports, "sessions", { sort_by: "created_at", limit: 2 })
          assert.strictEqual(store.cursors.size, before)
        })
      )
  )

  it.effect(
    "D14: a session_id filter that is not a UUID gives [] without reading; a UUID one filters the messages",
    () =>
      withExport((exports, store) =>
        Effect.gen(function* () {
          const session = newId()
          const mine = [record(1, null, { session_id: session }), record(2, null, { session_id: session })]
          store.messages.push(record(0, null, { session_id: newId() }), ...mine)
          assert.deepStrictEqual(yield* page(exports, "messages", { session_id: "not-a-uuid" }), [])
          assert.deepStrictEqual(store.reads, [])
          assert.deepStrictEqual(ids(yield* page(exports, "messages", { session_id: session })), ids(mine))
        })
      )
  )
})

describe("batch (D14)", () => {
  it.effect("D14: sessions in the order of the ids, duplicates once at their first position, others omitted", () =>
    withExport((exports, store) =>
      Effect.gen(function* () {
        const [a, b] = [record(1), record(2)]
        const foreign = record(3, null, { organization_id: newId() })
        store.sessions.push(a!, b!, foreign)
        const text = yield* exports.sessionsBatch(ORG, [b!.id, "nope", a!.id, foreign.id, newId(), b!.id, a!.id])
        assert.deepStrictEqual(JSON.parse(text), [b, a])
        assert.strictEqual(yield* exports.sessionsBatch(ORG, ["nope", foreign.id]), "[]")
        assert.strictEqual(yield* exports.sessionsBatch(ORG, ["nope"]), "[]")
      })
    )
  )
})

describe("limits (D14)", () => {
  it("D14: limit is an integer from 1 to 3000", () => {
    const decode = Schema.decodeUnknownExit(Schema.Struct(ExportQuery))
    assert.isTrue(Exit.isSuccess(decode({ limit: 3000 })))
    assert.isTrue(Exit.isSuccess(decode({ limit: 1 })))
    for (const limit of [3001, 0, 1.5]) assert.isTrue(Exit.isFailure(decode({ limit })), String(limit))
  })
})
