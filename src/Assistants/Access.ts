/**
 * What every assistants service does before its rule: find the organization's
 * versioned assistant (A1) and its branch, run an edit on the locked branch in
 * one transaction (A4), and record a commit (A5). Internal to the domain: each
 * service builds it from its `AssistantsRepo` with {@link makeAccess}.
 */
import { Clock, Effect } from "effect"
import type { SqlError } from "effect/sql"
import type { Branch, Commit } from "../Domain/Assistant.ts"
import type { PublishPayload } from "./Api.ts"
import { AssistantNotFound, AssistantNotVersioned, BranchNotFound } from "./Errors.ts"
import { commitId, type FileHashes } from "./Files.ts"
import type { AssistantRow, AssistantsRepo } from "./Repo.ts"

/** The name of the production branch (assistants.md "What the service does"). */
export const MAIN = "main"

/** The failures of reaching a versioned assistant (A1). */
export type AssistantAccessError = AssistantNotFound | AssistantNotVersioned

/** The failures of reaching a branch of a versioned assistant (A1). */
export type BranchAccessError = AssistantAccessError | BranchNotFound

/** Who made a commit and why: `author_type` defaults to `human` (spec "Commit"). */
export type CommitInput = typeof PublishPayload.Type

/** The steps shared by the assistants services (see the module docs). */
export interface Access {
  /** The organization's assistant; `AssistantNotFound` when unknown or foreign, `AssistantNotVersioned` when legacy (A1). */
  readonly versioned: (
    organizationId: string,
    assistantId: string
  ) => Effect.Effect<AssistantRow, AssistantAccessError | SqlError.SqlError>
  /** A branch by name, `BranchNotFound` otherwise; `forUpdate` takes its row lock (A4). */
  readonly branch: (
    organizationId: string,
    assistantId: string,
    name: string,
    forUpdate?: boolean
  ) => Effect.Effect<Branch, BranchNotFound | SqlError.SqlError>
  /** A branch of the organization's versioned assistant, read without a lock (A1). */
  readonly readBranch: (
    organizationId: string,
    assistantId: string,
    name: string
  ) => Effect.Effect<Branch, BranchAccessError | SqlError.SqlError>
  /**
   * Runs `f` in one transaction on the branch of the organization's versioned
   * assistant, its row locked first: edits and publishes of one branch are
   * serialized and none is lost (A4). A failure of `f` rolls everything back.
   */
  readonly onBranch: <A, E>(
    organizationId: string,
    assistantId: string,
    name: string,
    f: (branch: Branch) => Effect.Effect<A, E>
  ) => Effect.Effect<A, E | BranchAccessError | SqlError.SqlError>
  /**
   * Records a commit of the locked `branch`: its files are the branch's draft
   * (`files`, path -> hash), its parent the branch's HEAD, its second parent
   * `mergeParent` (A6); the id is derived from all of them (A5); HEAD advances.
   */
  readonly commit: (
    organizationId: string,
    assistantId: string,
    branch: Branch,
    files: FileHashes,
    input: CommitInput,
    mergeParent: string | null
  ) => Effect.Effect<Commit, SqlError.SqlError>
}

/** The shared steps over `repo`. */
export const makeAccess = (repo: AssistantsRepo["Service"]): Access => {
  const versioned = Effect.fnUntraced(function* (organizationId: string, assistantId: string) {
    const assistant = yield* repo.findAssistant(organizationId, assistantId)
    if (assistant === undefined) return yield* new AssistantNotFound()
    if (!assistant.versioned) return yield* new AssistantNotVersioned()
    return assistant
  })

  const branch = Effect.fnUntraced(function* (
    organizationId: string,
    assistantId: string,
    name: string,
    forUpdate = false
  ) {
    const found = yield* repo.findBranch(organizationId, assistantId, name, forUpdate)
    if (found === undefined) return yield* new BranchNotFound({ branch_name: name })
    return found
  })

  const readBranch = Effect.fnUntraced(function* (organizationId: string, assistantId: string, name: string) {
    yield* versioned(organizationId, assistantId)
    return yield* branch(organizationId, assistantId, name)
  })

  const onBranch = <A, E>(
    organizationId: string,
    assistantId: string,
    name: string,
    f: (branch: Branch) => Effect.Effect<A, E>
  ) =>
    repo.withTransaction(
      Effect.gen(function* () {
        yield* versioned(organizationId, assistantId)
        return yield* f(yield* branch(organizationId, assistantId, name, true))
      })
    )

  const commit = Effect.fnUntraced(function* (
    organizationId: string,
    assistantId: string,
    branch: Branch,
    files: FileHashes,
    input: CommitInput,
    mergeParent: string | null
  ) {
    const createdAt = new Date(yield* Clock.currentTimeMillis)
    const authorType = input.author_type ?? "human"
    const id = commitId({
      parent: branch.head_commit_id,
      mergeParent,
      files,
      message: input.message ?? null,
      authorType,
      authorId: input.author_id ?? null,
      createdAt: createdAt.toISOString()
    })
    const commit = yield* repo.insertCommit({
      id,
      organizationId,
      assistantId,
      branchId: branch.id,
      parent: branch.head_commit_id,
      mergeParent,
      message: input.message ?? null,
      authorType,
      authorId: input.author_id ?? null,
      createdAt
    })
    yield* repo.setHead(organizationId, branch.id, id)
    return commit
  })

  return { versioned, branch, readBranch, onBranch, commit }
}
