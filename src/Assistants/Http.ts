/**
 * Handlers of the assistants groups: the caller's organization, then one call
 * of the service that owns the operation.
 */
import { Effect } from "effect"
import { HttpApiBuilder } from "effect/http-api"
import { Admin } from "../Admin/Admin.ts"
import { ParleyApi } from "../Api.ts"
import type { ItemKind, SingletonKind } from "../Domain/Assistant.ts"
import type { JsonObject } from "../Domain/Common.ts"
import { CurrentOrganization } from "../Domain/Organization.ts"
import { Runtime } from "../Runtime/Runtime.ts"
import { Assistants } from "./Assistants.ts"
import { Branches } from "./Branches.ts"
import { type BodyOf, Drafts } from "./Drafts.ts"
import { Rollouts } from "./Rollouts.ts"
import { Versions } from "./Versions.ts"

/** The path parameters of a draft. */
interface BranchParams {
  readonly assistant_id: string
  readonly branch_name: string
}

/** Runs `f` with the id of the caller's organization (set by the `Authorization` middleware). */
const withOrganization = <A, E, R>(f: (organizationId: string) => Effect.Effect<A, E, R>) =>
  Effect.flatMap(Effect.service(CurrentOrganization), (organization) => f(organization.id))

/** The assistants handlers; require `Assistants`, `Drafts`, `Branches`, `Versions`, `Rollouts` and `Runtime`. */
export const AssistantsHttp = HttpApiBuilder.group(
  ParleyApi,
  "assistants",
  Effect.fnUntraced(function* (handlers) {
    const assistants = yield* Assistants
    const drafts = yield* Drafts
    const branches = yield* Branches
    const versions = yield* Versions
    const rollouts = yield* Rollouts
    const runtime = yield* Runtime

    /** The five operations of an item collection (A9); `param` names the item's path parameter. */
    const items = <K extends ItemKind, P extends string>(kind: K, param: P) => {
      type Params = BranchParams & { readonly [key in P]: string }
      return {
        list: ({ params }: { readonly params: BranchParams }) =>
          withOrganization((org) => drafts.listItems(org, params.assistant_id, params.branch_name, kind)),
        get: ({ params }: { readonly params: Params }) =>
          withOrganization((org) => drafts.getItem(org, params.assistant_id, params.branch_name, kind, params[param])),
        put: ({ params, payload }: { readonly params: Params; readonly payload: BodyOf[K] }) =>
          withOrganization((org) =>
            drafts.putItem(org, params.assistant_id, params.branch_name, kind, params[param], payload)
          ),
        patch: ({ params, payload }: { readonly params: Params; readonly payload: JsonObject }) =>
          withOrganization((org) =>
            drafts.patchItem(org, params.assistant_id, params.branch_name, kind, params[param], payload)
          ),
        delete: ({ params }: { readonly params: Params }) =>
          withOrganization((org) =>
            drafts.deleteItem(org, params.assistant_id, params.branch_name, kind, params[param])
          )
      }
    }

    /** The three operations of a singleton file (A9). */
    const singleton = <K extends SingletonKind>(kind: K) => ({
      get: ({ params }: { readonly params: BranchParams }) =>
        withOrganization((org) => drafts.getSingleton(org, params.assistant_id, params.branch_name, kind)),
      put: ({ params, payload }: { readonly params: BranchParams; readonly payload: BodyOf[K] }) =>
        withOrganization((org) => drafts.putSingleton(org, params.assistant_id, params.branch_name, kind, payload)),
      patch: ({ params, payload }: { readonly params: BranchParams; readonly payload: JsonObject }) =>
        withOrganization((org) => drafts.patchSingleton(org, params.assistant_id, params.branch_name, kind, payload))
    })

    const nodes = items("nodes", "node_id")
    const tools = items("tools", "tool_id")
    const variables = items("variables", "variable_id")
    const config = singleton("config")
    const context = singleton("context")

    return handlers.handleAll({
      listAssistants: ({ query }) => withOrganization((org) => assistants.list(org, query)),
      getAssistant: ({ params }) => withOrganization((org) => assistants.get(org, params.assistant_id)),
      updateAssistant: ({ params, payload }) =>
        withOrganization((org) => assistants.update(org, params.assistant_id, payload)),
      deleteAssistant: ({ params }) => withOrganization((org) => assistants.delete(org, params.assistant_id)),
      applyChangeset: ({ params, payload }) =>
        withOrganization((org) => drafts.applyChangeset(org, params.assistant_id, params.branch_name, payload)),
      getDraft: ({ params, query }) =>
        withOrganization((org) => drafts.get(org, params.assistant_id, params.branch_name, query)),
      draftIndex: ({ params, query }) =>
        withOrganization((org) => drafts.index(org, params.assistant_id, params.branch_name, query)),
      discard: ({ params, payload }) =>
        withOrganization((org) => drafts.discard(org, params.assistant_id, params.branch_name, payload)),
      reset: ({ params, payload }) =>
        withOrganization((org) => drafts.reset(org, params.assistant_id, params.branch_name, payload)),
      list_nodes: nodes.list,
      get_nodes: nodes.get,
      put_nodes: nodes.put,
      patch_nodes: nodes.patch,
      delete_nodes: nodes.delete,
      list_tools: tools.list,
      get_tools: tools.get,
      put_tools: tools.put,
      patch_tools: tools.patch,
      delete_tools: tools.delete,
      list_variables: variables.list,
      get_variables: variables.get,
      put_variables: variables.put,
      patch_variables: variables.patch,
      delete_variables: variables.delete,
      get_config: config.get,
      put_config: config.put,
      patch_config: config.patch,
      get_context: context.get,
      put_context: context.put,
      patch_context: context.patch,
      createBranch: ({ params, payload }) =>
        withOrganization((org) => branches.create(org, params.assistant_id, payload)),
      listBranches: ({ params }) => withOrganization((org) => branches.list(org, params.assistant_id)),
      fork: ({ params, payload }) =>
        withOrganization((org) => branches.fork(org, params.assistant_id, params.branch_name, payload)),
      getBranch: ({ params }) => withOrganization((org) => branches.get(org, params.assistant_id, params.branch_name)),
      deleteBranch: ({ params }) =>
        withOrganization((org) => branches.delete(org, params.assistant_id, params.branch_name)),
      publish: ({ params, payload }) =>
        withOrganization((org) => branches.publish(org, params.assistant_id, params.branch_name, payload ?? {})),
      rollback: ({ params, payload }) =>
        withOrganization((org) => branches.rollback(org, params.assistant_id, params.branch_name, payload)),
      merge: ({ params, payload }) =>
        withOrganization((org) => branches.merge(org, params.assistant_id, params.branch_name, payload)),
      changes: ({ params }) =>
        withOrganization((org) => branches.changes(org, params.assistant_id, params.branch_name)),
      branchDiff: ({ params }) =>
        withOrganization((org) => branches.diff(org, params.assistant_id, params.branch_name)),
      listVersions: ({ params, query }) => withOrganization((org) => versions.list(org, params.assistant_id, query)),
      diffVersions: ({ params, query }) => withOrganization((org) => versions.diff(org, params.assistant_id, query)),
      getVersion: ({ params }) => withOrganization((org) => versions.get(org, params.assistant_id, params.commit_id)),
      runtime: ({ params }) => withOrganization((org) => assistants.runtime(org, params.assistant_id)),
      getRollout: ({ params }) => withOrganization((org) => rollouts.get(org, params.assistant_id)),
      putRollout: ({ params, payload }) => withOrganization((org) => rollouts.put(org, params.assistant_id, payload)),
      deleteRollout: ({ params }) => withOrganization((org) => rollouts.end(org, params.assistant_id)),
      getRuntimeSettings: ({ params }) => withOrganization((org) => rollouts.settings(org, params.assistant_id)),
      putRuntimeSettings: ({ params, payload }) =>
        withOrganization((org) => rollouts.putSettings(org, params.assistant_id, payload)),
      runStats: ({ params, query }) => withOrganization((org) => runtime.stats(org, params.assistant_id, query)),
      migrate: ({ params }) => withOrganization((org) => assistants.migrate(org, params.assistant_id))
    })
  })
)

