/**
 * How an evaluation compares answers and sums them up (DECISIONS.md A16,
 * A17; `src/Evaluations/Compare.ts`), over values.
 */
import { assert, describe, it } from "@effect/vitest"
import { compareTurn, similarity, summarize, wilsonInterval } from "../../src/Evaluations/Compare.ts"
import { verdictOf } from "../../src/Evaluations/Judge.ts"

const answer = (text: string, nodes: Array<string> = ["start"], tool_calls: Array<any> = []) => ({
  text,
  nodes,
  tool_calls,
  error: null
})
const call = (args: unknown) => ({ node_id: "start", tool_id: "lookup", arguments: args, result: { ok: true } })

describe("evaluation comparison (A16)", () => {
  it("the Wilson 95% interval: known values, exact at the ends, nothing without turns", () => {
    const [low, high] = wilsonInterval(5, 10)
    assert.closeTo(low, 0.2366, 1e-4)
    assert.closeTo(high, 0.7634, 1e-4)
    const [few, many] = wilsonInterval(1, 50)
    assert.closeTo(few, 0.0035, 1e-4)
    assert.closeTo(many, 0.105, 1e-3)
    assert.deepStrictEqual(wilsonInterval(0, 20)[0], 0)
    assert.deepStrictEqual(wilsonInterval(20, 20)[1], 1)
    assert.deepStrictEqual(wilsonInterval(0, 0), [0, 0])
  })

  it("similarity is the Jaccard index of lowercase word sets, 1 when both texts have no word", () => {
    assert.strictEqual(similarity("Your order shipped.", "your ORDER shipped!"), 1)
    assert.strictEqual(similarity("a b c", "c d"), 1 / 4)
    assert.strictEqual(similarity("", ""), 1)
    assert.strictEqual(similarity("", "hi"), 0)
  })

  it("tool calls compare by tool id and canonical arguments (key order is no change); repeats compare one by one", () => {
    const same = compareTurn(
      [answer("x", ["start"], [call({ a: 1, b: 2 })])],
      [answer("x", ["start"], [call({ b: 2, a: 1 })])]
    )
    assert.deepInclude(same, { changed: false, tools_changed: false, similarity: 1 })
    const args = compareTurn([answer("x", ["start"], [call({ a: 1 })])], [answer("x", ["start"], [call({ a: 2 })])])
    assert.deepInclude(args, { changed: true, tools_changed: true, text_changed: false, path_changed: false })
    const path = compareTurn([answer("x", ["route", "a"])], [answer("x", ["route", "b"])])
    assert.deepInclude(path, { changed: true, path_changed: true, text_changed: false })
    // The second repeat differs: a change in any repeat is a change; baselines that differ are unstable.
    const repeats = compareTurn([answer("x"), answer("y")], [answer("x"), answer("z")])
    assert.deepInclude(repeats, { changed: true, text_changed: true, baseline_unstable: true, similarity: 1 })
  })

  it("the summary sums the turns; verdicts only when judged (A17)", () => {
    const side = (ms: Array<number>) => ({ durations_ms: ms, input_tokens: 10, output_tokens: 5 })
    const turn = (node: string, changed: boolean, verdict: "better" | "worse" | null) => ({
      node_id: node,
      changed,
      text_changed: changed,
      path_changed: false,
      tools_changed: false,
      baseline_unstable: false,
      unrecorded_tool_calls: 1,
      baseline: side([10, 30]),
      candidate: side([20]),
      verdict
    })
    const turns = [turn("a", true, "worse"), turn("a", false, null), turn("b", true, "better"), turn("c", false, null)]
    const judged = summarize(turns, true)
    assert.deepInclude(judged, {
      turns: 4,
      changed: 2,
      changed_rate: 0.5,
      text_changed: 2,
      unrecorded_tool_calls: 4,
      by_node: { a: 1, b: 1, c: 0 },
      verdicts: { better: 1, same: 0, worse: 1 }
    })
    assert.deepStrictEqual(judged.baseline, { duration_ms: { p50: 10, p95: 30 }, input_tokens: 40, output_tokens: 20 })
    assert.strictEqual(summarize(turns, false).verdicts, null)
  })

  it("a judge's answer names its verdict, or none", () => {
    assert.strictEqual(verdictOf("Worse."), "worse")
    assert.strictEqual(verdictOf("I'd say B is better"), "better")
    assert.strictEqual(verdictOf("no idea"), null)
  })
})
