/**
 * Branches: named pointers to a commit, each with its draft (assistants.md
 * "Branches", "States and transitions"; DECISIONS.md A3, A4, A6, A7). Every
 * change of a branch (publish, rollback, merge, delete, fork from it) runs in
 * one transaction on its locked row, so it is serialized with the branch's
 * draft edits (A4).
 */
import { Context, Effect, Layer } from "effect"
import type { Branch, Commit, Snapshot } from "../Domain/Assistant.ts"
import { ValidationFailed } from "../Domain/Errors.ts"
import { Ids } from "../Shared/Ids.ts"
import { type BranchAccessError, MAIN, makeAccess } from "./Access.ts"
import type {
  BranchNamePayload,
  ChangesResponse,
  CommitIdPayload,
  CommitResponse,
  DiffResponse,
  MergePayload,
  PublishPayload
} from "./Api.ts"
import {
  type AssistantNotFound,
  type AssistantNotVersioned,
  BranchAlreadyExists,
  CommitNotFound,
  CommitNotInHistory,
  MainBranchUndeletable,
  MergeConflict,
  NothingToPublish
} from "./Errors.ts"
import { diffFiles, mergeThreeWay, referenceIssues, sameFiles, snapshotOf } from "./Files.ts"
import { AssistantsRepo } from "./Repo.ts"

/**
 * The branch operations of an assistant. `organizationId` and `assistantId`
 * name it: every method fails with `AssistantNotFound` or
 * `AssistantNotVersioned` when they do not, and with `BranchNotFound` for an
 * unknown branch name (A1); the docs below name the other failures.
 */
export class Branches extends Context.Service<
  Branches,
  {
    /**
     * POST /branches: a branch `name` whose HEAD is `main`'s HEAD and whose draft
     * equals that commit (spec "States and transitions"). `BranchAlreadyExists` (A3).
     */
    readonly create: (
      organizationId: string,
      assistantId: string,
      payload: typeof BranchNamePayload.Type
    ) => Effect.Effect<Branch, BranchAccessError | BranchAlreadyExists>
    /**
     * POST /branches/{source}/fork: a branch `name` with the source's HEAD and a
     * copy of its draft, unpublished changes included. `BranchAlreadyExists` (A3).
     */
    readonly fork: (
      organizationId: string,
      assistantId: string,
      source: string,
      payload: typeof BranchNamePayload.Type
    ) => Effect.Effect<Branch, BranchAccessError | BranchAlreadyExists>
    /** GET /branches: every branch, oldest first. */
    readonly list: (
      organizationId: string,
      assistantId: string
    ) => Effect.Effect<ReadonlyArray<Branch>, AssistantNotFound | AssistantNotVersioned>
    /** GET /branches/{name}: the snapshot of the branch's HEAD (empty before its first publish). */
    readonly get: (
      organizationId: string,
      assistantId: string,
      branchName: string
    ) => Effect.Effect<Snapshot, BranchAccessError>
    /** DELETE /branches/{name}: the branch and its draft; its commits stay. `MainBranchUndeletable` (A3). */
    readonly delete: (
      organizationId: string,
      assistantId: string,
      branchName: string
    ) => Effect.Effect<void, BranchAccessError | MainBranchUndeletable>
    /**
     * POST /branches/{name}/publish: a commit of the draft whose parent is HEAD;
     * HEAD advances to it. `NothingToPublish` when the draft equals HEAD (A4; the
     * first publish of a branch always commits).
     */
    readonly publish: (
      organizationId: string,
      assistantId: string,
      branchName: string,
      payload: typeof PublishPayload.Type
    ) => Effect.Effect<typeof CommitResponse.Type, BranchAccessError | NothingToPublish>
    /**
     * POST /branches/{name}/rollback: HEAD moves to `commit_id` and the draft is
     * reset to it. `CommitNotFound` (A1); `CommitNotInHistory` unless the commit is
     * HEAD or one of its ancestors over both parent links (A7).
     */
    readonly rollback: (
      organizationId: string,
      assistantId: string,
      branchName: string,
      payload: typeof CommitIdPayload.Type
    ) => Effect.Effect<typeof CommitResponse.Type, BranchAccessError | CommitNotFound | CommitNotInHistory>
    /**
     * POST /branches/{name}/merge (A6): applies the changes of the source's HEAD
     * since the merge base to the target's draft. Nothing to merge (no source
     * HEAD, or it is in the target's history): `null`. A target without changes
     * of its own since the base fast-forwards (with `commit`, HEAD moves to the
     * source's HEAD and that commit is the result). Otherwise a three-way merge:
     * `MergeConflict` with the sorted paths both sides changed differently
     * (nothing changes); `ValidationFailed` at `["body", "source_branch_name"]`
     * when the result breaks a reference (A10); with `commit`, a merge commit
     * whose second parent is the source's HEAD is the result, else `null`.
     * `BranchNotFound` names the target or the source.
     */
    readonly merge: (
      organizationId: string,
      assistantId: string,
      branchName: string,
      payload: typeof MergePayload.Type
    ) => Effect.Effect<Commit | null, BranchAccessError | MergeConflict | ValidationFailed>
    /** GET /branches/{name}/changes: whether the draft differs from HEAD. */
    readonly changes: (
      organizationId: string,
      assistantId: string,
      branchName: string
    ) => Effect.Effect<typeof ChangesResponse.Type, BranchAccessError>
    /** GET /branches/{name}/diff: the differences from HEAD to the draft, file by file (spec "Diff entry"). */
    readonly diff: (
      organizationId: string,
      assistantId: string,
      branchName: string
    ) => Effect.Effect<typeof DiffResponse.Type, BranchAccessError>
  }
