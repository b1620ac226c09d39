/**
 * The assistants API (assistants.md, DECISIONS.md A1-A11) under
 * `/assistants/api/v2`, and the admin API's assistant row (O6).
 */
import { Schema } from "effect"
import { HttpApiEndpoint, HttpApiGroup, HttpApiSchema, OpenApi } from "effect/http-api"
import {
  Assistant,
  Branch,
  Commit,
  CommitFile,
  Config,
  ConfigInput,
  Context,
  ContextInput,
  DiffEntry,
  FilePath,
  ItemId,
  Node,
  NodeInput,
  NodeType,
  Position,
  Snapshot,
  SnapshotInput,
  Tool,
  ToolInput,
  Variable,
  VariableInput
} from "../Domain/Assistant.ts"
import {
  AssistantAlreadyVersioned,
  AssistantNotFound,
  AssistantNotVersioned,
  BranchAlreadyExists,
  BranchNotFound,
  CommitNotFound,
  CommitNotInHistory,
  ItemNotFound,
  MainBranchUndeletable,
  MergeConflict,
  NoPublishedVersion,
  NothingToPublish
} from "../Domain/AssistantErrors.ts"
import { adminBasePath, assistantsBasePath } from "../Domain/BasePaths.ts"
import { Identifier, JsonObjectInput, Limit, Offset } from "../Domain/Common.ts"
import { OrganizationNotFound, ValidationFailed } from "../Domain/Errors.ts"
import { AdminAuthorization, Authorization } from "../Domain/Security.ts"

/**
 * A branch name (A3): 1-100 of `A-Za-z0-9._/-`, no leading or trailing `/`,
 * no `..`; in URLs a `/` is sent as `%2F`.
 */
const BranchName = Schema.String.pipe(
  Schema.check(
    Schema.isPattern(/^(?!\/)(?!.*\/$)(?!.*\.\.)[A-Za-z0-9._/-]{1,100}$/, {
      message: "Branch names are 1-100 of A-Za-z0-9._/-, without a leading or trailing '/' and without '..'"
    })
  )
)

const items = <S extends Schema.Top>(item: S) =>
  Schema.Struct({
    upsert: Schema.optionalKey(Schema.Array(item)),
    delete: Schema.optionalKey(Schema.Array(ItemId))
  })

/** PATCH {draft_base} body: RFC 7396 patches for context and config, upserts and deletes of items. */
export const ChangesetPayload = Schema.Struct({
  context: Schema.optionalKey(JsonObjectInput),
  config: Schema.optionalKey(JsonObjectInput),
  nodes: Schema.optionalKey(items(NodeInput)),
  tools: Schema.optionalKey(items(ToolInput)),
  variables: Schema.optionalKey(items(VariableInput))
})

/** Answer of a changeset. */
export const ChangesetResult = Schema.Struct({
  context_updated: Schema.Boolean,
  config_updated: Schema.Boolean,
  nodes_upserted: Schema.Int,
  nodes_deleted: Schema.Int,
  tools_upserted: Schema.Int,
  tools_deleted: Schema.Int,
  variables_upserted: Schema.Int,
  variables_deleted: Schema.Int
})

/** PUT of a node: the Node fields; `id` comes from the path. */
export const NodeBody = Schema.Struct({
  id: Schema.optionalKey(ItemId),
  name: Schema.String,
  description: Schema.optionalKey(Schema.String),
  type: NodeType,
  config: Schema.optionalKey(JsonObjectInput),
  position: Schema.optionalKey(Schema.NullOr(Position))
})

/** PUT of a tool: the Tool fields (the same as a changeset's); `id` comes from the path. */
export const ToolBody = ToolInput

/** PUT of a variable: the Variable fields; `name` comes from the path. */
export const VariableBody = Schema.Struct({
  name: Schema.optionalKey(ItemId),
  permission: Schema.Literals(["read_only", "read_write"]),
  type: Schema.String,
  default_value: Schema.optionalKey(VariableInput.fields.default_value)
})

