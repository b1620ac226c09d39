/**
 * The rules of sessions (DECISIONS.md D1, D4-D7, D15, D16, R1, W1, W2; issue
 * 13 item 8), fast and with no database: `threadFor` directly, and the
 * `Sessions` service with `it.effect` over the in-memory database
 * (`Sessions.layerTest(db)`, with `Replies.layerTest(db)` and
 * `Messages.layerTest(db)` on the same tables), time on `TestClock`. Each test
 * has a database of its own. The integration suite (Sessions.test.ts,
 * Replies/Schedules.test.ts) checks the same over PostgreSQL.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Layer } from "effect"
import { TestClock } from "effect/testing"
import { type MemoryDatabase, makeMemoryDatabase, snapshotTables } from "../../src/Database/Memory.ts"
import { isUuid } from "../../src/Domain/Common.ts"
import { Messages } from "../../src/Messages/Messages.ts"
import { Replies } from "../../src/Replies/Replies.ts"
import { type CloseReason, Sessions, threadFor } from "../../src/Sessions/Sessions.ts"
import { makeIdGenerator } from "../../src/Shared/Ids.ts"
import { addAgent, eventLog, objectOf, setSettings } from "../support/MemoryDatabase.ts"

/** Ids for the fixtures (UUIDv7, as the application makes them). */
const newId = makeIdGenerator()

const ORG = newId()

interface Services {
  readonly sessions: Sessions["Service"]
  readonly replies: Replies["Service"]
  readonly messages: Messages["Service"]
}

/** Runs `f` with a fresh in-memory database and the sessions, replies and messages services over it. */
const withSessions = <A, E>(f: (services: Services, db: MemoryDatabase) => Effect.Effect<A, E>) => {
  const db = makeMemoryDatabase()
  return Effect.gen(function* () {
    return yield* f({ sessions: yield* Sessions, replies: yield* Replies, messages: yield* Messages }, db)
  }).pipe(Effect.provide(Layer.mergeAll(Sessions.layerTest(db), Replies.layerTest(db), Messages.layerTest(db))))
}

/** POST /sessions for contact `c` of ORG. */
const create = (
  sessions: Sessions["Service"],
  fields: { agent_id?: string; metadata?: Record<string, unknown> } = {}
) => sessions.create(ORG, { contact_id: "c", contact_name: "Ada", ...fields })

describe("threadFor (D7)", () => {
  it("D7: a new thread only when a session without one gets an AI agent; a thread once set is kept", () => {
    const ai = { id: newId(), type: "ai" } as const
    const human = { id: newId(), type: "human" } as const
    assert.isNull(threadFor(null, null, newId))
    assert.isNull(threadFor(human, null, newId))
    const made = threadFor(ai, null, newId)
    assert.isTrue(made !== null && isUuid(made))
    assert.notStrictEqual(threadFor(ai, null, newId), made)
    for (const agent of [ai, human, null]) assert.strictEqual(threadFor(agent, "thread-1", newId), "thread-1")
  })
})

