/**
 * Handlers of the apps group (O6): thin calls of the `Webhooks` service.
 */
import { Effect } from "effect"
import { HttpApiBuilder } from "effect/http-api"
import { ParleyApi } from "../Api.ts"
import { jsonText } from "../Domain/JsonResponse.ts"
import { Webhooks } from "./Webhooks.ts"

/** The apps handlers; require `Webhooks`. */
export const AppsHttp = HttpApiBuilder.group(
  ParleyApi,
  "apps",
  Effect.fnUntraced(function* (handlers) {
    const webhooks = yield* Webhooks
    return handlers.handleAll({
      createApp: ({ params, payload }) => webhooks.createApp(params.org_id, payload),
      listApps: ({ params }) => webhooks.listApps(params.org_id),
      getApp: ({ params }) => webhooks.getApp(params.org_id, params.app_id),
      updateApp: ({ params, payload }) => webhooks.updateApp(params.org_id, params.app_id, payload),
      deleteApp: ({ params }) => webhooks.deleteApp(params.org_id, params.app_id),
      listDeliveries: ({ params, query }) =>
        webhooks.listDeliveries(params.org_id, params.app_id, query).pipe(Effect.map((body) => jsonText(body))),
      retryDelivery: ({ params }) => webhooks.retryDelivery(params.org_id, params.app_id, params.delivery_id),
      rotateSecret: ({ params }) => webhooks.rotateSecret(params.org_id, params.app_id),
      recover: ({ params, payload }) => webhooks.recover(params.org_id, params.app_id, payload)
    })
  })
)
