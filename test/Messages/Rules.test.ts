/**
 * The rules of messages (DECISIONS.md D1, D3, D5, D12, D13, W1; issue 13 item
 * 8, issue 37 item 1): `nextDeliveryStatus` directly, and the `Messages`
 * service with `it.effect` over the production services on the file's
 * database (test/support/RulesDatabase.ts), sessions made with `Sessions` on
 * the same tables. A `delivered_at` the service sets comes from the
 * application's clock (`TestClock`); `created_at` and `updated_at` are the
 * database's (`statement_timestamp()`). Each test has an organization of its
 * own. The HTTP suite (Messages.test.ts) checks the same through the API.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Exit, Schema } from "effect"
import { SqlClient } from "effect/sql"
import { TestClock } from "effect/testing"
import type { DeliveryStatus } from "../../src/Domain/Message.ts"
import { SearchMessagesPayload } from "../../src/Messages/Api.ts"
import { Messages, nextDeliveryStatus } from "../../src/Messages/Messages.ts"
import { Sessions } from "../../src/Sessions/Sessions.ts"
import { makeIdGenerator } from "../../src/Shared/Ids.ts"
import { elapse, eventsOf, eventTypes, onDatabase, organization, snapshotTables } from "../support/RulesDatabase.ts"

/** Ids for the fixtures (UUIDv7, as the application makes them). */
const newId = makeIdGenerator()

/** Runs `f` with the messages and sessions services and a new organization. */
const withMessages = <A, E, R>(
  f: (messages: Messages["Service"], sessions: Sessions["Service"], organizationId: string) => Effect.Effect<A, E, R>
) =>
  Effect.gen(function* () {
    return yield* f(yield* Messages, yield* Sessions, yield* organization())
  })

/** An open session of `organizationId`; returns its id. */
const openSession = (sessions: Sessions["Service"], organizationId: string) =>
  Effect.map(sessions.create(organizationId, { contact_id: "c", contact_name: "Ada" }), (session) => session.id)

const text = (value: string) => ({ type: "text", text: value })

/** POST a user text message; returns the message's id. */
const post = (messages: Messages["Service"], organizationId: string, sessionId: string, value = "hi") =>
  Effect.map(
    messages.create(organizationId, sessionId, { role: "user", content: text(value) }),
    (body) => JSON.parse(body).id as string
  )

