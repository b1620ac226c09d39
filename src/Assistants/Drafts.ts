/**
 * Drafts: the editable working copy of each branch (assistants.md "Drafts";
 * DECISIONS.md A4, A5, A9, A10). Every edit runs in one transaction on the
 * locked branch (A4): it loads the draft, computes the next files, checks that
 * they stay referentially valid (A10), stores new contents and writes the delta
 * of the draft. A refused edit changes nothing.
 */
import { Context, Effect, Layer, Schema } from "effect"
import {
  Context as AssistantContext,
  Config,
  type ConfigInput,
  type ContextInput,
  type ItemKind,
  itemKindNames,
  Node,
  type NodeInput,
  type SingletonKind,
  type Snapshot,
  type Tool,
  type ToolInput,
  ToolWrite,
  Variable
} from "../Domain/Assistant.ts"
import type { JsonObject } from "../Domain/Common.ts"
import { ValidationFailed, type ValidationIssue } from "../Domain/Errors.ts"
import { validationIssues } from "../Domain/Validation.ts"
import { applyMergePatch } from "../Shared/MergePatch.ts"
import { type BranchAccessError, makeAccess } from "./Access.ts"
import type {
  ChangesetPayload,
  ChangesetResult,
  CommitIdPayload,
  DiscardPayload,
  NodeBody,
  PrefixQuery,
  ToolBody,
  VariableBody
} from "./Api.ts"
import { CommitNotFound, ItemNotFound } from "./Errors.ts"
import {
  type FileVersion,
  fileOf,
  type Locate,
  nodeContent,
  nodePath,
  referenceIssues,
  referrersOf,
  snapshotOf,
  toolContent,
  toolPath,
  variablePath
} from "./Files.ts"
import { AssistantsRepo } from "./Repo.ts"

/** What each file of a draft holds, by kind (A5, A9). */
export interface ItemOf {
  readonly nodes: Node
  readonly tools: Tool
  readonly variables: Variable
  readonly config: Config
  readonly context: AssistantContext
}

/** The body of a PUT, by kind (assistants.md "Item operations"). */
export interface BodyOf {
  readonly nodes: typeof NodeBody.Type
  readonly tools: typeof ToolBody.Type
  readonly variables: typeof VariableBody.Type
  readonly config: typeof ConfigInput.Type
  readonly context: typeof ContextInput.Type
}

/**
 * The draft operations of a branch. `organizationId`, `assistantId` and
 * `branchName` name the branch: every method fails with `AssistantNotFound`,
 * `AssistantNotVersioned` or `BranchNotFound` when they do not (A1); the
 * docs below name the other failures.
 */
