/**
 * The rules of replies (DECISIONS.md D7, R1, D11, D15; issue 13 item 8), fast
 * and with no database: `Rules.ts` directly, and the `Replies` service with
 * `it.effect` over its in-memory repository (`Replies.layerTest`), time on
 * `TestClock`. The integration suite (Replies.test.ts, Debounce.test.ts,
 * Schedules.test.ts) checks the same over PostgreSQL.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Schema } from "effect"
import { TestClock } from "effect/testing"
import { SessionNotFound, SessionNotOpen } from "../../src/Domain/Errors.ts"
import {
  ScheduleNotFound,
  ScheduleNotPending,
  SessionAgentNotAi,
  SessionHasNoAgent,
  SessionHasNoThread
} from "../../src/Replies/Errors.ts"
import { type MemorySession, type MemoryStore, makeMemoryStore } from "../../src/Replies/MemoryRepo.ts"
import { Replies } from "../../src/Replies/Replies.ts"
import { NOTIFY_WITHIN_MS, replyDue, replyRefusal } from "../../src/Replies/Rules.ts"
import { makeIdGenerator } from "../../src/Shared/Ids.ts"

/** Ids for the fixtures (UUIDv7, as the application makes them). */
const newId = makeIdGenerator()

const ORG = newId()

/** Adds a session to `store`: open, with an AI agent and a thread unless `fields` say otherwise. */
const addSession = (store: MemoryStore, fields: Partial<MemorySession> = {}): MemorySession => {
  const session: MemorySession = {
    id: newId(),
    organization_id: ORG,
    status: "open",
    agent_id: newId(),
    agent_type: "ai",
    thread_id: newId(),
    ...fields
  }
  store.sessions.set(session.id, session)
  return session
}

/** Runs `f` with a fresh store and the Replies service over it. */
const withReplies = <A, E>(f: (replies: Replies["Service"], store: MemoryStore) => Effect.Effect<A, E>) => {
  const store = makeMemoryStore()
  return Effect.gen(function* () {
    return yield* f(yield* Replies, store)
  }).pipe(Effect.provide(Replies.layerTest(store)))
}

describe("replyRefusal (D7)", () => {
  const ok = { status: "open", agent_id: "a", agent_type: "ai", thread_id: "t" }

  it("D7: each check in order: not found, not open, no agent, not AI, no thread; none for a session that can be answered", () => {
    const tags = [
      undefined,
      { ...ok, status: "closed", agent_id: null, agent_type: null, thread_id: null },
      { ...ok, agent_id: null, agent_type: null, thread_id: null },
      { ...ok, agent_type: "human", thread_id: null },
      { ...ok, thread_id: null },
      ok
    ].map((state) => replyRefusal(state)?._tag)
    assert.deepStrictEqual(tags, [
      "SessionNotFound",
      "SessionNotOpen",
      "SessionHasNoAgent",
      "SessionAgentNotAi",
      "SessionHasNoThread",
      undefined
    ])
  })

  it("D7, D15: the refusals keep their wire bodies", () => {
    const wire = [
      [SessionNotFound.Wire, new SessionNotFound()],
      [SessionNotOpen.Wire, new SessionNotOpen()],
      [SessionHasNoAgent.Wire, new SessionHasNoAgent()],
      [SessionAgentNotAi.Wire, new SessionAgentNotAi()],
      [SessionHasNoThread.Wire, new SessionHasNoThread()],
      [ScheduleNotFound.Wire, new ScheduleNotFound()],
      [ScheduleNotPending.Wire, new ScheduleNotPending()]
    ] as const
    assert.deepStrictEqual(
      wire.map(([schema, error]) => Schema.encodeSync(schema as Schema.Codec<unknown, unknown>)(error)),
      [
        { detail: "Session not found" },
        { detail: "Session is not open" },
        { detail: "Session has no agent" },
        { detail: "Session agent is not an AI agent" },
        { detail: "Session has no thread" },
        { detail: "Schedule not found" },
        { detail: "Schedule is not pending" }
      ]
    )
  })
})

describe("replyDue (R1)", () => {
  it("R1: due debounce seconds after the trigger; NOTIFY only when due within NOTIFY_WITHIN_MS", () => {
    assert.deepStrictEqual(replyDue(10_000, 3), { dueAt: new Date(13_000), notify: false })
    assert.deepStrictEqual(replyDue(10_000, 0), { dueAt: new Date(10_000), notify: true })
    assert.strictEqual(replyDue(0, 1).notify, 1_000 < NOTIFY_WITHIN_MS)
  })
})

