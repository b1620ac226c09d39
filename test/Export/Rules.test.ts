/**
 * The rules of bulk export (conversations.md "Data export", DECISIONS.md D14;
 * issue 13 item 8, issue 37 item 1): the `Export` service with `it.effect`
 * over the production services on the file's database
 * (test/support/RulesDatabase.ts), its records real sessions and messages rows
 * of the test's organization (test/support/ExportFixtures.ts), so the export's
 * SQL (keyset reads, the horizon, the remembered keys of cursors) returns them.
 * How a page was read is seen in the statements it sent. The horizon under
 * concurrent writers and the page statement's plan are checked by the HTTP
 * suite (Export.test.ts) and the export benchmark. Each test has an
 * organization of its own.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Exit, Schema, Stream } from "effect"
import { ExportQuery } from "../../src/Export/Api.ts"
import { Export } from "../../src/Export/Export.ts"
import type { WireRow } from "../../src/Export/Repo.ts"
import { Sessions } from "../../src/Sessions/Sessions.ts"
import { makeIdGenerator } from "../../src/Shared/Ids.ts"
import {
  addMessages,
  addSessions,
  at,
  cursorKeys,
  type ExportRecord,
  type KeysetRead,
  record,
  recordingReads
} from "../support/ExportFixtures.ts"
import { onDatabase, organization, setColumn } from "../support/RulesDatabase.ts"

/** Ids for the fixtures (UUIDv7, as the application makes them). */
const newId = makeIdGenerator()

/**
 * Runs `f` with the Export service, a new organization, and the log of the
 * keyset reads of pages made meanwhile (`recordingReads`).
 */
const withExport = <A, E, R>(
  f: (exports: Export["Service"], ORG: string, reads: ReadonlyArray<KeysetRead>) => Effect.Effect<A, E, R>
) =>
  Effect.gen(function* () {
    const exports = yield* Export
    const ORG = yield* organization()
    return yield* recordingReads((reads) => f(exports, ORG, reads))
  })

