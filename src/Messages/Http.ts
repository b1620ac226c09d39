/**
 * Handlers of the messages group: decode, call the service, send its JSON.
 */
import { Effect } from "effect"
import { HttpApiBuilder } from "effect/http-api"
import { ParleyApi } from "../Api.ts"
import { ValidationFailed } from "../Domain/Errors.ts"
import { jsonText } from "../Domain/JsonResponse.ts"
import { CurrentOrganization } from "../Domain/Organization.ts"
import { Messages } from "./Messages.ts"

/** The messages handlers; require `Messages`. */
export const MessagesHttp = HttpApiBuilder.group(
  ParleyApi,
  "messages",
  Effect.fnUntraced(function* (handlers) {
    const messages = yield* Messages
    return handlers.handleAll({
      create: Effect.fnUntraced(function* ({ params, payload }) {
        const organization = yield* CurrentOrganization
        const body = yield* messages.create(organization.id, params.session_id, {
          content: payload.content,
          role: payload.role,
          provider_message_id: payload.provider_message_id ?? undefined,
          replied_provider_message_id: payload.replied_provider_message_id ?? undefined,
          run_id: payload.run_id ?? undefined
        })
        return jsonText(body, 201)
      }),
      search: Effect.fnUntraced(function* ({ params, payload }) {
        const organization = yield* CurrentOrganization
        if (payload.session_id !== params.session_id) {
          return yield* ValidationFailed.one(
            ["body", "session_id"],
            "session_id must equal the session of the path",
            "value_error"
          )
        }
        return jsonText(
          yield* messages.search(organization.id, params.session_id, {
            provider_message_id: payload.provider_message_id,
            replied_provider_message_id: payload.replied_provider_message_id,
            role: payload.role,
            offset: payload.offset ?? 0,
            limit: payload.limit ?? 100
          })
        )
      }),
      get: Effect.fnUntraced(function* ({ params }) {
        const organization = yield* CurrentOrganization
        return jsonText(yield* messages.get(organization.id, params.session_id, params.message_id))
      }),
      update: Effect.fnUntraced(function* ({ params, payload }) {
        const organization = yield* CurrentOrganization
        const { delivered_at, ...rest } = payload
        return jsonText(
          yield* messages.update(organization.id, params.session_id, params.message_id, {
            ...rest,
            ...(delivered_at !== undefined
              ? { delivered_at: delivered_at === null ? null : new Date(delivered_at) }
              : {})
          })
        )
      })
    })
  })
)