describe("Replies over the in-memory repository", () => {
  it.effect("D7: POST /reply refuses in D7's order and triggers no job; a session that can be answered gets one", () =>
    withReplies((replies, store) =>
      Effect.gen(function* () {
        const refused = [
          newId(),
          addSession(store, { organization_id: newId() }).id,
          addSession(store, { status: "closed", agent_id: null, agent_type: null, thread_id: null }).id,
          addSession(store, { agent_id: null, agent_type: null, thread_id: null }).id,
          addSession(store, { agent_type: "human", thread_id: null }).id,
          addSession(store, { thread_id: null }).id
        ]
        const tags: Array<string> = []
        for (const id of refused) tags.push((yield* Effect.flip(replies.reply(ORG, id, {})))._tag)
        assert.deepStrictEqual(tags, [
          "SessionNotFound",
          "SessionNotFound",
          "SessionNotOpen",
          "SessionHasNoAgent",
          "SessionAgentNotAi",
          "SessionHasNoThread"
        ])
        assert.deepStrictEqual(store.jobs, [])

        const session = addSession(store)
        const body = JSON.parse(yield* replies.reply(ORG, session.id, {}))
        assert.strictEqual(body.id, session.id)
        assert.deepStrictEqual(
          store.jobs.map((job) => [job.session_id, job.triggers]),
          [[session.id, 1]]
        )
      })
    )
  )

  it.effect(
    "R1: trailing debounce on TestClock: each trigger within the window moves the due time to now + debounce_time",
    () =>
      withReplies((replies, store) =>
        Effect.gen(function* () {
          const session = addSession(store)
          // t = 0: the default debounce (3 s) makes the job due at 3 s.
          yield* replies.reply(ORG, session.id, { starting_node_id: "billing", metadata: { a: 1 } })
          assert.deepStrictEqual(
            store.jobs.map((job) => [job.due_at.getTime(), job.notified]),
            [[3_000, false]]
          )
          // t = 2 s: a second trigger within the window: one job, now due at 2 + 3 = 5 s.
          yield* TestClock.adjust("2 seconds")
          yield* replies.reply(ORG, session.id, { debounce_time: 3, metadata: { b: 2 } })
          // t = 2.5 s: debounce_time 1 moves the due time earlier, to 3.5 s, and wakes the workers.
          yield* TestClock.adjust("500 millis")
          yield* replies.reply(ORG, session.id, { debounce_time: 1 })
          assert.strictEqual(store.jobs.length, 1)
          const [job] = store.jobs
          assert.deepStrictEqual(
            [job!.due_at.getTime(), job!.triggers, job!.notified, job!.starting_node_id, job!.metadata],
            [3_500, 3, true, "billing", { a: 1, b: 2 }]
          )
        })
      )
  )

  it.effect(
    "D11: trigger makes the job of a session D7 would answer, due after the given debounce; others get none",
    () =>
      withReplies((replies, store) =>
        Effect.gen(function* () {
          const answerable = addSession(store)
          const threadless = addSession(store, { thread_id: null })
          const human = addSession(store, { agent_type: "human" })
          yield* TestClock.adjust("10 seconds")
          assert.isTrue(yield* replies.trigger(ORG, answerable, { debounceSeconds: 4 }))
          assert.isFalse(yield* replies.trigger(ORG, threadless, { debounceSeconds: 4 }))
          assert.isFalse(yield* replies.trigger(ORG, human, { debounceSeconds: 4 }))
          assert.deepStrictEqual(
            store.jobs.map((job) => [job.session_id, job.due_at.getTime(), job.triggers]),
            [[answerable.id, 14_000, 1]]
          )
        })
      )
  )

  it.effect("D15: schedules of an open session; cancel a pending one once; unknown schedules and sessions", () =>
    withReplies((replies, store) =>
      Effect.gen(function* () {
        const session = addSession(store)
        const created = JSON.parse(
          yield* replies.schedule(ORG, session.id, new Date(60_000).toISOString(), {
            type: "node",
            node_id: "follow_up"
          })
        )
        assert.deepStrictEqual([created.status, created.config], ["pending", { type: "node", node_id: "follow_up" }])
        yield* replies.cancelSchedule(ORG, session.id, created.id)
        const listed = JSON.parse(yield* replies.listSchedules(ORG, session.id))
        assert.deepStrictEqual(
          listed.map((schedule: { status: string }) => schedule.status),
          ["canceled"]
        )
        const again = yield* Effect.flip(replies.cancelSchedule(ORG, session.id, created.id))
        assert.strictEqual(again._tag, "ScheduleNotPending")
        for (const id of [newId(), "not-a-uuid"]) {
          assert.strictEqual((yield* Effect.flip(replies.cancelSchedule(ORG, session.id, id)))._tag, "ScheduleNotFound")
        }
        const closed = addSession(store, { status: "closed" })
        const refused = yield* Effect.flip(
          replies.schedule(ORG, closed.id, new Date(0).toISOString(), { type: "node", node_id: "x" })
        )
        assert.strictEqual(refused._tag, "SessionNotOpen")
        assert.strictEqual((yield* Effect.flip(replies.listSchedules(ORG, newId())))._tag, "SessionNotFound")
      })
    )
  )
})
