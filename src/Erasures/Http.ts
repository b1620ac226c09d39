/**
 * Handlers of the erasures group (D22): call the service.
 */
import { Effect } from "effect"
import { HttpApiBuilder } from "effect/http-api"
import { ParleyApi } from "../Api.ts"
import { CurrentOrganization } from "../Domain/Organization.ts"
import { Erasures } from "./Erasures.ts"

/** The erasures handlers; require `Erasures`. */
export const ErasuresHttp = HttpApiBuilder.group(
  ParleyApi,
  "erasures",
  Effect.fnUntraced(function* (handlers) {
    const erasures = yield* Erasures
    const organization = Effect.map(Effect.service(CurrentOrganization), (current) => current.id)
    return handlers.handleAll({
      erase: ({ params }) => Effect.flatMap(organization, (id) => erasures.erase(id, params.contact_id)),
      get: ({ params }) => Effect.flatMap(organization, (id) => erasures.get(id, params.erasure_id))
    })
  })
)
