/**
 * Evaluations (DECISIONS.md A15, A16, A17; issue 41 item 2, 3) over HTTP with
 * the workers running: real runs recorded against a scripted model and a
 * recording tool server, then replayed against a baseline and a candidate.
 *
 * The scripted model answers from the call itself (`respond`), so turns
 * answered concurrently get the same answers in any order: a call whose last
 * user text asks about an order calls `lookup` (with `order_id` 8 when the
 * instructions say "New args.", else 7), and after the tool's result answers
 * `<instructions> | <result>`; a "bye" calls `end_chat` (a `should_close`
 * tool) when the node has it; any other call answers `<instructions> |
 * <last user text>`. A judge call (A17) answers `worse`.
 */
import { assert } from "@effect/vitest"
import { Effect } from "effect"
import { SqlClient } from "effect/sql"
import { servicesWith } from "../../src/Server.ts"
import { aiFixture, realSleep, recordTurn, snapshotOf, waitFor } from "../Replies/support.ts"
import { A, assistantFixture, llm, tool } from "../support/Assistants.ts"
import { makeScript, type RecordedCall, type ScriptedAnswer, scriptedModel } from "../support/ScriptedModel.ts"
import { TestApi, withWorkers } from "../support/TestApp.ts"
import { toolServer } from "../support/ToolServer.ts"

const script = makeScript()

const JUDGE_PREFIX = "You compare two replies"

/** The scripted model's answer to `call` (see the module docs). */
const respond = (call: RecordedCall): ScriptedAnswer => {
  if (call.system?.startsWith(JUDGE_PREFIX)) return { text: "worse" }
  const last = call.messages.at(-1)
  if (last?.role === "tool") {
    const part = last.content[0]
    return { text: `${call.system} | ${JSON.stringify(part?.type === "tool-result" ? part.result : null)}` }
  }
  if (call.lastUserText?.includes("bye") && call.tools.includes("end_chat")) {
    return { toolCalls: [{ id: "call-bye", name: "end_chat", params: {} }] }
  }
  if (call.lastUserText?.includes("order")) {
    const orderId = call.system === "New args." ? 8 : 7
    return { toolCalls: [{ id: `call-${orderId}`, name: "lookup", params: { order_id: orderId } }] }
  }
  return { text: `${call.system} | ${call.lastUserText}` }
}
script.respond = respond

/** An assistant with a `lookup` tool on a recording server, two sessions with three recorded runs. */
const recordedFixture = Effect.gen(function* () {
  const tools = yield* toolServer((body) => ({ status: 200, json: { order: body.order_id, status: "shipped" } }))
  const fx = yield* aiFixture(
    snapshotOf(
      [llm("start", { instructions: "Help with orders.", tools: ["lookup"] })],
      [
        tool("lookup", {
          request: { url: tools.url, method: "POST" },
          parameters: { type: "object", properties: { order_id: { type: "integer" } } }
        })
      ]
    )
  )
  const first = yield* fx.session()
  yield* recordTurn(fx, first.id, "Where is my order?")
  yield* recordTurn(fx, first.id, "Thanks")
  const second = yield* fx.session()
  yield* recordTurn(fx, second.id, "Hello")
  assert.strictEqual(tools.requests.length, 1)
  return { fx, tools, sessions: [first.id, second.id] as const }
})

/** Starts an evaluation (202) and waits until it is no longer queued or running. */
const evaluate = (fx: { call: (m: string, p: string, b?: unknown) => Effect.Effect<any> }, body: unknown) =>
  Effect.gen(function* () {
    const created = yield* fx.call("POST", "/evaluations", body)
    assert.strictEqual(created.status, 202, created.text)
    assert.strictEqual(created.body.status, "queued")
    const done = yield* waitFor(
      fx.call("GET", `/evaluations/${created.body.id}`),
      (response) => !["queued", "running"].includes(response.body.status)
    )
    return { created: created.body, evaluation: done.body }
  })

/** The answered turns of evaluation `id`, with `query` (`changed=true&limit=2`, ...). */
const turnsOf = (fx: { call: (m: string, p: string, b?: unknown) => Effect.Effect<any> }, id: string, query = "") =>
  fx
    .call("GET", `/evaluations/${id}/turns${query === "" ? "" : `?${query}`}`)
    .pipe(Effect.map((r) => r.body as Array<any>))

