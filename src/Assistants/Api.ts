/**
 * The assistants API (assistants.md, DECISIONS.md A1-A14) under
 * `/assistants/api/v2`, and the admin API's assistant row (O6).
 */
import { Schema } from "effect"
import { HttpApiEndpoint, HttpApiGroup, HttpApiSchema, OpenApi } from "effect/http-api"
import { OrganizationNotFound } from "../Admin/Errors.ts"
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
  Rollout,
  RunStats,
  RuntimeSettings,
  Snapshot,
  SnapshotInput,
  Tool,
  ToolInput,
  Variable,
  VariableInput
} from "../Domain/Assistant.ts"
import { adminBasePath, assistantsBasePath } from "../Domain/BasePaths.ts"
import { DateTimeInput, Identifier, JsonObjectInput, Limit, NoBody, Offset, PageQuery } from "../Domain/Common.ts"
import { ValidationFailed } from "../Domain/Errors.ts"
import { AdminAuthorization, Authorization } from "../Domain/Security.ts"
import {
  AssistantAlreadyVersioned,
  AssistantInUse,
  AssistantNotFound,
  AssistantNotVersioned,
  BranchAlreadyExists,
  BranchNotFound,
  BranchNotPublished,
  CommitNotFound,
  CommitNotInHistory,
  ItemNotFound,
  MainBranchUndeletable,
  MergeConflict,
  NoPublishedVersion,
  NoRollout,
  NothingToPublish
} from "./Errors.ts"

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

/** Response of a changeset. */
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

/**
 * PATCH /assistants/{id} body (issue 39 item 6): `name` (1-255 characters) and
 * `description` (null clears it), each changed when present.
 */
export const UpdateAssistantPayload = Schema.Struct({
  name: Schema.optionalKey(CreateAssistantPayload.fields.name),
  description: CreateAssistantPayload.fields.description
}).annotate({ examples: [{ name: "Support bot", description: "Answers billing questions" }] })

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

/** The versions of a page when the query gives no `limit` (assistants.md "Limits"). */
export const DEFAULT_VERSIONS_LIMIT = 20

/** Query of the version list (A8): `limit` (default {@link DEFAULT_VERSIONS_LIMIT}), `offset` (default 0), `branch_name`. */
export const VersionsQuery = Schema.Struct({
  limit: Schema.optionalKey(
    Limit(1000).annotate({ description: `Most versions on the page, 1-1000 (default ${DEFAULT_VERSIONS_LIMIT}).` })
  ),
  offset: Schema.optionalKey(Offset.annotate({ description: "Versions to skip (default 0)." })),
  branch_name: Schema.optionalKey(BranchName)
})

/** Query of the diff of two commits: `commit_a` the older base, `commit_b` the newer. */
export const VersionsDiffQuery = Schema.Struct({ commit_a: Schema.String, commit_b: Schema.String })

/** Response of a publish and of a rollback: the commit HEAD now names. */
export const CommitResponse = Schema.Struct({ commit: Commit })

/** Response of the changes of a branch: whether its draft differs from HEAD. */
export const ChangesResponse = Schema.Struct({ has_changes: Schema.Boolean })

/** Response of a diff: file by file (spec "Diff entry"). */
export const DiffResponse = Schema.Struct({ diffs: Schema.Array(DiffEntry) })

/** Response of the version list: newest first (A8). */
export const VersionsResponse = Schema.Struct({ commits: Schema.Array(Commit) })

/** Response of one version: the commit and its files. */
export const VersionResponse = Schema.Struct({ commit: Commit, files: Schema.Array(CommitFile) })

/** Response of the runtime read (A11, R2): HEAD of `main`, or a legacy assistant's snapshot with `commit_id: null`. */
export const RuntimeResponse = Schema.Struct({
  assistant_id: Schema.String,
  commit_id: Schema.NullOr(Schema.String),
  snapshot: Snapshot
})

/** PUT /rollout body (A12): the branch to roll out and the share of new sessions, 0-100. */
export const RolloutPayload = Schema.Struct({
  branch_name: BranchName,
  percent: Schema.Int.pipe(Schema.check(Schema.isGreaterThanOrEqualTo(0), Schema.isLessThanOrEqualTo(100)))
}).annotate({ examples: [{ branch_name: "friendlier-greeting", percent: 10 }] })