/** The admin assistant handlers; require `Assistants` and `Admin` (`Organization not found` is Admin's, O6). */
export const AssistantsAdminHttp = HttpApiBuilder.group(
  ParleyApi,
  "assistantsAdmin",
  Effect.fnUntraced(function* (handlers) {
    const assistants = yield* Assistants
    const admin = yield* Admin
    /** Runs `f` once the organization is known (else `Organization not found`, O6). */
    const inOrganization = <A, E, R>(organizationId: string, f: Effect.Effect<A, E, R>) =>
      Effect.flatMap(admin.getOrganization(organizationId), () => f)
    return handlers.handleAll({
      createAssistant: ({ params, payload }) =>
        inOrganization(params.org_id, assistants.create(params.org_id, payload)),
      listAssistants: ({ params, query }) => inOrganization(params.org_id, assistants.list(params.org_id, query)),
      getAssistant: ({ params }) => inOrganization(params.org_id, assistants.get(params.org_id, params.assistant_id)),
      updateAssistant: ({ params, payload }) =>
        inOrganization(params.org_id, assistants.update(params.org_id, params.assistant_id, payload)),
      deleteAssistant: ({ params }) =>
        inOrganization(params.org_id, assistants.delete(params.org_id, params.assistant_id))
    })
  })
)
