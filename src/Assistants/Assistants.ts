/**
 * The assistants service: version control of assistants (assistants.md;
 * DECISIONS.md A1-A11). Every edit, publish, rollback and merge of a branch
 * runs in one transaction that first locks the branch row, so edits and
 * publishes on one branch are serialized and none is lost (A4).
 */
import { PgClient } from "@effect/sql-pg"
import { Context, Effect, Layer, Schema } from "effect"
import {
  type Assistant,
  Context as AssistantContext,
  type Branch,
  type Commit,
  type CommitFile,
  Config,
  type DiffEntry,
  Node,
  type NodeInput,
  type Snapshot,
  type SnapshotInput,
  Tool,
  type ToolInput,
  Variable
} from "../Domain/Assistant.ts"
import type { JsonObject } from "../Domain/Common.ts"
import { BadRequest, Conflict, NotFound, ValidationFailed } from "../Domain/Errors.ts"
import { validationIssues } from "../Domain/Validation.ts"
import { newId } from "../Shared/Ids.ts"
import { applyMergePatch } from "../Shared/MergePatch.ts"
import {
  commitId,
  diffFiles,
  type FileVersion,
  fileOf,
  filesFromSnapshot,
  type Locate,
  mergeThreeWay,
  nodeContent,
  nodePath,
  referenceIssues,
  referrersOf,
  sameFiles,
  snapshotOf,
  toolContent,
  toolPath,
  variablePath
} from "./Files.ts"
import { AssistantsRepo, type BranchRow } from "./Repo.ts"

/** The name of the production branch (assistants.md). */
export const MAIN = "main"

/** Published snapshots kept per process for the runtime (R2); a commit never changes, so entries never go stale. */
const SNAPSHOT_CACHE_SIZE = 256

/** An item collection of a draft (A9). */
export type ItemKind = "nodes" | "tools" | "variables"

/** A singleton file of a draft (A9). */
export type SingletonKind = "config" | "context"

/** Body of PATCH {draft_base}: the changeset (assistants.md "Drafts"). */
export interface Changeset {
  readonly context?: JsonObject | undefined
  readonly config?: JsonObject | undefined
  readonly nodes?: { readonly upsert?: ReadonlyArray<NodeInput>; readonly delete?: ReadonlyArray<string> } | undefined
  readonly tools?: { readonly upsert?: ReadonlyArray<ToolInput>; readonly delete?: ReadonlyArray<string> } | undefined
  readonly variables?:
    | { readonly upsert?: ReadonlyArray<Variable>; readonly delete?: ReadonlyArray<string> }
    | undefined
}

/** Answer of a changeset. */
export interface ChangesetResult {
  readonly context_updated: boolean
  readonly config_updated: boolean
  readonly nodes_upserted: number
  readonly nodes_deleted: number
  readonly tools_upserted: number
  readonly tools_deleted: number
  readonly variables_upserted: number
  readonly variables_deleted: number
}

/** Who publishes: `author_type` defaults to `human`. */
export interface PublishInput {
  readonly message?: string | null | undefined
  readonly author_type?: "human" | "agent" | "system" | undefined
  readonly author_id?: string | null | undefined
}

const kindNames: Record<ItemKind, string> = { nodes: "Node", tools: "Tool", variables: "Variable" }
const pathOf: Record<ItemKind, (id: string) => string> = { nodes: nodePath, tools: toolPath, variables: variablePath }
const singletonSchemas = { config: Config, context: AssistantContext } as const

const assistantNotFound = () => new NotFound({ detail: "Assistant not found" })
const branchNotFound = () => new NotFound({ detail: "Branch not found" })
const commitNotFound = () => new NotFound({ detail: "Commit not found" })

/** Failures of the version operations. */
export type VersionError = NotFound | Conflict | BadRequest | ValidationFailed

type Draft = Map<string, FileVersion>

