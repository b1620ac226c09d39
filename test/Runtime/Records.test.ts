/**
 * Run records (DECISIONS.md A15) and the replay's tool executor (A16), over
 * values: what the walk records for each tool call, and how a replay answers
 * calls from the recordings (`src/Runtime/Records.ts`). That a run stores its
 * records is in test/Runtime/Rules.test.ts.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Layer } from "effect"
import { Models } from "../../src/Runtime/Models.ts"
import {
  NO_RECORDED_RESULT,
  RECORD_RESULT_MAX_BYTES,
  recordedToolCaller,
  recordOf,
  type ToolCallRecord
} from "../../src/Runtime/Records.ts"
import { ToolCaller } from "../../src/Runtime/Tools.ts"
import { walk } from "../../src/Runtime/Walk.ts"
import { llm, tool } from "../support/Assistants.ts"
import { makeScript, scriptedLanguageModel } from "../support/ScriptedModel.ts"

const target = (id: string) => ({ id, url: "http://tools.invalid/", method: "POST" })

describe("run records (A15)", () => {
  it("a result is kept as given; a failure as error; over 64 KiB the JSON text is cut to 64 KiB with the mark", () => {
    assert.deepStrictEqual(recordOf("n", "t", { a: 1 }, { result: [1, 2], isError: false }), {
      node_id: "n",
      tool_id: "t",
      arguments: { a: 1 },
      result: [1, 2]
    })
    assert.deepStrictEqual(recordOf("n", "t", undefined, { result: { error: "Timed out" }, isError: true }), {
      node_id: "n",
      tool_id: "t",
      arguments: null,
      error: { error: "Timed out" }
    })
    // Multi-byte characters: the cut never leaves half a character.
    const big = recordOf("n", "t", {}, { result: { text: "é".repeat(40_000) }, isError: false })
    assert.strictEqual(big.truncated, true)
    const cut = big.result as string
    assert.isAtMost(Buffer.byteLength(cut, "utf8"), RECORD_RESULT_MAX_BYTES)
    assert.isAtLeast(Buffer.byteLength(cut, "utf8"), RECORD_RESULT_MAX_BYTES - 1)
    assert.isTrue(cut.startsWith('{"text":"éé') && !cut.includes("\uFFFD"))
    const exact = recordOf("n", "t", {}, { result: "x".repeat(RECORD_RESULT_MAX_BYTES - 2), isError: false })
    assert.isUndefined(exact.truncated)
  })

  it.effect("the walk records every call of the turn in order, with its node, across tool rounds", () =>
    Effect.gen(function* () {
      const script = makeScript()
      script.answers.push(
        { toolCalls: [{ id: "c1", name: "lookup", params: { order: 42 } }] },
        {
          toolCalls: [
            { id: "c2", name: "lookup", params: { order: 43 } },
            { id: "c3", name: "refund", params: {} }
          ]
        },
        { text: "Done" }
      )
      const turn = yield* walk({
        snapshot: {
          graph: { initial_node_id: "desk", nodes: [llm("desk", { tools: ["lookup", "refund"] })] },
          tools: [tool("lookup"), tool("refund")].map((t) => ({ ...t, id: t.name }))
        },
        startNodeId: "desk",
        history: [{ role: "user", text: "Where are my orders?" }],
        metadata: {}
      }).pipe(
        Effect.provide(
          Layer.merge(
            Models.layerTest(scriptedLanguageModel(script)),
            ToolCaller.layerTest((called, args) =>
              called.id === "refund"
                ? { result: { error: "Not allowed" }, isError: true }
                : { result: { order: (args as { order: number }).order, status: "shipped" }, isError: false }
            )
          )
        )
      )
      assert.deepStrictEqual(turn.toolCalls, [
        { node_id: "desk", tool_id: "lookup", arguments: { order: 42 }, result: { order: 42, status: "shipped" } },
        { node_id: "desk", tool_id: "lookup", arguments: { order: 43 }, result: { order: 43, status: "shipped" } },
        { node_id: "desk", tool_id: "refund", arguments: {}, error: { error: "Not allowed" } }
      ])
    })
  )
})

describe("the replay's tool executor (A16)", () => {
  const records: ReadonlyArray<ToolCallRecord> = [
    { node_id: "n", tool_id: "lookup", arguments: { order: 1, fields: ["a", "b"] }, result: "first" },
    { node_id: "n", tool_id: "lookup", arguments: { fields: ["a", "b"], order: 1 }, result: "second" },
    { node_id: "n", tool_id: "refund", arguments: { order: 1 }, error: { status: 409 } }
  ]

  it.effect(
    "a call takes the first unused record of its tool id and canonical arguments (key order is no change), in order of use",
    () =>
      Effect.gen(function* () {
        const replay = recordedToolCaller(records)
        const outcomes = yield* Effect.gen(function* () {
          const tools = yield* ToolCaller
          return [
            yield* tools.call(target("lookup"), { fields: ["a", "b"], order: 1 }),
            yield* tools.call(target("refund"), { order: 1 }),
            yield* tools.call(target("lookup"), { order: 1, fields: ["a", "b"] })
          ]
        }).pipe(Effect.provide(replay.layer))
        assert.deepStrictEqual(outcomes, [
          { result: "first", isError: false },
          { result: { status: 409 }, isError: true },
          { result: "second", isError: false }
        ])
        assert.strictEqual(replay.unrecorded(), 0)
      })
  )

  it.effect("a call with no record left, new arguments or another tool gets No recorded result and is counted", () =>
    Effect.gen(function* () {
      const replay = recordedToolCaller(records)
      const outcomes = yield* Effect.gen(function* () {
        const tools = yield* ToolCaller
        return [
          yield* tools.call(target("refund"), { order: 1 }),
          yield* tools.call(target("refund"), { order: 1 }),
          yield* tools.call(target("lookup"), { order: 2, fields: ["a", "b"] }),
          yield* tools.call(target("lookup"), { order: 1, fields: ["b", "a"] }),
          yield* tools.call(target("other"), {})
        ]
      }).pipe(Effect.provide(replay.layer))
      assert.deepStrictEqual(outcomes.slice(1), [
        { result: NO_RECORDED_RESULT, isError: true },
        { result: NO_RECORDED_RESULT, isError: true },
        { result: NO_RECORDED_RESULT, isError: true },
        { result: NO_RECORDED_RESULT, isError: true }
      ])
      assert.strictEqual(replay.unrecorded(), 4)
    })
  )

  it.effect("a redacted record (D23) answers no call, not even one without arguments", () =>
    Effect.gen(function* () {
      const replay = recordedToolCaller([{ node_id: "n", tool_id: "lookup", arguments: null, redacted: true }])
      const outcome = yield* Effect.gen(function* () {
        const tools = yield* ToolCaller
        return yield* tools.call(target("lookup"), null)
      }).pipe(Effect.provide(replay.layer))
      assert.deepStrictEqual(outcome, { result: NO_RECORDED_RESULT, isError: true })
      assert.strictEqual(replay.unrecorded(), 1)
    })
  )
})
