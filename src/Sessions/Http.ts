/**
 * Handlers of the sessions group: decode, call the service, send its JSON.
 */
import { Effect } from "effect"
import { HttpApiBuilder } from "effect/http-api"
import { ParleyApi } from "../Api.ts"
import { jsonText } from "../Domain/JsonResponse.ts"
import { CurrentOrganization } from "../Domain/Organization.ts"
import { Sessions } from "./Sessions.ts"

/** The sessions handlers; require `Sessions`. */
export const SessionsHttp = HttpApiBuilder.group(
  ParleyApi,
  "sessions",
  Effect.fnUntraced(function* (handlers) {
    const sessions = yield* Sessions
    return handlers.handleAll({
      create: Effect.fnUntraced(function* ({ payload }) {
        const organization = yield* CurrentOrganization
        const { agent_id, ...rest } = payload
        return jsonText(yield* sessions.create(organization.id, { ...rest, agent_id: agent_id ?? undefined }), 201)
      }),
      search: Effect.fnUntraced(function* ({ payload }) {
        const organization = yield* CurrentOrganization
        return jsonText(
          yield* sessions.search(organization.id, {
            contactId: payload.contact_id,
            status: payload.status,
            metadata: payload.metadata,
            offset: payload.offset ?? 0,
            limit: payload.limit ?? 10
          })
        )
      }),
      get: Effect.fnUntraced(function* ({ params }) {
        const organization = yield* CurrentOrganization
        return jsonText(yield* sessions.get(organization.id, params.session_id))
      }),
      update: Effect.fnUntraced(function* ({ params, payload }) {
        const organization = yield* CurrentOrganization
        return jsonText(yield* sessions.update(organization.id, params.session_id, payload.fields))
      }),
      transfer: Effect.fnUntraced(function* ({ params, payload }) {
        const organization = yield* CurrentOrganization
        return jsonText(yield* sessions.transfer(organization.id, params.session_id, payload?.agent_id ?? null))
      }),
      finish: Effect.fnUntraced(function* ({ params, payload }) {
        const organization = yield* CurrentOrganization
        return jsonText(
          yield* sessions.finish(organization.id, params.session_id, payload?.ending_survey_id ?? undefined)
        )
      })
    })
  })
)
