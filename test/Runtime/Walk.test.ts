/**
 * The walk of an assistant's graph (DECISIONS.md R2, A13; issue 13 item 8),
 * fast and with no database: over a scripted model (`Models.layerTest`) and
 * in-memory tool calls (`ToolCaller.layerTest`). Each failure is a tagged
 * reason whose `message` is the text a run records.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Fiber, Layer } from "effect"
import { TestClock } from "effect/testing"
import type { JsonObject } from "../../src/Domain/Common.ts"
import type { HistoryEntry } from "../../src/Messages/Repo.ts"
import type * as RunFailure from "../../src/Runtime/Errors.ts"
import { Models } from "../../src/Runtime/Models.ts"
import type { ToolOutcome, ToolTarget } from "../../src/Runtime/Tools.ts"
import { ToolCaller } from "../../src/Runtime/Tools.ts"
import {
  MAX_NODE_STEPS,
  MAX_TOOL_ROUNDS,
  MODEL_RETRIES,
  type RuntimeSnapshot,
  startNode,
  walk
} from "../../src/Runtime/Walk.ts"
import { llm, tool } from "../support/Assistants.ts"
import { makeScript, type Script, scriptedLanguageModel } from "../support/ScriptedModel.ts"

const history: ReadonlyArray<HistoryEntry> = [{ role: "user", text: "Where is my order?" }]

/** A snapshot of `nodes` and `tools` (tools' `id` is their name), starting at the first node. */
const snapshotOf = (
  nodes: ReadonlyArray<{ readonly id: string; readonly type: string; readonly config?: Record<string, unknown> }>,
  tools: ReadonlyArray<{ readonly name: string; readonly [key: string]: unknown }> = []
): RuntimeSnapshot => ({
  graph: { initial_node_id: nodes[0]?.id ?? null, nodes },
  tools: tools.map((t) => ({ id: t.name, ...t }))
})

const router = (id: string, next?: string, type = "router") => ({
  id,
  type,
  config: next === undefined ? {} : { next_node: next }
})

/** Walks `snapshot` from `start` (default: its initial node) over `script` and `tools`. */
const walkOver = (
  script: Script,
  snapshot: RuntimeSnapshot,
  options: {
    readonly start?: string | undefined
    readonly metadata?: JsonObject
    readonly tools?: (target: ToolTarget, args: unknown) => ToolOutcome
  } = {}
) =>
  walk({
    snapshot,
    startNodeId: "start" in options ? options.start : (snapshot.graph?.initial_node_id ?? undefined),
    history,
    metadata: options.metadata ?? {}
  }).pipe(
    Effect.provide(Layer.merge(Models.layerTest(scriptedLanguageModel(script)), ToolCaller.layerTest(options.tools)))
  )

/** The failure reason of a walk expected to fail. */
const reasonOf = <A, R>(effect: Effect.Effect<A, RunFailure.RunFailed, R>) =>
  Effect.map(Effect.flip(effect), (failure) => failure.reason)

describe("startNode (R2, A13)", () => {
  const snapshot = snapshotOf([llm("start"), llm("follow")])

  it("starting_node_id first, then the session's current node, then initial_node_id", () => {
    assert.deepStrictEqual(startNode(snapshot, "follow", "start"), { nodeId: "follow", missingNodeId: null })
    assert.deepStrictEqual(startNode(snapshot, null, "follow"), { nodeId: "follow", missingNodeId: null })
    assert.deepStrictEqual(startNode(snapshot, null, null), { nodeId: "start", missingNodeId: null })
  })

  it("R2, A13: a current node the published version no longer has starts at initial_node_id and is reported", () => {
    assert.deepStrictEqual(startNode(snapshot, null, "deleted"), { nodeId: "start", missingNodeId: "deleted" })
  })

  it("no initial_node_id and nothing else: nowhere to start", () => {
    assert.deepStrictEqual(startNode({ graph: { nodes: [] } }, null, null), { nodeId: undefined, missingNodeId: null })
  })
})

