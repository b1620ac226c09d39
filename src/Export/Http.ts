/**
 * Handlers of the export group: decode, call the service, send its JSON.
 */
import { Effect } from "effect"
import { HttpApiBuilder } from "effect/http-api"
import { ParleyApi } from "../Api.ts"
import { jsonArrayStream, jsonText } from "../Domain/JsonResponse.ts"
import { CurrentOrganization } from "../Domain/Organization.ts"
import { DEFAULT_EXPORT_LIMIT } from "./Api.ts"
import { Export } from "./Export.ts"

/** The export handlers; require `Export`. */
export const ExportHttp = HttpApiBuilder.group(
  ParleyApi,
  "export",
  Effect.fnUntraced(function* (handlers) {
    const exports = yield* Export
    return handlers.handleAll({
      sessions: Effect.fnUntraced(function* ({ query }) {
        const organization = yield* CurrentOrganization
        return jsonArrayStream(
          yield* exports.sessions(organization.id, {
            ...query,
            sort_by: query.sort_by ?? "created_at",
            limit: query.limit ?? DEFAULT_EXPORT_LIMIT
          })
        )
      }),
      sessionsBatch: Effect.fnUntraced(function* ({ query }) {
        const organization = yield* CurrentOrganization
        return jsonText(yield* exports.sessionsBatch(organization.id, query.session_ids))
      }),
      messages: Effect.fnUntraced(function* ({ query }) {
        const organization = yield* CurrentOrganization
        return jsonArrayStream(
          yield* exports.messages(organization.id, {
            ...query,
            sort_by: query.sort_by ?? "created_at",
            limit: query.limit ?? DEFAULT_EXPORT_LIMIT
          })
        )
      })
    })
  })
)
