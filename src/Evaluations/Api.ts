/**
 * The evaluation endpoints (DECISIONS.md A16, A17; issue 41): replay recorded
 * conversations against a baseline and a candidate (a draft, a branch or a
 * commit) and see what changed, before publishing.
 */
import { Schema } from "effect"
import { HttpApiEndpoint, HttpApiGroup, HttpApiSchema, OpenApi } from "effect/http-api"
import {
  AssistantNotFound,
  AssistantNotVersioned,
  BranchNotFound,
  BranchNotPublished,
  CommitNotFound
} from "../Assistants/Errors.ts"
import { assistantsBasePath } from "../Domain/BasePaths.ts"
import { Identifier, PageQuery } from "../Domain/Common.ts"
import { ValidationFailed } from "../Domain/Errors.ts"
import { CreateEvaluationPayload, Evaluation, EvaluationTurn, EvaluationTurnsQuery } from "../Domain/Evaluation.ts"
import { Authorization } from "../Domain/Security.ts"
import { EvaluationFinished, EvaluationNotFound } from "./Errors.ts"

const assistantPath = { assistant_id: Identifier }
const evaluationPath = { assistant_id: Identifier, evaluation_id: Identifier }
const evaluations = "/assistants/:assistant_id/evaluations"
const evaluation = `${evaluations}/:evaluation_id`

/** Failures of every operation on an assistant's evaluations (A1). */
const assistantErrors = [AssistantNotFound.Wire, AssistantNotVersioned.Wire] as const

/** The OpenAPI summary and description of an endpoint. */
const doc = (summary: string, description: string) => OpenApi.annotations({ summary, description })

/** The report page: HTML text. */
const ReportPage = Schema.String.pipe(HttpApiSchema.asText({ contentType: "text/html" })).annotate({
  description: "A self-contained HTML page (no external requests)."
})

/** The evaluations group, under the assistants base path, with API-key auth. */
export class EvaluationsApi extends HttpApiGroup.make("evaluations")
  .add(
    HttpApiEndpoint.post("createEvaluation", evaluations, {
      params: assistantPath,
      payload: CreateEvaluationPayload,
      success: Evaluation.pipe(HttpApiSchema.status(202)),
      error: [
        ...assistantErrors,
        BranchNotFound.Wire,
        BranchNotPublished.Wire,
        CommitNotFound.Wire,
        ValidationFailed.Wire
      ]
    }).annotateMerge(
      doc(
        "Start an evaluation",
        "Replays what the assistant's runs answered in the selected sessions against a `baseline` and a `candidate` (each a branch's HEAD `{branch_name}`, its draft `{branch_name, draft: true}` or a commit `{commit_id}`) and answers 202 with the evaluation `queued` (A16). `sessions` is `{ids}` (1-1000 session ids) or `{since?, until?, limit?}`: the sessions with runs of this assistant started in that range, newest first (default 100, at most 1000). Each run is a turn: both sides answer the session's history as it was when the run started, from the node it started at, `repeats` times (1-5); tool calls are answered from what the run recorded (A15), matched by tool id and RFC 8785 canonical arguments: no tool URL is called and nothing is written to the sessions. With `judge: {instructions}` the configured model grades each changed turn `better`, `same` or `worse` (A17). Workers answer the turns in the background; `evaluation.completed` (W1) follows."
      )
    ),
    HttpApiEndpoint.get("listEvaluations", evaluations, {
      params: assistantPath,
      query: PageQuery,
      success: Schema.Array(Evaluation),
      error: assistantErrors
    }).annotateMerge(
      doc(
        "List evaluations",
        "The assistant's evaluations, newest first, in pages: `limit` 1-1000 (default 100), next page with `after_id` = the last id of the previous page (A16)."
      )
    ),
    HttpApiEndpoint.get("getEvaluation", evaluation, {
      params: evaluationPath,
      success: Evaluation,
      error: [...assistantErrors, EvaluationNotFound.Wire]
    }).annotateMerge(
      doc(
        "Get an evaluation",
        "The evaluation: `status` (`queued`, `running`, `completed`, `failed`, `cancelled`), progress (`turns_done` of `turns_total`) and, once completed, `summary`: changed turns with the Wilson 95% interval of their rate, the kinds of change, unrecorded tool calls, unstable baselines, each side's duration and tokens, changed turns per starting node and the judge's verdicts (A16, A17)."
      )
    ),
    HttpApiEndpoint.delete("cancelEvaluation", evaluation, {
      params: evaluationPath,
      success: Evaluation,
      error: [...assistantErrors, EvaluationNotFound.Wire, EvaluationFinished.Wire]
    }).annotateMerge(
      doc(
        "Cancel an evaluation",
        "Cancels a queued or running evaluation and answers it `cancelled`: no turn is answered after this (A16). One already completed, failed or cancelled gets 409 `Evaluation is already finished`."
      )
    ),
    HttpApiEndpoint.get("listEvaluationTurns", `${evaluation}/turns`, {
      params: evaluationPath,
      query: EvaluationTurnsQuery,
      success: Schema.Array(EvaluationTurn),
      error: [...assistantErrors, EvaluationNotFound.Wire]
    }).annotateMerge(
      doc(
        "List an evaluation's turns",
        "The answered turns in order (sessions as selected, each one's runs oldest first), in keyset pages: `limit` 1-1000 (default 100), next page with `after_id` = the last turn id; `changed=true` lists only changed turns, `changed=false` only unchanged ones. Each has what the run recorded and each side's answers (one per repeat): text, node path, tool calls (A16)."
      )
    ),
    HttpApiEndpoint.get("evaluationReport", `${evaluation}/report`, {
      params: evaluationPath,
      success: ReportPage,
      error: [...assistantErrors, EvaluationNotFound.Wire]
    }).annotateMerge(
      doc(
        "An evaluation's report page",
        "A self-contained HTML page of the evaluation (issue 41 item 5): the summary first, a chart of changed turns per node, and the changed turns side by side (recorded, baseline, candidate). It makes no request of its own: a `Content-Security-Policy` header and meta tag forbid any."
      )
    )
  )
  .middleware(Authorization)
  .prefix(assistantsBasePath)
  .annotateMerge(
    OpenApi.annotations({
      title: "Evaluations",
      description:
        "Know before you publish (A15-A17): replay the conversations an assistant actually had against a draft, a branch or a commit, and see with a confidence interval how much its answers change and where. Requests use an organization's API key."
    })
  ) {}