/** Publish body: all optional; `author_type` defaults to `human`. */
export const PublishPayload = Schema.Struct({
  message: Schema.optionalKey(Schema.NullOr(Schema.String)),
  author_type: Schema.optionalKey(Schema.Literals(["human", "agent", "system"])),
  author_id: Schema.optionalKey(Schema.NullOr(Identifier))
})

/** The admin API's assistant creation (O6, A2). */
export const CreateAssistantPayload = Schema.Struct({
  name: Schema.String.pipe(Schema.check(Schema.isBetweenLength(1, 255))),
  description: Schema.optionalKey(Schema.NullOr(Schema.String)),
  versioned: Schema.optionalKey(Schema.Boolean),
  snapshot: Schema.optionalKey(SnapshotInput)
})

/** Body of creating and of forking a branch: the new branch's name (A3). */
export const BranchNamePayload = Schema.Struct({ name: BranchName })

/** Body of a draft's discard: the file path to revert to HEAD (A5). */
export const DiscardPayload = Schema.Struct({ path: FilePath })

/** Body of a draft's reset and of a branch's rollback: the commit (A7). */
export const CommitIdPayload = Schema.Struct({ commit_id: Schema.String })

/** Body of a merge into a branch: the source branch, and whether to commit the result (A6). */
export const MergePayload = Schema.Struct({
  source_branch_name: BranchName,
  commit: Schema.optionalKey(Schema.Boolean)
})

/** Query of a draft read and of its index: an optional path prefix such as `nodes/`. */
export const PrefixQuery = Schema.Struct({ prefix: Schema.optionalKey(Schema.String) })

/** Query of the version list (A8): `limit` (default 20), `offset` (default 0), `branch_name`. */
export const VersionsQuery = Schema.Struct({
  limit: Schema.optionalKey(Limit(1000)),
  offset: Schema.optionalKey(Offset),
  branch_name: Schema.optionalKey(BranchName)
})

/** Query of the diff of two commits: `commit_a` the older base, `commit_b` the newer. */
export const VersionsDiffQuery = Schema.Struct({ commit_a: Schema.String, commit_b: Schema.String })

/** Answer of a publish and of a rollback: the commit HEAD now names. */
export const CommitAnswer = Schema.Struct({ commit: Commit })

/** Answer of the changes of a branch: whether its draft differs from HEAD. */
export const ChangesAnswer = Schema.Struct({ has_changes: Schema.Boolean })

/** Answer of a diff: file by file (spec "Diff entry"). */
export const DiffAnswer = Schema.Struct({ diffs: Schema.Array(DiffEntry) })

/** Answer of the version list: newest first (A8). */
export const VersionsAnswer = Schema.Struct({ commits: Schema.Array(Commit) })

/** Answer of one version: the commit and its files. */
export const VersionAnswer = Schema.Struct({ commit: Commit, files: Schema.Array(CommitFile) })

/** Answer of the runtime read (A11, R2): HEAD of `main`, or a legacy assistant's snapshot with `commit_id: null`. */
export const RuntimeAnswer = Schema.Struct({
  assistant_id: Schema.String,
  commit_id: Schema.NullOr(Schema.String),
  snapshot: Snapshot
})

/** Answer of a migration (A11): the `main` branch and its first commit. */
export const MigrateAnswer = Schema.Struct({ assistant_id: Schema.String, branch: Branch, commit: Commit })

const assistantPath = { assistant_id: Identifier }
const branchPath = { assistant_id: Identifier, branch_name: BranchName }
const draft = "/assistants/:assistant_id/branches/:branch_name/draft"
const branches = "/assistants/:assistant_id/branches"

/** Failures of every operation on an assistant's versions (A1). */
const assistantErrors = [AssistantNotFound.Wire, AssistantNotVersioned.Wire] as const

/** Failures of every operation on a branch (A1). */
const branchErrors = [...assistantErrors, BranchNotFound.Wire] as const

const itemEndpoints = <
  const Kind extends string,
  const Param extends string,
  S extends Schema.Top,
  B extends Schema.Top
