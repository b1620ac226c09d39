/**
 * One side's answer to one turn of an evaluation (DECISIONS.md A16): the AI
 * runtime's own walk (`Runtime/Walk.ts`: the same graph walk, nodes and
 * models as a real run), given the session's history cut where the recorded
 * run started, from the node it started at (or `initial_node_id` when the
 * side's version has no such node), and a tool executor that answers from
 * the run's records (`Runtime/Records.ts` `recordedToolCaller`) instead of
 * calling tool URLs. One runtime, two executors: nothing here writes or calls
 * out.
 */
import { Effect, Result } from "effect"
import type { JsonObject } from "../Domain/Common.ts"
import type { ToolCallRecord, TurnAnswer } from "../Domain/Evaluation.ts"
import type { HistoryEntry } from "../Messages/Messages.ts"
import type { Models } from "../Runtime/Models.ts"
import { recordedToolCaller } from "../Runtime/Records.ts"
import { type RuntimeSnapshot, startNode, walk } from "../Runtime/Walk.ts"

/** One replayed answer with what it cost. */
export interface ReplayedAnswer {
  readonly answer: TurnAnswer
  /** A `should_close` tool succeeded: the reply would have closed the session (R2). */
  readonly shouldClose: boolean
  readonly durationMs: number
  readonly inputTokens: number
  readonly outputTokens: number
  /** Calls no record answered (A16 `unrecorded_tool_calls`). */
  readonly unrecorded: number
}

const NO_METADATA: JsonObject = {}

/**
 * Answers a turn from `snapshot` (see module docs): `history` is the
 * session's text history before the run, oldest first; `nodeId` the node the
 * run started at; `records` its tool calls. A failed walk is an answer with
 * empty text and its `error` (the reason a run would record). Never fails;
 * a defect (a bug) dies. Requires `Models`.
 */
export const replay = (input: {
  readonly snapshot: RuntimeSnapshot
  readonly nodeId: string
  readonly history: ReadonlyArray<HistoryEntry>
  readonly records: ReadonlyArray<ToolCallRecord>
}): Effect.Effect<ReplayedAnswer, never, Models> =>
  Effect.gen(function* () {
    const tools = recordedToolCaller(input.records)
    const toolCalls: Array<ToolCallRecord> = []
    const started = performance.now()
    const outcome = yield* walk({
      snapshot: input.snapshot,
      startNodeId: startNode(input.snapshot, null, input.nodeId).nodeId,
      history: input.history,
      metadata: NO_METADATA,
      toolCalls
    }).pipe(Effect.provide(tools.layer), Effect.result)
    const durationMs = Math.round(performance.now() - started)
    if (Result.isFailure(outcome)) {
      return {
        answer: { text: "", nodes: [], tool_calls: toolCalls, error: outcome.failure.reason.message },
        shouldClose: false,
        durationMs,
        inputTokens: 0,
        outputTokens: 0,
        unrecorded: tools.unrecorded()
      }
    }
    const turn = outcome.success
    const reply = turn.messages.at(-1)?.content
    return {
      answer: {
        text: reply?.type === "text" && typeof reply.text === "string" ? reply.text : "",
        nodes: turn.nodes,
        tool_calls: turn.toolCalls,
        error: null
      },
      shouldClose: turn.shouldClose,
      durationMs,
      inputTokens: turn.inputTokens,
      outputTokens: turn.outputTokens,
      unrecorded: tools.unrecorded()
    }
  })
