/**
 * The rules of messages (DECISIONS.md D1, D3, D5, D12, D13, W1; issue 13 item
 * 8), fast and with no database: `nextDeliveryStatus` directly, and the
 * `Messages` service with `it.effect` over the in-memory database
 * (`Messages.layerTest(db)`, sessions made with `Sessions.layerTest(db)` on
 * the same tables), time on `TestClock`. Each test has a database of its own.
 * The integration suite (Messages.test.ts) checks the same over PostgreSQL.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Exit, Layer, Schema } from "effect"
import { TestClock } from "effect/testing"
import { type MemoryDatabase, makeMemoryDatabase, snapshotTables } from "../../src/Database/Memory.ts"
import type { DeliveryStatus } from "../../src/Domain/Message.ts"
import { SearchMessagesPayload } from "../../src/Messages/Api.ts"
import { Messages, nextDeliveryStatus } from "../../src/Messages/Messages.ts"
import { Sessions } from "../../src/Sessions/Sessions.ts"
import { makeIdGenerator } from "../../src/Shared/Ids.ts"
import { eventTypes } from "../support/MemoryDatabase.ts"

/** Ids for the fixtures (UUIDv7, as the application makes them). */
const newId = makeIdGenerator()

const ORG = newId()

/** Runs `f` with a fresh in-memory database and the messages and sessions services over it. */
const withMessages = <A, E>(
  f: (messages: Messages["Service"], sessions: Sessions["Service"], db: MemoryDatabase) => Effect.Effect<A, E>
) => {
  const db = makeMemoryDatabase()
  return Effect.gen(function* () {
    return yield* f(yield* Messages, yield* Sessions, db)
  }).pipe(Effect.provide(Layer.mergeAll(Messages.layerTest(db), Sessions.layerTest(db))))
}

/** An open session of `organizationId` (ORG by default); answers its id. */
const openSession = (sessions: Sessions["Service"], organizationId = ORG) =>
  Effect.map(sessions.create(organizationId, { contact_id: "c", contact_name: "Ada" }), (session) => session.id)

const text = (value: string) => ({ type: "text", text: value })

/** POST a user text message; answers the message's id. */
const post = (messages: Messages["Service"], sessionId: string, value = "hi", organizationId = ORG) =>
  Effect.map(
    messages.create(organizationId, sessionId, { role: "user", content: text(value) }),
    (body) => JSON.parse(body).id as string
  )

describe("nextDeliveryStatus (D13)", () => {
  it("D13: never backwards along pending < sent < delivered < read; failed and rejected are final", () => {
    const statuses: ReadonlyArray<DeliveryStatus> = ["pending", "sent", "delivered", "read", "failed", "rejected"]
    // Rows: the current status; columns: the requested one, in the order of `statuses`.
    const expected: Record<DeliveryStatus, ReadonlyArray<DeliveryStatus>> = {
      pending: ["pending", "sent", "delivered", "read", "failed", "rejected"],
      sent: ["sent", "sent", "delivered", "read", "failed", "rejected"],
      delivered: ["delivered", "delivered", "delivered", "read", "failed", "rejected"],
      read: ["read", "read", "read", "read", "failed", "rejected"],
      failed: ["failed", "failed", "failed", "failed", "failed", "failed"],
      rejected: ["rejected", "rejected", "rejected", "rejected", "rejected", "rejected"]
    }
    for (const current of statuses) {
      assert.deepStrictEqual(
        statuses.map((requested) => nextDeliveryStatus(current, requested)),
        expected[current],
        current
      )
    }
  })
})

