/**
 * Evaluations (DECISIONS.md A15, A16, A17; issue 41): the run records a
 * replay answers tool calls from, the request that starts an evaluation, and
 * the evaluation, its turns and its summary as the endpoints answer them and
 * `evaluation.completed` (W1) carries them.
 */
import { Schema } from "effect"
import { DateTimeInput, Identifier, Limit, Timestamp, Uuid } from "./Common.ts"

/**
 * One tool call of a run (A15) or of a replayed answer (A16): `{node_id,
 * tool_id, arguments, result}` for a call that succeeded, `{..., error}` for
 * one that failed (the failure the model was given). A result or error whose
 * JSON text was over 64 KiB is its cut JSON text with `truncated: true`; a
 * redacted one (D23) keeps only `node_id` and `tool_id` with `redacted: true`.
 * A replayed call with no recording has the error `{"error":"No recorded result"}`.
 */
export const ToolCallRecord = Schema.Struct({
  node_id: Schema.String.annotate({ description: "The llm node that made the call." }),
  tool_id: Schema.String.annotate({ description: "The assistant tool's id." }),
  arguments: Schema.optionalKey(Schema.Unknown).annotate({ description: "The model's arguments (JSON)." }),
  result: Schema.optionalKey(Schema.Unknown).annotate({ description: "The result the model was given." }),
  error: Schema.optionalKey(Schema.Unknown).annotate({ description: "The failure the model was given." }),
  truncated: Schema.optionalKey(Schema.Literal(true)).annotate({
    description: "The result or error was over 64 KiB and is its cut JSON text (A15)."
  }),
  redacted: Schema.optionalKey(Schema.Literal(true)).annotate({
    description: "A redaction (D23) removed the arguments, result and error."
  })
}).annotate({ identifier: "ToolCallRecord" })
export type ToolCallRecord = typeof ToolCallRecord.Type

/**
 * One side of an evaluation (A16): a branch's HEAD (`{branch_name}`), a
 * branch's draft (`{branch_name, draft: true}`) or a commit (`{commit_id}`).
 */
export const EvaluationSide = Schema.Union([
  Schema.Struct({
    branch_name: Identifier.annotate({ description: "The branch: its HEAD, or its draft with `draft: true`." }),
    draft: Schema.optionalKey(Schema.Boolean.annotate({ description: "Answer from the branch's draft." }))
  }),
  Schema.Struct({ commit_id: Identifier.annotate({ description: "A commit of the assistant." }) })
]).annotate({ identifier: "EvaluationSide" })
export type EvaluationSide = typeof EvaluationSide.Type

/** Most sessions one evaluation replays (A16). */
export const MAX_EVALUATION_SESSIONS = 1000
/** Sessions an evaluation replays when `sessions` gives a range and no `limit` (A16). */
export const DEFAULT_EVALUATION_SESSIONS = 100

/**
 * Which sessions an evaluation replays (A16): `{ids}` (1-1000 session ids of
 * the organization), or `{since?, until?, limit?}`: the sessions with runs of
 * the assistant started in [`since`, `until`), newest first, `limit` of them
 * (1-1000, default 100).
 */
export const EvaluationSessions = Schema.Union([
  Schema.Struct({
    ids: Schema.Array(Identifier)
      .pipe(Schema.check(Schema.isMinLength(1), Schema.isMaxLength(MAX_EVALUATION_SESSIONS)))
      .annotate({ description: "The sessions to replay, 1-1000 ids." })
  }),
  Schema.Struct({
    since: Schema.optionalKey(DateTimeInput.annotate({ description: "Runs started at or after (ISO 8601)." })),
    until: Schema.optionalKey(DateTimeInput.annotate({ description: "Runs started before (ISO 8601)." })),
    limit: Schema.optionalKey(
      Limit(MAX_EVALUATION_SESSIONS).annotate({ description: "Most sessions, newest first, 1-1000 (default 100)." })
    )
  })
]).annotate({ identifier: "EvaluationSessions" })
export type EvaluationSessions = typeof EvaluationSessions.Type

/** A17: the rubric a judge grades changed turns by. */
export const EvaluationJudge = Schema.Struct({
  instructions: Schema.String.pipe(Schema.check(Schema.isBetweenLength(1, 10_000))).annotate({
    description: "The rubric: what makes a reply better or worse (A17)."
  })
}).annotate({ identifier: "EvaluationJudge" })

/** POST /assistants/{id}/evaluations body (A16, A17). */
export const CreateEvaluationPayload = Schema.Struct({
  baseline: EvaluationSide,
  candidate: EvaluationSide,
  sessions: EvaluationSessions,
  repeats: Schema.optionalKey(
    Schema.Int.pipe(Schema.check(Schema.isBetween({ minimum: 1, maximum: 5 }))).annotate({
      description: "Answers per side and turn, 1-5 (default 1): more show the model's own noise."
    })
  ),
  judge: Schema.optionalKey(EvaluationJudge)
}).annotate({ identifier: "CreateEvaluationPayload" })
export type CreateEvaluationPayload = typeof CreateEvaluationPayload.Type

/** One answer to a turn (A16): the reply text, the nodes visited in order, the tool calls in order, and why it failed. */
export const TurnAnswer = Schema.Struct({
  text: Schema.String.annotate({ description: "The reply text; empty when the turn failed." }),
  nodes: Schema.Array(Schema.String).annotate({ description: "The ids of the nodes visited, in order." }),
  tool_calls: Schema.Array(ToolCallRecord).annotate({ description: "The tool calls, in order." }),
  error: Schema.NullOr(Schema.String).annotate({
    description: "Why the turn failed (as a run records it), or null."
  })
}).annotate({ identifier: "TurnAnswer" })
export type TurnAnswer = typeof TurnAnswer.Type