export class Drafts extends Context.Service<
  Drafts,
  {
    /**
     * PATCH {draft_base}: applies a changeset (assistants.md "Drafts"): RFC 7396
     * merge patches of `context` and `config`, then deletes and upserts of nodes,
     * tools and variables (items of one changeset may reference each other);
     * returns what changed. `ValidationFailed`, nothing stored: when a patched
     * `context` or `config` breaks the schema its PUT checks (issue 37 item 3),
     * `loc` at the member under `["body", "context" | "config"]`; and (A10) when
     * the result names a missing item, `loc` at the offending member of the body
     * (an upsert, or the delete that removed the item).
     */
    readonly applyChangeset: (
      organizationId: string,
      assistantId: string,
      branchName: string,
      changeset: typeof ChangesetPayload.Type
    ) => Effect.Effect<typeof ChangesetResult.Type, BranchAccessError | ValidationFailed>
    /** GET {draft_base}: the draft as a snapshot, only the files under `prefix` when given. */
    readonly get: (
      organizationId: string,
      assistantId: string,
      branchName: string,
      query: typeof PrefixQuery.Type
    ) => Effect.Effect<Snapshot, BranchAccessError>
    /** GET {draft_base}/index: the draft's file paths (under `prefix`), sorted. */
    readonly index: (
      organizationId: string,
      assistantId: string,
      branchName: string,
      query: typeof PrefixQuery.Type
    ) => Effect.Effect<ReadonlyArray<string>, BranchAccessError>
    /**
     * POST {draft_base}/discard: the file at `path` returns to HEAD (removed if
     * HEAD has none); an unknown path changes nothing. `ValidationFailed` at
     * `["body", "path"]` when that leaves a reference dangling (A10).
     */
    readonly discard: (
      organizationId: string,
      assistantId: string,
      branchName: string,
      payload: typeof DiscardPayload.Type
    ) => Effect.Effect<void, BranchAccessError | ValidationFailed>
    /** POST {draft_base}/reset: every draft file equals commit `commit_id`'s; HEAD stays. `CommitNotFound` (A1). */
    readonly reset: (
      organizationId: string,
      assistantId: string,
      branchName: string,
      payload: typeof CommitIdPayload.Type
    ) => Effect.Effect<void, BranchAccessError | CommitNotFound>
    /** GET {draft_base}/<kind>: the items of `kind`, ordered by id (A9). */
    readonly listItems: <K extends ItemKind>(
      organizationId: string,
      assistantId: string,
      branchName: string,
      kind: K
    ) => Effect.Effect<ReadonlyArray<ItemOf[K]>, BranchAccessError>
    /** GET {draft_base}/<kind>/<id>: one item; `ItemNotFound` (A9). */
    readonly getItem: <K extends ItemKind>(
      organizationId: string,
      assistantId: string,
      branchName: string,
      kind: K,
      id: string
    ) => Effect.Effect<ItemOf[K], BranchAccessError | ItemNotFound>
    /**
     * PUT {draft_base}/<kind>/<id>: creates or replaces the item (A9); the id comes
     * from the path (`ValidationFailed` at `["body", "id"|"name"]` when the body
     * names another). Defaults of spec "Node" and A5 apply. `ValidationFailed` at
     * `["body", ...]` when the item names a missing one (A10).
     */
    readonly putItem: <K extends ItemKind>(
      organizationId: string,
      assistantId: string,
      branchName: string,
      kind: K,
      id: string,
      body: BodyOf[K]
    ) => Effect.Effect<ItemOf[K], BranchAccessError | ValidationFailed>
    /**
     * PATCH {draft_base}/<kind>/<id>: RFC 7396 merge patch of an existing item
     * (A9), the result checked as a PUT body is (a tool by `ToolWrite`, issue 37
     * item 3), but for D18's depth limit, which applies to the patch sent.
     * `ItemNotFound`; `ValidationFailed`.
     */
    readonly patchItem: <K extends ItemKind>(
      organizationId: string,
      assistantId: string,
      branchName: string,
      kind: K,
      id: string,
      patch: JsonObject
    ) => Effect.Effect<ItemOf[K], BranchAccessError | ItemNotFound | ValidationFailed>
    /**
     * DELETE {draft_base}/<kind>/<id> (A9). `ItemNotFound`; `ValidationFailed` at
     * `["path", "<kind>_id"]` naming the referrers when other files still refer to
     * the item (A10).
     */
    readonly deleteItem: (
      organizationId: string,
      assistantId: string,
      branchName: string,
      kind: ItemKind,
      id: string
    ) => Effect.Effect<void, BranchAccessError | ItemNotFound | ValidationFailed>
    /** GET {draft_base}/config or /context: the file, `{}` when the draft has none (A9). */
    readonly getSingleton: <K extends SingletonKind>(
      organizationId: string,
      assistantId: string,
      branchName: string,
      kind: K
    ) => Effect.Effect<ItemOf[K], BranchAccessError>
    /** PUT {draft_base}/config or /context: replaces the file (A9); `ValidationFailed` (A10: `initial_node_id`). */
    readonly putSingleton: <K extends SingletonKind>(
      organizationId: string,
      assistantId: string,
      branchName: string,
      kind: K,
      body: BodyOf[K]
    ) => Effect.Effect<ItemOf[K], BranchAccessError | ValidationFailed>
    /**
     * PATCH {draft_base}/config or /context: RFC 7396 merge patch of the file (A9),
     * the result checked as a PUT body is; `ValidationFailed` (A10).
     */
    readonly patchSingleton: <K extends SingletonKind>(
      organizationId: string,
      assistantId: string,
      branchName: string,
      kind: K,
      patch: JsonObject
    ) => Effect.Effect<ItemOf[K], BranchAccessError | ValidationFailed>
  }