/** What a replay must never change (A16): rows a real run writes, per table, and the sessions as they are. */
const footprint = Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  const [counts] = yield* sql<Record<string, string>>`SELECT
      (SELECT count(*) FROM messages)::text AS messages,
      (SELECT count(*) FROM runs)::text AS runs,
      (SELECT count(*) FROM reply_jobs)::text AS reply_jobs,
      (SELECT count(*) FROM events WHERE type <> 'evaluation.completed')::text AS events,
      (SELECT count(*) FROM deliveries)::text AS deliveries,
      (SELECT coalesce(sum(runs), 0) FROM run_rollups)::text AS rolled_up_runs,
      (SELECT json_agg(s ORDER BY s.id)::text FROM sessions s) AS sessions`
  return counts
})

withWorkers({ allowPrivateNetworkTargets: true }, servicesWith(scriptedModel(script)))("evaluations", (it) => {
  it.effect(
    "A16: main against main changes nothing; tool calls are answered from the records; nothing is written and no tool URL called",
    () =>
      Effect.gen(function* () {
        const { fx, tools, sessions } = yield* recordedFixture
        const before = yield* footprint
        const { created, evaluation } = yield* evaluate(fx, {
          baseline: { branch_name: "main" },
          candidate: { commit_id: fx.commit.id },
          sessions: { ids: sessions }
        })
        assert.strictEqual(created.turns_total, 3)
        assert.strictEqual(created.baseline_commit_id, fx.commit.id)
        assert.strictEqual(evaluation.status, "completed", evaluation.error)
        assert.strictEqual(evaluation.turns_done, 3)
        const summary = evaluation.summary
        assert.deepInclude(summary, {
          turns: 3,
          changed: 0,
          changed_rate: 0,
          text_changed: 0,
          path_changed: 0,
          tools_changed: 0,
          unrecorded_tool_calls: 0,
          baseline_unstable: 0,
          by_node: { start: 0 },
          verdicts: null
        })
        assert.strictEqual(summary.interval[0], 0)
        // Wilson 95% upper bound of 0 of 3: z^2 / (n + z^2).
        assert.closeTo(summary.interval[1], 3.8415 / (3 + 3.8415), 1e-4)
        assert.strictEqual(summary.baseline.input_tokens, 40)

        const turns = yield* turnsOf(fx, created.id)
        assert.deepStrictEqual(
          turns.map((turn) => [turn.session_id, turn.recorded.text]),
          [
            [sessions[0], 'Help with orders. | {"order":7,"status":"shipped"}'],
            [sessions[0], "Help with orders. | Thanks"],
            [sessions[1], "Help with orders. | Hello"]
          ]
        )
        for (const turn of turns) {
          // The history is cut where the run started: each replay answers what the run answered.
          assert.deepStrictEqual(turn.baseline, [turn.recorded])
          assert.deepStrictEqual(turn.candidate, [turn.recorded])
          assert.strictEqual(turn.similarity, 1)
          assert.strictEqual(turn.node_id, "start")
        }
        assert.deepStrictEqual(turns[0].recorded.tool_calls, [
          {
            node_id: "start",
            tool_id: "lookup",
            arguments: { order_id: 7 },
            result: { order: 7, status: "shipped" }
          }
        ])

        assert.deepStrictEqual(yield* footprint, before)
        assert.strictEqual(tools.requests.length, 1, "no tool URL was called by the replay")
        const api = yield* TestApi
        const completed = (yield* api.events(fx.org.id)).filter((event) => event.type === "evaluation.completed")
        assert.strictEqual(completed.length, 1)
        assert.deepStrictEqual(completed[0].data.object, evaluation)
        // The envelope's id is the stored event's id (the webhook-id of its deliveries, W3, W4).
        const sql = yield* SqlClient.SqlClient
        const [row] = yield* sql<{ id: string }>`SELECT id::text AS id FROM events
          WHERE organization_id = ${fx.org.id} AND type = 'evaluation.completed'`
        assert.strictEqual(completed[0].id, row!.id)
      })
  )

  it.effect(
    "A16: a draft whose instructions change calls the tool with new arguments: unrecorded, every turn changed, keyset pages of turns",
    () =>
      Effect.gen(function* () {
        const { fx, tools, sessions } = yield* recordedFixture
        assert.strictEqual((yield* fx.call("POST", "/branches", { name: "feature" })).status, 201)
        const patched = yield* fx.call("PATCH", fx.draft("feature"), {
          nodes: { upsert: [llm("start", { instructions: "New args.", tools: ["lookup"] })] }
        })
        assert.strictEqual(patched.status, 200, patched.text)
        const { created, evaluation } = yield* evaluate(fx, {
          baseline: { branch_name: "main" },
          candidate: { branch_name: "feature", draft: true },
          sessions: { ids: [...sessions] }
        })
        assert.strictEqual(created.candidate_commit_id, null)
        assert.strictEqual(evaluation.status, "completed", evaluation.error)
        const summary = evaluation.summary
        assert.deepInclude(summary, {
          turns: 3,
          changed: 3,
          changed_rate: 1,
          text_changed: 3,
          path_changed: 0,
          tools_changed: 1,
          unrecorded_tool_calls: 1,
          by_node: { start: 3 }
        })
        assert.closeTo(summary.interval[0], 3 / (3 + 3.8415), 1e-4)
        assert.strictEqual(summary.interval[1], 1)

        const page = (query: string) => turnsOf(fx, created.id, query)
        const first = yield* page("changed=true&limit=2")
        const rest = yield* page(`changed=true&limit=2&after_id=${first[1].id}`)
        assert.deepStrictEqual([first.length, rest.length], [2, 1])
        assert.deepStrictEqual(yield* page("changed=false"), [])
        const order = first[0]
        assert.isTrue(order.tools_changed)
        assert.deepStrictEqual(order.candidate[0].tool_calls, [
          { node_id: "start", tool_id: "lookup", arguments: { order_id: 8 }, error: { error: "No recorded result" } }
        ])
        assert.strictEqual(order.candidate[0].text, 'New args. | {"error":"No recorded result"}')
        // {help, with, orders, thanks} and {new, args, thanks}: one word of six shared.
        assert.strictEqual(rest[0].similarity, 1 / 6)
        assert.strictEqual(tools.requests.length, 1, "no tool URL was called by the replay")

        const report = yield* fx.call("GET", `/evaluations/${created.id}/report`)
        assert.strictEqual(report.status, 200)
        assert.match(report.headers.get("content-type") ?? "", /^text\/html/)
        assert.include(report.headers.get("content-security-policy") ?? "", "default-src 'none'")
        assert.include(report.text, "New args.")
      })
  )

  it.effect("A17: a judge grades each changed turn through the model; without one no grading call is made", () =>
    Effect.gen(function* () {
      const { fx, sessions } = yield* recordedFixture
      assert.strictEqual((yield* fx.call("POST", "/branches", { name: "brief" })).status, 201)
      yield* fx.call("PATCH", fx.draft("brief"), {
        nodes: { upsert: [llm("start", { instructions: "Be brief.", tools: ["lookup"] })] }
      })
      const judged = yield* evaluate(fx, {
        baseline: { branch_name: "main" },
        candidate: { branch_name: "brief", draft: true },
        sessions: { ids: [sessions[1]] },
        judge: { instructions: "Shorter is better." }
      })
      assert.deepStrictEqual(judged.evaluation.summary.verdicts, { better: 0, same: 0, worse: 1 })
      const [turn] = yield* turnsOf(fx, judged.created.id)
      assert.strictEqual(turn.verdict, "worse")
      const judgeCall = script.calls.find((call) => call.system?.startsWith(JUDGE_PREFIX))!
      assert.include(judgeCall.system, "Shorter is better.")
      assert.include(judgeCall.lastUserText, "Reply A:\nHelp with orders. | Hello")
      assert.include(judgeCall.lastUserText, "Reply B:\nBe brief. | Hello")

      script.calls.length = 0
      const unjudged = yield* evaluate(fx, {
        baseline: { branch_name: "main" },
        candidate: { branch_name: "brief", draft: true },
        sessions: { ids: [sessions[1]] }
      })
      assert.strictEqual(unjudged.evaluation.summary.verdicts, null)
      assert.isFalse(script.calls.some((call) => call.system?.startsWith(JUDGE_PREFIX)))
    })
  )

  it.effect("A16: sessions by range, newest first with a limit; repeats answer each side that many times", () =>
    Effect.gen(function* () {
      const { fx, sessions } = yield* recordedFixture
      const { created, evaluation } = yield* evaluate(fx, {
        baseline: { branch_name: "main" },
        candidate: { branch_name: "main" },
        sessions: { limit: 1 },
        repeats: 2
      })
      assert.strictEqual(created.turns_total, 1)
      assert.strictEqual(evaluation.summary.turns, 1)
      const [turn] = yield* turnsOf(fx, created.id)
      assert.strictEqual(turn.session_id, sessions[1])
      assert.strictEqual(turn.baseline.length, 2)
      assert.strictEqual(turn.candidate.length, 2)
      const none = yield* fx.call("POST", "/evaluations", {
        baseline: { branch_name: "main" },
        candidate: { branch_name: "main" },
        sessions: { since: "2999-01-01T00:00:00Z" }
      })
      assert.strictEqual(none.body.turns_total, 0)
      const empty = yield* waitFor(
        fx.call("GET", `/evaluations/${none.body.id}`),
        (response) => response.body.status === "completed"
      )
      assert.deepInclude(empty.body.summary, { turns: 0, changed: 0, changed_rate: 0, interval: [0, 0] })
      const listed = (yield* fx.call("GET", "/evaluations?limit=1")).body as Array<any>
      assert.deepStrictEqual(
        listed.map((e) => e.id),
        [none.body.id]
      )
      const next = (yield* fx.call("GET", `/evaluations?after_id=${none.body.id}`)).body as Array<any>
      assert.deepStrictEqual(
        next.map((e) => e.id),
        [created.id]
      )
    })
  )

  it.effect("A16: what a request gets wrong is a 4xx with a detail; other organizations see nothing", () =>
    Effect.gen(function* () {
      const { fx, sessions } = yield* recordedFixture
      const main = { branch_name: "main" }
      const post = (body: unknown) => fx.call("POST", "/evaluations", body)
      const unknown = yield* post({ baseline: main, candidate: main, sessions: { ids: [sessions[0], "nope"] } })
      assert.strictEqual(unknown.status, 422)
      assert.deepStrictEqual(unknown.body.detail, [
        { loc: ["body", "sessions", "ids", 1], msg: "Session not found", type: "value_error" }
      ])
      assert.strictEqual((yield* post({ baseline: main, candidate: main, sessions: { limit: 1001 } })).status, 422)
      assert.strictEqual((yield* post({ baseline: main, candidate: main, sessions: {}, repeats: 6 })).status, 422)
      const branch = yield* post({ baseline: main, candidate: { branch_name: "nope" }, sessions: {} })
      assert.deepStrictEqual([branch.status, branch.body.detail], [404, "Branch not found"])
      const commit = yield* post({ baseline: main, candidate: { commit_id: "nope" }, sessions: {} })
      assert.deepStrictEqual([commit.status, commit.body.detail], [404, "Commit not found"])
      // An assistant never published: main's HEAD is null (its draft can be evaluated).
      const unpublished = yield* assistantFixture({ snapshot: snapshotOf([llm("start")]) })
      const head = yield* unpublished.call("POST", "/evaluations", { baseline: main, candidate: main, sessions: {} })
      assert.deepStrictEqual([head.status, head.body.detail], [400, "Branch has no published version"])
      const draft = yield* unpublished.call("POST", "/evaluations", {
        baseline: { branch_name: "main", draft: true },
        candidate: { branch_name: "main", draft: true },
        sessions: {}
      })
      assert.deepStrictEqual([draft.status, draft.body.turns_total], [202, 0])

      const missing = yield* fx.call("GET", "/evaluations/0190a000-0000-7000-8000-000000000000")
      assert.deepStrictEqual([missing.status, missing.body.detail], [404, "Evaluation not found"])
      const { created } = yield* evaluate(fx, { baseline: main, candidate: main, sessions: { ids: [sessions[1]] } })
      const again = yield* fx.call("DELETE", `/evaluations/${created.id}`)
      assert.deepStrictEqual([again.status, again.body.detail], [409, "Evaluation is already finished"])

      const other = yield* aiFixture(snapshotOf([llm("start")]))
      const foreign = yield* other.api.request("GET", `${A}/assistants/${fx.id}/evaluations/${created.id}`, {
        token: other.org.token
      })
      assert.deepStrictEqual([foreign.status, foreign.body.detail], [404, "Assistant not found"])
      const viaOwnAssistant = yield* other.call("GET", `/evaluations/${created.id}`)
      assert.deepStrictEqual([viaOwnAssistant.status, viaOwnAssistant.body.detail], [404, "Evaluation not found"])
      const foreignSessions = yield* other.call("POST", "/evaluations", {
        baseline: main,
        candidate: main,
        sessions: { ids: [sessions[0]] }
      })
      assert.strictEqual(foreignSessions.status, 422)
    })
  )
  it.effect("A16: DELETE cancels a running evaluation: answers still in flight are not written, no event", () =>
    Effect.gen(function* () {
      const { fx, sessions } = yield* recordedFixture
      let open: () => void = () => {}
      script.gate = new Promise<void>((resolve) => (open = resolve))
      const created = yield* fx.call("POST", "/evaluations", {
        baseline: { branch_name: "main" },
        candidate: { branch_name: "main" },
        sessions: { ids: [...sessions] }
      })
      yield* waitFor(fx.call("GET", `/evaluations/${created.body.id}`), (r) => r.body.status === "running")
      const cancelled = yield* fx.call("DELETE", `/evaluations/${created.body.id}`)
      script.gate = undefined
      open()
      assert.strictEqual(cancelled.status, 200, cancelled.text)
      assert.strictEqual(cancelled.body.status, "cancelled")
      assert.isNotNull(cancelled.body.completed_at)
      yield* realSleep(500)
      const after = (yield* fx.call("GET", `/evaluations/${created.body.id}`)).body
      assert.deepInclude(after, { status: "cancelled", turns_done: 0, summary: null })
      assert.deepStrictEqual((yield* fx.call("GET", `/evaluations/${created.body.id}/turns`)).body, [])
      const events = (yield* (yield* TestApi).events(fx.org.id)).filter((e) => e.type === "evaluation.completed")
      assert.deepStrictEqual(events, [])
    })
  )

  it.effect(
    "A16: a worker that lost its lease writes nothing; the evaluation is taken up again and each turn is answered once",
    () =>
      Effect.gen(function* () {
        const sql = yield* SqlClient.SqlClient
        const { fx, sessions } = yield* recordedFixture
        let open: () => void = () => {}
        script.gate = new Promise<void>((resolve) => (open = resolve))
        const created = yield* fx.call("POST", "/evaluations", {
          baseline: { branch_name: "main" },
          candidate: { branch_name: "main" },
          sessions: { ids: [...sessions] }
        })
        const id = created.body.id
        yield* waitFor(fx.call("GET", `/evaluations/${id}`), (r) => r.body.status === "running")
        // The worker holding it "crashed" after answering the first turn: its lease is another's and has expired.
        yield* sql`UPDATE evaluation_turns SET answered_at = now(), should_close = false,
            baseline = '[{"text":"before the crash","nodes":["start"],"tool_calls":[],"error":null}]',
            candidate = '[{"text":"before the crash","nodes":["start"],"tool_calls":[],"error":null}]',
            text_changed = false, path_changed = false, tools_changed = false, changed = false, similarity = 1,
            stats = '{"baseline":{"durations_ms":[1],"input_tokens":0,"output_tokens":0},"candidate":{"durations_ms":[1],"input_tokens":0,"output_tokens":0},"unrecorded_tool_calls":0,"baseline_unstable":false}'
          WHERE evaluation_id = ${id} AND position = 1`
        yield* sql`UPDATE evaluations SET turns_done = 1, leased_by = ${"0190a000-0000-7000-8000-00000000dead"},
            lease_until = now() - interval '1 second' WHERE id = ${id}`
        const calls = script.calls.length
        script.gate = undefined
        open()
        const done = yield* waitFor(fx.call("GET", `/evaluations/${id}`), (r) => r.body.status === "completed")
        assert.deepInclude(done.body, { turns_total: 3, turns_done: 3 })
        const turns = yield* turnsOf(fx, id)
        assert.strictEqual(turns[0].baseline[0].text, "before the crash", "the turn answered before the crash is kept")
        assert.deepStrictEqual(
          turns.slice(1).map((turn) => turn.baseline[0].text),
          ["Help with orders. | Thanks", "Help with orders. | Hello"]
        )
        // The stuck batch's two turns in flight (2 sides each) were refused; its third (the order turn, two calls a
        // side) was not started once the lease was found lost; then 2 turns were answered again.
        assert.strictEqual(script.calls.length - calls, 2 * 2 + 2 * 2)
      })
  )
  it.effect(
    "A15, A16: a run recorded without records still replays (its calls unrecorded); a start node the version lacks starts at initial_node_id",
    () =>
      Effect.gen(function* () {
        const sql = yield* SqlClient.SqlClient
        const { fx, tools, sessions } = yield* recordedFixture
        // Runs written before A15 have no records (migrations/0023_run_records.ts).
        yield* sql`UPDATE runs SET tool_calls = '[]' WHERE session_id = ${sessions[0]}`
        const old = yield* evaluate(fx, {
          baseline: { branch_name: "main" },
          candidate: { branch_name: "main" },
          sessions: { ids: [sessions[0]] }
        })
        assert.deepInclude(old.evaluation.summary, { turns: 2, changed: 0, unrecorded_tool_calls: 2 })
        const [order] = yield* turnsOf(fx, old.created.id)
        assert.deepStrictEqual(order.recorded.tool_calls, [])
        assert.strictEqual(order.baseline[0].text, 'Help with orders. | {"error":"No recorded result"}')
        assert.strictEqual(tools.requests.length, 1, "no tool URL was called by the replay")

        // A draft that renamed the node the runs started at: the candidate starts at initial_node_id.
        assert.strictEqual((yield* fx.call("POST", "/branches", { name: "renamed" })).status, 201)
        const renamed = yield* fx.call("PATCH", fx.draft("renamed"), {
          nodes: { upsert: [llm("welcome", { instructions: "Welcome." })], delete: ["start"] },
          config: { initial_node_id: "welcome" }
        })
        assert.strictEqual(renamed.status, 200, renamed.text)
        const moved = yield* evaluate(fx, {
          baseline: { branch_name: "main" },
          candidate: { branch_name: "renamed", draft: true },
          sessions: { ids: [sessions[1]] }
        })
        const [turn] = yield* turnsOf(fx, moved.created.id)
        assert.strictEqual(turn.node_id, "start")
        assert.deepStrictEqual(turn.candidate[0].nodes, ["welcome"])
        assert.strictEqual(turn.candidate[0].text, "Welcome. | Hello")
        assert.deepInclude(moved.evaluation.summary, { changed: 1, path_changed: 1, by_node: { start: 1 } })
      })
  )

  it.effect("A16: should_close says whether the reply would have closed the session; the session stays as it is", () =>
    Effect.gen(function* () {
      const tools = yield* toolServer(() => ({ status: 200, json: { ok: true } }))
      const fx = yield* aiFixture(
        snapshotOf(
          [llm("start", { instructions: "Say goodbye.", tools: ["end_chat"] })],
          [tool("end_chat", { request: { url: tools.url, method: "POST" }, should_close: true })]
        )
      )
      const session = yield* fx.session()
      yield* recordTurn(fx, session.id, "Hello")
      assert.strictEqual((yield* fx.call("POST", "/branches", { name: "open" })).status, 201)
      yield* fx.call("PATCH", fx.draft("open"), {
        nodes: { upsert: [llm("start", { instructions: "Say goodbye.", tools: [] })] }
      })
      // The second turn closes the session (R2) and leaves it closed.
      yield* recordTurn(fx, session.id, "bye")
      const closed = (yield* fx.org.call("GET", `/sessions/${session.id}`)).body
      assert.strictEqual(closed.status, "closed")
      const { created } = yield* evaluate(fx, {
        baseline: { branch_name: "main" },
        candidate: { branch_name: "open", draft: true },
        sessions: { ids: [session.id] }
      })
      const turns = yield* turnsOf(fx, created.id)
      assert.deepStrictEqual(
        turns.map((turn) => turn.should_close),
        [false, false]
      )
      const same = yield* evaluate(fx, {
        baseline: { branch_name: "open", draft: true },
        candidate: { branch_name: "main" },
        sessions: { ids: [session.id] }
      })
      const again = yield* turnsOf(fx, same.created.id)
      assert.deepStrictEqual(
        again.map((turn) => turn.should_close),
        [false, true]
      )
      assert.deepStrictEqual((yield* fx.org.call("GET", `/sessions/${session.id}`)).body, closed)
      assert.strictEqual(tools.requests.length, 1, "only the recorded run called the tool")
    })
  )
})