describe("walk (R2)", () => {
  it.effect("R2: router and logic go to next_node without the model; the llm node answers; its next_node is next", () =>
    Effect.gen(function* () {
      const script = makeScript()
      script.answers.push({ text: "  It ships today.  " })
      const turn = yield* walkOver(
        script,
        snapshotOf([router("r", "l"), router("l", "answer", "logic"), llm("answer", { next_node: "after" })]),
        { metadata: { source: "test" } }
      )
      assert.deepStrictEqual(turn.nodes, ["r", "l", "answer"])
      assert.strictEqual(script.calls.length, 1)
      assert.strictEqual(script.calls[0]!.system, "You are answer")
      assert.strictEqual(script.calls[0]!.lastUserText, "Where is my order?")
      assert.deepStrictEqual(turn.messages, [
        {
          role: "assistant",
          content: { type: "text", text: "It ships today." },
          provider_message_id: null,
          replied_provider_message_id: null,
          metadata: { source: "test" }
        }
      ])
      assert.strictEqual(turn.nextNode, "after")
      assert.deepStrictEqual([turn.inputTokens, turn.outputTokens, turn.model], [10, 5, "test"])
    })
  )

  it.effect("R2: a classifier routes by the model's category (case and surrounding words ignored)", () =>
    Effect.gen(function* () {
      const script = makeScript()
      script.answers.push({ text: "Category: Refund" }, { text: "We will refund you." })
      const turn = yield* walkOver(
        script,
        snapshotOf([
          {
            id: "triage",
            type: "classifier",
            config: {
              categories: [
                { name: "refund", description: "Money back", next_node: "refunds" },
                { name: "other", next_node: "general" }
              ]
            }
          },
          llm("refunds"),
          llm("general")
        ])
      )
      assert.deepStrictEqual(turn.nodes, ["triage", "refunds"])
      assert.include(script.calls[0]!.system ?? "", "- refund: Money back\n- other")
      assert.strictEqual(turn.inputTokens, 20)
    })
  )

  it.effect("R2: a classifier answer naming no category goes to config.next_node; without one the run fails", () =>
    Effect.gen(function* () {
      const categories = [{ name: "refund", next_node: "refunds" }]
      const script = makeScript()
      script.answers.push({ text: "no idea" })
      const turn = yield* walkOver(
        script,
        snapshotOf([
          { id: "triage", type: "classifier", config: { categories, next_node: "general" } },
          llm("refunds"),
          llm("general")
        ])
      )
      assert.deepStrictEqual(turn.nodes, ["triage", "general"])

      script.answers.push({ text: "no idea" })
      const reason = yield* reasonOf(
        walkOver(script, snapshotOf([{ id: "triage", type: "classifier", config: { categories } }, llm("refunds")]))
      )
      assert.strictEqual(reason._tag, "NoCategoryMatch")
      assert.strictEqual(
        reason.message,
        'Classifier node "triage": the answer names no category and there is no next_node'
      )
      const none = yield* reasonOf(walkOver(script, snapshotOf([{ id: "triage", type: "classifier" }])))
      assert.strictEqual(none._tag, "NoCategories")
      assert.strictEqual(none.message, 'Classifier node "triage" has no categories ([{name, next_node}]) to route by')
    })
  )

  it.effect("R2: tool calls go to the tool, are kept as function_call/function_result, and the model answers", () =>
    Effect.gen(function* () {
      const script = makeScript()
      script.answers.push(
        { toolCalls: [{ id: "call-1", name: "lookup", params: { order: 42 } }] },
        { text: "Order 42 has shipped." }
      )
      const called: Array<[ToolTarget, unknown]> = []
      const turn = yield* walkOver(
        script,
        snapshotOf(
          [llm("answer", { tools: ["lookup"] })],
          [tool("lookup", { should_close: true, parameters: { properties: { order: { type: "number" } } } })]
        ),
        {
          tools: (target, args) => {
            called.push([target, args])
            return { result: { status: "shipped" }, isError: false }
          }
        }
      )
      assert.deepStrictEqual(called, [
        [{ id: "lookup", url: "https://example.com/tools", method: "POST" }, { order: 42 }]
      ])
      assert.deepStrictEqual(script.calls[0]!.tools, ["lookup"])
      assert.deepStrictEqual(
        turn.messages.map((message) => message.content),
        [
          { type: "function_call", call_id: "call-1", name: "lookup", arguments: { order: 42 } },
          {
            type: "function_result",
            call_id: "call-1",
            name: "lookup",
            result: { status: "shipped" },
            is_error: false
          },
          { type: "text", text: "Order 42 has shipped." }
        ]
      )
      assert.isTrue(turn.shouldClose)
    })
  )

  it.effect("R2: a failed tool is a result for the model, and a should_close tool that failed does not close", () =>
    Effect.gen(function* () {
      const script = makeScript()
      script.answers.push(
        { toolCalls: [{ id: "c1", name: "lookup", params: {} }] },
        { toolCalls: [{ id: "c2", name: "unknown_tool", params: {} }] },
        { text: "Sorry, I could not look that up." }
      )
      const turn = yield* walkOver(
        script,
        snapshotOf([llm("answer", { tools: ["lookup"] })], [tool("lookup", { should_close: true })]),
        { tools: () => ({ result: { error: "Timed out after 10000 ms" }, isError: true }) }
      )
      const results = turn.messages.filter((message) => message.content.type === "function_result")
      assert.deepStrictEqual(
        results.map((message) => message.content),
        [
          {
            type: "function_result",
            call_id: "c1",
            name: "lookup",
            result: { error: "Timed out after 10000 ms" },
            is_error: true
          },
          {
            type: "function_result",
            call_id: "c2",
            name: "unknown_tool",
            result: { error: "Unknown tool unknown_tool" },
            is_error: true
          }
        ]
      )
      assert.isFalse(turn.shouldClose)
    })
  )

  it.effect("a model still calling tools after MAX_TOOL_ROUNDS calls fails with ToolLoop", () =>
    Effect.gen(function* () {
      const script = makeScript()
      for (let i = 0; i < MAX_TOOL_ROUNDS; i++)
        script.answers.push({ toolCalls: [{ id: `c${i}`, name: "t", params: {} }] })
      const reason = yield* reasonOf(walkOver(script, snapshotOf([llm("answer", { tools: ["t"] })], [tool("t")])))
      assert.strictEqual(reason._tag, "ToolLoop")
      assert.strictEqual(
        reason.message,
        `The model was still calling tools after ${MAX_TOOL_ROUNDS} rounds at node "answer"`
      )
      assert.strictEqual(script.calls.length, MAX_TOOL_ROUNDS)
    })
  )

  it.effect(
    "a node naming a tool the assistant does not have fails with ToolMissing; an empty answer with EmptyAnswer",
    () =>
      Effect.gen(function* () {
        const script = makeScript()
        const missing = yield* reasonOf(walkOver(script, snapshotOf([llm("answer", { tools: ["ghost"] })])))
        assert.strictEqual(missing._tag, "ToolMissing")
        assert.strictEqual(missing.message, 'Tool "ghost" of node "answer" is not in the assistant')
        script.answers.push({ text: "   " })
        const empty = yield* reasonOf(walkOver(script, snapshotOf([llm("answer")])))
        assert.strictEqual(empty._tag, "EmptyAnswer")
        assert.strictEqual(empty.message, 'The model gave an empty answer at node "answer"')
      })
  )

  it.effect("R2: a missing node, an unsupported node type, a router without next_node, no start: tagged failures", () =>
    Effect.gen(function* () {
      const script = makeScript()
      const cases = [
        [
          snapshotOf([router("r", "nowhere")]),
          "NodeMissing",
          `Node "nowhere" is not in the assistant's published version`
        ],
        [
          snapshotOf([{ id: "s", type: "skill" }]),
          "NodeUnsupported",
          'Node "s" has type "skill", which the runtime does not run'
        ],
        [snapshotOf([router("l", undefined, "logic")]), "NoNextNode", 'Node "l" (logic) has no next_node to go to']
      ] as const
      for (const [snapshot, tag, message] of cases) {
        const reason = yield* reasonOf(walkOver(script, snapshot))
        assert.deepStrictEqual([reason._tag, reason.message], [tag, message])
      }
      const nowhere = yield* reasonOf(walkOver(script, snapshotOf([llm("a")]), { start: undefined }))
      assert.deepStrictEqual(
        [nowhere._tag, nowhere.message],
        ["NoStartNode", "The assistant has no initial_node_id and no node to start from"]
      )
      assert.strictEqual(script.calls.length, 0)
    })
  )

  it.effect("MAX_NODE_STEPS: routers that never reach an llm node fail with StepLimit", () =>
    Effect.gen(function* () {
      const reason = yield* reasonOf(walkOver(makeScript(), snapshotOf([router("a", "b"), router("b", "a")])))
      assert.strictEqual(reason._tag, "StepLimit")
      assert.strictEqual(reason.message, `No llm node was reached within ${MAX_NODE_STEPS} nodes`)
    })
  )

  it.effect("model errors: retryable ones are retried MODEL_RETRIES times with backoff, then ModelFailed", () =>
    Effect.gen(function* () {
      const script = makeScript()
      for (let i = 0; i <= MODEL_RETRIES; i++) script.answers.push({ error: "retryable" })
      const fiber = yield* Effect.forkChild(reasonOf(walkOver(script, snapshotOf([llm("answer")]))))
      yield* TestClock.adjust("1 minute")
      const reason = yield* Fiber.join(fiber)
      assert.strictEqual(reason._tag, "ModelFailed")
      assert.match(reason.message, /^Model error: /)
      assert.strictEqual(script.calls.length, MODEL_RETRIES + 1)

      const fatal = makeScript()
      fatal.answers.push({ error: "fatal" })
      const once = yield* reasonOf(walkOver(fatal, snapshotOf([llm("answer")])))
      assert.strictEqual(once._tag, "ModelFailed")
      assert.strictEqual(fatal.calls.length, 1)
    })
  )
})
