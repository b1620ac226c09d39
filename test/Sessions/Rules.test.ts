/**
 * The rules of sessions (DECISIONS.md D1, D4-D7, D15, D16, R1, W1, W2; issue
 * 13 item 8, issue 37 item 1): `threadFor` directly, and the `Sessions`
 * service with `it.effect` over the production services on the file's
 * database (test/support/RulesDatabase.ts). Session expiry (D16) compares with
 * the database's clock, which `elapse` moves on; reply jobs and schedules run
 * on `TestClock`. Each test has an organization of its own. The HTTP suite (Sessions.test.ts,
 * Replies/Schedules.test.ts) checks the same through the API.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import type { SqlClient } from "effect/sql"
import { isUuid } from "../../src/Domain/Common.ts"
import { Messages } from "../../src/Messages/Messages.ts"
import { Replies } from "../../src/Replies/Replies.ts"
import { type CloseReason, Sessions, threadFor } from "../../src/Sessions/Sessions.ts"
import { makeIdGenerator } from "../../src/Shared/Ids.ts"
import {
  addAgent,
  elapse,
  eventLog,
  eventsOf,
  objectOf,
  onDatabase,
  organization,
  rowsOf,
  setColumn,
  setSettings,
  snapshotTables
} from "../support/RulesDatabase.ts"

/** Ids for the fixtures (UUIDv7, as the application makes them). */
const newId = makeIdGenerator()

interface Services {
  readonly sessions: Sessions["Service"]
  readonly replies: Replies["Service"]
  readonly messages: Messages["Service"]
  /** The test's own organization. */
  readonly ORG: string
}

/** Runs `f` with the sessions, replies and messages services and a new organization. */
const withSessions = <A, E, R>(f: (services: Services) => Effect.Effect<A, E, R>) =>
  Effect.gen(function* () {
    const services = { sessions: yield* Sessions, replies: yield* Replies, messages: yield* Messages }
    return yield* f({ ...services, ORG: yield* organization() })
  })

/** POST /sessions for contact `c` of `organizationId`. */
const create = (
  sessions: Sessions["Service"],
  organizationId: string,
  fields: { agent_id?: string; metadata?: Record<string, unknown> } = {}
) => sessions.create(organizationId, { contact_id: "c", contact_name: "Ada", ...fields })

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

