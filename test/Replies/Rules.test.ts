/**
 * The rules of replies (DECISIONS.md D7, R1, D11, D15; issue 13 item 8, issue
 * 37 item 1): `Rules.ts` directly, and the `Replies` service with `it.effect`
 * over the production services on the file's database
 * (test/support/RulesDatabase.ts), so D7's checks run in `RepliesRepo.reply`'s
 * one statement and R1's debounce in its upsert. Reply jobs and schedules are
 * timed by the application's clock, moved with `TestClock`; the workers'
 * wakeup (R1: a job due soon NOTIFYs them) is read by listening on their
 * channel. Each test has an organization of its own; sessions are made by the
 * `Sessions` service. The HTTP suite (Replies.test.ts, Debounce.test.ts,
 * Schedules.test.ts) checks the same through the API, with the worker running.
 */
import { PgClient } from "@effect/sql-pg"
import { assert, describe, it } from "@effect/vitest"
import { Effect, Queue, Schema } from "effect"
import { SqlClient } from "effect/sql"
import { TestClock } from "effect/testing"
import {
  ScheduleNotFound,
  ScheduleNotPending,
  SessionAgentNotAi,
  SessionHasNoAgent,
  SessionHasNoThread
} from "../../src/Replies/Errors.ts"
import { Replies } from "../../src/Replies/Replies.ts"
import { repliesChannel } from "../../src/Replies/Repo.ts"
import { NOTIFY_WITHIN_MS, type ReplyState, replyDue, replyRefusal } from "../../src/Replies/Rules.ts"
import { SessionNotFound, SessionNotOpen } from "../../src/Sessions/Errors.ts"
import { Sessions } from "../../src/Sessions/Sessions.ts"
import { makeIdGenerator } from "../../src/Shared/Ids.ts"
import { addAgent, onDatabase, organization, setColumn } from "../support/RulesDatabase.ts"

/** Ids for the fixtures (UUIDv7, as the application makes them). */
const newId = makeIdGenerator()

/** A session as D7 checks it (what ingest passes to `Replies.trigger`), with its id. */
type SessionState = ReplyState & { readonly id: string }

/** How a fixture session differs from an open one with an AI agent and a thread. */
interface SessionFields {
  readonly status?: "closed"
  /** Null: no agent (then no thread either). */
  readonly agent_id?: null
  /** `human`: a human agent, which keeps the thread of an AI agent before it (D7) unless `thread_id` is null. */
  readonly agent_type?: "human" | null
  /** Null: no thread; with an AI agent, a state only another writer makes (D7 gives it one). */
  readonly thread_id?: null
}

/**
 * A session of `organizationId` made by the `Sessions` service: open, with an
 * AI agent and so a thread (D7), unless `fields` say otherwise; returns its
 * state as stored.
 */
const addSession = (organizationId: string, fields: SessionFields = {}) =>
  Effect.gen(function* () {
    const sessions = yield* Sessions
    const give = (type: "ai" | "human") =>
      Effect.flatMap(addAgent(organizationId, type), (agent) => sessions.transfer(organizationId, id, agent.id))
    const { id } = yield* sessions.create(organizationId, { contact_id: "c", contact_name: "Ada" })
    if (fields.agent_type === "human") {
      // D7: a thread comes with the first AI agent and stays with the human one after it.
      if (fields.thread_id !== null) yield* give("ai")
      yield* give("human")
    } else if (fields.agent_id !== null && fields.agent_type !== null) {
      yield* give("ai")
      if (fields.thread_id === null) yield* setColumn("sessions", id, "thread_id", null)
    }
    if (fields.status === "closed") yield* sessions.finish(organizationId, id, undefined)
    return yield* stateOf(organizationId, id)
  })

/**
 * What D7 checks of session `id` of the organization, as stored (filtered and
 * joined by the organization, as every query: on Citus a join of two tables
 * not on it is refused, O11).
 */
const stateOf = (organizationId: string, id: string) =>
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const [state] = yield* sql<SessionState>`SELECT s.id, s.status, s.agent_id, a.type AS agent_type, s.thread_id
      FROM sessions s LEFT JOIN agents a ON a.organization_id = s.organization_id AND a.id = s.agent_id
      WHERE s.organization_id = ${organizationId} AND s.id = ${id}`.pipe(Effect.orDie)
    return state!
  })

/** Runs `f` with the Replies service and a new organization (each test has a `TestClock` of its own at 0). */
const withReplies = <A, E, R>(f: (replies: Replies["Service"], organizationId: string) => Effect.Effect<A, E, R>) =>
  Effect.gen(function* () {
    return yield* f(yield* Replies, yield* organization())
  })

/** A reply job as stored (R1: at most one pending per session). */
interface JobRow {
  readonly session_id: string
  readonly due_at: Date
  readonly starting_node_id: string | null
  readonly metadata: Record<string, unknown>
  readonly triggers: number
}

/** The reply jobs of the organizations, oldest first. */
const jobsOf = (...organizationIds: ReadonlyArray<string>) =>
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    return yield* sql<JobRow>`SELECT session_id, due_at, starting_node_id, metadata, triggers FROM reply_jobs
      WHERE organization_id IN ${sql.in(organizationIds)} ORDER BY created_at, id`.pipe(Effect.orDie)
  })

