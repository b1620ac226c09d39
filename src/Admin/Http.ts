/**
 * Handlers of the admin group (O6).
 */
import { Effect } from "effect"
import { HttpApiBuilder } from "effect/http-api"
import { ParleyApi } from "../Api.ts"
import { Admin } from "./Admin.ts"

/** The admin handlers; require `Admin`. */
export const AdminHttp = HttpApiBuilder.group(
  ParleyApi,
  "admin",
  Effect.fnUntraced(function* (handlers) {
    const admin = yield* Admin
    return handlers.handleAll({
      createOrganization: ({ payload }) => admin.createOrganization(payload.name),
      listOrganizations: ({ query }) => admin.listOrganizations(query),
      getOrganization: ({ params }) => admin.getOrganization(params.org_id),
      listApiKeys: ({ params }) => admin.listApiKeys(params.org_id),
      createApiKey: ({ params, payload }) => admin.createApiKey(params.org_id, payload),
      revokeApiKey: ({ params }) => admin.revokeApiKey(params.org_id, params.key_id),
      createAgent: ({ params, payload }) => admin.createAgent(params.org_id, payload),
      listAgents: ({ params }) => admin.listAgents(params.org_id),
      getAgent: ({ params }) => admin.getAgent(params.org_id, params.agent_id),
      updateAgent: ({ params, payload }) => admin.updateAgent(params.org_id, params.agent_id, payload),
      deleteAgent: ({ params }) => admin.deleteAgent(params.org_id, params.agent_id),
      getSettings: ({ params }) => admin.getSettings(params.org_id),
      updateSettings: ({ params, payload }) => admin.updateSettings(params.org_id, payload)
    })
  })
)
