/**
 * The rules of the AI runtime's service (DECISIONS.md R2, A13, D15; issue 13
 * item 8), fast and with no database: `Runtime.layerTest(db, …)` over the
 * in-memory database (sessions, messages, runs), the assistants domain in
 * memory, a scripted model and tools answered in the test. What a run checks
 * before it walks, what it writes in one transaction (the reply, the current
 * node, the close and the run record, or nothing), and how it ends work it no
 * longer holds. The integration suite (test/Replies) runs the same over
 * PostgreSQL, HTTP and the replies worker.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Layer, Schema } from "effect"
import { type MemoryDatabase, makeMemoryDatabase } from "../../src/Database/Memory.ts"
import { SnapshotInput } from "../../src/Domain/Assistant.ts"
import { Messages } from "../../src/Messages/Messages.ts"
import { makeMemoryRepo } from "../../src/Runtime/MemoryRepo.ts"
import { RuntimeRepo } from "../../src/Runtime/Repo.ts"
import * as RunFailure from "../../src/Runtime/RunFailure.ts"
import { type RunCompletion, type RunRequest, Runtime } from "../../src/Runtime/Runtime.ts"
import { ToolCaller, type ToolOutcome, type ToolTarget } from "../../src/Runtime/Tools.ts"
import { Sessions } from "../../src/Sessions/Sessions.ts"
import { makeIdGenerator } from "../../src/Shared/Ids.ts"
import { llm, snapshotOf, tool } from "../support/AssistantItems.ts"
import { memoryAssistant } from "../support/AssistantsMemory.ts"
import { addAgent } from "../support/MemoryDatabase.ts"
import { makeScript, type Script, scriptedModel } from "../support/ScriptedModel.ts"

/** Ids for the fixtures (UUIDv7, as the application makes them). */
const newId = makeIdGenerator()

const ORG = newId()

/** What a test gets: the database, the script, the completions its runs reported, and shortcuts. */
interface Fixture {
  readonly db: MemoryDatabase
  readonly script: Script
  /** The commit main's HEAD was published as. */
  readonly commitId: string
  /** The AI agent answering from the assistant. */
  readonly agentId: string
  /** Every completion a run passed to `complete`, in order. */
  readonly completions: Array<RunCompletion>
  /** A new open session of the AI agent with one user message `Hello`; answers its id. */
  readonly session: (agentId?: string | null) => Effect.Effect<string, unknown, Sessions | Messages>
  /** A reply request for `sessionId`; `held` is what `complete` answers (false: the lease was lost). */
  readonly request: (sessionId: string, fields?: Partial<RunRequest> & { held?: boolean }) => RunRequest
}

/**
 * Runs `f` over a fresh in-memory database with an assistant holding
 * `snapshot` published on main, an AI agent for it, and tool calls answered by
 * `answer` (given the database).
 */
const withRuntime = <A, E>(
  snapshot: ReturnType<typeof snapshotOf>,
  f: (fx: Fixture) => Effect.Effect<A, E, Runtime | Sessions | Messages>,
  answer?: (db: MemoryDatabase, target: ToolTarget, args: unknown) => ToolOutcome,
  /** The run records' repository over the database (default `RuntimeRepo.layerTest`). */
  runs: (db: MemoryDatabase) => Layer.Layer<RuntimeRepo> = RuntimeRepo.layerTest
) => {
  const db = makeMemoryDatabase()
  const script = makeScript()
  const tools = answer === undefined ? ToolCaller.layerTest() : ToolCaller.layerTest((t, a) => answer(db, t, a))
  return Effect.gen(function* () {
    const assistant = yield* memoryAssistant(
      { snapshot: yield* Schema.decodeUnknownEffect(SnapshotInput)(snapshot) },
      ORG
    )
    const commit = yield* assistant.publish("main")
    const agent = addAgent(db, ORG, "ai", "Bot", assistant.id)
    const completions: Array<RunCompletion> = []
    const fx: Fixture = {
      db,
      script,
      commitId: commit.id,
      agentId: agent.id,
      completions,
      session: (agentId = agent.id) =>
        Effect.gen(function* () {
          const session = yield* (yield* Sessions).create(ORG, {
            contact_id: "+15550100",
            contact_name: "Ada",
            agent_id: agentId
          })
          yield* (yield* Messages).create(ORG, session.id, { role: "user", content: { type: "text", text: "Hello" } })
          return session.id
        }),
      request: (sessionId, { held = true, ...fields } = {}) => ({
        organizationId: ORG,
        sessionId,
        trigger: "reply",
        jobId: null,
        startingNodeId: null,
        metadata: {},
        complete: (completion) =>
          Effect.sync(() => {
            completions.push(completion)
            return held
          }),
        ...fields
      })
    }
    return yield* f(fx)
  }).pipe(Effect.provide(Runtime.layerTest(db, scriptedModel(script), tools, runs(db))))
}

