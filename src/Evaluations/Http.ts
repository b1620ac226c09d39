/**
 * Handlers of the evaluations group (A16, A17): call the service; the report
 * is sent as HTML with its Content Security Policy.
 */
import { Effect } from "effect"
import { HttpServerResponse } from "effect/http"
import { HttpApiBuilder } from "effect/http-api"
import { ParleyApi } from "../Api.ts"
import { CurrentOrganization } from "../Domain/Organization.ts"
import { Evaluations } from "./Evaluations.ts"
import { REPORT_CONTENT_SECURITY_POLICY } from "./Report.ts"

/** The evaluations handlers; require `Evaluations`. */
export const EvaluationsHttp = HttpApiBuilder.group(
  ParleyApi,
  "evaluations",
  Effect.fnUntraced(function* (handlers) {
    const service = yield* Evaluations
    const organization = Effect.map(Effect.service(CurrentOrganization), (current) => current.id)
    return handlers.handleAll({
      createEvaluation: ({ params, payload }) =>
        Effect.flatMap(organization, (id) => service.create(id, params.assistant_id, payload)),
      listEvaluations: ({ params, query }) =>
        Effect.flatMap(organization, (id) => service.list(id, params.assistant_id, query)),
      getEvaluation: ({ params }) =>
        Effect.flatMap(organization, (id) => service.get(id, params.assistant_id, params.evaluation_id)),
      cancelEvaluation: ({ params }) =>
        Effect.flatMap(organization, (id) => service.cancel(id, params.assistant_id, params.evaluation_id)),
      listEvaluationTurns: ({ params, query }) =>
        Effect.flatMap(organization, (id) => service.turns(id, params.assistant_id, params.evaluation_id, query)),
      evaluationReport: ({ params }) =>
        Effect.flatMap(organization, (id) => service.report(id, params.assistant_id, params.evaluation_id)).pipe(
          Effect.map((page) =>
            HttpServerResponse.text(page, {
              contentType: "text/html; charset=utf-8",
              headers: { "content-security-policy": REPORT_CONTENT_SECURITY_POLICY }
            })
          )
        )
    })
  })
)