>(
  kind: Kind,
  param: Param,
  item: S,
  body: B
) => {
  const params = { ...branchPath, [param]: ItemId } as {
    assistant_id: typeof Identifier
    branch_name: typeof BranchName
  } & {
    [K in Param]: typeof ItemId
  }
  return [
    HttpApiEndpoint.get(`list_${kind}`, `${draft}/${kind}`, {
      params: branchPath,
      success: Schema.Array(item),
      error: branchErrors
    }),
    HttpApiEndpoint.get(`get_${kind}`, `${draft}/${kind}/:${param}`, {
      params,
      success: item,
      error: [...branchErrors, ItemNotFound.Wire]
    }),
    HttpApiEndpoint.put(`put_${kind}`, `${draft}/${kind}/:${param}`, {
      params,
      payload: body,
      success: item,
      error: [...branchErrors, ValidationFailed.Wire]
    }),
    HttpApiEndpoint.patch(`patch_${kind}`, `${draft}/${kind}/:${param}`, {
      params,
      payload: JsonObjectInput,
      success: item,
      error: [...branchErrors, ItemNotFound.Wire, ValidationFailed.Wire]
    }),
    HttpApiEndpoint.delete(`delete_${kind}`, `${draft}/${kind}/:${param}`, {
      params,
      success: HttpApiSchema.NoContent,
      error: [...branchErrors, ItemNotFound.Wire, ValidationFailed.Wire]
    })
  ] as const
}

const singletonEndpoints = <const Kind extends string, S extends Schema.Top, I extends Schema.Top>(
  kind: Kind,
  schema: S,
  input: I
) =>
  [
    HttpApiEndpoint.get(`get_${kind}`, `${draft}/${kind}`, {
      params: branchPath,
      success: schema,
      error: branchErrors
    }),
    HttpApiEndpoint.put(`put_${kind}`, `${draft}/${kind}`, {
      params: branchPath,
      payload: input,
      success: schema,
      error: [...branchErrors, ValidationFailed.Wire]
    }),
    HttpApiEndpoint.patch(`patch_${kind}`, `${draft}/${kind}`, {
      params: branchPath,
      payload: JsonObjectInput,
      success: schema,
      error: [...branchErrors, ValidationFailed.Wire]
    })
  ] as const

/**
 * The assistants group (API-key auth). Each endpoint lists the failures its
 * operation can answer; every one may also answer 401 and 422 (middleware).
 */
