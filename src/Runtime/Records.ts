/**
 * Run records (DECISIONS.md A15, issue 41 item 1): every tool call a run made,
 * in order, so the run can be replayed (A16), and the tool executor that
 * answers a replay from them.
 *
 * A record is `{node_id, tool_id, arguments, result}` for a call that
 * succeeded, `{node_id, tool_id, arguments, error}` for one that failed (the
 * failure the model was given); a result or error whose JSON text is over
 * {@link RECORD_RESULT_MAX_BYTES} is stored cut to that many bytes, as a
 * string, with `truncated: true`. Records are stored with the run
 * (`runs.tool_calls`, migrations/0023_run_records.ts); runs written before
 * have none, and on replay their tool calls count as unrecorded.
 */
import canonicalize from "canonicalize"
import { Effect, Layer } from "effect"
import type { ToolCallRecord } from "../Domain/Evaluation.ts"
import { ToolCaller, type ToolOutcome, type ToolTarget } from "./Tools.ts"

/** The most bytes of a result's (or error's) JSON text a record keeps (A15: 64 KiB). */
export const RECORD_RESULT_MAX_BYTES = 65_536

/** One tool call of a run, as recorded (A15): the schema is `Domain/Evaluation.ts` `ToolCallRecord`. */
export type { ToolCallRecord } from "../Domain/Evaluation.ts"

/**
 * SQL over a run's `tool_calls` (jsonb expression `records`): the records as
 * a redaction of the run's messages leaves them (D23): each keeps `node_id`
 * and `tool_id` and gets `redacted: true`; arguments, results and errors go.
 * Used by the redaction statement (`Messages/Repo.ts`).
 */
export const redactedRunRecords = (records: string) => `(SELECT coalesce(jsonb_agg(
    jsonb_build_object('node_id', c->'node_id', 'tool_id', c->'tool_id', 'redacted', true) ORDER BY n), '[]'::jsonb)
  FROM jsonb_array_elements(${records}) WITH ORDINALITY AS t(c, n))`

/** The result (or error) as a record keeps it: itself, or its JSON text cut to the limit with the mark. */
const capped = (value: unknown): { readonly value: unknown; readonly truncated: boolean } => {
  const text = JSON.stringify(value ?? null)
  const bytes = Buffer.byteLength(text, "utf8")
  if (bytes <= RECORD_RESULT_MAX_BYTES) return { value, truncated: false }
  // Cut on a byte boundary, then drop a partial character at the end.
  const cut = Buffer.from(text, "utf8")
    .subarray(0, RECORD_RESULT_MAX_BYTES)
    .toString("utf8")
    .replace(/\uFFFD$/, "")
  return { value: cut, truncated: true }
}

/** The record of one call: `outcome` of calling `toolId` from `nodeId` with `args` (A15). */
export const recordOf = (nodeId: string, toolId: string, args: unknown, outcome: ToolOutcome): ToolCallRecord => {
  const { value, truncated } = capped(outcome.result)
  return {
    node_id: nodeId,
    tool_id: toolId,
    arguments: args ?? null,
    ...(outcome.isError ? { error: value } : { result: value }),
    ...(truncated ? { truncated: true as const } : {})
  }
}

/** The key a call is matched to a record by (A16): its tool id and its RFC 8785 canonical arguments. */
export const callKey = (toolId: string, args: unknown): string =>
  `${toolId}\u0000${canonicalize(args ?? null) ?? "null"}`

/** The result a replayed call with no recording gets (A16). */
export const NO_RECORDED_RESULT = { error: "No recorded result" } as const

/** A tool executor answering from recordings, and what it saw (see {@link recordedToolCaller}). */
export interface RecordedTools {
  /** The `ToolCaller` to provide to the walk. */
  readonly layer: Layer.Layer<ToolCaller>
  /** Calls so far that no record answered. */
  readonly unrecorded: () => number
}

/**
 * A `ToolCaller` that never calls out (A16): each call takes the first record
 * not used yet (nor redacted, D23) with the same tool id and the same RFC
 * 8785 canonical arguments (so key order is no change), in order of use, and answers its
 * result (or its error, as a failed call); a call no record matches gets
 * {@link NO_RECORDED_RESULT} as a failure and is counted as unrecorded.
 */
export const recordedToolCaller = (records: ReadonlyArray<ToolCallRecord>): RecordedTools => {
  const waiting = new Map<string, Array<ToolCallRecord>>()
  for (const record of records) {
    // A redacted record (D23) has no arguments left to match.
    if (record.redacted === true) continue
    const key = callKey(record.tool_id, record.arguments)
    const queue = waiting.get(key)
    if (queue === undefined) waiting.set(key, [record])
    else queue.push(record)
  }
  let unrecorded = 0
  const call = (target: ToolTarget, args: unknown) =>
    Effect.sync((): ToolOutcome => {
      const record = waiting.get(callKey(target.id, args))?.shift()
      if (record === undefined) {
        unrecorded++
        return { result: NO_RECORDED_RESULT, isError: true }
      }
      return "error" in record ? { result: record.error, isError: true } : { result: record.result, isError: false }
    })
  return { layer: Layer.succeed(ToolCaller, ToolCaller.of({ call })), unrecorded: () => unrecorded }
}