onDatabase()("Sessions on PostgreSQL", (it) => {
  it.effect(
    "D7: a thread is made when a session first gets an AI agent (create, transfer or PATCH) and kept after",
    () =>
      withSessions(({ sessions, ORG }) =>
        Effect.gen(function* () {
          const ai = (yield* addAgent(ORG, "ai")).id
          const human = (yield* addAgent(ORG, "human")).id
          const withAi = yield* create(sessions, ORG, { agent_id: ai })
          assert.isTrue(withAi.thread_id !== null && isUuid(withAi.thread_id))

          const session = yield* create(sessions, ORG, { agent_id: human })
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

          const patched = yield* create(sessions, ORG)
          assert.isNull(patched.thread_id)
          assert.isString((yield* sessions.update(ORG, patched.id, { agent_id: ai })).thread_id)
        })
      )
  )

  it.effect(
    "W1, D6: session.created carries the agent; every transfer emits session.transferred with the changed session; an agent of another organization is refused",
    () =>
      withSessions(({ sessions, ORG }) =>
        Effect.gen(function* () {
          const ai = (yield* addAgent(ORG, "ai")).id
          const foreign = (yield* addAgent(yield* organization(), "ai")).id
          const session = yield* create(sessions, ORG, { agent_id: ai })
          assert.deepStrictEqual(yield* eventLog(ORG), [
            ["conversation.created", "-"],
            ["session.created", "-"]
          ])
          const events = yield* eventsOf(ORG)
          assert.deepStrictEqual(objectOf(events[1]), session)
          const same = yield* sessions.transfer(ORG, session.id, ai)
          const none = yield* sessions.transfer(ORG, session.id, null)
          assert.deepStrictEqual((yield* eventLog(ORG)).slice(2), [
            ["session.transferred", "-"],
            ["session.transferred", "-"]
          ])
          const all = yield* eventsOf(ORG)
          assert.deepStrictEqual(objectOf(all[2]), same)
          assert.deepStrictEqual(objectOf(all[3]), none)
          assert.isNull(none.agent)
          const before = yield* snapshotTables
          for (const agentId of [foreign, newId(), "not-an-id"]) {
            assert.strictEqual((yield* Effect.flip(sessions.transfer(ORG, session.id, agentId)))._tag, "AgentNotFound")
            const refused = yield* Effect.flip(create(sessions, ORG, { agent_id: agentId }))
            assert.strictEqual(refused._tag, "AgentNotFound")
          }
          assert.deepStrictEqual(yield* snapshotTables, before)
        })
      )
  )

  it.effect(
    "D4, D6, W2: PATCH applies metadata, agent and status in that order in one transaction; an unknown agent leaves the metadata as it was",
    () =>
      withSessions(({ sessions, ORG }) =>
        Effect.gen(function* () {
          const ai = (yield* addAgent(ORG, "ai")).id
          const session = yield* create(sessions, ORG, { metadata: { a: 1 } })
          const closed = yield* sessions.update(ORG, session.id, {
            status: "closed",
            agent_id: ai,
            metadata: { b: 2 }
          })
          assert.deepStrictEqual([closed.status, closed.agent?.id, closed.metadata], ["closed", ai, { b: 2 }])
          assert.deepStrictEqual((yield* eventLog(ORG, session.id)).slice(1), [
            ["session.transferred", "-"],
            ["session.finished", null],
            ["session.closed", null]
          ])
          // The transfer's object already has the new metadata; the close's has the agent too.
          const events = yield* eventsOf(ORG)
          assert.deepStrictEqual(objectOf(events.at(-3)).metadata, { b: 2 })
          assert.strictEqual(objectOf(events.at(-3)).status, "open")
          assert.deepStrictEqual(objectOf(events.at(-1)), { ...closed, action: null })

          const other = yield* create(sessions, ORG, { metadata: { a: 1 } })
          const before = yield* snapshotTables
          const refused = yield* Effect.flip(
            sessions.update(ORG, other.id, { metadata: { b: 2 }, agent_id: newId(), status: "closed" })
          )
          assert.strictEqual(refused._tag, "AgentNotFound")
          assert.deepStrictEqual(yield* snapshotTables, before)
          assert.deepStrictEqual(yield* sessions.get(ORG, other.id), other)
        })
      )
  )

  it.effect(
    "D4, D5: a closed session refuses PATCH to open with its own text, every other change with Session is not open; GET still returns it",
    () =>
      withSessions(({ sessions, ORG }) =>
        Effect.gen(function* () {
          const session = yield* create(sessions, ORG)
          const finished = yield* sessions.finish(ORG, session.id, "survey-9")
          assert.deepStrictEqual([finished.status, finished.ending_survey_submission_id], ["closed", "survey-9"])
          const before = yield* snapshotTables
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
          assert.deepStrictEqual(yield* snapshotTables, before)
          assert.deepStrictEqual(yield* sessions.get(ORG, session.id), finished)
        })
      )
  )

  it.effect(
    "W1: finish and system closes emit session.finished then session.closed with action null, expiry both with expired, ingest only session.closed with ingest",
    () =>
      withSessions(({ sessions, ORG }) =>
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
            const session = yield* create(sessions, ORG)
            assert.isTrue(yield* sessions.close(ORG, session.id, reason))
            const closed = yield* sessions.get(ORG, session.id)
            assert.strictEqual(closed.status, "closed")
            assert.deepStrictEqual((yield* eventLog(ORG, session.id)).slice(1), expected, reason.kind)
            // Each object is the closed session with its action (W1, W3).
            for (const event of (yield* eventsOf(ORG)).slice(-expected.length)) {
              assert.deepStrictEqual(objectOf(event), { ...closed, action: expected[0]![1] })
            }
            // Closing again, or a session that is not the organization's, closes nothing and writes nothing.
            const count = (yield* eventsOf(ORG)).length
            assert.isFalse(yield* sessions.close(ORG, session.id, reason))
            assert.isFalse(yield* sessions.close(yield* organization(), session.id, reason))
            assert.isFalse(yield* sessions.close(ORG, newId(), reason))
            assert.strictEqual((yield* eventsOf(ORG)).length, count)
          }
        })
      )
  )

  it.effect(
    "D15, R1: every close, whatever its path, cancels the session's pending schedules (Session closed) and drops its pending reply job; other sessions keep theirs",
    () =>
      withSessions(({ sessions, replies, messages, ORG }) =>
        Effect.gen(function* () {
          const ai = (yield* addAgent(ORG, "ai")).id
          yield* setSettings(ORG, { session_idle_timeout_seconds: 60 })
          const closes: ReadonlyArray<
            readonly [
              string,
              (closing: string, staying: string) => Effect.Effect<unknown, unknown, SqlClient.SqlClient>
            ]
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
                  yield* elapse(61, ORG)
                  yield* messages.create(ORG, staying, { role: "user", content: { type: "text", text: "hi" } })
                  assert.strictEqual(yield* sessions.expireIdle(100), 1)
                })
            ]
          ]
          for (const [path, close] of closes) {
            const closing = yield* create(sessions, ORG, { agent_id: ai })
            const staying = yield* create(sessions, ORG, { agent_id: ai })
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
            yield* setColumn("session_schedules", JSON.parse(ran).id, "status", "done")
            yield* close(closing.id, staying.id)
            assert.strictEqual((yield* sessions.get(ORG, closing.id)).status, "closed", path)
            assert.deepStrictEqual(yield* rowsOf("reply_jobs", "session_id", closing.id), [], path)
            assert.deepStrictEqual(
              (yield* rowsOf("session_schedules", "session_id", closing.id)).map((schedule) => [
                schedule.status,
                schedule.error
              ]),
              [
                ["canceled", "Session closed"],
                ["done", null]
              ],
              path
            )
            assert.strictEqual((yield* rowsOf("reply_jobs", "session_id", staying.id)).length, 1, path)
            assert.deepStrictEqual(
              (yield* rowsOf("session_schedules", "session_id", staying.id)).map((schedule) => schedule.status),
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
      withSessions(({ sessions, messages, ORG }) =>
        Effect.gen(function* () {
          const other = yield* organization()
          yield* setSettings(ORG, { session_idle_timeout_seconds: 60 })
          const quiet = yield* create(sessions, ORG)
          const chatty = yield* create(sessions, ORG)
          const never = yield* sessions.create(other, { contact_id: "c", contact_name: "Ada" })
          yield* elapse(30, ORG, other)
          yield* messages.create(ORG, chatty.id, { role: "user", content: { type: "text", text: "still here" } })
          // t = 55 s: not idle yet (idle means older than the timeout; the database's clock moves on meanwhile, by
          // more than a second on a busy Citus cluster, O11).
          yield* elapse(25, ORG, other)
          assert.strictEqual(yield* sessions.expireIdle(100), 0)
          // t = 61 s: the quiet session is idle; the chatty one's message is 31 s old.
          yield* elapse(6, ORG, other)
          assert.strictEqual(yield* sessions.expireIdle(100), 1)
          assert.deepStrictEqual((yield* eventLog(ORG, quiet.id)).slice(1), [
            ["session.finished", "expired"],
            ["session.closed", "expired"]
          ])
          assert.strictEqual((yield* sessions.get(ORG, chatty.id)).status, "open")
          // t = 91 s: the chatty one is idle too; the other organization has no timeout.
          yield* elapse(30, ORG, other)
          assert.strictEqual(yield* sessions.expireIdle(100), 1)
          assert.strictEqual((yield* sessions.get(ORG, chatty.id)).status, "closed")
          yield* elapse(86400, ORG, other)
          assert.strictEqual(yield* sessions.expireIdle(100), 0)
          assert.strictEqual((yield* sessions.get(other, never.id)).status, "open")
          // At most `limit` per sweep.
          yield* create(sessions, ORG)
          yield* create(sessions, ORG)
          yield* elapse(61, ORG, other)
          assert.strictEqual(yield* sessions.expireIdle(1), 1)
          assert.strictEqual(yield* sessions.expireIdle(1), 1)
          assert.strictEqual(yield* sessions.expireIdle(1), 0)
        })
      )
  )

  it.effect(
    "D1: an unknown, malformed or foreign session is SessionNotFound for get, PATCH, transfer and finish, and nothing is written",
    () =>
      withSessions(({ sessions, ORG }) =>
        Effect.gen(function* () {
          const foreign = yield* sessions.create(yield* organization(), { contact_id: "c", contact_name: "Ada" })
          const before = yield* snapshotTables
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
          assert.deepStrictEqual(yield* snapshotTables, before)
          // Ids are UUIDs: another case names the same session, as in PostgreSQL.
          assert.strictEqual((yield* sessions.get(foreign.organization_id, foreign.id.toUpperCase())).id, foreign.id)
        })
      )
  )
})