export class AssistantsApi extends HttpApiGroup.make("assistants")
  .add(
    HttpApiEndpoint.patch("applyChangeset", draft, {
      params: branchPath,
      payload: ChangesetPayload,
      success: ChangesetResult,
      error: [...branchErrors, ValidationFailed.Wire]
    }),
    HttpApiEndpoint.get("getDraft", draft, {
      params: branchPath,
      query: PrefixQuery.fields,
      success: Snapshot,
      error: branchErrors
    }),
    HttpApiEndpoint.get("draftIndex", `${draft}/index`, {
      params: branchPath,
      query: PrefixQuery.fields,
      success: Schema.Array(Schema.String),
      error: branchErrors
    }),
    HttpApiEndpoint.post("discard", `${draft}/discard`, {
      params: branchPath,
      payload: DiscardPayload,
      success: HttpApiSchema.NoContent,
      error: [...branchErrors, ValidationFailed.Wire]
    }),
    HttpApiEndpoint.post("reset", `${draft}/reset`, {
      params: branchPath,
      payload: CommitIdPayload,
      success: HttpApiSchema.NoContent,
      error: [...branchErrors, CommitNotFound.Wire]
    }),
    ...itemEndpoints("nodes", "node_id", Node, NodeBody),
    ...itemEndpoints("tools", "tool_id", Tool, ToolBody),
    ...itemEndpoints("variables", "variable_id", Variable, VariableBody),
    ...singletonEndpoints("config", Config, ConfigInput),
    ...singletonEndpoints("context", Context, ContextInput),
    HttpApiEndpoint.post("createBranch", branches, {
      params: assistantPath,
      payload: BranchNamePayload,
      success: Branch.pipe(HttpApiSchema.status(201)),
      error: [...branchErrors, BranchAlreadyExists.Wire]
    }),
    HttpApiEndpoint.get("listBranches", branches, {
      params: assistantPath,
      success: Schema.Array(Branch),
      error: assistantErrors
    }),
    HttpApiEndpoint.post("fork", `${branches}/:branch_name/fork`, {
      params: branchPath,
      payload: BranchNamePayload,
      success: Branch.pipe(HttpApiSchema.status(201)),
      error: [...branchErrors, BranchAlreadyExists.Wire]
    }),
    HttpApiEndpoint.get("getBranch", `${branches}/:branch_name`, {
      params: branchPath,
      success: Snapshot,
      error: branchErrors
    }),
    HttpApiEndpoint.delete("deleteBranch", `${branches}/:branch_name`, {
      params: branchPath,
      success: HttpApiSchema.NoContent,
      error: [...branchErrors, MainBranchUndeletable.Wire]
    }),
    HttpApiEndpoint.post("publish", `${branches}/:branch_name/publish`, {
      params: branchPath,
      payload: [PublishPayload, Schema.Null],
      success: CommitAnswer,
      error: [...branchErrors, NothingToPublish.Wire]
    }),
    HttpApiEndpoint.post("rollback", `${branches}/:branch_name/rollback`, {
      params: branchPath,
      payload: CommitIdPayload,
      success: CommitAnswer,
      error: [...branchErrors, CommitNotFound.Wire, CommitNotInHistory.Wire]
    }),
    HttpApiEndpoint.post("merge", `${branches}/:branch_name/merge`, {
      params: branchPath,
      payload: MergePayload,
      success: Schema.NullOr(Commit),
      error: [...branchErrors, MergeConflict.Wire, ValidationFailed.Wire]
    }),
    HttpApiEndpoint.get("changes", `${branches}/:branch_name/changes`, {
      params: branchPath,
      success: ChangesAnswer,
      error: branchErrors
    }),
    HttpApiEndpoint.get("branchDiff", `${branches}/:branch_name/diff`, {
      params: branchPath,
      success: DiffAnswer,
      error: branchErrors
    }),
    HttpApiEndpoint.get("listVersions", "/assistants/:assistant_id/versions", {
      params: assistantPath,
      query: VersionsQuery.fields,
      success: VersionsAnswer,
      error: branchErrors
    }),
    HttpApiEndpoint.get("diffVersions", "/assistants/:assistant_id/versions/diff", {
      params: assistantPath,
      query: VersionsDiffQuery.fields,
      success: DiffAnswer,
      error: [...assistantErrors, CommitNotFound.Wire]
    }),
    HttpApiEndpoint.get("getVersion", "/assistants/:assistant_id/versions/:commit_id", {
      params: { assistant_id: Identifier, commit_id: Schema.String },
      success: VersionAnswer,
      error: [...assistantErrors, CommitNotFound.Wire]
    }),
    HttpApiEndpoint.get("runtime", "/assistants/:assistant_id/runtime", {
      params: assistantPath,
      success: RuntimeAnswer,
      error: [AssistantNotFound.Wire, BranchNotFound.Wire, NoPublishedVersion.Wire]
    }),
    HttpApiEndpoint.post("migrate", "/assistants/:assistant_id/migrate", {
      params: assistantPath,
      success: MigrateAnswer,
      error: [AssistantNotFound.Wire, AssistantAlreadyVersioned.Wire]
    })
  )
  .middleware(Authorization)
  .prefix(assistantsBasePath)
  .annotateMerge(OpenApi.annotations({ title: "Assistants" })) {}

/** The admin API's assistant row (O6). */
export class AssistantsAdminApi extends HttpApiGroup.make("assistantsAdmin")
  .add(
    HttpApiEndpoint.post("createAssistant", "/organizations/:org_id/assistants", {
      params: { org_id: Identifier },
      payload: CreateAssistantPayload,
      success: Assistant.pipe(HttpApiSchema.status(201)),
      error: [OrganizationNotFound.Wire, ValidationFailed.Wire]
    })
  )
  .middleware(AdminAuthorization)
  .prefix(adminBasePath)
  .annotateMerge(OpenApi.annotations({ title: "Admin: assistants" })) {}