describe("Messages over the in-memory database", () => {
  it.effect(
    "D13, W1: a PATCH that would go backwards keeps the later status and still updates the other fields; delivered_at is set on delivered if not given; message.updated only when a delivery field changed",
    () =>
      withMessages((messages, sessions, db) =>
        Effect.gen(function* () {
          const sessionId = yield* openSession(sessions)
          const id = yield* post(messages, sessionId)
          yield* TestClock.adjust("5 seconds")
          const delivered = yield* messages.update(ORG, sessionId, id, { delivery_status: "delivered" })
          assert.deepStrictEqual(
            [delivered.delivery_status, delivered.delivered_at],
            ["delivered", "1970-01-01T00:00:05.000000Z"]
          )
          yield* TestClock.adjust("5 seconds")
          const backwards = yield* messages.update(ORG, sessionId, id, {
            delivery_status: "sent",
            provider_message_id: "wamid.1"
          })
          assert.deepStrictEqual(
            [backwards.delivery_status, backwards.provider_message_id, backwards.updated_at],
            ["delivered", "wamid.1", "1970-01-01T00:00:10.000000Z"]
          )
          const unchanged = yield* messages.update(ORG, sessionId, id, { delivery_status: "pending" })
          assert.strictEqual(unchanged.delivery_status, "delivered")
          const read = yield* messages.update(ORG, sessionId, id, { delivery_status: "read" })
          assert.deepStrictEqual([read.delivery_status, read.delivered_at], ["read", "1970-01-01T00:00:05.000000Z"])
          const failed = yield* messages.update(ORG, sessionId, id, {
            delivery_status: "failed",
            delivery_error_code: 131_026,
            delivery_error_message: "Receiver is incapable of receiving this message"
          })
          assert.strictEqual(failed.delivery_status, "failed")
          const final = yield* messages.update(ORG, sessionId, id, { delivery_status: "read" })
          assert.deepStrictEqual([final.delivery_status, final.delivery_error_code], ["failed", 131_026])
          // W1: created, then one message.updated per PATCH that changed a delivery field.
          assert.deepStrictEqual(eventTypes(db).slice(2), [
            "message.created",
            "message.updated",
            "message.updated",
            "message.updated",
            "message.updated"
          ])
          assert.deepStrictEqual(db.events.at(-1)!.data.object, failed)

          // read straight from pending sets delivered_at too; a given delivered_at is kept.
          const skipped = yield* post(messages, sessionId)
          const straight = yield* messages.update(ORG, sessionId, skipped, { delivery_status: "read" })
          assert.strictEqual(straight.delivered_at, "1970-01-01T00:00:10.000000Z")
          const given = yield* post(messages, sessionId)
          const withTime = yield* messages.update(ORG, sessionId, given, {
            delivery_status: "delivered",
            delivered_at: "1970-01-01T00:00:01.000000Z"
          })
          assert.strictEqual(withTime.delivered_at, "1970-01-01T00:00:01.000000Z")
        })
      )
  )

  it.effect(
    "D5, D12: POST on a closed session is SessionNotOpen and an internal or unknown content type InvalidContentType, writing nothing; delivery PATCHes still work on a closed session",
    () =>
      withMessages((messages, sessions, db) =>
        Effect.gen(function* () {
          const sessionId = yield* openSession(sessions)
          const id = yield* post(messages, sessionId)
          let before = snapshotTables(db)
          for (const type of ["function_call", "function_result", "thought", "sticker"]) {
            const refused = yield* Effect.flip(
              messages.create(ORG, sessionId, { role: "assistant", content: { type, text: "x" } })
            )
            assert.strictEqual(refused._tag, "InvalidContentType", type)
          }
          assert.deepStrictEqual(snapshotTables(db), before)
          yield* sessions.finish(ORG, sessionId, undefined)
          before = snapshotTables(db)
          const closed = yield* Effect.flip(post(messages, sessionId))
          assert.deepStrictEqual([closed._tag, closed.detail], ["SessionNotOpen", "Session is not open"])
          assert.deepStrictEqual(snapshotTables(db), before)
          const receipt = yield* messages.update(ORG, sessionId, id, { delivery_status: "sent" })
          assert.strictEqual(receipt.delivery_status, "sent")
          assert.strictEqual(eventTypes(db).at(-1), "message.updated")
        })
      )
  )

  it.effect(
    "D1: the session is checked first (SessionNotFound), then the message: another organization's is Forbidden, another session's or an unknown one MessageNotFound",
    () =>
      withMessages((messages, sessions) =>
        Effect.gen(function* () {
          const other = newId()
          const sessionId = yield* openSession(sessions)
          const sibling = yield* openSession(sessions)
          const foreignSession = yield* openSession(sessions, other)
          const id = yield* post(messages, sessionId)
          const siblings = yield* post(messages, sibling)
          const foreign = yield* post(messages, foreignSession, "theirs", other)
          assert.strictEqual((yield* messages.get(ORG, sessionId, id)).id, id)
          const tags = [
            yield* Effect.flip(messages.get(ORG, newId(), id)),
            yield* Effect.flip(messages.get(ORG, foreignSession, foreign)),
            yield* Effect.flip(messages.get(ORG, sessionId, foreign)),
            yield* Effect.flip(messages.get(ORG, sessionId, siblings)),
            yield* Effect.flip(messages.get(ORG, sessionId, newId())),
            yield* Effect.flip(messages.get(ORG, sessionId, "not-a-uuid")),
            yield* Effect.flip(messages.update(ORG, sessionId, foreign, { delivery_status: "read" })),
            yield* Effect.flip(post(messages, foreignSession))
          ].map((error) => error._tag)
          assert.deepStrictEqual(tags, [
            "SessionNotFound",
            "SessionNotFound",
            "Forbidden",
            "MessageNotFound",
            "MessageNotFound",
            "MessageNotFound",
            "Forbidden",
            "SessionNotFound"
          ])
        })
      )
  )

  it.effect(
    "D3: search needs the body's session_id to be the path's (422 at body.session_id, before the session is looked up); answers oldest first; limit at most 1000",
    () =>
      withMessages((messages, sessions) =>
        Effect.gen(function* () {
          const sessionId = yield* openSession(sessions)
          const first = yield* post(messages, sessionId, "first")
          yield* TestClock.adjust("1 second")
          const second = yield* post(messages, sessionId, "second")
          const mismatch = yield* Effect.flip(
            messages.search(ORG, sessionId, { session_id: newId(), offset: 0, limit: 100 })
          )
          assert.strictEqual(mismatch._tag, "ValidationFailed")
          assert.deepStrictEqual(
            mismatch._tag === "ValidationFailed" ? mismatch.detail.map((issue) => issue.loc) : [],
            [["body", "session_id"]]
          )
          const unknown = newId()
          assert.strictEqual(
            (yield* Effect.flip(messages.search(ORG, unknown, { session_id: newId(), offset: 0, limit: 100 })))._tag,
            "ValidationFailed"
          )
          assert.strictEqual(
            (yield* Effect.flip(messages.search(ORG, unknown, { session_id: unknown, offset: 0, limit: 100 })))._tag,
            "SessionNotFound"
          )
          const found = yield* messages.search(ORG, sessionId, { session_id: sessionId, offset: 0, limit: 100 })
          assert.deepStrictEqual(
            found.map((message) => message.id),
            [first, second]
          )
          const decode = Schema.decodeUnknownExit(SearchMessagesPayload)
          assert.isTrue(Exit.isSuccess(decode({ session_id: sessionId, limit: 1000 })))
          assert.isTrue(Exit.isFailure(decode({ session_id: sessionId, limit: 1001 })))
        })
      )
  )
})
