/**
 * Handlers of the sessions group: call the service; HttpApi encodes the
 * Session it returns with the group's success schemas.
 */
import { Effect } from "effect"
import { HttpApiBuilder } from "effect/http-api"
import { ParleyApi } from "../Api.ts"
import { CurrentOrganization } from "../Domain/Organization.ts"
import { Sessions } from "./Sessions.ts"

/** The sessions handlers; require `Sessions`. */
export const SessionsHttp = HttpApiBuilder.group(
  ParleyApi,
  "sessions",
  Effect.fnUntraced(function* (handlers) {
    const sessions = yield* Sessions
    const organization = Effect.map(Effect.service(CurrentOrganization), (current) => current.id)
    return handlers.handleAll({
      create: ({ payload }) => Effect.flatMap(organization, (id) => sessions.create(id, payload)),
      search: ({ payload }) => Effect.flatMap(organization, (id) => sessions.search(id, payload)),
      get: ({ params }) => Effect.flatMap(organization, (id) => sessions.get(id, params.session_id)),
      update: ({ params, payload }) =>
        Effect.flatMap(organization, (id) => sessions.update(id, params.session_id, payload.fields)),
      transfer: ({ params, payload }) =>
        Effect.flatMap(organization, (id) => sessions.transfer(id, params.session_id, payload?.agent_id ?? null)),
      finish: ({ params, payload }) =>
        Effect.flatMap(organization, (id) =>
          sessions.finish(id, params.session_id, payload?.ending_survey_id ?? undefined)
        )
    })
  })
)