/** One page of `kind`, its rows collected. */
const page = (
  exports: Export["Service"],
  ORG: string,
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

/** Walks `kind` to its end (an empty page) at `limit`, following `after_id`, returning every row and the page sizes. */
const walk = (
  exports: Export["Service"],
  ORG: string,
  kind: "sessions" | "messages",
  sortBy: "created_at" | "updated_at",
  limit: number
) =>
  Effect.gen(function* () {
    const rows: Array<WireRow> = []
    const sizes: Array<number> = []
    let after: string | undefined
    for (;;) {
      const next = yield* page(exports, ORG, kind, { sort_by: sortBy, limit, ...(after ? { after_id: after } : {}) })
      sizes.push(next.length)
      if (next.length === 0) return { rows, sizes }
      rows.push(...next)
      after = next.at(-1)!.id
    }
  })

onDatabase()("Export on PostgreSQL", (it) => {
  describe("cursors (D14)", () => {
    it.effect(
      "D14: an after_id that is unknown, malformed, of another organization or of the other kind is InvalidCursor",
      () =>
        withExport((exports, ORG, reads) =>
          Effect.gen(function* () {
            const foreignSession = record(1)
            const ownSession = record(2)
            const ownMessage = record(3, null, { session_id: ownSession.id })
            yield* addSessions(yield* organization(), foreignSession)
            yield* addSessions(ORG, ownSession)
            yield* addMessages(ORG, ownMessage)
            for (const [kind, afterId] of [
              ["sessions", newId()],
              ["sessions", "not-a-uuid"],
              ["sessions", foreignSession.id],
              ["sessions", ownMessage.id],
              ["messages", ownSession.id]
            ] as const) {
              for (const sortBy of ["created_at", "updated_at"] as const) {
                const error = yield* Effect.flip(page(exports, ORG, kind, { sort_by: sortBy, after_id: afterId }))
                assert.deepStrictEqual(
                  [error._tag, error.detail, error.after_id],
                  ["InvalidCursor", "Invalid cursor", afterId]
                )
              }
            }
            assert.deepStrictEqual(reads, [])
            // A known one of the organization is a cursor.
            assert.deepStrictEqual(yield* page(exports, ORG, "sessions", { after_id: ownSession.id }), [])
            assert.deepStrictEqual(ids(yield* page(exports, ORG, "messages", {})), [ownMessage.id])
          })
        )
    )

    it.effect(
      "D14: pages follow each other by after_id with no loss and no duplicate, in (created_at, id) order, until []",
      () =>
        withExport((exports, ORG) =>
          Effect.gen(function* () {
            // 1,234 sessions, several per second (so the id breaks ties), inserted out of order.
            const records = Array.from({ length: 1234 }, (_, i) => record((i * 7919) % 300))
            yield* addSessions(ORG, ...records.reverse())
            const { rows, sizes } = yield* walk(exports, ORG, "sessions", "created_at", 1000)
            assert.deepStrictEqual(sizes, [1000, 234, 0])
            assert.deepStrictEqual(ids(rows), sorted(records, "created_at"))
          })
        )
    )

    it.effect(
      "D14: a page over 500 rows is read in keyset reads of at most 500, each after the last row of the one before",
      () =>
        withExport((exports, ORG, reads) =>
          Effect.gen(function* () {
            const records = Array.from({ length: 1300 }, (_, i) => record(i % 97, (i * 31) % 400))
            yield* addSessions(ORG, ...records)
            const rows = yield* page(exports, ORG, "sessions", { sort_by: "updated_at", limit: 1200 })
            assert.deepStrictEqual(ids(rows), sorted(records, "updated_at").slice(0, 1200))
            assert.deepStrictEqual(
              reads.map((read) => read.query.limit),
              [500, 500, 200]
            )
            // Each read resumes at the (coalesce(updated_at, created_at), id) of the row before it.
            const [, second, third] = reads
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
            assert.strictEqual(new Set(reads.map((read) => read.query.horizon)).size, 1)
          })
        )
    )

    it.effect("D14: a page of exactly the rows left ends with one read; the next page is []", () =>
      withExport((exports, ORG, reads) =>
        Effect.gen(function* () {
          yield* addSessions(ORG, ...Array.from({ length: 500 }, (_, i) => record(i)))
          const rows = yield* page(exports, ORG, "sessions", { limit: 500 })
          assert.strictEqual(rows.length, 500)
          assert.strictEqual(reads.length, 1)
          assert.deepStrictEqual(yield* page(exports, ORG, "sessions", { limit: 500, after_id: rows.at(-1)!.id }), [])
        })
      )
    )

    it.effect(
      "D14: sort_by=updated_at resumes after the key a record was served under, even when it was updated since",
      () =>
        withExport((exports, ORG) =>
          Effect.gen(function* () {
            // a, b, c never updated (keys 10, 20, 30); d updated at 40.
            const [a, b, c, d] = [record(10), record(20), record(30), record(5, 40)]
            yield* addSessions(ORG, a!, b!, c!, d!)
            const first = yield* page(exports, ORG, "sessions", { sort_by: "updated_at", limit: 2 })
            assert.deepStrictEqual(ids(first), [a!.id, b!.id])
            assert.deepStrictEqual(yield* cursorKeys(ORG), [b!.created_at])
            // b is updated after it was served: its key is now the latest of all.
            yield* setColumn("sessions", b!.id, "updated_at", at(50))
            const next = yield* page(exports, ORG, "sessions", { sort_by: "updated_at", limit: 10, after_id: b!.id })
            assert.deepStrictEqual(ids(next), [c!.id, d!.id, b!.id])
            // created_at pages need no memory: a record's created_at never changes.
            const before = (yield* cursorKeys(ORG)).length
            yield* page(exports, ORG, "sessions", { sort_by: "created_at", limit: 2 })
            assert.strictEqual((yield* cursorKeys(ORG)).length, before)
          })
        )
    )

    it.effect(
      "D14: a session_id filter that is not a UUID gives [] without reading; a UUID one filters the messages",
      () =>
        withExport((exports, ORG, reads) =>
          Effect.gen(function* () {
            const [session, other] = [record(0), record(0)]
            yield* addSessions(ORG, session!, other!)
            const mine = [record(1, null, { session_id: session!.id }), record(2, null, { session_id: session!.id })]
            yield* addMessages(ORG, record(0, null, { session_id: other!.id }), ...mine)
            assert.deepStrictEqual(yield* page(exports, ORG, "messages", { session_id: "not-a-uuid" }), [])
            assert.deepStrictEqual(reads, [])
            assert.deepStrictEqual(ids(yield* page(exports, ORG, "messages", { session_id: session!.id })), ids(mine))
          })
        )
    )
  })

  describe("batch (D14)", () => {
    it.effect("D14: sessions in the order of the ids, duplicates once at their first position, others omitted", () =>
      withExport((exports, ORG) =>
        Effect.gen(function* () {
          const sessions = yield* Sessions
          const create = (organizationId: string) =>
            sessions.create(organizationId, { contact_id: "c", contact_name: "Ada" })
          const [a, b] = [yield* create(ORG), yield* create(ORG)]
          const foreign = yield* create(yield* organization())
          const text = yield* exports.sessionsBatch(ORG, [b!.id, "nope", a!.id, foreign.id, newId(), b!.id, a!.id])
          assert.deepStrictEqual(JSON.parse(text), [b, a])
          assert.strictEqual(yield* exports.sessionsBatch(ORG, ["nope", foreign.id]), "[]")
          assert.strictEqual(yield* exports.sessionsBatch(ORG, ["nope"]), "[]")
        })
      )
    )
  })
})

describe("limits (D14)", () => {
  it("D14: limit is an integer from 1 to 3000", () => {
    const decode = Schema.decodeUnknownExit(Schema.Struct(ExportQuery))
    assert.isTrue(Exit.isSuccess(decode({ limit: 3000 })))
    assert.isTrue(Exit.isSuccess(decode({ limit: 1 })))
    for (const limit of [3001, 0, 1.5]) assert.isTrue(Exit.isFailure(decode({ limit })), String(limit))
  })
})
