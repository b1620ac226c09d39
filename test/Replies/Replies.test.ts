/**
 * POST /reply and the AI runtime end to end with a scripted language model
 * (DECISIONS.md D5, D7, R1-R3): D7's checks in order, debounce bounds, a
 * tool-calling run against a tool server on loopback, should_close, next_node,
 * starting_node_id, model errors (retried, then a failed run with no reply),
 * unsupported node types, and the run record.
 */
import { assert } from "@effect/vitest"
import { Effect } from "effect"
import { SqlClient } from "effect/sql"
import { servicesWith } from "../../src/Server.ts"
import { llm, tool } from "../support/Assistants.ts"
import { makeScript, scriptedModel } from "../support/ScriptedModel.ts"
import { assertMessage } from "../support/Shapes.ts"
import { TestApi, withWorkers } from "../support/TestApp.ts"
import { toolServer } from "../support/ToolServer.ts"
import { aiFixture, messagesOf, realSleep, runsOf, snapshotOf, waitFor } from "./support.ts"

const script = makeScript()

const reply = (
  org: { call: (m: string, p: string, b?: unknown) => Effect.Effect<any> },
  sessionId: string,
  body: unknown = { debounce_time: 0 }
) => org.call("POST", `/sessions/${sessionId}/reply`, body)

