/**
 * Handlers of the ingest group: decode, call the service, send its JSON.
 */
import { Effect } from "effect"
import { HttpApiBuilder } from "effect/http-api"
import { ParleyApi } from "../Api.ts"
import type { JsonText } from "../Domain/Common.ts"
import { jsonText } from "../Domain/JsonResponse.ts"
import { CurrentOrganization } from "../Domain/Organization.ts"
import type { IngestResponse } from "./Api.ts"
import { Ingest } from "./Ingest.ts"

/** The ingest handlers; require `Ingest`. */
export const IngestHttp = HttpApiBuilder.group(
  ParleyApi,
  "ingest",
  Effect.fnUntraced(function* (handlers) {
    const service = yield* Ingest
    return handlers.handleAll({
      ingest: Effect.fnUntraced(function* ({ payload }) {
        const organization = yield* CurrentOrganization
        const result = yield* service.ingest(organization.id, payload)
        return jsonText(JSON.stringify(result) as JsonText<IngestResponse>)
      })
    })
  })
)
