/**
 * How an evaluation compares answers and sums them up (DECISIONS.md A16,
 * A17), over values: no database, no Effect.
 *
 * - A turn changed when, in any repeat `i`, the candidate's answer `i`
 *   differs from the baseline's answer `i` in reply text, node path or tool
 *   calls; tool calls compare by tool id and RFC 8785 canonical arguments in
 *   order ({@link callKey}), so key order is no change.
 * - A turn's baseline is unstable when its baseline answers differ from each
 *   other the same way (the model's own noise).
 * - `similarity`: the Jaccard index of the lowercase word sets (runs of
 *   letters and digits) of the first baseline and candidate texts, 1 when
 *   both are empty.
 * - The summary: counts, `changed_rate` with its Wilson 95% interval, each
 *   side's duration percentiles (nearest rank) and tokens, changed turns per
 *   starting node, and the judge's verdicts when judged.
 */
import type { EvaluationSummary, SideStats, TurnAnswer, Verdict } from "../Domain/Evaluation.ts"
import { callKey } from "../Runtime/Records.ts"

/** z of a two-sided 95% interval. */
const Z95 = 1.959963984540054

/** The Wilson score interval (95%) of `successes` out of `trials`, `[low, high]` in 0-1; `[0, 0]` for no trials. */
export const wilsonInterval = (successes: number, trials: number): readonly [number, number] => {
  if (trials === 0) return [0, 0]
  const p = successes / trials
  const z2 = Z95 * Z95
  const denominator = 1 + z2 / trials
  const centre = (p + z2 / (2 * trials)) / denominator
  const half = (Z95 * Math.sqrt((p * (1 - p)) / trials + z2 / (4 * trials * trials))) / denominator
  // The bounds are exact at the ends (no rounding error below 0 or above 1 of the formula's terms).
  return [successes === 0 ? 0 : Math.max(0, centre - half), successes === trials ? 1 : Math.min(1, centre + half)]
}

/** The lowercase words of `text`: runs of letters and digits. */
const words = (text: string): Set<string> => new Set(text.toLowerCase().match(/[\p{L}\p{N}]+/gu) ?? [])

/** The Jaccard index of the word sets of `a` and `b` (1 when both have none). */
export const similarity = (a: string, b: string): number => {
  const left = words(a)
  const right = words(b)
  if (left.size === 0 && right.size === 0) return 1
  let shared = 0
  for (const word of left) if (right.has(word)) shared++
  return shared / (left.size + right.size - shared)
}

/** The tool calls of an answer as comparable text: tool ids and canonical arguments, in order. */
const toolsKey = (answer: TurnAnswer): string =>
  JSON.stringify(answer.tool_calls.map((call) => callKey(call.tool_id, call.arguments)))

/** How two answers differ. */
const differences = (a: TurnAnswer, b: TurnAnswer) => ({
  text: a.text !== b.text,
  path: a.nodes.join("\u0000") !== b.nodes.join("\u0000") || a.nodes.length !== b.nodes.length,
  tools: toolsKey(a) !== toolsKey(b)
})

/** How a turn's candidate answers compare with its baseline answers (repeat by repeat). */
export interface TurnComparison {
  readonly text_changed: boolean
  readonly path_changed: boolean
  readonly tools_changed: boolean
  readonly changed: boolean
  readonly similarity: number
  readonly baseline_unstable: boolean
}

/** Compares one turn's answers (see module docs); `baseline` and `candidate` hold one answer per repeat, at least one. */
export const compareTurn = (
  baseline: ReadonlyArray<TurnAnswer>,
  candidate: ReadonlyArray<TurnAnswer>
): TurnComparison => {
  let text = false
  let path = false
  let tools = false
  for (let i = 0; i < Math.min(baseline.length, candidate.length); i++) {
    const d = differences(baseline[i]!, candidate[i]!)
    text ||= d.text
    path ||= d.path
    tools ||= d.tools
  }
  const unstable = baseline.slice(1).some((answer) => {
    const d = differences(baseline[0]!, answer)
    return d.text || d.path || d.tools
  })
  return {
    text_changed: text,
    path_changed: path,
    tools_changed: tools,
    changed: text || path || tools,
    similarity: similarity(baseline[0]?.text ?? "", candidate[0]?.text ?? ""),
    baseline_unstable: unstable
  }
}

/** One side's cost of one turn, over its repeats: each answer's duration (ms) and the tokens summed. */
export interface SideCost {
  readonly durations_ms: ReadonlyArray<number>
  readonly input_tokens: number
  readonly output_tokens: number
}

/** What the summary reads of one answered turn. */
export interface AnsweredTurn {
  readonly node_id: string
  readonly changed: boolean
  readonly text_changed: boolean
  readonly path_changed: boolean
  readonly tools_changed: boolean
  readonly baseline_unstable: boolean
  readonly unrecorded_tool_calls: number
  readonly baseline: SideCost
  readonly candidate: SideCost
  readonly verdict: Verdict | null
}

/** The nearest-rank percentile `p` (0-100) of `sorted` (ascending), 0 when empty. */
const percentile = (sorted: ReadonlyArray<number>, p: number): number =>
  sorted.length === 0 ? 0 : sorted[Math.max(0, Math.ceil((p / 100) * sorted.length) - 1)]!

const sideStats = (costs: ReadonlyArray<SideCost>): SideStats => {
  const durations = costs.flatMap((cost) => cost.durations_ms).sort((a, b) => a - b)
  return {
    duration_ms: { p50: Math.round(percentile(durations, 50)), p95: Math.round(percentile(durations, 95)) },
    input_tokens: costs.reduce((sum, cost) => sum + cost.input_tokens, 0),
    output_tokens: costs.reduce((sum, cost) => sum + cost.output_tokens, 0)
  }
}

/** The summary of an evaluation's answered turns (A16); `judged`: `verdicts` counts them (A17), else null. */
export const summarize = (turns: ReadonlyArray<AnsweredTurn>, judged: boolean): EvaluationSummary => {
  const count = (predicate: (turn: AnsweredTurn) => boolean) => turns.filter(predicate).length
  const changed = count((turn) => turn.changed)
  const byNode: Record<string, number> = {}
  for (const turn of turns) byNode[turn.node_id] = (byNode[turn.node_id] ?? 0) + (turn.changed ? 1 : 0)
  return {
    turns: turns.length,
    changed,
    changed_rate: turns.length === 0 ? 0 : changed / turns.length,
    interval: wilsonInterval(changed, turns.length),
    text_changed: count((turn) => turn.text_changed),
    path_changed: count((turn) => turn.path_changed),
    tools_changed: count((turn) => turn.tools_changed),
    unrecorded_tool_calls: turns.reduce((sum, turn) => sum + turn.unrecorded_tool_calls, 0),
    baseline_unstable: count((turn) => turn.baseline_unstable),
    baseline: sideStats(turns.map((turn) => turn.baseline)),
    candidate: sideStats(turns.map((turn) => turn.candidate)),
    by_node: byNode,
    verdicts: judged
      ? {
          better: count((turn) => turn.verdict === "better"),
          same: count((turn) => turn.verdict === "same"),
          worse: count((turn) => turn.verdict === "worse")
        }
      : null
  }
}