/** Query of the run statistics (A14): the range of the runs' start, ISO 8601; default the last 24 hours. */
export const RunStatsQuery = Schema.Struct({
  since: Schema.optionalKey(
    DateTimeInput.annotate({ description: "Runs started at or after this moment; default 24 hours before `until`." })
  ),
  until: Schema.optionalKey(DateTimeInput.annotate({ description: "Runs started before this moment; default now." }))
})

/** Response of a migration (A11): the `main` branch and its first commit. */
export const MigrateResponse = Schema.Struct({ assistant_id: Schema.String, branch: Branch, commit: Commit })

const assistantPath = { assistant_id: Identifier }
const branchPath = { assistant_id: Identifier, branch_name: BranchName }
const draft = "/assistants/:assistant_id/branches/:branch_name/draft"
const branches = "/assistants/:assistant_id/branches"

/** Failures of every operation on an assistant's versions (A1). */
const assistantErrors = [AssistantNotFound.Wire, AssistantNotVersioned.Wire] as const

/** Failures of every operation on a branch (A1). */
const branchErrors = [...assistantErrors, BranchNotFound.Wire] as const

/** The OpenAPI summary and description of an endpoint. */
const doc = (summary: string, description: string) => OpenApi.annotations({ summary, description })

/** `node` -> `Node`. */
const capitalized = (word: string): string => word.charAt(0).toUpperCase() + word.slice(1)

const itemEndpoints = <
  const Kind extends string,
  const Param extends string,
  S extends Schema.Top,
  B extends Schema.Top
>(
  kind: Kind,
  param: Param,
  item: S,
  body: B,
  /** The item's name in summaries (`node`); `Node` in its 404 detail. */
  noun: string
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
    }).annotateMerge(doc(`List a draft's ${kind}`, `The ${kind} of the branch's draft (A9).`)),
    HttpApiEndpoint.get(`get_${kind}`, `${draft}/${kind}/:${param}`, {
      params,
      success: item,
      error: [...branchErrors, ItemNotFound.Wire]
    }).annotateMerge(doc(`Get a ${noun}`, `The ${noun} of the draft, or 404 \`${capitalized(noun)} not found\` (A9).`)),
    HttpApiEndpoint.put(`put_${kind}`, `${draft}/${kind}/:${param}`, {
      params,
      payload: body,
      success: item,
      error: [...branchErrors, ValidationFailed.Wire]
    }).annotateMerge(
      doc(
        `Create or replace a ${noun}`,
        `Writes the ${noun} under this id in the draft. The draft must stay referentially valid, else nothing changes and it responds 422 (A9, A10).`
      )
    ),
    HttpApiEndpoint.patch(`patch_${kind}`, `${draft}/${kind}/:${param}`, {
      params,
      payload: JsonObjectInput,
      success: item,
      error: [...branchErrors, ItemNotFound.Wire, ValidationFailed.Wire]
    }).annotateMerge(
      doc(
        `Patch a ${noun}`,
        `Applies the body to the draft's ${noun} as an RFC 7396 merge patch. The draft must stay referentially valid, else nothing changes and it responds 422 (A9, A10).`
      )
    ),
    HttpApiEndpoint.delete(`delete_${kind}`, `${draft}/${kind}/:${param}`, {
      params,
      success: HttpApiSchema.NoContent,
      error: [...branchErrors, ItemNotFound.Wire, ValidationFailed.Wire]
    }).annotateMerge(
      doc(
        `Delete a ${noun}`,
        `Removes the ${noun} from the draft (204). A ${noun} still referenced gets 422 at its path parameter, naming the referrers (A9, A10).`
      )
    )
  ] as const
}

