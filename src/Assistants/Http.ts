/**
 * Handlers of the assistants groups: decode, call the service, answer.
 */
import { Effect } from "effect"
import { HttpApiBuilder } from "effect/http-api"
import { Admin } from "../Admin/Admin.ts"
import { ParleyApi } from "../Api.ts"
import type { Node, Tool, Variable } from "../Domain/Assistant.ts"
import { CurrentOrganization } from "../Domain/Organization.ts"
import { Assistants, type ItemKind, type SingletonKind } from "./Assistants.ts"

/** The assistants handlers; require `Assistants`. */
export const AssistantsHttp = HttpApiBuilder.group(
  ParleyApi,
  "assistants",
  Effect.fnUntraced(function* (handlers) {
    const assistants = yield* Assistants
    const org = Effect.map(Effect.service(CurrentOrganization), (organization) => organization.id)
    const list = (kind: ItemKind) => (request: { params: { assistant_id: string; branch_name: string } }) =>
      Effect.flatMap(org, (id) =>
        assistants.listItems(id, request.params.assistant_id, request.params.branch_name, kind)
      )
    const get = (kind: ItemKind | SingletonKind, param?: string) => (request: { params: Record<string, string> }) =>
      Effect.flatMap(org, (id) =>
        assistants.getItem(
          id,
          request.params.assistant_id!,
          request.params.branch_name!,
          kind,
          param ? request.params[param]! : ""
        )
      )
    const write =
      (kind: ItemKind | SingletonKind, mode: "put" | "patch", param?: string) =>
      (request: { params: Record<string, string>; payload: unknown }) =>
        Effect.flatMap(org, (id) =>
          assistants.writeItem(
            id,
            request.params.assistant_id!,
            request.params.branch_name!,
            kind,
            param ? request.params[param]! : "",
            mode,
            request.payload
          )
        )
    const remove = (kind: ItemKind, param: string) => (request: { params: Record<string, string> }) =>
      Effect.flatMap(org, (id) =>
        assistants.deleteItem(
          id,
          request.params.assistant_id!,
          request.params.branch_name!,
          kind,
          request.params[param]!
        )
      )
    return handlers.handleAll({
      applyChangeset: ({ params, payload }) =>
        Effect.flatMap(org, (id) => assistants.applyChangeset(id, params.assistant_id, params.branch_name, payload)),
      getDraft: ({ params, query }) =>
        Effect.flatMap(org, (id) => assistants.getDraft(id, params.assistant_id, params.branch_name, query.prefix)),
      draftIndex: ({ params, query }) =>
        Effect.flatMap(org, (id) => assistants.draftIndex(id, params.assistant_id, params.branch_name, query.prefix)),
      discard: ({ params, payload }) =>
        Effect.flatMap(org, (id) => assistants.discard(id, params.assistant_id, params.branch_name, payload.path)),
      reset: ({ params, payload }) =>
        Effect.flatMap(org, (id) => assistants.reset(id, params.assistant_id, params.branch_name, payload.commit_id)),
      list_nodes: (request) => list("nodes")(request) as Effect.Effect<Array<Node>, never>,
      get_nodes: (request) => get("nodes", "node_id")(request) as Effect.Effect<Node>,
      put_nodes: (request) => write("nodes", "put", "node_id")(request) as Effect.Effect<Node>,
      patch_nodes: (request) => write("nodes", "patch", "node_id")(request) as Effect.Effect<Node>,
      delete_nodes: remove("nodes", "node_id"),
      list_tools: (request) => list("tools")(request) as Effect.Effect<Array<Tool>, never>,
      get_tools: (request) => get("tools", "tool_id")(request) as Effect.Effect<Tool>,
      put_tools: (request) => write("tools", "put", "tool_id")(request) as Effect.Effect<Tool>,
      patch_tools: (request) => write("tools", "patch", "tool_id")(request) as Effect.Effect<Tool>,
      delete_tools: remove("tools", "tool_id"),
      list_variables: (request) => list("variables")(request) as Effect.Effect<Array<Variable>, never>,
      get_variables: (request) => get("variables", "variable_id")(request) as Effect.Effect<Variable>,
      put_variables: (request) => write("variables", "put", "variable_id")(request) as Effect.Effect<Variable>,
      patch_variables: (request) => write("variables", "patch", "variable_id")(request) as Effect.Effect<Variable>,
      delete_variables: remove("variables", "variable_id"),
      get_config: (request) => get("config")(request) as Effect.Effect<any>,
      put_config: (request) => write("config", "put")(request) as Effect.Effect<any>,
      patch_config: (request) => write("config", "patch")(request) as Effect.Effect<any>,
      get_context: (request) => get("context")(request) as Effect.Effect<any>,
      put_context: (request) => write("context", "put")(request) as Effect.Effect<any>,
      patch_context: (request) => write("context", "patch")(request) as Effect.Effect<any>,
      createBranch: ({ params, payload }) =>
        Effect.flatMap(org, (id) => assistants.createBranch(id, params.assistant_id, payload.name)),
      listBranches: ({ params }) => Effect.flatMap(org, (id) => assistants.listBranches(id, params.assistant_id)),
      fork: ({ params, payload }) =>
        Effect.flatMap(org, (id) => assistants.fork(id, params.assistant_id, params.branch_name, payload.name)),
      getBranch: ({ params }) =>
        Effect.flatMap(org, (id) => assistants.branchSnapshot(id, params.assistant_id, params.branch_name)),
      deleteBranch: ({ params }) =>
        Effect.flatMap(org, (id) => assistants.deleteBranch(id, params.assistant_id, params.branch_name)),
      publish: ({ params, payload }) =>
        Effect.flatMap(org, (id) => assistants.publish(id, params.assistant_id, params.branch_name, payload ?? {})),
      rollback: ({ params, payload }) =>
        Effect.flatMap(org, (id) =>
          assistants.rollback(id, params.assistant_id, params.branch_name, payload.commit_id)
        ),
      merge: ({ params, payload }) =>
        Effect.flatMap(org, (id) =>
          assistants.merge(
            id,
            params.assistant_id,
            params.branch_name,
            payload.source_branch_name,
            payload.commit ?? false
          )
        ),
      changes: ({ params }) =>
        Effect.flatMap(org, (id) => assistants.hasChanges(id, params.assistant_id, params.branch_name)),
      branchDiff: ({ params }) =>
        Effect.flatMap(org, (id) => assistants.branchDiff(id, params.assistant_id, params.branch_name)),
      listVersions: ({ params, query }) =>
        Effect.flatMap(org, (id) =>
          assistants.listVersions(id, params.assistant_id, {
            limit: query.limit ?? 20,
            offset: query.offset ?? 0,
            branch_name: query.branch_name
          })
        ),
      diffVersions: ({ params, query }) =>
        Effect.flatMap(org, (id) => assistants.diffVersions(id, params.assistant_id, query.commit_a, query.commit_b)),
      getVersion: ({ params }) =>
        Effect.flatMap(org, (id) => assistants.getVersion(id, params.assistant_id, params.commit_id)),
      runtime: ({ params }) => Effect.flatMap(org, (id) => assistants.runtime(id, params.assistant_id)),
      migrate: ({ params }) => Effect.flatMap(org, (id) => assistants.migrate(id, params.assistant_id))
    })
  })
)

/** The admin assistant handler; requires `Assistants` and `Admin`. */
export const AssistantsAdminHttp = HttpApiBuilder.group(
  ParleyApi,
  "assistantsAdmin",
  Effect.fnUntraced(function* (handlers) {
    const assistants = yield* Assistants
    const admin = yield* Admin
    return handlers.handleAll({
      createAssistant: ({ params, payload }) =>
        Effect.flatMap(admin.getOrganization(params.org_id), () => assistants.createAssistant(params.org_id, payload))
    })
  })
)