>()("parley/Assistants/Drafts") {
  /** The service, its repository left open (the domain's `Assistants.layer` provides it); requires `AssistantsRepo`. */
  static readonly layerNoDeps = Layer.effect(
    Drafts,
    Effect.gen(function* () {
      return Drafts.of(makeDrafts(yield* AssistantsRepo))
    })
  )
}

type Draft = Map<string, FileVersion>

/** An edit of a draft: the next files, its result, and where reference problems are reported (A10). */
interface Edit<A> {
  readonly next: Draft
  readonly result: A
  readonly locate: Locate
}

const pathOf: Record<ItemKind, (id: string) => string> = { nodes: nodePath, tools: toolPath, variables: variablePath }

/** The path parameter naming an item of each kind (the `loc` of A10's DELETE). */
const paramOf: Record<ItemKind, string> = { nodes: "node_id", tools: "tool_id", variables: "variable_id" }

/** The key of an item that holds its id: a variable is identified by its `name` (A5). */
const idKeyOf: Record<ItemKind, string> = { nodes: "id", tools: "id", variables: "name" }

/**
 * The schemas config and context are checked with before they are stored,
 * whichever route writes them: their PUT, their PATCH and a changeset's patch
 * check the result with these (issue 37 item 3). The PUT bodies
 * (`ConfigInput`, `ContextInput`) add D18's depth limit on what a request sends.
 */
const singletonSchemaOf = { config: Config, context: AssistantContext } as const

/** A file's content as its kind holds it: contents are checked when written, so reading casts. */
const contentAs = <K extends keyof ItemOf>(_kind: K, content: unknown) => content as ItemOf[K]

/** `value` decoded with `schema`, or `ValidationFailed` with every problem, `loc` under `loc`. */
const decodeItem = <S extends Schema.Top>(
  schema: S,
  value: unknown,
  loc: ReadonlyArray<string | number>
): Effect.Effect<unknown, ValidationFailed> => {
  const exit = Schema.decodeUnknownExit(schema as unknown as Schema.Codec<unknown>, { errors: "all" })(value)
  if (exit._tag === "Success") return Effect.succeed(exit.value)
  const reason = exit.cause.reasons.find((r) => r._tag === "Fail")
  if (reason?._tag === "Fail" && Schema.isSchemaError(reason.error)) {
    return Effect.fail(new ValidationFailed({ detail: validationIssues(reason.error.issue, loc) }))
  }
  return Effect.die(exit.cause)
}

/** RFC 7396 merge patch of a file's content (absent: `{}`). */
const applyPatch = (current: unknown, patch: unknown) => applyMergePatch(current ?? {}, patch)

/** The content of an item of `kind` with the checks and defaults of a PUT (spec "Node", A5). */
const itemContent = (kind: ItemKind, id: string, value: unknown) =>
  Effect.gen(function* () {
    const idKey = idKeyOf[kind]
    const given = (value as Record<string, unknown>)[idKey]
    if (given !== undefined && given !== id) {
      return yield* ValidationFailed.one(["body", idKey], `${idKey} must equal the ${idKey} of the path`)
    }
    const withId = { ...(value as object), [idKey]: id }
    // A node's description defaults to "" and its config to {} (spec "Node").
    if (kind === "nodes") {
      const node = yield* decodeItem(Node, { description: "", config: {}, ...withId }, ["body"])
      return nodeContent(node as NodeInput)
    }
    if (kind === "tools") return toolContent((yield* decodeItem(ToolWrite, withId, ["body"])) as ToolInput)
    return yield* decodeItem(Variable, withId, ["body"])
  })