const singletonEndpoints = <const Kind extends string, S extends Schema.Top, I extends Schema.Top>(
  kind: Kind,
  schema: S,
  input: I
) => {
  return [
    HttpApiEndpoint.get(`get_${kind}`, `${draft}/${kind}`, {
      params: branchPath,
      success: schema,
      error: branchErrors
    }).annotateMerge(doc(`Get the draft's ${kind}`, `The \`${kind}\` file of the branch's draft (A5).`)),
    HttpApiEndpoint.put(`put_${kind}`, `${draft}/${kind}`, {
      params: branchPath,
      payload: input,
      success: schema,
      error: [...branchErrors, ValidationFailed.Wire]
    }).annotateMerge(
      doc(
        `Replace the draft's ${kind}`,
        `Replaces the \`${kind}\` file of the draft. The draft must stay referentially valid, else nothing changes and it responds 422 (A10).`
      )
    ),
    HttpApiEndpoint.patch(`patch_${kind}`, `${draft}/${kind}`, {
      params: branchPath,
      payload: JsonObjectInput,
      success: schema,
      error: [...branchErrors, ValidationFailed.Wire]
    }).annotateMerge(
      doc(
        `Patch the draft's ${kind}`,
        `Applies the body to the draft's \`${kind}\` as an RFC 7396 merge patch. The draft must stay referentially valid, else nothing changes and it responds 422 (A10).`
      )
    )
  ] as const
}

/** The OpenAPI description of the assistant list, in both groups. */
const LIST_DESCRIPTION =
  "The organization's assistants, oldest first, in pages: `limit` 1-1000 (default 100), next page with `after_id` = the last id of the previous page (issue 39 item 6)."

/** The OpenAPI description of an assistant's deletion, in both groups. */
const DELETE_DESCRIPTION =
  "204: the assistant is deleted with its branches, drafts, commits and rollout (the runs of sessions stay). 409 `Assistant is in use by an agent` while an AI agent of the organization answers from it: delete the agent or point it at another assistant first (issue 39 item 6)."

/** The OpenAPI description of an assistant's update, in both groups. */
const UPDATE_DESCRIPTION =
  "Changes `name` and `description` (null clears it) when present. The draft's `context` (its own `assistant_name`) is versioned content and does not change (issue 39 item 6)."

/**
 * The assistants group (API-key auth). Each endpoint lists the failures its
 * operation can respond with; every one may also respond 401 and 422 (middleware).
 */
