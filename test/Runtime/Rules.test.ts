/**
 * The rules of the AI runtime's service (DECISIONS.md R2, A13, D15; issue 13
 * item 8, issue 37 item 1): the `Runtime` service (`Runtime.layerNoDeps` over
 * the PostgreSQL `RuntimeRepo.layer`) with a scripted model and tools stubbed
 * in the test, over the production services (sessions, messages, replies, the
 * assistants domain) on the file's database (test/support/RulesDatabase.ts),
 * on the TestClock. What a run checks before it walks, what it writes in one
 * transaction (the reply, the current node, the close and the run record, or
 * nothing), and how it ends work it no longer holds. Each test has an
 * organization of its own. The integration suite (test/Replies) runs the same
 * through HTTP and the replies worker.
 */
import type { PgClient } from "@effect/sql-pg"
import { assert } from "@effect/vitest"
import { Effect, Layer, Schema } from "effect"
import { SqlClient } from "effect/sql"
import { SnapshotInput } from "../../src/Domain/Assistant.ts"
import { Messages } from "../../src/Messages/Messages.ts"
import { Replies } from "../../src/Replies/Replies.ts"
import * as RunFailure from "../../src/Runtime/Errors.ts"
import { RuntimeRepo } from "../../src/Runtime/Repo.ts"
import { type RunCompletion, type RunRequest, Runtime } from "../../src/Runtime/Runtime.ts"
import { ToolCaller, type ToolOutcome, type ToolTarget } from "../../src/Runtime/Tools.ts"
import { Sessions } from "../../src/Sessions/Sessions.ts"
import { makeIdGenerator } from "../../src/Shared/Ids.ts"
import { newAssistant } from "../support/AssistantFixture.ts"
import { llm, snapshotOf, tool } from "../support/AssistantItems.ts"
import { addAgent, onDatabase, organization, rowsOf, setColumn } from "../support/RulesDatabase.ts"
import { makeScript, type Script, scriptedModel } from "../support/ScriptedModel.ts"

/** Ids for the fixtures (UUIDv7, as the application makes them). */
const newId = makeIdGenerator()

/** A run record as the tests read it (the `runs` row, named as `RunRecord`). */
interface StoredRun {
  readonly id: string
  readonly status: string
  readonly error: string | null
  readonly commitId: string | null
  readonly nodes: ReadonlyArray<string>
  readonly model: string | null
  readonly inputTokens: number | null
  readonly outputTokens: number | null
  readonly missingNodeId: string | null
  readonly durationMs: number
}

/** The organization's run records, in the order they were made (`SqlClient` required). */
const runsOf = (organizationId: string) =>
  Effect.map(
    rowsOf("runs", "organization_id", organizationId),
    (rows): ReadonlyArray<StoredRun> =>
      rows.map((row) => ({
        id: row.id,
        status: row.status,
        error: row.error,
        commitId: row.commit_id,
        nodes: row.nodes,
        model: row.model,
        inputTokens: row.input_tokens,
        outputTokens: row.output_tokens,
        missingNodeId: row.missing_node_id,
        durationMs: row.duration_ms
      }))
  )

/** The organization's messages, in the order they were made (`SqlClient` required). */
const messagesOf = (organizationId: string) => rowsOf("messages", "organization_id", organizationId)

/** The row of session `sessionId` (`SqlClient` required). */
const sessionRow = (sessionId: string) => Effect.map(rowsOf("sessions", "id", sessionId), (rows) => rows[0]!)

/** The messages the runtime wrote (those with a run id), as their content types (`SqlClient` required). */
const runMessages = (organizationId: string) =>
  Effect.map(messagesOf(organizationId), (rows) =>
    rows.filter((message) => message.run_id !== null).map((message) => message.content.type)
  )