describe("Sessions over the in-memory database", () => {
  it.effect(
    "D7: a thread is made when a session first gets an AI agent (create, transfer or PATCH) and kept after",
    () =>
      withSessions(({ sessions }, db) =>
        Effect.gen(function* () {
          const ai = addAgent(db, ORG, "ai").id
          const human = addAgent(db, ORG, "human").id
          const withAi = yield* create(sessions, { agent_id: ai })
          assert.isTrue(withAi.thread_id !== null && isUuid(withAi.thread_id))

          const session = yield* create(sessions, { agent_id: human })
          assert.isNull(session.thread_id)
          assert.isNull((yield* sessions.transfer(ORG, session.id, null)).thread_id)
          const thread = (yield* sessions.transfer(ORG, session.id, ai)).thread_id
          assert.isTrue(thread !== null && isUuid(thread) && thread !== withAi.thread_id)
          const kept = [
            yield* sessions.transfer(ORG, session.id, human),
            yield* sessions.transfer(ORG, session.id, null),
            yield* sessions.transfer(ORG, session.id, ai),
            yield* sessions.update(ORG, session.id, { agent_id: human })
          ]
          assert.deepStrictEqual(
            kept.map((changed) => changed.thread_id),
            [thread, thread, thread, thread]
          )

          const patched = yield* create(sessions)
          assert.isNull(patched.thread_id)
          assert.isString((yield* sessions.update(ORG, patched.id, { agent_id: ai })).thread_id)
        })
      )
  )

  it.effect(
    "W1, D6: session.created carries the agent; every transfer emits session.transferred with the changed session; an agent of another organization is refused",
    () =>
      withSessions(({ sessions }, db) =>
        Effect.gen(function* () {
          const ai = addAgent(db, ORG, "ai").id
          const foreign = addAgent(db, newId(), "ai").id
          const session = yield* create(sessions, { agent_id: ai })
          assert.deepStrictEqual(eventLog(db), [
            ["conversation.created", "-"],
            ["session.created", "-"]
          ])
          assert.deepStrictEqual(objectOf(db.events[1]), session)
          const same = yield* sessions.transfer(ORG, session.id, ai)
          const none = yield* sessions.transfer(ORG, session.id, null)
          assert.deepStrictEqual(eventLog(db).slice(2), [
            ["session.transferred", "-"],
            ["session.transferred", "-"]
          ])
          assert.deepStrictEqual(objectOf(db.events[2]), same)
          assert.deepStrictEqual(objectOf(db.events[3]), none)
          assert.isNull(none.agent)
          const before = snapshotTables(db)
          for (const agentId of [foreign, newId(), "not-an-id"]) {
            assert.strictEqual((yield* Effect.flip(sessions.transfer(ORG, session.id, agentId)))._tag, "AgentNotFound")
            const refused = yield* Effect.flip(create(sessions, { agent_id: agentId }))
            assert.strictEqual(refused._tag, "AgentNotFound")
          }
          assert.deepStrictEqual(snapshotTables(db), before)
        })
      )
  )

  it.effect(
    "D4, D6, W2: PATCH applies metadata, agent and status in that order in one transaction; an unknown agent leaves the metadata as it was",
    () =>
      withSessions(({ sessions }, db) =>
        Effect.gen(function* () {
          const ai = addAgent(db, ORG, "ai").id
          const session = yield* create(sessions, { metadata: { a: 1 } })
          const closed = yield* sessions.update(ORG, session.id, {
            status: "closed",
            agent_id: ai,
            metadata: { b: 2 }
          })
          assert.deepStrictEqual([closed.status, closed.agent?.id, closed.metadata], ["closed", ai, { b: 2 }])
          assert.deepStrictEqual(eventLog(db, session.id).slice(1), [
            ["session.transferred", "-"],
            ["session.finished", null],
            ["session.closed", null]
          ])
          // The transfer's object already has the new metadata; the close's has the agent too.
          assert.deepStrictEqual(objectOf(db.events.at(-3)).metadata, { b: 2 })
          assert.strictEqual(objectOf(db.events.at(-3)).status, "open")
          assert.deepStrictEqual(objectOf(db.events.at(-1)), { ...closed, action: null })

          const other = yield* create(sessions, { metadata: { a: 1 } })
          const before = snapshotTables(db)
          const refused = yield* Effect.flip(
            sessions.update(ORG, other.id, { metadata: { b: 2 }, agent_id: newId(), status: "closed" })
          )
          assert.strictEqual(refused._tag, "AgentNotFound")
          assert.deepStrictEqual(snapshotTables(db), before)
          assert.deepStrictEqual(yield* sessions.get(ORG, other.id), other)
        })
      )
  )

  it.effect(
    "D4, D5: a closed session refuses PATCH to open with its own text, every other change with Session is not open; GET still answers",
    () =>
      withSessions(({ sessions }, db) =>
        Effect.gen(function* () {
          const session = yield* create(sessions)
          const finished = yield* sessions.finish(ORG, session.id, "survey-9")
          assert.deepStrictEqual([finished.status, finished.ending_survey_submission_id], ["closed", "survey-9"])
          const before = snapshotTables(db)
          const reopen = yield* Effect.flip(sessions.update(ORG, session.id, { status: "open" }))
          assert.deepStrictEqual(
            [reopen._tag, reopen.detail],
            ["SessionNotOpen", "Session is closed and cannot be reopened"]
          )
          const refusals = [
            yield* Effect.flip(sessions.update(ORG, session.id, { metadata: {} })),
            yield* Effect.flip(sessions.update(ORG, session.id, { status: "closed" })),
            yield* Effect.flip(sessions.transfer(ORG, session.id, null)),
            yield* Effect.flip(sessions.finish(ORG, session.id, undefined))
          ]
          assert.deepStrictEqual(
            refusals.map((error) => error.detail),
            Array(4).fill("Session is not open")
          )
          assert.deepStrictEqual(snapshotTables(db), before)
          assert.deepStrictEqual(yield* sessions.get(ORG, session.id), finished)
        })
      )
  )

  it.effect(
    "W1: finish and system closes emit session.finished then session.closed with action null, expiry both with expired, ingest only session.closed with ingest",
    () =>
      withSessions(({ sessions }, db) =>
        Effect.gen(function* () {
          const reasons: ReadonlyArray<readonly [CloseReason, ReadonlyArray<readonly [string, unknown]>]> = [
            [
              { kind: "finish" },
              [
                ["session.finished", null],
                ["session.closed", null]
              ]
            ],
            [
              { kind: "system" },
              [
                ["session.finished", null],
                ["session.closed", null]
              ]
            ],
            [
              { kind: "expiry" },
              [
                ["session.finished", "expired"],
                ["session.closed", "expired"]
              ]
            ],
            [{ kind: "ingest" }, [["session.closed", "ingest"]]]
          ]
          for (const [reason, expected] of reasons) {
            const session = yield* create(sessions)
            assert.isTrue(yield* sessions.close(ORG, session.id, reason))
            const closed = yield* sessions.get(ORG, session.id)
            assert.strictEqual(closed.status, "closed")
            assert.deepStrictEqual(eventLog(db, session.id).slice(1), expected, reason.kind)
            // Each object is the closed session with its action (W1, W3).
            for (const event of db.events.slice(-expected.length)) {
              assert.deepStrictEqual(objectOf(event), { ...closed, action: expected[0]![1] })
            }
            // Closing again, or a session that is not the organization's, closes nothing and writes nothing.
            const count = db.events.length
            assert.isFalse(yield* sessions.close(ORG, session.id, reason))
            assert.isFalse(yield* sessions.close(newId(), session.id, reason))
            assert.isFalse(yield* sessions.close(ORG, newId(), reason))
            assert.strictEqual(db.events.length, count)
          }
        })
      )
  )

  it.effect(
    "D15, R1: every close, whatever its path, cancels the session's pending schedules (Session closed) and drops its pending reply job; other sessions keep theirs",
    () =>
      withSessions(({ sessions, replies, messages }, db) =>
        Effect.gen(function* () {
          const ai = addAgent(db, ORG, "ai").id
          setSettings(db, ORG, { session_idle_timeout_seconds: 60 })
          const closes: ReadonlyArray<
            readonly [string, (closing: string, staying: string) => Effect.Effect<unknown, unknown>]
          > = [
            ["finish", (id) => sessions.finish(ORG, id, undefined)],
            ["PATCH closed", (id) => sessions.update(ORG, id, { status: "closed" })],
            ["system", (id) => sessions.close(ORG, id, { kind: "system" })],
            ["ingest", (id) => sessions.close(ORG, id, { kind: "ingest" })],
            [
              "expiry",
              (_, staying) =>
                Effect.gen(function* () {
                  // Only the closing session is idle at the sweep: the other one just got a message.
                  yield* TestClock.adjust("61 seconds")
                  yield* messages.create(ORG, staying, { role: "user", content: { type: "text", text: "hi" } })
                  assert.strictEqual(yield* sessions.expireIdle(100), 1)
                })
            ]
          ]
          for (const [path, close] of closes) {
            const closing = yield* create(sessions, { agent_id: ai })
            const staying = yield* create(sessions, { agent_id: ai })
            for (const session of [closing, staying]) {
              yield* replies.reply(ORG, session.id, {})
              yield* replies.schedule(ORG, session.id, new Date(3_600_000).toISOString(), {
                type: "node",
                node_id: "later"
              })
            }
            // A schedule that already ran stays as it is.
            const ran = yield* replies.schedule(ORG, closing.id, new Date(0).toISOString(), {
              type: "node",
              node_id: "now"
            })
            db.schedules.find((schedule) => schedule.id === JSON.parse(ran).id)!.status = "done"
            yield* close(closing.id, staying.id)
            assert.strictEqual((yield* sessions.get(ORG, closing.id)).status, "closed", path)
            assert.deepStrictEqual(
              db.jobs.filter((job) => job.session_id === closing.id),
              [],
              path
            )
            assert.deepStrictEqual(
              db.schedules
                .filter((schedule) => schedule.session_id === closing.id)
                .map((schedule) => [schedule.status, schedule.error]),
              [
                ["canceled", "Session closed"],
                ["done", null]
              ],
              path
            )
            assert.strictEqual(db.jobs.filter((job) => job.session_id === staying.id).length, 1, path)
            assert.deepStrictEqual(
              db.schedules.filter((schedule) => schedule.session_id === staying.id).map((schedule) => schedule.status),
              ["pending"],
              path
            )
            yield* sessions.finish(ORG, staying.id, undefined)
          }
        })
      )
  )

  it.effect(
    "D16: expiry closes the open sessions idle past their organization's timeout, with action expired; a recent message keeps a session open; no timeout, no expiry",
    () =>
      withSessions(({ sessions, messages }, db) =>
        Effect.gen(function* () {
          const other = newId()
          setSettings(db, ORG, { session_idle_timeout_seconds: 60 })
          const quiet = yield* create(sessions)
          const chatty = yield* create(sessions)
          const never = yield* sessions.create(other, { contact_id: "c", contact_name: "Ada" })
          yield* TestClock.adjust("30 seconds")
          yield* messages.create(ORG, chatty.id, { role: "user", content: { type: "text", text: "still here" } })
          // t = 60 s: not idle yet (idle means older than the timeout).
          yield* TestClock.adjust("30 seconds")
          assert.strictEqual(yield* sessions.expireIdle(100), 0)
          // t = 61 s: the quiet session is idle; the chatty one's message is 31 s old.
          yield* TestClock.adjust("1 second")
          assert.strictEqual(yield* sessions.expireIdle(100), 1)
          assert.deepStrictEqual(eventLog(db, quiet.id).slice(1), [
            ["session.finished", "expired"],
            ["session.closed", "expired"]
          ])
          assert.strictEqual((yield* sessions.get(ORG, chatty.id)).status, "open")
          // t = 91 s: the chatty one is idle too; the other organization has no timeout.
          yield* TestClock.adjust("30 seconds")
          assert.strictEqual(yield* sessions.expireIdle(100), 1)
          assert.strictEqual((yield* sessions.get(ORG, chatty.id)).status, "closed")
          yield* TestClock.adjust("1 day")
          assert.strictEqual(yield* sessions.expireIdle(100), 0)
          assert.strictEqual((yield* sessions.get(other, never.id)).status, "open")
          // At most `limit` per sweep.
          yield* create(sessions)
          yield* create(sessions)
          yield* TestClock.adjust("61 seconds")
          assert.strictEqual(yield* sessions.expireIdle(1), 1)
          assert.strictEqual(yield* sessions.expireIdle(1), 1)
          assert.strictEqual(yield* sessions.expireIdle(1), 0)
        })
      )
  )

  it.effect(
    "D1: an unknown, malformed or foreign session is SessionNotFound for get, PATCH, transfer and finish, and nothing is written",
    () =>
      withSessions(({ sessions }, db) =>
        Effect.gen(function* () {
          const foreign = yield* sessions.create(newId(), { contact_id: "c", contact_name: "Ada" })
          const before = snapshotTables(db)
          for (const id of [newId(), "not-a-uuid", foreign.id]) {
            const failures = [
              yield* Effect.flip(sessions.get(ORG, id)),
              yield* Effect.flip(sessions.update(ORG, id, { metadata: { x: 1 } })),
              yield* Effect.flip(sessions.transfer(ORG, id, null)),
              yield* Effect.flip(sessions.finish(ORG, id, undefined))
            ]
            assert.deepStrictEqual(
              failures.map((error) => error._tag),
              Array(4).fill("SessionNotFound")
            )
          }
          assert.deepStrictEqual(snapshotTables(db), before)
          // Ids are UUIDs: another case names the same session, as in PostgreSQL.
          assert.strictEqual((yield* sessions.get(foreign.organization_id, foreign.id.toUpperCase())).id, foreign.id)
        })
      )
  )
})