export class AssistantsApi extends HttpApiGroup.make("assistants")
  .add(
    HttpApiEndpoint.get("listAssistants", "/assistants", {
      query: PageQuery,
      success: Schema.Array(Assistant)
    }).annotateMerge(doc("List assistants", LIST_DESCRIPTION)),
    HttpApiEndpoint.get("getAssistant", "/assistants/:assistant_id", {
      params: assistantPath,
      success: Assistant,
      error: AssistantNotFound.Wire
    }).annotateMerge(doc("Get an assistant", "The assistant, or 404 `Assistant not found` (A1, issue 39 item 6).")),
    HttpApiEndpoint.patch("updateAssistant", "/assistants/:assistant_id", {
      params: assistantPath,
      payload: UpdateAssistantPayload,
      success: Assistant,
      error: AssistantNotFound.Wire
    }).annotateMerge(doc("Update an assistant", UPDATE_DESCRIPTION)),
    HttpApiEndpoint.delete("deleteAssistant", "/assistants/:assistant_id", {
      params: assistantPath,
      success: HttpApiSchema.NoContent,
      error: [AssistantNotFound.Wire, AssistantInUse.Wire]
    }).annotateMerge(doc("Delete an assistant", DELETE_DESCRIPTION)),
    HttpApiEndpoint.patch("applyChangeset", draft, {
      params: branchPath,
      payload: ChangesetPayload,
      success: ChangesetResult,
      error: [...branchErrors, ValidationFailed.Wire]
    }).annotateMerge(
      OpenApi.annotations({
        summary: "Apply a changeset to a draft",
        description:
          'Upserts and deletes items of the branch\'s draft in one edit (`nodes`, `tools`, `variables`, and `config`/`context` patches). `config` and `context` are RFC 7396 merge patches; the patched file is checked as its PUT checks it, else nothing changes and it responds 422 at the member (`["body", "context", "assistant_name"]`). The draft must stay referentially valid: `config.initial_node_id`, a node\'s `config.next_node` and an llm node\'s `config.tools` must name items of the draft after the edit, else nothing changes and it responds 422 naming the field (A10). Edits of one branch are serialized (A4).'
      })
    ),
    HttpApiEndpoint.get("getDraft", draft, {
      params: branchPath,
      query: PrefixQuery.fields,
      success: Snapshot,
      error: branchErrors
    }).annotateMerge(
      OpenApi.annotations({
        summary: "Get a draft",
        description: "The branch's draft as a snapshot; `prefix` limits it to the files whose paths start with it (A5)."
      })
    ),
    HttpApiEndpoint.get("draftIndex", `${draft}/index`, {
      params: branchPath,
      query: PrefixQuery.fields,
      success: Schema.Array(Schema.String),
      error: branchErrors
    }).annotateMerge(
      OpenApi.annotations({
        summary: "List a draft's files",
        description:
          "The paths of the draft's files (`context`, `config`, `nodes/<id>`, `tools/<id>`, `variables/<name>`, A5), optionally under `prefix`."
      })
    ),
    HttpApiEndpoint.post("discard", `${draft}/discard`, {
      params: branchPath,
      payload: DiscardPayload,
      success: HttpApiSchema.NoContent,
      error: [...branchErrors, ValidationFailed.Wire]
    }).annotateMerge(
      OpenApi.annotations({
        summary: "Discard a file's changes",
        description: "Reverts one file of the draft (`path`) to its content at the branch's HEAD (A5)."
      })
    ),
    HttpApiEndpoint.post("reset", `${draft}/reset`, {
      params: branchPath,
      payload: CommitIdPayload,
      success: HttpApiSchema.NoContent,
      error: [...branchErrors, CommitNotFound.Wire]
    }).annotateMerge(
      OpenApi.annotations({
        summary: "Reset a draft to a commit",
        description: "Replaces the whole draft with the files of `commit_id` (404 `Commit not found`, A1)."
      })
    ),
    ...itemEndpoints("nodes", "node_id", Node, NodeBody, "node"),
    ...itemEndpoints("tools", "tool_id", Tool, ToolBody, "tool"),
    ...itemEndpoints("variables", "variable_id", Variable, VariableBody, "variable"),
    ...singletonEndpoints("config", Config, ConfigInput),
    ...singletonEndpoints("context", Context, ContextInput),
    HttpApiEndpoint.post("createBranch", branches, {
      params: assistantPath,
      payload: BranchNamePayload,
      success: Branch.pipe(HttpApiSchema.status(201)),
      error: [...branchErrors, BranchAlreadyExists.Wire]
    }).annotateMerge(
      OpenApi.annotations({
        summary: "Create a branch",
        description:
          "A branch from `main`'s HEAD with a draft holding that commit's files. Names are 1-100 of `A-Za-z0-9._/-` without a leading or trailing `/` or `..` (422 otherwise); in URLs a `/` in a name is sent as `%2F`; a name in use gets 409 `Branch already exists` (A3)."
      })
    ),
    HttpApiEndpoint.get("listBranches", branches, {
      params: assistantPath,
      success: Schema.Array(Branch),
      error: assistantErrors
    }).annotateMerge(
      OpenApi.annotations({
        summary: "List branches",
        description: "The assistant's branches with their HEAD commits (A3)."
      })
    ),
    HttpApiEndpoint.post("fork", `${branches}/:branch_name/fork`, {
      params: branchPath,
      payload: BranchNamePayload,
      success: Branch.pipe(HttpApiSchema.status(201)),
      error: [...branchErrors, BranchAlreadyExists.Wire]
    }).annotateMerge(
      OpenApi.annotations({
        summary: "Fork a branch",
        description: "A new branch `name` from this branch's HEAD, its draft a copy of this branch's draft (A3)."
      })
    ),
    HttpApiEndpoint.get("getBranch", `${branches}/:branch_name`, {
      params: branchPath,
      success: Snapshot,
      error: branchErrors
    }).annotateMerge(
      OpenApi.annotations({
        summary: "Get a branch's HEAD snapshot",
        description: "The snapshot at the branch's HEAD commit (A5)."
      })
    ),
    HttpApiEndpoint.delete("deleteBranch", `${branches}/:branch_name`, {
      params: branchPath,
      success: HttpApiSchema.NoContent,
      error: [...branchErrors, MainBranchUndeletable.Wire]
    }).annotateMerge(
      OpenApi.annotations({
        summary: "Delete a branch",
        description:
          "Deletes the branch and its draft; its commits stay reachable from other branches. `main` gets 400 `The main branch cannot be deleted` (A3)."
      })
    ),
    HttpApiEndpoint.post("publish", `${branches}/:branch_name/publish`, {
      params: branchPath,
      payload: [PublishPayload, NoBody],
      success: CommitResponse,
      error: [...branchErrors, NothingToPublish.Wire]
    }).annotateMerge(
      OpenApi.annotations({
        summary: "Publish a draft",
        description:
          "Commits the branch's draft as its new HEAD with `message`. A draft without changes gets 400 `No changes to publish`; concurrent publishes of one branch are serialized and none is lost (A4). A commit id is the first 12 hex characters of a SHA-256 over parent, files, message, author and time (A5). Publishing `main` changes what new AI runs answer from (R2)."
      })
    ),
    HttpApiEndpoint.post("rollback", `${branches}/:branch_name/rollback`, {
      params: branchPath,
      payload: CommitIdPayload,
      success: CommitResponse,
      error: [...branchErrors, CommitNotFound.Wire, CommitNotInHistory.Wire]
    }).annotateMerge(
      OpenApi.annotations({
        summary: "Roll a branch back",
        description:
          "Moves the branch's HEAD to `commit_id`, HEAD or one of its ancestors, and resets the draft to it; a commit not in the history gets 400 `Commit is not in the history of this branch` (A7)."
      })
    ),
    HttpApiEndpoint.post("merge", `${branches}/:branch_name/merge`, {
      params: branchPath,
      payload: MergePayload,
      success: Schema.NullOr(Commit),
      error: [...branchErrors, MergeConflict.Wire, ValidationFailed.Wire]
    }).annotateMerge(
      OpenApi.annotations({
        summary: "Merge a branch into this one",
        description:
          "Merges `source_branch_name` into this branch from their merge base (the nearest common ancestor). Without changes of its own since the base, this branch fast-forwards to the source's HEAD. A path changed on both sides to different content is a conflict: 409 `Merge conflict on paths: ...`, nothing changed; identical changes are not conflicts. Returns the merge commit, or `null` when there was nothing to merge or `commit` is false (the result stays in the draft) (A6)."
      })
    ),
    HttpApiEndpoint.get("changes", `${branches}/:branch_name/changes`, {
      params: branchPath,
      success: ChangesResponse,
      error: branchErrors
    }).annotateMerge(
      OpenApi.annotations({
        summary: "Whether a draft has changes",
        description: "`has_changes`: whether the branch's draft differs from its HEAD (A4)."
      })
    ),
    HttpApiEndpoint.get("branchDiff", `${branches}/:branch_name/diff`, {
      params: branchPath,
      success: DiffResponse,
      error: branchErrors
    }).annotateMerge(
      OpenApi.annotations({
        summary: "Diff a draft against HEAD",
        description: "The files of the branch's draft that differ from its HEAD, file by file (A5)."
      })
    ),
    HttpApiEndpoint.get("listVersions", "/assistants/:assistant_id/versions", {
      params: assistantPath,
      query: VersionsQuery.fields,
      success: VersionsResponse,
      error: branchErrors
    }).annotateMerge(
      OpenApi.annotations({
        summary: "List versions",
        description: `The assistant's commits, newest first, paged by \`limit\` (default ${DEFAULT_VERSIONS_LIMIT}) and \`offset\`; with \`branch_name\`, only those reachable from that branch's HEAD over both parent links (A8).`
      })
    ),
    HttpApiEndpoint.get("diffVersions", "/assistants/:assistant_id/versions/diff", {
      params: assistantPath,
      query: VersionsDiffQuery.fields,
      success: DiffResponse,
      error: [...assistantErrors, CommitNotFound.Wire]
    }).annotateMerge(
      OpenApi.annotations({
        summary: "Diff two versions",
        description: "The files that differ between commits `commit_a` and `commit_b` (A5)."
      })
    ),
    HttpApiEndpoint.get("getVersion", "/assistants/:assistant_id/versions/:commit_id", {
      params: { assistant_id: Identifier, commit_id: Schema.String },
      success: VersionResponse,
      error: [...assistantErrors, CommitNotFound.Wire]
    }).annotateMerge(
      OpenApi.annotations({
        summary: "Get a version",
        description: "A commit and its files (404 `Commit not found`, A1)."
      })
    ),
    HttpApiEndpoint.get("runtime", "/assistants/:assistant_id/runtime", {
      params: assistantPath,
      success: RuntimeResponse,
      error: [AssistantNotFound.Wire, BranchNotFound.Wire, NoPublishedVersion.Wire]
    }).annotateMerge(
      OpenApi.annotations({
        summary: "Get the runtime snapshot",
        description:
          "What the AI runs: the snapshot at `main`'s HEAD with its `commit_id`, or a legacy assistant's snapshot with `commit_id: null`. A versioned assistant never published gets 404 `Assistant has no published version` (A2, A11, R2)."
      })
    ),
    HttpApiEndpoint.get("getRollout", "/assistants/:assistant_id/rollout", {
      params: assistantPath,
      success: Rollout,
      error: [...assistantErrors, NoRollout.Wire]
    }).annotateMerge(
      OpenApi.annotations({
        summary: "Get the rollout",
        description:
          "The branch rolled out to a share of new sessions, and that share; 404 `No rollout` when none is set (A12)."
      })
    ),
    HttpApiEndpoint.put("putRollout", "/assistants/:assistant_id/rollout", {
      params: assistantPath,
      payload: RolloutPayload,
      success: Rollout,
      error: [...branchErrors, BranchNotPublished.Wire]
    }).annotateMerge(
      OpenApi.annotations({
        summary: "Roll a branch out to a share of sessions",
        description:
          "From now on, a session's first AI run reads `branch_name` with probability `percent`/100, decided by a hash of the session id (the same session always gets the same branch, in every process), else `main`. Unpinned sessions keep that branch and read its HEAD at each run. The same branch again changes `percent` (sessions keep their branch); another branch replaces the rollout, and the sessions the old one took go back to `main` unless pinned (A13). An unknown branch gets 404 `Branch not found`, a branch never published 400 `Branch has no published version` (A12)."
      })
    ),
    HttpApiEndpoint.delete("deleteRollout", "/assistants/:assistant_id/rollout", {
      params: assistantPath,
      success: HttpApiSchema.NoContent,
      error: [...assistantErrors, NoRollout.Wire]
    }).annotateMerge(
      OpenApi.annotations({
        summary: "End the rollout",
        description:
          "Ends the rollout: the sessions it took go back to `main` at their next run, while pinned sessions keep their commit (A12, A13). 404 `No rollout` when none is set."
      })
    ),
    HttpApiEndpoint.get("getRuntimeSettings", "/assistants/:assistant_id/runtime-settings", {
      params: assistantPath,
      success: RuntimeSettings,
      error: assistantErrors
    }).annotateMerge(
      OpenApi.annotations({
        summary: "Get the runtime settings",
        description: "`session_pinning`: `none` (default) or `session` (A13)."
      })
    ),
    HttpApiEndpoint.put("putRuntimeSettings", "/assistants/:assistant_id/runtime-settings", {
      params: assistantPath,
      payload: RuntimeSettings,
      success: RuntimeSettings,
      error: assistantErrors
    }).annotateMerge(
      OpenApi.annotations({
        summary: "Set the runtime settings",
        description:
          "With `session_pinning: session`, every run of a session reads the commit of its first run (rollout or not), so a publish never changes a conversation in the middle; new sessions take the current HEAD of their branch. With `none`, each run reads its branch's HEAD, and a run whose current node the new HEAD no longer has starts at `initial_node_id` and records that it did (A13, R2)."
      })
    ),
    HttpApiEndpoint.get("runStats", "/assistants/:assistant_id/runs/stats", {
      params: assistantPath,
      query: RunStatsQuery.fields,
      success: RunStats,
      error: assistantErrors
    }).annotateMerge(
      OpenApi.annotations({
        summary: "Run statistics per commit",
        description:
          "Over the runs started in [`since`, `until`) (default: the last 24 hours), per commit and the branch it was read through, newest commit first: how many runs, how many succeeded and failed, the p50 and p95 of their duration in ms (nearest rank) and their input and output tokens summed, so a rollout can be compared with `main` before it is merged (A14). Runs of a legacy assistant have no commit and are not counted."
      })
    ),
    HttpApiEndpoint.post("migrate", "/assistants/:assistant_id/migrate", {
      params: assistantPath,
      success: MigrateResponse,
      error: [AssistantNotFound.Wire, AssistantAlreadyVersioned.Wire]
    }).annotateMerge(
      OpenApi.annotations({
        summary: "Put a legacy assistant under version control",
        description:
          "Creates branch `main` with a first commit of the legacy snapshot and returns both; a second migrate gets 409 `Assistant is already versioned` (A11)."
      })
    )
  )
  .middleware(Authorization)
  .prefix(assistantsBasePath)
  .annotateMerge(
    OpenApi.annotations({
      title: "Assistants",
      description:
        "AI assistants under version control: branches with drafts, commits with content hashes, publish, rollback, merge, the runtime snapshot the AI answers from (A1-A11), rollouts of a branch to a share of sessions, session pinning and run statistics per commit (A12-A14). Requests use an organization's API key."
    })
  ) {}