/** What a test gets: its organization, the script, the completions its runs reported, and shortcuts. */
interface Fixture {
  /** The test's own organization. */
  readonly ORG: string
  readonly script: Script
  /** The commit main's HEAD was published as. */
  readonly commitId: string
  /** The AI agent answering from the assistant. */
  readonly agentId: string
  /** Every completion a run passed to `complete`, in order. */
  readonly completions: Array<RunCompletion>
  /** A new open session of the AI agent with one user message `Hello`; returns its id. */
  readonly session: (agentId?: string | null) => Effect.Effect<string, unknown, Sessions | Messages>
  /** A reply request for `sessionId`; `held` is what `complete` returns (false: the lease was lost). */
  readonly request: (sessionId: string, fields?: Partial<RunRequest> & { held?: boolean }) => RunRequest
}

/** A tool's outcome in a test: may read and write the database, as a tool's endpoint may while it runs. */
type ToolStub = (
  organizationId: string,
  target: ToolTarget,
  args: unknown
) => Effect.Effect<ToolOutcome, unknown, SqlClient.SqlClient>

/**
 * Runs `f` in a new organization with an assistant holding `snapshot`
 * published on main, an AI agent for it, and the runtime over the file's
 * services with a script of its own and tool calls whose outcomes `toolStub` gives
 * (default `ToolCaller.layerTest()`: `{ok: true}`).
 */