/** The database's clock now, in milliseconds (`SqlClient` required). */
const databaseNow = Effect.flatMap(Effect.service(SqlClient.SqlClient), (sql) =>
  Effect.orDie(Effect.map(sql<{ now: Date }>`SELECT statement_timestamp() AS now`, (rows) => rows[0]!.now.getTime()))
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

onDatabase()("Messages on PostgreSQL", (it) => {
  it.effect(
    "D13, W1: a PATCH that would go backwards keeps the later status and still updates the other fields; delivered_at is set on delivered if not given; message.updated only when a delivery field changed",
    () =>
      withMessages((messages, sessions, ORG) =>
        Effect.gen(function* () {
          const sessionId = yield* openSession(sessions, ORG)
          const id = yield* post(messages, ORG, sessionId)
          yield* TestClock.adjust("5 seconds")
          const delivered = yield* messages.update(ORG, sessionId, id, { delivery_status: "delivered" })
          assert.deepStrictEqual(
            [delivered.delivery_status, delivered.delivered_at],
            ["delivered", "1970-01-01T00:00:05.000000Z"]
          )
          yield* TestClock.adjust("5 seconds")
          // updated_at is the database's time of the PATCH (statement_timestamp()).
          const patchStarted = yield* databaseNow
          const backwards = yield* messages.update(ORG, sessionId, id, {
            delivery_status: "sent",
            provider_message_id: "wamid.1"
          })
          const patchEnded = yield* databaseNow
          assert.deepStrictEqual([backwards.delivery_status, backwards.provider_message_id], ["delivered", "wamid.1"])
          const updatedAt = Date.parse(backwards.updated_at ?? "")
          assert.isTrue(patchStarted <= updatedAt && updatedAt <= patchEnded, backwards.updated_at ?? "null")
          assert.isTrue((backwards.updated_at ?? "") > (delivered.updated_at ?? ""))
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
          assert.deepStrictEqual((yield* eventTypes(ORG)).slice(2), [
            "message.created",
            "message.updated",
            "message.updated",
            "message.updated",
            "message.updated"
          ])
          assert.deepStrictEqual((yield* eventsOf(ORG)).at(-1)!.data.object, failed)

          // read straight from pending sets delivered_at too; a given delivered_at is kept.
          const skipped = yield* post(messages, ORG, sessionId)
          const straight = yield* messages.update(ORG, sessionId, skipped, { delivery_status: "read" })
          assert.strictEqual(straight.delivered_at, "1970-01-01T00:00:10.000000Z")
          const given = yield* post(messages, ORG, sessionId)
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
      withMessages((messages, sessions, ORG) =>
        Effect.gen(function* () {
          const sessionId = yield* openSession(sessions, ORG)
          const id = yield* post(messages, ORG, sessionId)
          let before = yield* snapshotTables
          for (const type of ["function_call", "function_result", "thought", "sticker"]) {
            const refused = yield* Effect.flip(
              messages.create(ORG, sessionId, { role: "assistant", content: { type, text: "x" } })
            )
            assert.strictEqual(refused._tag, "InvalidContentType", type)
          }
          assert.deepStrictEqual(yield* snapshotTables, before)
          yield* sessions.finish(ORG, sessionId, undefined)
          before = yield* snapshotTables
          const closed = yield* Effect.flip(post(messages, ORG, sessionId))
          assert.deepStrictEqual([closed._tag, closed.detail], ["SessionNotOpen", "Session is not open"])
          assert.deepStrictEqual(yield* snapshotTables, before)
          const receipt = yield* messages.update(ORG, sessionId, id, { delivery_status: "sent" })
          assert.strictEqual(receipt.delivery_status, "sent")
          assert.strictEqual((yield* eventTypes(ORG)).at(-1), "message.updated")
        })
      )
  )

  it.effect(
    "D1: the session is checked first (SessionNotFound), then the message: another organization's is Forbidden, another session's or an unknown one MessageNotFound",
    () =>
      withMessages((messages, sessions, ORG) =>
        Effect.gen(function* () {
          const other = yield* organization()
          const sessionId = yield* openSession(sessions, ORG)
          const sibling = yield* openSession(sessions, ORG)
          const foreignSession = yield* openSession(sessions, other)
          const id = yield* post(messages, ORG, sessionId)
          const siblings = yield* post(messages, ORG, sibling)
          const foreign = yield* post(messages, other, foreignSession, "theirs")
          assert.strictEqual((yield* messages.get(ORG, sessionId, id)).id, id)
          const tags = [
            yield* Effect.flip(messages.get(ORG, newId(), id)),
            yield* Effect.flip(messages.get(ORG, foreignSession, foreign)),
            yield* Effect.flip(messages.get(ORG, sessionId, foreign)),
            yield* Effect.flip(messages.get(ORG, sessionId, siblings)),
            yield* Effect.flip(messages.get(ORG, sessionId, newId())),
            yield* Effect.flip(messages.get(ORG, sessionId, "not-a-uuid")),
            yield* Effect.flip(messages.update(ORG, sessionId, foreign, { delivery_status: "read" })),
            yield* Effect.flip(post(messages, ORG, foreignSession))
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
    "D3: search needs the body's session_id to be the path's (422 at body.session_id, before the session is looked up); returns oldest first; limit at most 1000",
    () =>
      withMessages((messages, sessions, ORG) =>
        Effect.gen(function* () {
          const sessionId = yield* openSession(sessions, ORG)
          const first = yield* post(messages, ORG, sessionId, "first")
          // The first message a second older on the database's clock (created_at is statement_timestamp()).
          yield* elapse(1, ORG)
          const second = yield* post(messages, ORG, sessionId, "second")
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
