/**
 * Handlers of the messages group: call the service. POST message sends the
 * JSON PostgreSQL built (the measured hot path, `npm run bench`); the other
 * responses are decoded Messages that HttpApi encodes.
 */
import { Effect } from "effect"
import { HttpApiBuilder } from "effect/http-api"
import { ParleyApi } from "../Api.ts"
import { jsonText } from "../Domain/JsonResponse.ts"
import { CurrentOrganization } from "../Domain/Organization.ts"
import { Messages } from "./Messages.ts"

/** The messages handlers; require `Messages`. */
export const MessagesHttp = HttpApiBuilder.group(
  ParleyApi,
  "messages",
  Effect.fnUntraced(function* (handlers) {
    const messages = yield* Messages
    const organization = Effect.map(Effect.service(CurrentOrganization), (current) => current.id)
    return handlers.handleAll({
      create: Effect.fnUntraced(function* ({ params, payload }) {
        const organization = yield* CurrentOrganization
        const body = yield* messages.create(organization.id, params.session_id, payload)
        return jsonText(body, 201)
      }),
      search: ({ params, payload }) =>
        Effect.flatMap(organization, (id) => messages.search(id, params.session_id, payload)),
      get: ({ params }) => Effect.flatMap(organization, (id) => messages.get(id, params.session_id, params.message_id)),
      update: ({ params, payload }) =>
        Effect.flatMap(organization, (id) => messages.update(id, params.session_id, params.message_id, payload)),
      redact: ({ params }) =>
        Effect.flatMap(organization, (id) => messages.redact(id, params.session_id, params.message_id))
    })
  })
)