withWorkers({ allowPrivateNetworkTargets: true }, servicesWith(scriptedModel(script)))("replies", (it) => {
  it.effect("D7: reply checks in order: not found 404, not open, no agent, not AI, no thread (400)", () =>
    Effect.gen(function* () {
      const api = yield* TestApi
      const fx = yield* aiFixture(snapshotOf([llm("start")]))
      const org = fx.org
      const missing = yield* reply(org, "0190a000-0000-7000-8000-000000000000")
      assert.deepStrictEqual([missing.status, missing.body], [404, { detail: "Session not found" }])
      const foreign = yield* (yield* api.organization()).session()
      assert.strictEqual((yield* reply(org, foreign.id)).status, 404)

      const closed = yield* fx.session()
      yield* org.call("POST", `/sessions/${closed.id}/finish`, {})
      const notOpen = yield* reply(org, closed.id)
      assert.deepStrictEqual([notOpen.status, notOpen.body], [400, { detail: "Session is not open" }])

      const noAgent = yield* org.session()
      const a = yield* reply(org, noAgent.id)
      assert.deepStrictEqual([a.status, a.body], [400, { detail: "Session has no agent" }])

      const human = yield* org.session({ agent_id: yield* org.agent("human") })
      const h = yield* reply(org, human.id)
      assert.deepStrictEqual([h.status, h.body], [400, { detail: "Session agent is not an AI agent" }])

      const threadless = yield* fx.session()
      const sql = yield* SqlClient.SqlClient
      yield* sql`UPDATE sessions SET thread_id = NULL WHERE id = ${threadless.id}`
      const t = yield* reply(org, threadless.id)
      assert.deepStrictEqual([t.status, t.body], [400, { detail: "Session has no thread" }])

      // A closed session with no agent gets "not open" first (D7's order).
      const closedNoAgent = yield* org.session({ status: "closed" })
      assert.strictEqual((yield* reply(org, closedNoAgent.id)).body.detail, "Session is not open")
    })
  )

  it.effect("debounce_time is an integer 0-60 (422 outside), and the response is the session", () =>
    Effect.gen(function* () {
      const fx = yield* aiFixture(snapshotOf([llm("start")]))
      const session = yield* fx.session()
      for (const bad of [61, -1, 1.5, "3"]) {
        const response = yield* reply(fx.org, session.id, { debounce_time: bad })
        assert.strictEqual(response.status, 422, `debounce_time ${JSON.stringify(bad)}`)
        assert.deepStrictEqual(response.body.detail[0].loc, ["body", "debounce_time"])
      }
      const ok = yield* reply(fx.org, session.id, { debounce_time: 60 })
      assert.strictEqual(ok.status, 200)
      assert.deepStrictEqual(ok.body, session)
      // No body at all: defaults (debounce 3 s).
      assert.strictEqual((yield* fx.org.call("POST", `/sessions/${session.id}/reply`)).status, 200)
      const sql = yield* SqlClient.SqlClient
      const [job] = yield* sql<{ triggers: number }>`SELECT triggers FROM reply_jobs WHERE session_id = ${session.id}`
      assert.strictEqual(job!.triggers, 2)
      // Closing the session drops its pending job (it would otherwise answer during a later test).
      yield* fx.org.call("POST", `/sessions/${session.id}/finish`, {})
      assert.deepStrictEqual(yield* sql`SELECT 1 FROM reply_jobs WHERE session_id = ${session.id}`, [])
    })
  )

  it.effect("R2: a tool-calling run stores the calls and results, then the reply with run_id and metadata", () =>
    Effect.gen(function* () {
      const tools = yield* toolServer((body) => ({ status: 200, json: { order: body.order_id, status: "shipped" } }))
      const fx = yield* aiFixture(
        snapshotOf(
          [
            llm("start", { instructions: "You track orders.", tools: ["lookup"], next_node: "after" }),
            llm("after", { instructions: "Follow up." })
          ],
          [
            tool("lookup", {
              request: { url: tools.url, method: "POST" },
              parameters: { type: "object", properties: { order_id: { type: "integer" } }, required: ["order_id"] }
            })
          ]
        )
      )
      const session = yield* fx.session()
      yield* fx.org.call("POST", `/sessions/${session.id}/messages`, {
        role: "user",
        content: { type: "text", text: "Where is order 42?" }
      })
      script.calls.length = 0
      script.answers.push(
        { toolCalls: [{ id: "call_1", name: "lookup", params: { order_id: 42 } }] },
        { text: "Order 42 has shipped." }
      )
      const response = yield* reply(fx.org, session.id, { debounce_time: 0, metadata: { channel: "whatsapp" } })
      assert.strictEqual(response.status, 200)

      const runs = yield* waitFor(runsOf(session.id), (rows) => rows.length === 1)
      const run = runs[0]!
      assert.strictEqual(run.status, "succeeded", run.error ?? "")
      assert.strictEqual(run.trigger, "reply")
      assert.strictEqual(run.commit_id, fx.commit.id)
      assert.deepStrictEqual(run.nodes, ["start"])
      assert.deepStrictEqual([run.input_tokens, run.output_tokens], [20, 10])

      // The model saw the instructions, the history and the tool; then the tool result.
      assert.strictEqual(script.calls.length, 2)
      assert.strictEqual(script.calls[0]!.system, "You track orders.")
      assert.strictEqual(script.calls[0]!.lastUserText, "Where is order 42?")
      assert.deepStrictEqual(script.calls[0]!.tools, ["lookup"])
      const toolMessage = script.calls[1]!.messages.find((m) => m.role === "tool")
      assert.ok(toolMessage !== undefined && toolMessage.role === "tool")
      const result = toolMessage.content[0] as any
      assert.deepStrictEqual(
        [result.id, result.isFailure, result.result],
        ["call_1", false, { order: 42, status: "shipped" }]
      )

      // The tool got a POST with the model's arguments.
      assert.strictEqual(tools.requests.length, 1)
      assert.strictEqual(tools.requests[0]!.method, "POST")
      assert.deepStrictEqual(tools.requests[0]!.body, { order_id: 42 })

      const messages = yield* messagesOf(fx.org, session.id)
      assert.deepStrictEqual(
        messages.map((m) => [m.role, m.content.type]),
        [
          ["user", "text"],
          ["assistant", "function_call"],
          ["assistant", "function_result"],
          ["assistant", "text"]
        ]
      )
      for (const m of messages) assertMessage(m)
      assert.deepStrictEqual(messages[1].content, {
        type: "function_call",
        call_id: "call_1",
        name: "lookup",
        arguments: { order_id: 42 }
      })
      assert.deepStrictEqual(messages[2].content, {
        type: "function_result",
        call_id: "call_1",
        name: "lookup",
        result: { order: 42, status: "shipped" },
        is_error: false
      })
      const answer = messages[3]
      assert.deepStrictEqual(answer.content, { type: "text", text: "Order 42 has shipped." })
      assert.strictEqual(answer.delivery_status, "pending")
      assert.strictEqual(answer.run_id, run.id)
      assert.deepStrictEqual(answer.metadata, { channel: "whatsapp" })
      for (const m of messages.slice(1)) assert.strictEqual(m.run_id, run.id)

      // message.created for the reply (W1), after the others.
      const events = yield* (yield* TestApi).events(fx.org.id)
      const created = events.filter((e) => e.type === "message.created").map((e) => e.data.object)
      assert.deepStrictEqual(created.at(-1), answer)

      // next_node: the next turn starts at "after".
      const sql = yield* SqlClient.SqlClient
      const [row] = yield* sql<{
        current_node_id: string
      }>`SELECT current_node_id FROM sessions WHERE id = ${session.id}`
      assert.strictEqual(row!.current_node_id, "after")
      script.calls.length = 0
      yield* reply(fx.org, session.id)
      const second = yield* waitFor(runsOf(session.id), (rows) => rows.length === 2)
      assert.deepStrictEqual(second[1]!.nodes, ["after"])
      assert.strictEqual(script.calls[0]!.system, "Follow up.")
      // The history holds text messages only (R2): the earlier reply, not the tool messages.
      assert.deepStrictEqual(
        script.calls[0]!.messages.filter((m) => m.role !== "system").map((m) => m.role),
        ["user", "assistant"]
      )
    })
  )

  it.effect("R2: a should_close tool closes the session after the reply; a failing tool is given to the model", () =>
    Effect.gen(function* () {
      const tools = yield* toolServer((body) =>
        body?.fail ? { status: 500, json: { oops: true } } : { status: 200, json: { ok: true } }
      )
      const fx = yield* aiFixture(
        snapshotOf(
          [llm("start", { tools: ["check", "end_chat"] })],
          [
            tool("check", { request: { url: tools.url, method: "POST" } }),
            tool("end_chat", { request: { url: tools.url, method: "POST" }, should_close: true })
          ]
        )
      )
      const session = yield* fx.session()
      script.answers.push(
        { toolCalls: [{ id: "c1", name: "check", params: { fail: true } }] },
        { toolCalls: [{ id: "c2", name: "end_chat", params: {} }] },
        { text: "Goodbye!" }
      )
      yield* reply(fx.org, session.id)
      const [run] = yield* waitFor(runsOf(session.id), (rows) => rows.length === 1)
      assert.strictEqual(run!.status, "succeeded", run!.error ?? "")
      const messages = yield* messagesOf(fx.org, session.id)
      assert.deepStrictEqual(messages[1].content.is_error, true)
      assert.deepStrictEqual(messages[1].content.result, { status: 500, body: { oops: true } })
      assert.deepStrictEqual(messages.at(-1).content, { type: "text", text: "Goodbye!" })
      const after = yield* fx.org.call("GET", `/sessions/${session.id}`)
      assert.strictEqual(after.body.status, "closed")
      const events = (yield* (yield* TestApi).events(fx.org.id)).filter((e) => e.data.object.id === session.id)
      assert.deepStrictEqual(events.map((e) => e.type).slice(-2), ["session.finished", "session.closed"])
      assert.strictEqual(events.at(-1).data.object.action, null)
    })
  )

  it.effect("R2: starting_node_id wins over the current node; routers pass through to next_node", () =>
    Effect.gen(function* () {
      const fx = yield* aiFixture(
        snapshotOf([
          { id: "route", name: "Route", type: "router", config: { next_node: "billing" } },
          llm("billing", { instructions: "Billing desk." }),
          llm("sales", { instructions: "Sales desk." })
        ])
      )
      const session = yield* fx.session()
      script.calls.length = 0
      yield* reply(fx.org, session.id)
      const first = yield* waitFor(runsOf(session.id), (rows) => rows.length === 1)
      assert.deepStrictEqual(first[0]!.nodes, ["route", "billing"])
      assert.strictEqual(script.calls[0]!.system, "Billing desk.")
      yield* reply(fx.org, session.id, { debounce_time: 0, starting_node_id: "sales" })
      const second = yield* waitFor(runsOf(session.id), (rows) => rows.length === 2)
      assert.deepStrictEqual(second[1]!.nodes, ["sales"])
      assert.strictEqual(script.calls[1]!.system, "Sales desk.")
    })
  )

  it.effect("R2: the runtime answers from main's HEAD: a new publish is used by the next run", () =>
    Effect.gen(function* () {
      const fx = yield* aiFixture(snapshotOf([llm("start", { instructions: "Version one." })]))
      const session = yield* fx.session()
      script.calls.length = 0
      yield* reply(fx.org, session.id)
      const [first] = yield* waitFor(runsOf(session.id), (rows) => rows.length === 1)
      assert.strictEqual(script.calls[0]!.system, "Version one.")
      // A draft edit is not live until published (assistants.md); then the next run uses it.
      const patched = yield* fx.call("PATCH", fx.draft("main"), {
        nodes: { upsert: [llm("start", { instructions: "Version two." })] }
      })
      assert.strictEqual(patched.status, 200, patched.text)
      yield* reply(fx.org, session.id)
      yield* waitFor(runsOf(session.id), (rows) => rows.length === 2)
      assert.strictEqual(script.calls[1]!.system, "Version one.")
      const second = yield* fx.publish("main", "v2")
      yield* reply(fx.org, session.id)
      const runs = yield* waitFor(runsOf(session.id), (rows) => rows.length === 3)
      assert.strictEqual(script.calls[2]!.system, "Version two.")
      assert.deepStrictEqual([first!.commit_id, runs[2]!.commit_id], [fx.commit.id, second.id])
    })
  )

  it.effect(
    "R2, A13: a publish that deletes the session's current node: the next run starts at initial_node_id and records it",
    () =>
      Effect.gen(function* () {
        const sql = yield* SqlClient.SqlClient
        const fx = yield* aiFixture(
          snapshotOf([
            llm("start", { instructions: "Start.", next_node: "follow" }),
            llm("follow", { instructions: "Follow up." })
          ])
        )
        const session = yield* fx.session()
        yield* reply(fx.org, session.id)
        yield* waitFor(runsOf(session.id), (rows) => rows.length === 1)
        // The session now stands on "follow"; a publish removes that node.
        const removed = yield* fx.call("PATCH", fx.draft("main"), {
          nodes: { upsert: [llm("start", { instructions: "Start again." })], delete: ["follow"] }
        })
        assert.strictEqual(removed.status, 200, removed.text)
        yield* fx.publish("main", "drop follow")
        script.calls.length = 0
        yield* reply(fx.org, session.id)
        const runs = yield* waitFor(runsOf(session.id), (rows) => rows.length === 2)
        assert.strictEqual(runs[1]!.status, "succeeded", runs[1]!.error ?? "")
        assert.deepStrictEqual(runs[1]!.nodes, ["start"])
        assert.strictEqual(script.calls[0]!.system, "Start again.")
        const [recorded] = yield* sql<{
          missing_node_id: string | null
        }>`SELECT missing_node_id FROM runs WHERE id = ${runs[1]!.id}`
        assert.strictEqual(recorded!.missing_node_id, "follow")
        // The contact keeps getting answers: a third run goes on normally.
        yield* reply(fx.org, session.id)
        const third = yield* waitFor(runsOf(session.id), (rows) => rows.length === 3)
        assert.strictEqual(third[2]!.status, "succeeded")
      })
  )

  it.effect("R2: a classifier node routes by the model's category", () =>
    Effect.gen(function* () {
      const fx = yield* aiFixture(
        snapshotOf([
          {
            id: "triage",
            name: "Triage",
            type: "classifier",
            config: {
              categories: [
                { name: "refund", next_node: "refunds" },
                { name: "other", next_node: "general" }
              ]
            }
          },
          llm("refunds", { instructions: "Refunds." }),
          llm("general", { instructions: "General." })
        ])
      )
      const session = yield* fx.session()
      script.answers.push({ text: "Refund" }, { text: "We will refund you." })
      yield* reply(fx.org, session.id)
      const [run] = yield* waitFor(runsOf(session.id), (rows) => rows.length === 1)
      assert.deepStrictEqual(run!.nodes, ["triage", "refunds"])
      assert.strictEqual((yield* messagesOf(fx.org, session.id)).at(-1).content.text, "We will refund you.")
    })
  )

  it.effect("model errors are retried; a lasting error fails the run with no reply written", () =>
    Effect.gen(function* () {
      const fx = yield* aiFixture(snapshotOf([llm("start")]))
      const session = yield* fx.session()
      // Two outages, then an answer: retried, succeeds.
      script.answers.push({ error: "retryable" }, { error: "retryable" }, { text: "Back online." })
      yield* reply(fx.org, session.id)
      const [ok] = yield* waitFor(runsOf(session.id), (rows) => rows.length === 1)
      assert.strictEqual(ok!.status, "succeeded")
      assert.strictEqual((yield* messagesOf(fx.org, session.id)).at(-1).content.text, "Back online.")

      // A non-retryable error fails at once: a failed run, no message.
      script.answers.push({ error: "fatal" })
      yield* reply(fx.org, session.id)
      const runs = yield* waitFor(runsOf(session.id), (rows) => rows.length === 2)
      assert.strictEqual(runs[1]!.status, "failed")
      assert.match(runs[1]!.error!, /^Model error: /)
      assert.strictEqual((yield* messagesOf(fx.org, session.id)).length, 1)
    })
  )

  it.effect("unsupported node types and dangling nodes fail the run with a clear error", () =>
    Effect.gen(function* () {
      const fx = yield* aiFixture(snapshotOf([{ id: "sk", name: "Skill", type: "skill", config: {} }, llm("other")]))
      const session = yield* fx.session()
      yield* reply(fx.org, session.id)
      const [run] = yield* waitFor(runsOf(session.id), (rows) => rows.length === 1)
      assert.strictEqual(run!.status, "failed")
      assert.strictEqual(run!.error, 'Node "sk" has type "skill", which the runtime does not run')
      yield* reply(fx.org, session.id, { debounce_time: 0, starting_node_id: "nowhere" })
      const runs = yield* waitFor(runsOf(session.id), (rows) => rows.length === 2)
      assert.strictEqual(runs[1]!.error, `Node "nowhere" is not in the assistant's published version`)
      assert.strictEqual((yield* messagesOf(fx.org, session.id)).length, 0)
    })
  )

  it.effect("an assistant without a published version fails the run (A2)", () =>
    Effect.gen(function* () {
      const fx = yield* aiFixture(snapshotOf([llm("start")]))
      // A second assistant never published, assigned through a new agent.
      const api = yield* TestApi
      const created = yield* api.request("POST", `/admin/v1/organizations/${fx.org.id}/assistants`, {
        token: "test-admin-token",
        body: { name: "Draft only", snapshot: snapshotOf([llm("x")]) }
      })
      const agent = yield* api.request("POST", `/admin/v1/organizations/${fx.org.id}/agents`, {
        token: "test-admin-token",
        body: { name: "Draft bot", type: "ai", assistant_id: created.body.id }
      })
      const session = yield* fx.org.session({ agent_id: agent.body.id })
      yield* reply(fx.org, session.id)
      const [run] = yield* waitFor(runsOf(session.id), (rows) => rows.length === 1)
      assert.strictEqual(run!.status, "failed")
      assert.match(run!.error!, /Assistant has no published version/)
    })
  )

  it.effect(
    "R1: a trigger while a turn runs waits for it; a crashed worker's job runs again once its lease expires",
    () =>
      Effect.gen(function* () {
        const sql = yield* SqlClient.SqlClient
        const fx = yield* aiFixture(snapshotOf([llm("start")]))
        const session = yield* fx.session()
        // Another process holds a running job of this session (lease valid for 30 s).
        const held = "0190a000-0000-7000-8000-0000000000aa"
        yield* sql`INSERT INTO reply_jobs (id, organization_id, session_id, status, due_at, leased_by, lease_until, created_at)
        VALUES (${held}, ${fx.org.id}, ${session.id}, 'running', now(), gen_random_uuid(), now() + interval '30 seconds', now())`
        assert.strictEqual((yield* reply(fx.org, session.id)).status, 200)
        const jobs = sql<{
          status: string
        }>`SELECT status FROM reply_jobs WHERE session_id = ${session.id} ORDER BY status`
        assert.deepStrictEqual(
          (yield* jobs).map((j) => j.status),
          ["pending", "running"]
        )
        yield* realSleep(1500)
        assert.strictEqual((yield* runsOf(session.id)).length, 0, "the next turn waits for the running one")
        // The holder finishes its turn: the pending job runs.
        yield* sql`DELETE FROM reply_jobs WHERE id = ${held}`
        yield* waitFor(runsOf(session.id), (rows) => rows.length === 1)

        // A crashed worker: its running job's lease expired; recovered and run once.
        const crashed = "0190a000-0000-7000-8000-0000000000bb"
        yield* sql`INSERT INTO reply_jobs (id, organization_id, session_id, status, due_at, leased_by, lease_until, created_at)
        VALUES (${crashed}, ${fx.org.id}, ${session.id}, 'running', now() - interval '5 minutes', gen_random_uuid(),
          now() - interval '1 second', now() - interval '5 minutes')`
        const runs = yield* waitFor(runsOf(session.id), (rows) => rows.length === 2, 20_000)
        assert.strictEqual(runs[1]!.status, "succeeded")
        yield* realSleep(500)
        assert.strictEqual((yield* runsOf(session.id)).length, 2)
        assert.deepStrictEqual(yield* jobs, [])
      })
  )
})