/** The admin API's assistant row (O6). */
export class AssistantsAdminApi extends HttpApiGroup.make("assistantsAdmin")
  .add(
    HttpApiEndpoint.post("createAssistant", "/organizations/:org_id/assistants", {
      params: { org_id: Identifier },
      payload: CreateAssistantPayload,
      success: Assistant.pipe(HttpApiSchema.status(201)),
      error: [OrganizationNotFound.Wire, ValidationFailed.Wire]
    }).annotateMerge(
      OpenApi.annotations({
        summary: "Create an assistant",
        description:
          "An assistant of the organization. Versioned (default): a branch `main` with no HEAD and a draft holding `snapshot` (A2). With `versioned: false`, a legacy assistant answering from `snapshot` until migrated (A11)."
      })
    ),
    HttpApiEndpoint.get("listAssistants", "/organizations/:org_id/assistants", {
      params: { org_id: Identifier },
      query: PageQuery,
      success: Schema.Array(Assistant),
      error: OrganizationNotFound.Wire
    }).annotateMerge(doc("List an organization's assistants", LIST_DESCRIPTION)),
    HttpApiEndpoint.get("getAssistant", "/organizations/:org_id/assistants/:assistant_id", {
      params: { org_id: Identifier, assistant_id: Identifier },
      success: Assistant,
      error: [OrganizationNotFound.Wire, AssistantNotFound.Wire]
    }).annotateMerge(
      doc("Get an organization's assistant", "The assistant, or 404 `Assistant not found` (A1, issue 39 item 6).")
    ),
    HttpApiEndpoint.patch("updateAssistant", "/organizations/:org_id/assistants/:assistant_id", {
      params: { org_id: Identifier, assistant_id: Identifier },
      payload: UpdateAssistantPayload,
      success: Assistant,
      error: [OrganizationNotFound.Wire, AssistantNotFound.Wire]
    }).annotateMerge(doc("Update an organization's assistant", UPDATE_DESCRIPTION)),
    HttpApiEndpoint.delete("deleteAssistant", "/organizations/:org_id/assistants/:assistant_id", {
      params: { org_id: Identifier, assistant_id: Identifier },
      success: HttpApiSchema.NoContent,
      error: [OrganizationNotFound.Wire, AssistantNotFound.Wire, AssistantInUse.Wire]
    }).annotateMerge(doc("Delete an organization's assistant", DELETE_DESCRIPTION))
  )
  .middleware(AdminAuthorization)
  .prefix(adminBasePath)
  .annotateMerge(
    OpenApi.annotations({
      title: "Admin: assistants",
      description:
        "An organization's assistants: create, list, read, update and delete (O6, issue 39 item 6). Requests use the server's `ADMIN_TOKEN`."
    })
  ) {}