>()("parley/Assistants/Branches") {
  /** The service, its repository left open (the domain's `Assistants.layer` provides it); requires `AssistantsRepo` and `Ids`. */
  static readonly layerNoDeps = Layer.effect(
    Branches,
    Effect.gen(function* () {
      return Branches.of(makeBranches(yield* AssistantsRepo, (yield* Ids).newId))
    })
  )
}

const makeBranches = (repo: AssistantsRepo["Service"], newId: () => string): Branches["Service"] => {
  const access = makeAccess(repo)

  /** A new branch with HEAD `head` and the draft of branch `draftFrom`, or of `head` when null. */
  const newBranch = (
    organizationId: string,
    assistantId: string,
    name: string,
    head: string | null,
    draftFrom: string | null
  ) =>
    Effect.gen(function* () {
      const branch = yield* repo.insertBranch({ id: newId(), organizationId, assistantId, name, head })
      if (branch === undefined) return yield* new BranchAlreadyExists({ branch_name: name })
      if (draftFrom === null) yield* repo.resetDraft(organizationId, assistantId, branch.id, head)
      else yield* repo.copyDraft(organizationId, draftFrom, branch.id)
      return branch
    })

  const create = Effect.fn("Branches.create")(
    (organizationId: string, assistantId: string, payload: typeof BranchNamePayload.Type) =>
      access.onBranch(organizationId, assistantId, MAIN, (main) =>
        newBranch(organizationId, assistantId, payload.name, main.head_commit_id, null)
      ),
    Effect.catchTag("SqlError", Effect.die)
  )

  const fork = Effect.fn("Branches.fork")(
    (organizationId: string, assistantId: string, source: string, payload: typeof BranchNamePayload.Type) =>
      access.onBranch(organizationId, assistantId, source, (branch) =>
        newBranch(organizationId, assistantId, payload.name, branch.head_commit_id, branch.id)
      ),
    Effect.catchTag("SqlError", Effect.die)
  )

  const list = Effect.fn("Branches.list")(
    function* (organizationId: string, assistantId: string) {
      yield* access.versioned(organizationId, assistantId)
      return yield* repo.listBranches(organizationId, assistantId)
    },
    Effect.catchTag("SqlError", Effect.die)
  )

  const get = Effect.fn("Branches.get")(
    function* (organizationId: string, assistantId: string, branchName: string) {
      const branch = yield* access.readBranch(organizationId, assistantId, branchName)
      return snapshotOf(yield* repo.commitFiles(organizationId, assistantId, branch.head_commit_id))
    },
    Effect.catchTag("SqlError", Effect.die)
  )

  const delete_ = Effect.fn("Branches.delete")(
    (organizationId: string, assistantId: string, branchName: string) =>
      access.onBranch(organizationId, assistantId, branchName, (branch) =>
        Effect.gen(function* () {
          if (branch.name === MAIN) return yield* new MainBranchUndeletable()
          yield* repo.deleteBranch(organizationId, branch.id)
        })
      ),
    Effect.catchTag("SqlError", Effect.die)
  )

  const publish = Effect.fn("Branches.publish")(
    (organizationId: string, assistantId: string, branchName: string, payload: typeof PublishPayload.Type) =>
      access.onBranch(organizationId, assistantId, branchName, (branch) =>
        Effect.gen(function* () {
          const draft = yield* repo.draftHashes(organizationId, branch.id)
          const head = yield* repo.commitHashes(organizationId, assistantId, branch.head_commit_id)
          if (branch.head_commit_id !== null && sameFiles(draft, head)) return yield* new NothingToPublish()
          return { commit: yield* access.commit(organizationId, assistantId, branch, draft, payload, null) }
        })
      ),
    Effect.catchTag("SqlError", Effect.die)
  )

  const rollback = Effect.fn("Branches.rollback")(
    (organizationId: string, assistantId: string, branchName: string, payload: typeof CommitIdPayload.Type) =>
      access.onBranch(organizationId, assistantId, branchName, (branch) =>
        Effect.gen(function* () {
          const target = yield* repo.findCommit(organizationId, assistantId, payload.commit_id)
          if (target === undefined) return yield* new CommitNotFound({ commit_id: payload.commit_id })
          if (
            branch.head_commit_id === null ||
            !(yield* repo.isAncestor(organizationId, assistantId, target.id, branch.head_commit_id))
          ) {
            return yield* new CommitNotInHistory({ commit_id: target.id })
          }
          yield* repo.setHead(organizationId, branch.id, target.id)
          yield* repo.resetDraft(organizationId, assistantId, branch.id, target.id)
          return { commit: target }
        })
      ),
    Effect.catchTag("SqlError", Effect.die)
  )

  const merge = Effect.fn("Branches.merge")(
    (organizationId: string, assistantId: string, branchName: string, payload: typeof MergePayload.Type) =>
      access.onBranch(organizationId, assistantId, branchName, (target) =>
        Effect.gen(function* () {
          const commit = payload.commit ?? false
          const source = yield* access.branch(organizationId, assistantId, payload.source_branch_name)
          const sourceHead = source.head_commit_id
          if (sourceHead === null || sourceHead === target.head_commit_id) return null
          const base =
            target.head_commit_id === null
              ? null
              : yield* repo.mergeBase(organizationId, assistantId, sourceHead, target.head_commit_id)
          if (base === sourceHead) return null
          const draft = yield* repo.draftHashes(organizationId, target.id)
          const targetHead = yield* repo.commitHashes(organizationId, assistantId, target.head_commit_id)
          if (base === target.head_commit_id && sameFiles(draft, targetHead)) {
            // Fast-forward: the target has nothing of its own since the base.
            yield* repo.resetDraft(organizationId, assistantId, target.id, sourceHead)
            if (!commit) return null
            yield* repo.setHead(organizationId, target.id, sourceHead)
            const head = yield* repo.findCommit(organizationId, assistantId, sourceHead)
            return head ?? (yield* Effect.die(new Error(`HEAD ${sourceHead} of ${source.name} is no commit`)))
          }
          const outcome = mergeThreeWay(
            yield* repo.commitHashes(organizationId, assistantId, base),
            yield* repo.commitHashes(organizationId, assistantId, sourceHead),
            draft
          )
          if (outcome._tag === "Conflict") return yield* new MergeConflict({ paths: outcome.paths })
          const merged = new Map(draft)
          for (const [path, hash] of outcome.set) merged.set(path, hash)
          for (const path of outcome.remove) merged.delete(path)
          const contents = yield* repo.contents(organizationId, assistantId, [...merged.values()])
          const files = new Map(
            [...merged].map(([path, hash]) => [path, { hash, content: contents.get(hash) }] as const)
          )
          const issues = referenceIssues(files, () => ["body", "source_branch_name"])
          if (issues.length > 0) return yield* new ValidationFailed({ detail: issues })
          yield* repo.writeDraft(organizationId, target.id, outcome.set, outcome.remove)
          yield* repo.touchBranch(organizationId, target.id)
          if (!commit) return null
          return yield* access.commit(
            organizationId,
            assistantId,
            target,
            merged,
            { message: `Merge branch '${source.name}'`, author_type: "human" },
            sourceHead
          )
        })
      ),
    Effect.catchTag("SqlError", Effect.die)
  )

  const changes = Effect.fn("Branches.changes")(
    function* (organizationId: string, assistantId: string, branchName: string) {
      const branch = yield* access.readBranch(organizationId, assistantId, branchName)
      const draft = yield* repo.draftHashes(organizationId, branch.id)
      const head = yield* repo.commitHashes(organizationId, assistantId, branch.head_commit_id)
      return { has_changes: !sameFiles(draft, head) }
    },
    Effect.catchTag("SqlError", Effect.die)
  )

  const diff = Effect.fn("Branches.diff")(
    function* (organizationId: string, assistantId: string, branchName: string) {
      const branch = yield* access.readBranch(organizationId, assistantId, branchName)
      const draft = yield* repo.draftFiles(organizationId, assistantId, branch.id)
      const head = yield* repo.commitFiles(organizationId, assistantId, branch.head_commit_id)
      return { diffs: diffFiles(head, draft) }
    },
    Effect.catchTag("SqlError", Effect.die)
  )

  return { create, fork, list, get, delete: delete_, publish, rollback, merge, changes, diff }
}