/** A judge's verdict on a changed turn's candidate reply against the baseline's (A17). */
export const Verdict = Schema.Literals(["better", "same", "worse"])
export type Verdict = typeof Verdict.Type

/**
 * One turn of an evaluation (A16): a recorded run of a selected session,
 * answered again by each side (one answer per repeat), compared.
 */
export const EvaluationTurn = Schema.Struct({
  id: Uuid,
  session_id: Uuid,
  run_id: Uuid,
  node_id: Schema.String.annotate({ description: "The node the recorded run started at; both sides start there." }),
  should_close: Schema.Boolean.annotate({
    description: "Whether the candidate's (first) reply would have closed the session (a `should_close` tool)."
  }),
  recorded: TurnAnswer,
  baseline: Schema.Array(TurnAnswer).annotate({ description: "The baseline's answers, one per repeat." }),
  candidate: Schema.Array(TurnAnswer).annotate({ description: "The candidate's answers, one per repeat." }),
  text_changed: Schema.Boolean,
  path_changed: Schema.Boolean,
  tools_changed: Schema.Boolean,
  similarity: Schema.Number.annotate({
    description:
      "Jaccard index (0-1) of the lowercase word sets of the first baseline and candidate texts (1 when both are empty)."
  }),
  verdict: Schema.NullOr(Verdict).annotate({
    description: "The judge's, on a changed turn of a judged evaluation (A17)."
  })
}).annotate({ identifier: "EvaluationTurn" })
export type EvaluationTurn = typeof EvaluationTurn.Type

/** One side's cost over an evaluation (A16): duration percentiles (ms, nearest rank) and tokens summed. */
export const SideStats = Schema.Struct({
  duration_ms: Schema.Struct({ p50: Schema.Int, p95: Schema.Int }),
  input_tokens: Schema.Int,
  output_tokens: Schema.Int
}).annotate({ identifier: "EvaluationSideStats" })
export type SideStats = typeof SideStats.Type

/** A completed evaluation's summary (A16, A17). */
export const EvaluationSummary = Schema.Struct({
  turns: Schema.Int,
  changed: Schema.Int.annotate({
    description: "Turns whose candidate text, node path or tool calls differ from the baseline's, in any repeat."
  }),
  changed_rate: Schema.Number.annotate({ description: "`changed / turns` (0 when there are no turns)." }),
  interval: Schema.Tuple([Schema.Number, Schema.Number]).annotate({
    description: "The Wilson 95% interval of `changed_rate`: `[low, high]`, 0-1."
  }),
  text_changed: Schema.Int,
  path_changed: Schema.Int,
  tools_changed: Schema.Int,
  unrecorded_tool_calls: Schema.Int.annotate({ description: "Replayed tool calls no recording answered." }),
  baseline_unstable: Schema.Int.annotate({ description: "Turns whose baseline repeats differ from each other." }),
  baseline: SideStats,
  candidate: SideStats,
  by_node: Schema.Record(Schema.String, Schema.Int).annotate({ description: "Changed turns per starting node." }),
  verdicts: Schema.NullOr(Schema.Struct({ better: Schema.Int, same: Schema.Int, worse: Schema.Int })).annotate({
    description: "Verdicts over the changed turns of a judged evaluation (A17); null without `judge`."
  })
}).annotate({ identifier: "EvaluationSummary" })
export type EvaluationSummary = typeof EvaluationSummary.Type

/** An evaluation's status (A16). */
export const EvaluationStatus = Schema.Literals(["queued", "running", "completed", "failed", "cancelled"])
export type EvaluationStatus = typeof EvaluationStatus.Type

/** An evaluation (A16): what was compared, its progress and, once completed, its summary. */
export const Evaluation = Schema.Struct({
  id: Uuid,
  assistant_id: Schema.String,
  status: EvaluationStatus,
  baseline: EvaluationSide,
  candidate: EvaluationSide,
  baseline_commit_id: Schema.NullOr(Schema.String).annotate({ description: "The commit; null for a draft." }),
  candidate_commit_id: Schema.NullOr(Schema.String).annotate({ description: "The commit; null for a draft." }),
  repeats: Schema.Int,
  judge: Schema.NullOr(EvaluationJudge),
  turns_total: Schema.Int,
  turns_done: Schema.Int,
  error: Schema.NullOr(Schema.String).annotate({ description: "Why a `failed` evaluation failed." }),
  created_at: Timestamp,
  completed_at: Schema.NullOr(Timestamp).annotate({ description: "When it completed, failed or was cancelled." }),
  summary: Schema.NullOr(EvaluationSummary).annotate({ description: "Once `completed`." })
}).annotate({ identifier: "Evaluation" })
export type Evaluation = typeof Evaluation.Type

/** GET .../evaluations/{eval_id}/turns query (A16): keyset pages, only changed turns with `changed=true`. */
export const EvaluationTurnsQuery = Schema.Struct({
  changed: Schema.optionalKey(
    Schema.Literals(["true", "false"]).annotate({ description: "`true`: only changed turns; `false`: only unchanged." })
  ),
  limit: Schema.optionalKey(Limit(1000).annotate({ description: "Most turns on the page, 1-1000 (default 100)." })),
  after_id: Schema.optionalKey(Identifier.annotate({ description: "The last turn id of the previous page." }))
})
export type EvaluationTurnsQuery = typeof EvaluationTurnsQuery.Type