/** An edit of a draft: the next files, its answer, and where reference problems are reported. */
interface Edit<A> {
  readonly next: Draft
  readonly result: A
  readonly locate: Locate
}

const decodeItem = <S extends Schema.Top>(schema: S, value: unknown, loc: ReadonlyArray<string | number>) => {
  const exit = Schema.decodeUnknownExit(schema as unknown as Schema.Codec<unknown>, { errors: "all" })(value)
  if (exit._tag === "Success") return Effect.succeed(exit.value)
  const reason = exit.cause.reasons.find((r) => r._tag === "Fail")
  if (reason?._tag === "Fail" && Schema.isSchemaError(reason.error)) {
    return Effect.fail(new ValidationFailed({ detail: validationIssues(reason.error.issue, loc) }))
  }
  return Effect.die(exit.cause)
}

const applyPatch = (current: unknown, patch: unknown) => applyMergePatch(current ?? {}, patch)

const makeService = Effect.gen(function* () {
  const sql = yield* PgClient.PgClient
  const repo = yield* AssistantsRepo

  /** The organization's assistant, versioned (A1). */
  const versioned = Effect.fnUntraced(function* (organizationId: string, assistantId: string) {
    const assistant = yield* repo.findAssistant(organizationId, assistantId)
    if (assistant === undefined) return yield* assistantNotFound()
    if (!assistant.versioned) return yield* new Conflict({ detail: "Assistant is not versioned" })
    return assistant
  })

  const branchOf = Effect.fnUntraced(function* (assistantId: string, name: string, forUpdate = false) {
    const branch = yield* repo.findBranch(assistantId, name, forUpdate)
    if (branch === undefined) return yield* branchNotFound()
    return branch
  })

  /** Runs `f` in a transaction on the locked branch of a versioned assistant (A4). */
  const onBranch = <A, E>(
    organizationId: string,
    assistantId: string,
    name: string,
    f: (branch: BranchRow) => Effect.Effect<A, E>
  ) =>
    sql
      .withTransaction(
        Effect.gen(function* () {
          yield* versioned(organizationId, assistantId)
          return yield* f(yield* branchOf(assistantId, name, true))
        })
      )
      .pipe(Effect.catchTag("SqlError", Effect.die))

  /** Checks references (A10), stores new contents and writes the draft delta. */
  const commitEdit = <A>(assistantId: string, branch: BranchRow, current: Draft, edit: Edit<A>) =>
    Effect.gen(function* () {
      const issues = referenceIssues(edit.next, edit.locate)
      if (issues.length > 0) return yield* new ValidationFailed({ detail: issues })
      const set = new Map<string, string>()
      const remove: Array<string> = []
      const fresh: Array<FileVersion> = []
      for (const [path, file] of edit.next) {
        if (current.get(path)?.hash !== file.hash) {
          set.set(path, file.hash)
          fresh.push(file)
        }
      }
      for (const path of current.keys()) if (!edit.next.has(path)) remove.push(path)
      yield* repo.insertFiles(assistantId, fresh)
      yield* repo.writeDraft(branch.id, set, remove)
      if (set.size > 0 || remove.length > 0) yield* repo.touchBranch(branch.id)
      return edit.result
    })

  /** Edits a branch's draft: lock, load, compute, validate (A10), write. */
  const editDraft = <A, E>(
    organizationId: string,
    assistantId: string,
    name: string,
    compute: (draft: Draft) => Effect.Effect<Edit<A>, E>
  ) =>
    onBranch(organizationId, assistantId, name, (branch) =>
      Effect.gen(function* () {
        const draft = yield* repo.draftFiles(assistantId, branch.id)
        const edit = yield* compute(draft)
        return yield* commitEdit(assistantId, branch, draft, edit)
      })
    )

  const createAssistant = Effect.fn("Assistants.create")(
    function* (
      organizationId: string,
      input: {
        readonly name: string
        readonly description?: string | null | undefined
        readonly versioned?: boolean | undefined
        readonly snapshot?: SnapshotInput | undefined
      }
    ) {
      const isVersioned = input.versioned ?? true
      // A2: the draft holds the assistant's context: its name and description unless the snapshot gives one.
      const files = filesFromSnapshot({
        ...input.snapshot,
        context: input.snapshot?.context ?? {
          assistant_name: input.name,
          assistant_description: input.description ?? ""
        }
      })
      if (isVersioned) {
        const issues = referenceIssues(files, (path, field) => ["body", "snapshot", path, ...field])
        if (issues.length > 0) return yield* new ValidationFailed({ detail: issues })
      }
      return yield* sql.withTransaction(
        Effect.gen(function* () {
          const assistant: Assistant = yield* repo.insertAssistant({
            id: newId(),
            organizationId,
            name: input.name,
            description: input.description ?? null,
            versioned: isVersioned,
            legacySnapshot: isVersioned ? undefined : (input.snapshot ?? {})
          })
          if (isVersioned) {
            const branch = (yield* repo.insertBranch({
              id: newId(),
              assistantId: assistant.id,
              name: MAIN,
              head: null
            }))!
            yield* repo.insertFiles(assistant.id, [...files.values()])
            yield* repo.writeDraft(branch.id, new Map([...files].map(([path, file]) => [path, file.hash])), [])
          }
          return assistant
        })
      )
    },
    Effect.catchTag("SqlError", Effect.die)
  )

  const getDraft = Effect.fn("Assistants.getDraft")(
    function* (organizationId: string, assistantId: string, name: string, prefix: string | undefined) {
      yield* versioned(organizationId, assistantId)
      const branch = yield* branchOf(assistantId, name)
      return snapshotOf(yield* repo.draftFiles(assistantId, branch.id, prefix ?? ""))
    },
    Effect.catchTag("SqlError", Effect.die)
  )

  const draftIndex = Effect.fn("Assistants.draftIndex")(
    function* (organizationId: string, assistantId: string, name: string, prefix: string | undefined) {
      yield* versioned(organizationId, assistantId)
      const branch = yield* branchOf(assistantId, name)
      return [...(yield* repo.draftHashes(branch.id)).keys()].filter((path) => path.startsWith(prefix ?? "")).sort()
    },
    Effect.catchTag("SqlError", Effect.die)
  )

  const applyChangeset = Effect.fn("Assistants.applyChangeset")(
    (organizationId: string, assistantId: string, name: string, changeset: Changeset) =>
      editDraft(organizationId, assistantId, name, (draft) =>
        Effect.sync((): Edit<ChangesetResult> => {
          const next: Draft = new Map(draft)
          const origin = new Map<string, ReadonlyArray<string | number>>()
          const deleted = new Map<string, ReadonlyArray<string | number>>()
          let contextUpdated = false
          let configUpdated = false
          for (const kind of ["context", "config"] as const) {
            const patch = changeset[kind]
            if (patch === undefined) continue
            const file = fileOf(applyPatch(draft.get(kind)?.content, patch))
            if (file.hash !== draft.get(kind)?.hash) {
              next.set(kind, file)
              if (kind === "context") contextUpdated = true
              else configUpdated = true
            }
            origin.set(kind, ["body", kind])
          }
          const counts = { nodes: [0, 0], tools: [0, 0], variables: [0, 0] }
          for (const kind of ["nodes", "tools", "variables"] as const) {
            const group = changeset[kind]
            group?.delete?.forEach((id, index) => {
              const path = pathOf[kind](id)
              if (next.delete(path)) counts[kind][1]!++
              deleted.set(path, ["body", kind, "delete", index])
            })
            group?.upsert?.forEach((input, index) => {
              const content =
                kind === "nodes"
                  ? nodeContent(input as NodeInput)
                  : kind === "tools"
                    ? toolContent(input as ToolInput)
                    : (input as Variable)
              const id = kind === "variables" ? (content as Variable).name : (content as { id: string }).id
              const path = pathOf[kind](id)
              next.set(path, fileOf(content))
              origin.set(path, ["body", kind, "upsert", index])
              deleted.delete(path)
              counts[kind][0]!++
            })
          }
          return {
            next,
            result: {
              context_updated: contextUpdated,
              config_updated: configUpdated,
              nodes_upserted: counts.nodes[0]!,
              nodes_deleted: counts.nodes[1]!,
              tools_upserted: counts.tools[0]!,
              tools_deleted: counts.tools[1]!,
              variables_upserted: counts.variables[0]!,
              variables_deleted: counts.variables[1]!
            },
            locate: (path, field, missing) => {
              const at = origin.get(path)
              if (at !== undefined) return [...at, ...(path === "config" ? field : field)]
              const removedAt = deleted.get(missing)
              if (removedAt !== undefined) return removedAt
              return ["body"]
            }
          }
        })
      )
  )

  const discard = Effect.fn("Assistants.discard")(
    (organizationId: string, assistantId: string, name: string, path: string) =>
      onBranch(organizationId, assistantId, name, (branch) =>
        Effect.gen(function* () {
          const draft = yield* repo.draftFiles(assistantId, branch.id)
          const head = yield* repo.commitFiles(assistantId, branch.head_commit_id)
          const next: Draft = new Map(draft)
          const original = head.get(path)
          if (original === undefined) next.delete(path)
          else next.set(path, original)
          return yield* commitEdit(assistantId, branch, draft, {
            next,
            result: undefined,
            locate: () => ["body", "path"]
          })
        })
      )
  )

  const reset = Effect.fn("Assistants.reset")(
    (organizationId: string, assistantId: string, name: string, commit: string) =>
      onBranch(organizationId, assistantId, name, (branch) =>
        Effect.gen(function* () {
          if ((yield* repo.findCommit(assistantId, commit)) === undefined) return yield* commitNotFound()
          yield* repo.resetDraft(assistantId, branch.id, commit)
          yield* repo.touchBranch(branch.id)
        })
      )
  )

  const listItems = Effect.fn("Assistants.listItems")(
    function* (organizationId: string, assistantId: string, name: string, kind: ItemKind) {
      yield* versioned(organizationId, assistantId)
      const branch = yield* branchOf(assistantId, name)
      const files = yield* repo.draftFiles(assistantId, branch.id, `${kind}/`)
      return [...files.entries()].sort(([a], [b]) => (a < b ? -1 : 1)).map(([, file]) => file.content)
    },
    Effect.catchTag("SqlError", Effect.die)
  )

  const getItem = Effect.fn("Assistants.getItem")(
    function* (organizationId: string, assistantId: string, name: string, kind: ItemKind | SingletonKind, id: string) {
      yield* versioned(organizationId, assistantId)
      const branch = yield* branchOf(assistantId, name)
      const path = kind === "config" || kind === "context" ? kind : pathOf[kind](id)
      const file = (yield* repo.draftFiles(assistantId, branch.id, path)).get(path)
      if (file === undefined) {
        if (kind === "config" || kind === "context") return {}
        return yield* new NotFound({ detail: `${kindNames[kind]} not found` })
      }
      return file.content
    },
    Effect.catchTag("SqlError", Effect.die)
  )

  /** PUT (replace) or PATCH (RFC 7396) of one item or singleton, validated and referentially checked (A9, A10). */
  const writeItem = Effect.fn("Assistants.writeItem")(
    (
      organizationId: string,
      assistantId: string,
      name: string,
      kind: ItemKind | SingletonKind,
      id: string,
      mode: "put" | "patch",
      body: unknown
    ) =>
      editDraft(organizationId, assistantId, name, (draft) =>
        Effect.gen(function* () {
          const singleton = kind === "config" || kind === "context"
          const path = singleton ? kind : pathOf[kind](id)
          const current = draft.get(path)
          if (!singleton && mode === "patch" && current === undefined) {
            return yield* new NotFound({ detail: `${kindNames[kind]} not found` })
          }
          const idKey = kind === "variables" ? "name" : "id"
          let value: unknown = mode === "patch" ? applyPatch(current?.content, body) : body
          if (!singleton) {
            const given = (value as Record<string, unknown>)[idKey]
            if (given !== undefined && given !== id) {
              return yield* ValidationFailed.one(["body", idKey], `${idKey} must equal the ${idKey} of the path`)
            }
            value = { ...(value as object), [idKey]: id }
          }
          let content: unknown
          // A node's description defaults to "" and its config to {} (spec "Node").
          if (kind === "nodes") {
            const node = yield* decodeItem(Node, { description: "", config: {}, ...(value as object) }, ["body"])
            content = nodeContent(node as NodeInput)
          } else if (kind === "tools") content = toolContent((yield* decodeItem(Tool, value, ["body"])) as ToolInput)
          else if (kind === "variables") content = yield* decodeItem(Variable, value, ["body"])
          else content = yield* decodeItem(singletonSchemas[kind], value, ["body"])
          const next: Draft = new Map(draft)
          next.set(path, fileOf(content))
          return {
            next,
            result: content,
            locate: (at: string, field: ReadonlyArray<string | number>) => (at === path ? ["body", ...field] : ["body"])
          }
        })
      )
  )

  const deleteItem = Effect.fn("Assistants.deleteItem")(
    (organizationId: string, assistantId: string, name: string, kind: ItemKind, id: string) =>
      editDraft(organizationId, assistantId, name, (draft) =>
        Effect.gen(function* () {
          const path = pathOf[kind](id)
          if (!draft.has(path)) return yield* new NotFound({ detail: `${kindNames[kind]} not found` })
          const referrers = referrersOf(draft, path)
          const param = kind === "nodes" ? "node_id" : kind === "tools" ? "tool_id" : "variable_id"
          if (referrers.length > 0) {
            return yield* ValidationFailed.one(
              ["path", param],
              `${kindNames[kind]} ${id} is still referenced by: ${referrers.join(", ")}`,
              "reference_error"
            )
          }
          const next: Draft = new Map(draft)
          next.delete(path)
          return { next, result: undefined, locate: () => ["path", param] }
        })
      )
  )

  const createBranch = Effect.fn("Assistants.createBranch")(
    (organizationId: string, assistantId: string, name: string) =>
      onBranch(organizationId, assistantId, MAIN, (main) => newBranch(assistantId, name, main.head_commit_id, null))
  )

  const newBranch = (assistantId: string, name: string, head: string | null, draftFrom: string | null) =>
    Effect.gen(function* () {
      const branch = yield* repo.insertBranch({ id: newId(), assistantId, name, head })
      if (branch === undefined) return yield* new Conflict({ detail: "Branch already exists" })
      if (draftFrom === null) yield* repo.resetDraft(assistantId, branch.id, head)
      else yield* repo.copyDraft(draftFrom, branch.id)
      return branch as Branch
    })

  const fork = Effect.fn("Assistants.fork")(
    (organizationId: string, assistantId: string, source: string, name: string) =>
      onBranch(organizationId, assistantId, source, (branch) =>
        newBranch(assistantId, name, branch.head_commit_id, branch.id)
      )
  )

  const listBranches = Effect.fn("Assistants.listBranches")(
    function* (organizationId: string, assistantId: string) {
      yield* versioned(organizationId, assistantId)
      return yield* repo.listBranches(assistantId)
    },
    Effect.catchTag("SqlError", Effect.die)
  )

  const branchSnapshot = Effect.fn("Assistants.branchSnapshot")(
    function* (organizationId: string, assistantId: string, name: string) {
      yield* versioned(organizationId, assistantId)
      const branch = yield* branchOf(assistantId, name)
      return snapshotOf(yield* repo.commitFiles(assistantId, branch.head_commit_id))
    },
    Effect.catchTag("SqlError", Effect.die)
  )

  const deleteBranch = Effect.fn("Assistants.deleteBranch")(
    (organizationId: string, assistantId: string, name: string) =>
      onBranch(organizationId, assistantId, name, (branch) =>
        Effect.gen(function* () {
          if (branch.name === MAIN) return yield* new BadRequest({ detail: "The main branch cannot be deleted" })
          yield* repo.deleteBranch(branch.id)
        })
      )
  )

  /** Creates a commit from the locked branch's draft and advances HEAD. */
  const commitDraft = (
    assistantId: string,
    branch: BranchRow,
    draft: ReadonlyMap<string, string>,
    input: PublishInput,
    mergeParent: string | null
  ) =>
    Effect.gen(function* () {
      const createdAt = new Date()
      const authorType = input.author_type ?? "human"
      const id = commitId({
        parent: branch.head_commit_id,
        mergeParent,
        files: draft,
        message: input.message ?? null,
        authorType,
        authorId: input.author_id ?? null,
        createdAt: createdAt.toISOString()
      })
      const commit = yield* repo.insertCommit({
        id,
        assistantId,
        branchId: branch.id,
        parent: branch.head_commit_id,
        mergeParent,
        message: input.message ?? null,
        authorType,
        authorId: input.author_id ?? null,
        createdAt
      })
      yield* repo.setHead(branch.id, id)
      return commit
    })

  const publish = Effect.fn("Assistants.publish")(
    (organizationId: string, assistantId: string, name: string, input: PublishInput) =>
      onBranch(organizationId, assistantId, name, (branch) =>
        Effect.gen(function* () {
          const draft = yield* repo.draftHashes(branch.id)
          const head = yield* repo.commitHashes(assistantId, branch.head_commit_id)
          if (branch.head_commit_id !== null && sameFiles(draft, head)) {
            return yield* new BadRequest({ detail: "No changes to publish" })
          }
          return { commit: yield* commitDraft(assistantId, branch, draft, input, null) }
        })
      )
  )

  const rollback = Effect.fn("Assistants.rollback")(
    (organizationId: string, assistantId: string, name: string, commit: string) =>
      onBranch(organizationId, assistantId, name, (branch) =>
        Effect.gen(function* () {
          const target = yield* repo.findCommit(assistantId, commit)
          if (target === undefined) return yield* commitNotFound()
          if (branch.head_commit_id === null || !(yield* repo.isAncestor(assistantId, commit, branch.head_commit_id))) {
            return yield* new BadRequest({ detail: "Commit is not in the history of this branch" })
          }
          yield* repo.setHead(branch.id, commit)
          yield* repo.resetDraft(assistantId, branch.id, commit)
          return { commit: target }
        })
      )
  )

  const merge = Effect.fn("Assistants.merge")(
    (organizationId: string, assistantId: string, name: string, sourceName: string, commit: boolean) =>
      onBranch(organizationId, assistantId, name, (target) =>
        Effect.gen(function* () {
          const source = yield* branchOf(assistantId, sourceName)
          const sourceHead = source.head_commit_id
          if (sourceHead === null || sourceHead === target.head_commit_id) return null
          const base =
            target.head_commit_id === null
              ? null
              : yield* repo.mergeBase(assistantId, sourceHead, target.head_commit_id)
          if (base === sourceHead) return null
          const draft = yield* repo.draftHashes(target.id)
          const targetHead = yield* repo.commitHashes(assistantId, target.head_commit_id)
          const sourceFiles = yield* repo.commitHashes(assistantId, sourceHead)
          if (base === target.head_commit_id && sameFiles(draft, targetHead)) {
            // Fast-forward: the target has nothing of its own since the base.
            yield* repo.resetDraft(assistantId, target.id, sourceHead)
            if (!commit) return null
            yield* repo.setHead(target.id, sourceHead)
            return (yield* repo.findCommit(assistantId, sourceHead))!
          }
          const outcome = mergeThreeWay(yield* repo.commitHashes(assistantId, base), sourceFiles, draft)
          if (outcome._tag === "Conflict") {
            return yield* new Conflict({ detail: `Merge conflict on paths: ${outcome.paths.join(", ")}` })
          }
          const merged = new Map(draft)
          for (const [path, hash] of outcome.set) merged.set(path, hash)
          for (const path of outcome.remove) merged.delete(path)
          const contents = yield* repo.contents(assistantId, [...merged.values()])
          const files = new Map(
            [...merged].map(([path, hash]) => [path, { hash, content: contents.get(hash) }] as const)
          )
          const issues = referenceIssues(files, () => ["body", "source_branch_name"])
          if (issues.length > 0) return yield* new ValidationFailed({ detail: issues })
          yield* repo.writeDraft(target.id, outcome.set, outcome.remove)
          yield* repo.touchBranch(target.id)
          if (!commit) return null
          return yield* commitDraft(
            assistantId,
            target,
            merged,
            { message: `Merge branch '${sourceName}'`, author_type: "human" },
            sourceHead
          )
        })
      )
  )

  const hasChanges = Effect.fn("Assistants.changes")(
    function* (organizationId: string, assistantId: string, name: string) {
      yield* versioned(organizationId, assistantId)
      const branch = yield* branchOf(assistantId, name)
      const draft = yield* repo.draftHashes(branch.id)
      const head = yield* repo.commitHashes(assistantId, branch.head_commit_id)
      return { has_changes: !sameFiles(draft, head) }
    },
    Effect.catchTag("SqlError", Effect.die)
  )

  const branchDiff = Effect.fn("Assistants.branchDiff")(
    function* (organizationId: string, assistantId: string, name: string) {
      yield* versioned(organizationId, assistantId)
      const branch = yield* branchOf(assistantId, name)
      const draft = yield* repo.draftFiles(assistantId, branch.id)
      const head = yield* repo.commitFiles(assistantId, branch.head_commit_id)
      return { diffs: diffFiles(head, draft) }
    },
    Effect.catchTag("SqlError", Effect.die)
  )

  const listVersions = Effect.fn("Assistants.listVersions")(
    function* (
      organizationId: string,
      assistantId: string,
      options: { readonly limit: number; readonly offset: number; readonly branch_name?: string | undefined }
    ) {
      yield* versioned(organizationId, assistantId)
      const head =
        options.branch_name === undefined
          ? undefined
          : (yield* branchOf(assistantId, options.branch_name)).head_commit_id
      const commits = yield* repo.listCommits(assistantId, {
        ...(head !== undefined ? { head } : {}),
        limit: options.limit,
        offset: options.offset
      })
      return { commits: commits as ReadonlyArray<Commit> }
    },
    Effect.catchTag("SqlError", Effect.die)
  )

  const getVersion = Effect.fn("Assistants.getVersion")(
    function* (organizationId: string, assistantId: string, id: string) {
      yield* versioned(organizationId, assistantId)
      const commit = yield* repo.findCommit(assistantId, id)
      if (commit === undefined) return yield* commitNotFound()
      return { commit, files: (yield* repo.listCommitFiles(assistantId, id)) as ReadonlyArray<CommitFile> }
    },
    Effect.catchTag("SqlError", Effect.die)
  )

  const diffVersions = Effect.fn("Assistants.diffVersions")(
    function* (organizationId: string, assistantId: string, a: string, b: string) {
      yield* versioned(organizationId, assistantId)
      for (const id of [a, b])
        if ((yield* repo.findCommit(assistantId, id)) === undefined) return yield* commitNotFound()
      return {
        diffs: diffFiles(yield* repo.commitFiles(assistantId, a), yield* repo.commitFiles(assistantId, b))
      } as { readonly diffs: ReadonlyArray<DiffEntry> }
    },
    Effect.catchTag("SqlError", Effect.die)
  )

  /** Snapshots of published commits by `<assistant id>:<commit id>`, oldest first (see runtime). */
  const snapshots = new Map<string, ReturnType<typeof snapshotOf>>()

  const runtime = Effect.fn("Assistants.runtime")(
    function* (organizationId: string, assistantId: string) {
      const assistant = yield* repo.findAssistant(organizationId, assistantId)
      if (assistant === undefined) return yield* assistantNotFound()
      if (!assistant.versioned) {
        return {
          assistant_id: assistant.id,
          commit_id: null,
          snapshot: snapshotOf(filesFromSnapshot((assistant.legacy_snapshot ?? {}) as SnapshotInput))
        }
      }
      const main = yield* branchOf(assistantId, MAIN)
      if (main.head_commit_id === null) return yield* new NotFound({ detail: "Assistant has no published version" })
      // Commits are immutable: their snapshot is assembled once per process (every AI run reads it).
      const key = `${assistantId}:${main.head_commit_id}`
      let snapshot = snapshots.get(key)
      if (snapshot === undefined) {
        snapshot = snapshotOf(yield* repo.commitFiles(assistantId, main.head_commit_id))
        if (snapshots.size >= SNAPSHOT_CACHE_SIZE) snapshots.delete(snapshots.keys().next().value!)
        snapshots.set(key, snapshot)
      }
      return { assistant_id: assistant.id, commit_id: main.head_commit_id, snapshot }
    },
    Effect.catchTag("SqlError", Effect.die)
  )

  const migrate = Effect.fn("Assistants.migrate")((organizationId: string, assistantId: string) =>
    sql
      .withTransaction(
        Effect.gen(function* () {
          const assistant = yield* repo.findAssistant(organizationId, assistantId, true)
          if (assistant === undefined) return yield* assistantNotFound()
          if (assistant.versioned) return yield* new Conflict({ detail: "Assistant is already versioned" })
          const files = filesFromSnapshot((assistant.legacy_snapshot ?? {}) as SnapshotInput)
          const main =
            (yield* repo.findBranch(assistantId, MAIN, true)) ??
            (yield* repo.insertBranch({ id: newId(), assistantId, name: MAIN, head: null }))!
          yield* repo.insertFiles(assistantId, [...files.values()])
          yield* repo.resetDraft(assistantId, main.id, null)
          const hashes = new Map([...files].map(([path, file]) => [path, file.hash]))
          yield* repo.writeDraft(main.id, hashes, [])
          const commit = yield* commitDraft(
            assistantId,
            main,
            hashes,
            { message: "Migrated from the legacy snapshot", author_type: "system" },
            null
          )
          yield* repo.markVersioned(assistantId)
          return { assistant_id: assistantId, branch: (yield* branchOf(assistantId, MAIN))!, commit }
        })
      )
      .pipe(Effect.catchTag("SqlError", Effect.die))
  )

  return {
    createAssistant,
    getDraft,
    draftIndex,
    applyChangeset,
    discard,
    reset,
    listItems,
    getItem,
    writeItem,
    deleteItem,
    createBranch,
    fork,
    listBranches,
    branchSnapshot,
    deleteBranch,
    publish,
    rollback,
    merge,
    hasChanges,
    branchDiff,
    listVersions,
    getVersion,
    diffVersions,
    runtime,
    migrate
  }
})

/** The assistants service (see module docs); failures are {@link VersionError}s. */
export class Assistants extends Context.Service<Assistants, Effect.Success<typeof makeService>>()("parley/Assistants") {
  static readonly layer = Layer.effect(Assistants, makeService).pipe(Layer.provide(AssistantsRepo.layer))
}

export type { Snapshot }