/**
 * Listens on the replies workers' channel from now on (scoped); returns an
 * effect telling whether the workers were woken since (R1: a trigger due
 * within NOTIFY_WITHIN_MS NOTIFYs them at commit). It NOTIFYs a marker and
 * reads up to it: PostgreSQL delivers notifications in commit order, so every
 * wakeup committed before has arrived by then.
 */
const workersWoken = Effect.gen(function* () {
  const pg = yield* PgClient.PgClient
  const notifications = yield* Effect.orDie(pg.listen(repliesChannel))
  let woken = false
  return Effect.gen(function* () {
    const marker = `marker-${newId()}`
    yield* Effect.orDie(pg.notify(repliesChannel, marker))
    for (;;) {
      const { payload } = yield* Effect.orDie(Queue.take(notifications))
      if (payload === marker) return woken
      woken ||= payload === "job"
    }
  })
})

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

onDatabase()("Replies on PostgreSQL", (it) => {
  it.effect("D7: POST /reply refuses in D7's order and triggers no job; a session that can be answered gets one", () =>
    withReplies((replies, ORG) =>
      Effect.gen(function* () {
        const other = yield* organization()
        const refused = [
          newId(),
          (yield* addSession(other)).id,
          (yield* addSession(ORG, { status: "closed", agent_id: null, agent_type: null, thread_id: null })).id,
          (yield* addSession(ORG, { agent_id: null, agent_type: null, thread_id: null })).id,
          (yield* addSession(ORG, { agent_type: "human", thread_id: null })).id,
          (yield* addSession(ORG, { thread_id: null })).id
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
        assert.deepStrictEqual(yield* jobsOf(ORG, other), [])

        const session = yield* addSession(ORG)
        const body = JSON.parse(yield* replies.reply(ORG, session.id, {}))
        assert.strictEqual(body.id, session.id)
        assert.deepStrictEqual(
          (yield* jobsOf(ORG)).map((job) => [job.session_id, job.triggers]),
          [[session.id, 1]]
        )
      })
    )
  )

  it.effect(
    "R1: trailing debounce on TestClock: each trigger within the window moves the due time to now + debounce_time",
    () =>
      withReplies((replies, ORG) =>
        Effect.gen(function* () {
          const session = yield* addSession(ORG)
          const notified = yield* workersWoken
          // t = 0: the default debounce (3 s) makes the job due at 3 s.
          yield* replies.reply(ORG, session.id, { starting_node_id: "billing", metadata: { a: 1 } })
          const woken = yield* notified
          assert.deepStrictEqual(
            (yield* jobsOf(ORG)).map((job) => [job.due_at.getTime(), woken]),
            [[3_000, false]]
          )
          // t = 2 s: a second trigger within the window: one job, now due at 2 + 3 = 5 s.
          yield* TestClock.adjust("2 seconds")
          yield* replies.reply(ORG, session.id, { debounce_time: 3, metadata: { b: 2 } })
          // t = 2.5 s: debounce_time 1 moves the due time earlier, to 3.5 s, and wakes the workers.
          yield* TestClock.adjust("500 millis")
          yield* replies.reply(ORG, session.id, { debounce_time: 1 })
          const jobs = yield* jobsOf(ORG)
          assert.strictEqual(jobs.length, 1)
          const [job] = jobs
          assert.deepStrictEqual(
            [job!.due_at.getTime(), job!.triggers, yield* notified, job!.starting_node_id, job!.metadata],
            [3_500, 3, true, "billing", { a: 1, b: 2 }]
          )
        })
      )
  )

  it.effect(
    "D11: trigger makes the job of a session D7 would answer, due after the given debounce; others get none",
    () =>
      withReplies((replies, ORG) =>
        Effect.gen(function* () {
          const answerable = yield* addSession(ORG)
          const threadless = yield* addSession(ORG, { thread_id: null })
          const human = yield* addSession(ORG, { agent_type: "human" })
          yield* TestClock.adjust("10 seconds")
          assert.isTrue(yield* replies.trigger(ORG, answerable, { debounceSeconds: 4 }))
          assert.isFalse(yield* replies.trigger(ORG, threadless, { debounceSeconds: 4 }))
          assert.isFalse(yield* replies.trigger(ORG, human, { debounceSeconds: 4 }))
          assert.deepStrictEqual(
            (yield* jobsOf(ORG)).map((job) => [job.session_id, job.due_at.getTime(), job.triggers]),
            [[answerable.id, 14_000, 1]]
          )
        })
      )
  )

  it.effect("D15: schedules of an open session; cancel a pending one once; unknown schedules and sessions", () =>
    withReplies((replies, ORG) =>
      Effect.gen(function* () {
        const session = yield* addSession(ORG)
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
        const closed = yield* addSession(ORG, { status: "closed" })
        const refused = yield* Effect.flip(
          replies.schedule(ORG, closed.id, new Date(0).toISOString(), { type: "node", node_id: "x" })
        )
        assert.strictEqual(refused._tag, "SessionNotOpen")
        assert.strictEqual((yield* Effect.flip(replies.listSchedules(ORG, newId())))._tag, "SessionNotFound")
      })
    )
  )
})