const withRuntime = <A, E, R>(
  snapshot: ReturnType<typeof snapshotOf>,
  f: (fx: Fixture) => Effect.Effect<A, E, R>,
  toolStub?: ToolStub,
  /** The run records' repository (default `RuntimeRepo.layer`, on the file's database). */
  runs: Layer.Layer<RuntimeRepo, never, PgClient.PgClient> = RuntimeRepo.layer
) =>
  Effect.gen(function* () {
    const ORG = yield* organization()
    const script = makeScript()
    const tools =
      toolStub === undefined
        ? ToolCaller.layerTest()
        : Layer.effect(
            ToolCaller,
            Effect.map(Effect.service(SqlClient.SqlClient), (sql) =>
              ToolCaller.of({
                call: (target, args) =>
                  toolStub(ORG, target, args).pipe(Effect.provideService(SqlClient.SqlClient, sql), Effect.orDie)
              })
            )
          )
    const assistant = yield* newAssistant({ snapshot: yield* Schema.decodeUnknownEffect(SnapshotInput)(snapshot) }, ORG)
    const commit = yield* assistant.publish("main")
    const agent = yield* addAgent(ORG, "ai", "Bot", assistant.id)
    const completions: Array<RunCompletion> = []
    const fx: Fixture = {
      ORG,
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
    // Fresh: the file's services built `Runtime.layerNoDeps` already (with the echo model and tools over
    // HTTP), and a test's `Effect.provide` would reuse that build (layers are memoized).
    return yield* f(fx).pipe(
      Effect.provide(
        Layer.fresh(Runtime.layerNoDeps).pipe(Layer.provide(Layer.mergeAll(runs, scriptedModel(script), tools)))
      )
    )
  })

onDatabase()("Runtime on PostgreSQL", (it) => {
  it.effect(
    "R2: a turn writes the reply (assistant text, delivery pending, run_id, the trigger's metadata) and its run record (commit, nodes, model, tokens) in one transaction",
    () =>
      withRuntime(snapshotOf([llm("start")]), (fx) =>
        Effect.gen(function* () {
          const sessionId = yield* fx.session()
          const outcome = yield* (yield* Runtime).run(fx.request(sessionId, { metadata: { source: "test" } }))
          assert.strictEqual(outcome.status, "succeeded")
          const reply = (yield* messagesOf(fx.ORG)).at(-1)!
          assert.deepStrictEqual(
            [reply.role, reply.content, reply.delivery_status, reply.run_id, reply.metadata],
            ["assistant", { type: "text", text: "Reply to: Hello" }, "pending", outcome.runId, { source: "test" }]
          )
          const runs = yield* runsOf(fx.ORG)
          assert.strictEqual(runs.length, 1)
          const run = runs[0]!
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
          yield* (yield* Sessions).close(fx.ORG, closed, { kind: "system" })
          const human = yield* fx.session((yield* addAgent(fx.ORG, "human")).id)
          const noAgent = yield* fx.session(null)
          const orphan = yield* fx.session((yield* addAgent(fx.ORG, "ai", "Orphan", newId())).id)
          // D1, D22: not found, a session of the organization being erased. A run's record references its
          // session within its organization (O11: FOREIGN KEY (organization_id, session_id)), so a session that
          // does not exist there cannot be recorded; a job or schedule names one of its own organization only.
          const erased = yield* fx.session()
          yield* setColumn("sessions", erased, "erasure_id", crypto.randomUUID())
          const cases = [
            [erased, "SessionNotFound"],
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
            const run = (yield* runsOf(fx.ORG)).find((candidate) => candidate.id === outcome.runId)!
            assert.deepStrictEqual([run.status, run.error], ["failed", outcome.reason.message])
          }
          assert.deepStrictEqual(yield* runMessages(fx.ORG), [])
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
        assert.deepStrictEqual([yield* runMessages(fx.ORG), yield* runsOf(fx.ORG)], [[], []])
      })
    )
  )

  it.effect(
    "A15: a run records each tool call it made (node, tool id, arguments, result or error) in order; a result over 64 KiB is cut with a mark",
    () =>
      withRuntime(
        snapshotOf(
          [llm("start", { tools: ["lookup", "broken", "dump"] })],
          [tool("lookup", { id: "lookup" }), tool("broken", { id: "broken" }), tool("dump", { id: "dump" })]
        ),
        (fx) =>
          Effect.gen(function* () {
            const sessionId = yield* fx.session()
            fx.script.answers.push(
              {
                toolCalls: [
                  { id: "call_1", name: "lookup", params: { order: 42, fields: ["status"] } },
                  { id: "call_2", name: "broken", params: {} }
                ]
              },
              { toolCalls: [{ id: "call_3", name: "dump", params: { all: true } }] },
              { text: "Your order ships today" }
            )
            const outcome = yield* (yield* Runtime).run(fx.request(sessionId))
            assert.strictEqual(outcome.status, "succeeded")
            const sql = yield* SqlClient.SqlClient
            const [row] = yield* sql<{ tool_calls: ReadonlyArray<Record<string, unknown>> }>`SELECT tool_calls
              FROM runs WHERE id = ${outcome.runId}`
            const calls = row!.tool_calls
            assert.deepStrictEqual(calls.slice(0, 2), [
              {
                node_id: "start",
                tool_id: "lookup",
                arguments: { order: 42, fields: ["status"] },
                result: { status: "shipped" }
              },
              { node_id: "start", tool_id: "broken", arguments: {}, error: { status: 500, body: "down" } }
            ])
            const dump = calls[2]!
            assert.deepStrictEqual(
              [dump.node_id, dump.tool_id, dump.arguments, dump.truncated],
              ["start", "dump", { all: true }, true]
            )
            assert.strictEqual(typeof dump.result, "string")
            assert.strictEqual(Buffer.byteLength(dump.result as string, "utf8"), 65_536)
            assert.isTrue((dump.result as string).startsWith('{"rows":"xxxx'))
          }),
        (_organizationId, target, _args) =>
          Effect.succeed(
            target.id === "lookup"
              ? { result: { status: "shipped" }, isError: false }
              : target.id === "broken"
                ? { result: { status: 500, body: "down" }, isError: true }
                : { result: { rows: "x".repeat(70_000) }, isError: false }
          )
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
            assert.deepStrictEqual(yield* runMessages(fx.ORG), [])
            assert.deepStrictEqual(
              (yield* runsOf(fx.ORG)).map((run) => [run.status, run.nodes]),
              [["failed", ["start"]]]
            )
            assert.deepStrictEqual(
              fx.completions.map((completion) => completion.status),
              ["succeeded", "failed"],
              "the success was rolled back with the turn, then the failure completed the work"
            )
          }),
        (organizationId, _target, _args) =>
          Effect.gen(function* () {
            const sql = yield* SqlClient.SqlClient
            yield* sql`UPDATE sessions SET status = 'closed' WHERE organization_id = ${organizationId}`
            return { result: { ok: true }, isError: false }
          })
      )
  )

  it.effect("A15: a failed run records the tool calls it made before it failed", () =>
    withRuntime(snapshotOf([llm("start", { tools: ["lookup"] })], [tool("lookup", { id: "lookup" })]), (fx) =>
      Effect.gen(function* () {
        const sessionId = yield* fx.session()
        fx.script.answers.push({ toolCalls: [{ id: "c1", name: "lookup", params: { q: "x" } }] }, { text: "  " })
        const outcome = yield* (yield* Runtime).run(fx.request(sessionId))
        assert.strictEqual(outcome.status, "failed")
        const rows = yield* rowsOf("runs", "organization_id", fx.ORG)
        assert.deepStrictEqual(rows[0]!.tool_calls, [
          { node_id: "start", tool_id: "lookup", arguments: { q: "x" }, result: { ok: true } }
        ])
      })
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
            yield* setColumn("sessions", sessionId, "current_node_id", null)
            fx.script.answers.push({ toolCalls: [{ id: "call_1", name: "bye", params: {} }] }, { text: "Goodbye" })
            const outcome = yield* (yield* Runtime).run(fx.request(sessionId))
            assert.deepStrictEqual([outcome.status, outcome.error], ["died", "Internal error: disk full"])
            assert.deepStrictEqual(yield* runMessages(fx.ORG), [])
            const session = yield* sessionRow(sessionId)
            assert.deepStrictEqual([session.status, session.current_node_id], ["open", null])
          }),
        undefined,
        Layer.effect(
          RuntimeRepo,
          Effect.map(Effect.service(RuntimeRepo), (repo) =>
            RuntimeRepo.of({ ...repo, insertRun: () => Effect.die(new Error("disk full")) })
          )
        ).pipe(Layer.provide(RuntimeRepo.layer))
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
            yield* (yield* Replies).schedule(fx.ORG, sessionId, new Date(60_000).toISOString(), {
              type: "node",
              node_id: "start"
            })
            fx.script.answers.push({ toolCalls: [{ id: "call_1", name: "bye", params: {} }] }, { text: "Goodbye" })
            const outcome = yield* (yield* Runtime).run(fx.request(sessionId))
            assert.strictEqual(outcome.status, "succeeded")
            assert.deepStrictEqual(yield* runMessages(fx.ORG), ["function_call", "function_result", "text"])
            assert.strictEqual((yield* sessionRow(sessionId)).status, "closed")
            assert.deepStrictEqual(
              (yield* rowsOf("session_schedules", "session_id", sessionId)).map((schedule) => [
                schedule.status,
                schedule.error
              ]),
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
          assert.strictEqual((yield* sessionRow(sessionId)).current_node_id, "b")
          yield* runtime.run(fx.request(sessionId))
          assert.strictEqual((yield* runsOf(fx.ORG))[1]!.nodes[0], "b", "the next run starts at the current node")

          yield* setColumn("sessions", sessionId, "current_node_id", "gone")
          const outcome = yield* runtime.run(fx.request(sessionId))
          assert.strictEqual(outcome.status, "succeeded")
          const run = (yield* runsOf(fx.ORG))[2]!
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
          assert.deepStrictEqual([yield* runMessages(fx.ORG), yield* runsOf(fx.ORG)], [[], []])

          const reason = new RunFailure.GaveUp({ error: died.error!, attempts: 3 })
          const ended = yield* runtime.recordFailure(fx.request(sessionId), reason)
          assert.strictEqual(ended.status, "failed")
          assert.deepStrictEqual(
            (yield* runsOf(fx.ORG)).map((run) => [run.id, run.status, run.error, run.durationMs]),
            [[ended.runId, "failed", "Internal error: model layer broke (gave up after 3 attempts)", 0]]
          )
          assert.deepStrictEqual(yield* runMessages(fx.ORG), [])
        })
      )
  )
})