const makeDrafts = (repo: AssistantsRepo["Service"]): Drafts["Service"] => {
  const access = makeAccess(repo)

  /** Checks references (A10), stores new contents and writes the draft delta; returns the edit's result. */
  const commitEdit = <A>(
    organizationId: string,
    assistantId: string,
    branchId: string,
    current: Draft,
    edit: Edit<A>
  ) =>
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
      yield* repo.insertFiles(organizationId, assistantId, fresh)
      yield* repo.writeDraft(organizationId, branchId, set, remove)
      if (set.size > 0 || remove.length > 0) yield* repo.touchBranch(organizationId, branchId)
      return edit.result
    })

  /** Edits a branch's draft in one transaction on the locked branch (A4): load, compute, check (A10), write. */
  const editDraft = <A, E>(
    organizationId: string,
    assistantId: string,
    branchName: string,
    compute: (draft: Draft) => Effect.Effect<Edit<A>, E>
  ) =>
    access.onBranch(organizationId, assistantId, branchName, (branch) =>
      Effect.gen(function* () {
        const draft = yield* repo.draftFiles(organizationId, assistantId, branch.id)
        return yield* commitEdit(organizationId, assistantId, branch.id, draft, yield* compute(draft))
      })
    )

  /** Replaces the file at `path` by `content`; reference problems are reported in the body (A10). */
  const replaceWith = (draft: Draft, path: string, content: unknown): Edit<unknown> => {
    const next: Draft = new Map(draft)
    next.set(path, fileOf(content))
    return {
      next,
      result: content,
      locate: (at, field) => (at === path ? ["body", ...field] : ["body"])
    }
  }

  const applyChangeset = Effect.fn("Drafts.applyChangeset")(
    (organizationId: string, assistantId: string, branchName: string, changeset: typeof ChangesetPayload.Type) =>
      editDraft(organizationId, assistantId, branchName, (draft) =>
        Effect.gen(function* () {
          const next: Draft = new Map(draft)
          // Where each changed file and each deleted item was given in the body, for A10's `loc`.
          const origin = new Map<string, ReadonlyArray<string | number>>()
          const deleted = new Map<string, ReadonlyArray<string | number>>()
          const updated = { context: false, config: false }
          // The patched context and config are checked as their PATCH checks them; every problem of both is reported.
          const issues: Array<ValidationIssue> = []
          for (const kind of ["context", "config"] as const) {
            const patch = changeset[kind]
            if (patch === undefined) continue
            const patched = applyPatch(draft.get(kind)?.content, patch)
            const checked = yield* Effect.result(decodeItem(singletonSchemaOf[kind], patched, ["body", kind]))
            if (checked._tag === "Failure") {
              issues.push(...checked.failure.detail)
              continue
            }
            const file = fileOf(checked.success)
            if (file.hash !== draft.get(kind)?.hash) {
              next.set(kind, file)
              updated[kind] = true
            }
            origin.set(kind, ["body", kind])
          }
          if (issues.length > 0) return yield* new ValidationFailed({ detail: issues })
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
              const path = pathOf[kind](kind === "variables" ? (content as Variable).name : (content as Node).id)
              next.set(path, fileOf(content))
              origin.set(path, ["body", kind, "upsert", index])
              deleted.delete(path)
              counts[kind][0]!++
            })
          }
          const edit: Edit<typeof ChangesetResult.Type> = {
            next,
            result: {
              context_updated: updated.context,
              config_updated: updated.config,
              nodes_upserted: counts.nodes[0]!,
              nodes_deleted: counts.nodes[1]!,
              tools_upserted: counts.tools[0]!,
              tools_deleted: counts.tools[1]!,
              variables_upserted: counts.variables[0]!,
              variables_deleted: counts.variables[1]!
            },
            // A reference from a file of this changeset is reported at that file; a reference to an item
            // this changeset deleted, at the delete.
            locate: (path, field, missing) => {
              const at = origin.get(path)
              if (at !== undefined) return [...at, ...field]
              return deleted.get(missing) ?? ["body"]
            }
          }
          return edit
        })
      ),
    Effect.catchTag("SqlError", Effect.die)
  )

  const get = Effect.fn("Drafts.get")(
    function* (organizationId: string, assistantId: string, branchName: string, query: typeof PrefixQuery.Type) {
      const branch = yield* access.readBranch(organizationId, assistantId, branchName)
      return snapshotOf(yield* repo.draftFiles(organizationId, assistantId, branch.id, query.prefix ?? ""))
    },
    Effect.catchTag("SqlError", Effect.die)
  )

  const index = Effect.fn("Drafts.index")(
    function* (organizationId: string, assistantId: string, branchName: string, query: typeof PrefixQuery.Type) {
      const branch = yield* access.readBranch(organizationId, assistantId, branchName)
      const prefix = query.prefix ?? ""
      return [...(yield* repo.draftHashes(organizationId, branch.id)).keys()]
        .filter((path) => path.startsWith(prefix))
        .sort()
    },
    Effect.catchTag("SqlError", Effect.die)
  )

  const discard = Effect.fn("Drafts.discard")(
    (organizationId: string, assistantId: string, branchName: string, payload: typeof DiscardPayload.Type) =>
      access.onBranch(organizationId, assistantId, branchName, (branch) =>
        Effect.gen(function* () {
          const draft = yield* repo.draftFiles(organizationId, assistantId, branch.id)
          const head = yield* repo.commitFiles(organizationId, assistantId, branch.head_commit_id)
          const next: Draft = new Map(draft)
          const original = head.get(payload.path)
          if (original === undefined) next.delete(payload.path)
          else next.set(payload.path, original)
          yield* commitEdit(organizationId, assistantId, branch.id, draft, {
            next,
            result: undefined,
            locate: () => ["body", "path"]
          })
        })
      ),
    Effect.catchTag("SqlError", Effect.die)
  )

  const reset = Effect.fn("Drafts.reset")(
    (organizationId: string, assistantId: string, branchName: string, payload: typeof CommitIdPayload.Type) =>
      access.onBranch(organizationId, assistantId, branchName, (branch) =>
        Effect.gen(function* () {
          const commit = yield* repo.findCommit(organizationId, assistantId, payload.commit_id)
          if (commit === undefined) return yield* new CommitNotFound({ commit_id: payload.commit_id })
          yield* repo.resetDraft(organizationId, assistantId, branch.id, commit.id)
          yield* repo.touchBranch(organizationId, branch.id)
        })
      ),
    Effect.catchTag("SqlError", Effect.die)
  )

  const listItems = Effect.fn("Drafts.listItems")(
    function* <K extends ItemKind>(organizationId: string, assistantId: string, branchName: string, kind: K) {
      const branch = yield* access.readBranch(organizationId, assistantId, branchName)
      const files = yield* repo.draftFiles(organizationId, assistantId, branch.id, `${kind}/`)
      return [...files.entries()].sort(([a], [b]) => (a < b ? -1 : 1)).map(([, file]) => contentAs(kind, file.content))
    },
    Effect.catchTag("SqlError", Effect.die)
  )

  const getItem = Effect.fn("Drafts.getItem")(
    function* <K extends ItemKind>(
      organizationId: string,
      assistantId: string,
      branchName: string,
      kind: K,
      id: string
    ) {
      const branch = yield* access.readBranch(organizationId, assistantId, branchName)
      const path = pathOf[kind](id)
      const file = (yield* repo.draftFiles(organizationId, assistantId, branch.id, path)).get(path)
      if (file === undefined) return yield* new ItemNotFound({ kind, id })
      return contentAs(kind, file.content)
    },
    Effect.catchTag("SqlError", Effect.die)
  )

  const putItem = Effect.fn("Drafts.putItem")(
    <K extends ItemKind>(
      organizationId: string,
      assistantId: string,
      branchName: string,
      kind: K,
      id: string,
      body: BodyOf[K]
    ) =>
      editDraft(organizationId, assistantId, branchName, (draft) =>
        Effect.map(itemContent(kind, id, body), (content) => replaceWith(draft, pathOf[kind](id), content))
      ).pipe(Effect.map((content) => contentAs(kind, content))),
    Effect.catchTag("SqlError", Effect.die)
  )

  const patchItem = Effect.fn("Drafts.patchItem")(
    <K extends ItemKind>(
      organizationId: string,
      assistantId: string,
      branchName: string,
      kind: K,
      id: string,
      patch: JsonObject
    ) =>
      editDraft(organizationId, assistantId, branchName, (draft) =>
        Effect.gen(function* () {
          const path = pathOf[kind](id)
          const current = draft.get(path)
          if (current === undefined) return yield* new ItemNotFound({ kind, id })
          return replaceWith(draft, path, yield* itemContent(kind, id, applyPatch(current.content, patch)))
        })
      ).pipe(Effect.map((content) => contentAs(kind, content))),
    Effect.catchTag("SqlError", Effect.die)
  )

  const deleteItem = Effect.fn("Drafts.deleteItem")(
    (organizationId: string, assistantId: string, branchName: string, kind: ItemKind, id: string) =>
      editDraft(organizationId, assistantId, branchName, (draft) =>
        Effect.gen(function* () {
          const path = pathOf[kind](id)
          if (!draft.has(path)) return yield* new ItemNotFound({ kind, id })
          const referrers = referrersOf(draft, path)
          if (referrers.length > 0) {
            return yield* ValidationFailed.one(
              ["path", paramOf[kind]],
              `${itemKindNames[kind]} ${id} is still referenced by: ${referrers.join(", ")}`,
              "reference_error"
            )
          }
          const next: Draft = new Map(draft)
          next.delete(path)
          const edit: Edit<void> = { next, result: undefined, locate: () => ["path", paramOf[kind]] }
          return edit
        })
      ),
    Effect.catchTag("SqlError", Effect.die)
  )

  const getSingleton = Effect.fn("Drafts.getSingleton")(
    function* <K extends SingletonKind>(organizationId: string, assistantId: string, branchName: string, kind: K) {
      const branch = yield* access.readBranch(organizationId, assistantId, branchName)
      const file = (yield* repo.draftFiles(organizationId, assistantId, branch.id, kind)).get(kind)
      return contentAs(kind, file?.content ?? {})
    },
    Effect.catchTag("SqlError", Effect.die)
  )

  const putSingleton = Effect.fn("Drafts.putSingleton")(
    <K extends SingletonKind>(
      organizationId: string,
      assistantId: string,
      branchName: string,
      kind: K,
      body: BodyOf[K]
    ) =>
      editDraft(organizationId, assistantId, branchName, (draft) =>
        Effect.map(decodeItem(singletonSchemaOf[kind], body, ["body"]), (content) => replaceWith(draft, kind, content))
      ).pipe(Effect.map((content) => contentAs(kind, content))),
    Effect.catchTag("SqlError", Effect.die)
  )

  const patchSingleton = Effect.fn("Drafts.patchSingleton")(
    <K extends SingletonKind>(
      organizationId: string,
      assistantId: string,
      branchName: string,
      kind: K,
      patch: JsonObject
    ) =>
      editDraft(organizationId, assistantId, branchName, (draft) =>
        Effect.map(
          decodeItem(singletonSchemaOf[kind], applyPatch(draft.get(kind)?.content, patch), ["body"]),
          (content) => replaceWith(draft, kind, content)
        )
      ).pipe(Effect.map((content) => contentAs(kind, content))),
    Effect.catchTag("SqlError", Effect.die)
  )

  return {
    applyChangeset,
    get,
    index,
    discard,
    reset,
    listItems,
    getItem,
    putItem,
    patchItem,
    deleteItem,
    getSingleton,
    putSingleton,
    patchSingleton
  }
}