/** The messages the runtime wrote (those with a run id), as `[type, run_id]`. */
const runMessages = (db: MemoryDatabase) =>
  db.messages.filter((message) => message.run_id !== null).map((message) => message.content.type)

describe("Runtime over the in-memory database", () => {
  it.effect(
    "R2: a turn writes the reply (assistant text, delivery pending, run_id, the trigger's metadata) and its run record (commit, nodes, model, tokens) in one transaction",
    () =>
      withRuntime(snapshotOf([llm("start")]), (fx) =>
        Effect.gen(function* () {
          const sessionId = yield* fx.session()
          const outcome = yield* (yield* Runtime).run(fx.request(sessionId, { metadata: { source: "test" } }))
          assert.strictEqual(outcome.status, "succeeded")
          const reply = fx.db.messages.at(-1)!
          assert.deepStrictEqual(
            [reply.role, reply.content, reply.delivery_status, reply.run_id, reply.metadata],
            ["assistant", { type: "text", text: "Reply to: Hello" }, "pending", outcome.runId, { source: "test" }]
          )
          assert.strictEqual(fx.db.runs.length, 1)
          const run = fx.db.runs[0]!
          assert.deepStrictEqual(
            [run.id, run.status, run.error, run.commitId, run.nodes, run.model, run.inputTokens, run.outputTokens],
            [outcome.runId, "succeeded", null, fx.commitId, ["start"], "test", 10, 5]
          )
          assert.deepStrictEqual(fx.completions, [{ status: "succeeded" }])
        })
      )
  )

  it.effect(
    "R2: a session missing, not open, without an AI agent or whose assistant is gone fails the run with its reason, records it and writes no message",
    () =>
      withRuntime(snapshotOf([llm("start")]), (fx) =>
        Effect.gen(function* () {
          const runtime = yield* Runtime
          const closed = yield* fx.session()
          yield* (yield* Sessions).close(ORG, closed, { kind: "system" })
          const human = yield* fx.session(addAgent(fx.db, ORG, "human").id)
          const noAgent = yield* fx.session(null)
          const orphan = yield* fx.session(addAgent(fx.db, ORG, "ai", "Orphan", newId()).id)
          const cases = [
            [newId(), "SessionNotFound"],
            [closed, "SessionNotOpen"],
            [human, "AgentNotAi"],
            [noAgent, "AgentNotAi"],
            [orphan, "AssistantUnavailable"]
          ] as const
          for (const [sessionId, tag] of cases) {
            const outcome = yield* runtime.run(fx.request(sessionId))
            assert.strictEqual(outcome.status, "failed", tag)
            if (outcome.status !== "failed") continue
            assert.strictEqual(outcome.reason._tag, tag)
            const run = fx.db.runs.find((candidate) => candidate.id === outcome.runId)!
            assert.deepStrictEqual([run.status, run.error], ["failed", outcome.reason.message])
          }
          assert.deepStrictEqual(runMessages(fx.db), [])
          assert.deepStrictEqual(
            fx.completions.map((completion) => completion.status),
            cases.map(() => "failed")
          )
          assert.strictEqual(fx.script.calls.length, 0, "no model call before the checks pass")
        })
      )
  )

  it.effect("R1/R2: a run whose work is no longer held (lease lost) writes nothing, neither reply nor record", () =>
    withRuntime(snapshotOf([llm("start")]), (fx) =>
      Effect.gen(function* () {
        const sessionId = yield* fx.session()
        const runtime = yield* Runtime
        const lost = yield* runtime.run(fx.request(sessionId, { held: false }))
        assert.strictEqual(lost.status, "lost")
        const notHeld = yield* runtime.recordFailure(
          fx.request(sessionId, { held: false }),
          new RunFailure.GaveUp({ error: "boom", attempts: 3 })
        )
        assert.strictEqual(notHeld.status, "lost")
        assert.deepStrictEqual([runMessages(fx.db), fx.db.runs], [[], []])
      })
    )
  )

  it.effect(
    "R2: a session closed while a tool runs: the turn is not written, its completion is rolled back and the run is recorded failed with SessionNotOpen",
    () =>
      withRuntime(
        snapshotOf([llm("start", { tools: ["lookup"] })], [tool("lookup", { id: "lookup" })]),
        (fx) =>
          Effect.gen(function* () {
            const sessionId = yield* fx.session()
            fx.script.answers.push({ toolCalls: [{ id: "call_1", name: "lookup", params: { q: "x" } }] })
            const outcome = yield* (yield* Runtime).run(fx.request(sessionId))
            assert.strictEqual(outcome.status, "failed")
            assert.strictEqual(outcome.status === "failed" && outcome.reason._tag, "SessionNotOpen")
            assert.deepStrictEqual(runMessages(fx.db), [])
            assert.deepStrictEqual(
              fx.db.runs.map((run) => [run.status, run.nodes]),
              [["failed", ["start"]]]
            )
            assert.deepStrictEqual(
              fx.completions.map((completion) => completion.status),
              ["succeeded", "failed"],
              "the success was rolled back with the turn, then the failure completed the work"
            )
          }),
        (db, _target, _args) => {
          for (const session of db.sessions.values()) session.status = "closed"
          return { result: { ok: true }, isError: false }
        }
      )
  )

  it.effect(
    "R2: never half a reply: when writing the run record fails, the turn's tool messages, reply, current node and close roll back with it",
    () =>
      withRuntime(
        snapshotOf(
          [llm("start", { tools: ["bye"], next_node: "start" })],
          [tool("bye", { id: "bye", should_close: true })]
        ),
        (fx) =>
          Effect.gen(function* () {
            const sessionId = yield* fx.session()
            fx.db.sessions.get(sessionId)!.current_node_id = null
            fx.script.answers.push({ toolCalls: [{ id: "call_1", name: "bye", params: {} }] }, { text: "Goodbye" })
            const outcome = yield* (yield* Runtime).run(fx.request(sessionId))
            assert.deepStrictEqual([outcome.status, outcome.error], ["died", "Internal error: disk full"])
            assert.deepStrictEqual(runMessages(fx.db), [])
            const session = fx.db.sessions.get(sessionId)!
            assert.deepStrictEqual([session.status, session.current_node_id], ["open", null])
          }),
        undefined,
        (db) =>
          Layer.succeed(RuntimeRepo, {
            ...makeMemoryRepo(db),
            insertRun: () => Effect.die(new Error("disk full"))
          })
      )
  )

  it.effect(
    "R2, D15: a should_close tool closes the session after the reply, and the close cancels its pending schedules",
    () =>
      withRuntime(
        snapshotOf([llm("start", { tools: ["bye"] })], [tool("bye", { id: "bye", should_close: true })]),
        (fx) =>
          Effect.gen(function* () {
            const sessionId = yield* fx.session()
            fx.db.schedules.push({
              id: newId(),
              organization_id: ORG,
              session_id: sessionId,
              scheduled_for: new Date(60_000),
              config: {},
              status: "pending",
              error: null,
              created_at: new Date(0)
            })
            fx.script.answers.push({ toolCalls: [{ id: "call_1", name: "bye", params: {} }] }, { text: "Goodbye" })
            const outcome = yield* (yield* Runtime).run(fx.request(sessionId))
            assert.strictEqual(outcome.status, "succeeded")
            assert.deepStrictEqual(runMessages(fx.db), ["function_call", "function_result", "text"])
            assert.strictEqual(fx.db.sessions.get(sessionId)!.status, "closed")
            assert.deepStrictEqual(
              fx.db.schedules.map((schedule) => [schedule.status, schedule.error]),
              [["canceled", "Session closed"]]
            )
          })
      )
  )

  it.effect(
    "R2: an llm node's next_node becomes the session's current node; A13: a current node the published version no longer has starts the run at the initial node and is recorded",
    () =>
      withRuntime(snapshotOf([llm("a", { next_node: "b" }), llm("b")]), (fx) =>
        Effect.gen(function* () {
          const sessionId = yield* fx.session()
          const runtime = yield* Runtime
          yield* runtime.run(fx.request(sessionId))
          assert.strictEqual(fx.db.sessions.get(sessionId)!.current_node_id, "b")
          yield* runtime.run(fx.request(sessionId))
          assert.strictEqual(fx.db.runs[1]!.nodes[0], "b", "the next run starts at the current node")

          fx.db.sessions.get(sessionId)!.current_node_id = "gone"
          const outcome = yield* runtime.run(fx.request(sessionId))
          assert.strictEqual(outcome.status, "succeeded")
          const run = fx.db.runs[2]!
          assert.deepStrictEqual([run.nodes, run.missingNodeId], [["a"], "gone"])
        })
      )
  )

  it.effect(
    "issue 12 'Poison jobs': a run that dies writes nothing and reports the defect's first line; recordFailure then ends the work as a failed run (GaveUp)",
    () =>
      withRuntime(snapshotOf([llm("start")]), (fx) =>
        Effect.gen(function* () {
          const sessionId = yield* fx.session()
          const runtime = yield* Runtime
          fx.script.answers.push({ defect: "model layer broke\nstack line" })
          const died = yield* runtime.run(fx.request(sessionId))
          assert.deepStrictEqual([died.status, died.error], ["died", "Internal error: model layer broke"])
          assert.deepStrictEqual([runMessages(fx.db), fx.db.runs], [[], []])

          const reason = new RunFailure.GaveUp({ error: died.error!, attempts: 3 })
          const ended = yield* runtime.recordFailure(fx.request(sessionId), reason)
          assert.strictEqual(ended.status, "failed")
          assert.deepStrictEqual(
            fx.db.runs.map((run) => [run.id, run.status, run.error, run.durationMs]),
            [[ended.runId, "failed", "Internal error: model layer broke (gave up after 3 attempts)", 0]]
          )
          assert.deepStrictEqual(runMessages(fx.db), [])
        })
      )
  )
})
