/**
 * Handlers of the replies group: decode, call the service, send its JSON.
 */
import { Effect } from "effect"
import { HttpApiBuilder } from "effect/http-api"
import { ParleyApi } from "../Api.ts"
import { jsonText } from "../Domain/JsonResponse.ts"
import { CurrentOrganization } from "../Domain/Organization.ts"
import { Replies } from "./Replies.ts"

/** The replies handlers; require `Replies`. */
export const RepliesHttp = HttpApiBuilder.group(
  ParleyApi,
  "replies",
  Effect.fnUntraced(function* (handlers) {
    const replies = yield* Replies
    return handlers.handleAll({
      reply: Effect.fnUntraced(function* ({ params, payload }) {
        const organization = yield* CurrentOrganization
        return jsonText(yield* replies.reply(organization.id, params.session_id, payload ?? {}))
      }),
      schedule: Effect.fnUntraced(function* ({ params, payload }) {
        const organization = yield* CurrentOrganization
        return jsonText(
          yield* replies.schedule(organization.id, params.session_id, payload.scheduled_for, payload.config)
        )
      }),
      listSchedules: Effect.fnUntraced(function* ({ params }) {
        const organization = yield* CurrentOrganization
        return jsonText(yield* replies.listSchedules(organization.id, params.session_id))
      }),
      cancelSchedule: Effect.fnUntraced(function* ({ params }) {
        const organization = yield* CurrentOrganization
        yield* replies.cancelSchedule(organization.id, params.session_id, params.schedule_id)
      })
    })
  })
)
