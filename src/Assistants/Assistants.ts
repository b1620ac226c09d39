/**
 * The assistants domain (assistants.md; DECISIONS.md A1-A14), in five services
 * over one `AssistantsRepo`:
 *
 * - `Assistants` (this file): an assistant as a whole: creation (O6, A2), its
 *   list, read, update and deletion (issue 39 item 6), the
 *   runtime reads (A11, R2; per session with rollouts and pinning, A12, A13)
 *   and the one-way migration of a legacy assistant (A11);
 * - `Drafts` (`Drafts.ts`): the working copy of a branch (changesets, items,
 *   discard, reset; A9, A10);
 * - `Branches` (`Branches.ts`): create, fork, publish, rollback, merge (A3, A4,
 *   A6, A7);
 * - `Versions` (`Versions.ts`): the commits and their diffs (A5, A8);
 * - `Rollouts` (`Rollouts.ts`): rollouts and runtime settings (A12, A13).
 *
 * Failures are the tagged errors of `Errors.ts`; `SqlError`
 * becomes a defect at each method.
 */
import { Cache, Context, Duration, Effect, Exit, Layer } from "effect"
import type { SqlError } from "effect/sql"
import type { Assistant, Snapshot, SnapshotInput } from "../Domain/Assistant.ts"
import { DEFAULT_PAGE_LIMIT, type PageQuery } from "../Domain/Common.ts"
import { ValidationFailed } from "../Domain/Errors.ts"
import type { EvaluationSide } from "../Domain/Evaluation.ts"
import { Ids } from "../Shared/Ids.ts"
import { type AssistantAccessError, MAIN, makeAccess } from "./Access.ts"
import type { CreateAssistantPayload, MigrateResponse, RuntimeResponse, UpdateAssistantPayload } from "./Api.ts"
import { Branches } from "./Branches.ts"
import { Drafts } from "./Drafts.ts"
import {
  AssistantAlreadyVersioned,
  AssistantInUse,
  AssistantNotFound,
  type BranchNotFound,
  BranchNotPublished,
  CommitNotFound,
  NoPublishedVersion
} from "./Errors.ts"
import { filesFromSnapshot, referenceIssues, snapshotOf } from "./Files.ts"
import { type AssistantRow, AssistantsRepo } from "./Repo.ts"
import { inRollout, Rollouts } from "./Rollouts.ts"
import { Versions } from "./Versions.ts"

/** Published snapshots kept per process for the runtime (R2); a commit never changes, so entries never go stale. */
const SNAPSHOT_CACHE_SIZE = 256

/** An assistant as a whole: `organizationId` is the caller's organization (A1). */
export class Assistants extends Context.Service<
  Assistants,
  {
    /**
     * The admin API's creation of an assistant of the organization (O6). A
     * versioned one (the default) gets `main` with no HEAD and a draft holding the
     * snapshot, its context defaulting to the name and description (A2);
     * `ValidationFailed` at `["body", "snapshot", ...]` when the snapshot breaks a
     * reference (A10). A legacy one (`versioned: false`) keeps the snapshot as it is.
     */
    readonly create: (
      organizationId: string,
      payload: typeof CreateAssistantPayload.Type
    ) => Effect.Effect<Assistant, ValidationFailed>
    /**
     * GET /assistants (issue 39 item 6): the organization's assistants, oldest
     * first, `limit` of them (default {@link DEFAULT_PAGE_LIMIT}) after `after_id`.
     */
    readonly list: (organizationId: string, page: PageQuery) => Effect.Effect<ReadonlyArray<Assistant>>
    /** GET /assistants/{id} (issue 39 item 6): `AssistantNotFound` for another organization's or an unknown one (A1). */
    readonly get: (organizationId: string, assistantId: string) => Effect.Effect<Assistant, AssistantNotFound>
    /**
     * PATCH /assistants/{id} (issue 39 item 6): changes `name` and `description`
     * (null clears it) when present. The draft's `context` is not touched: it
     * is versioned content (A2). `AssistantNotFound` (A1).
     */
    readonly update: (
      organizationId: string,
      assistantId: string,
      patch: typeof UpdateAssistantPayload.Type
    ) => Effect.Effect<Assistant, AssistantNotFound>
    /**
     * DELETE /assistants/{id} (issue 39 item 6): deletes the assistant with its
     * whole version control (branches, drafts, commits, rollout); the runs of
     * sessions stay. `AssistantInUse` (409) while an AI agent of the
     * organization, not deleted, answers from it; `AssistantNotFound` (A1).
     * The assistant's row is locked while its agents are checked.
     */
    readonly delete: (
      organizationId: string,
      assistantId: string
    ) => Effect.Effect<void, AssistantNotFound | AssistantInUse>
    /**
     * GET /runtime, and what the AI runtime answers from (R2, A11): the snapshot of
     * HEAD of `main`, or of a legacy assistant its legacy snapshot with `commit_id:
     * null`. `AssistantNotFound` (A1); `NoPublishedVersion` before the first publish
     * (A2). A commit's snapshot is assembled once per process, even under
     * concurrent reads.
     */
    readonly runtime: (
      organizationId: string,
      assistantId: string
    ) => Effect.Effect<typeof RuntimeResponse.Type, AssistantNotFound | BranchNotFound | NoPublishedVersion>
    /** That the organization has this versioned assistant: `AssistantNotFound`, `AssistantNotVersioned` (A1). */
    readonly checkVersioned: (organizationId: string, assistantId: string) => Effect.Effect<void, AssistantAccessError>
    /**
     * What an AI run of session `sessionId` reads (R2, A12, A13): a legacy
     * assistant's snapshot (`commit_id` and `branch_name` null), else a commit
     * and the branch it was read through:
     *
     * - the first run of the session takes the rollout's branch when the split
     *   puts it there ({@link inRollout}), else `main`, reads its HEAD, and
     *   records both (its assignment; a racing run of the same session gets
     *   the one recorded first);
     * - with `session_pinning: "session"` every later run reads that commit;
     * - otherwise it reads the HEAD of its branch, and of `main` for good once
     *   the rollout that chose its branch has ended or been replaced.
     *
     * `AssistantNotFound` (A1); `NoPublishedVersion` when the branch has no
     * HEAD (A2); `BranchNotFound` only when the branch is deleted meanwhile.
     */
    readonly sessionRuntime: (
      organizationId: string,
      assistantId: string,
      sessionId: string
    ) => Effect.Effect<SessionRuntime, AssistantNotFound | BranchNotFound | NoPublishedVersion>
    /**
     * The snapshot one side of an evaluation answers from (A16) and its commit:
     * a branch's HEAD (`{branch_name}`), its draft (`{branch_name, draft:
     * true}`, `commit_id` null) or a commit (`{commit_id}`).
     * `AssistantNotFound`, `AssistantNotVersioned` (A1), `BranchNotFound`,
     * `BranchNotPublished` (a HEAD that is null), `CommitNotFound`.
     */
    readonly sideSnapshot: (
      organizationId: string,
      assistantId: string,
      side: EvaluationSide
    ) => Effect.Effect<
      { readonly commit_id: string | null; readonly snapshot: Snapshot },
      AssistantAccessError | BranchNotFound | BranchNotPublished | CommitNotFound
    >
    /**
     * POST /migrate (A11): a legacy assistant becomes versioned, one way: its
     * snapshot fills the draft of `main` and is published as the first commit
     * (author `system`). `AssistantAlreadyVersioned` for a versioned one.
     */
    readonly migrate: (
      organizationId: string,
      assistantId: string
    ) => Effect.Effect<typeof MigrateResponse.Type, AssistantNotFound | AssistantAlreadyVersioned>
  }
>()("parley/Assistants") {
  /**
   * The five services of the domain (`Assistants`, `Drafts`, `Branches`,
   * `Versions`, `Rollouts`), their repository left open; require
   * `AssistantsRepo` and `Ids`.
   */
  static readonly layerNoDeps = Layer.mergeAll(
    Layer.effect(
      Assistants,
      Effect.gen(function* () {
        const repo = yield* AssistantsRepo
        return Assistants.of(makeAssistants(repo, yield* makeSnapshots(repo), (yield* Ids).newId))
      })
    ),
    Drafts.layerNoDeps,
    Branches.layerNoDeps,
    Versions.layerNoDeps,
    Rollouts.layerNoDeps
  )

  /** The whole domain on PostgreSQL, its repository built once; requires `PgClient` and `Ids`. */
  static readonly layer = Assistants.layerNoDeps.pipe(Layer.provide(AssistantsRepo.layer))
}

/**
 * What a session's run reads ({@link Assistants} `sessionRuntime`): the
 * runtime response, and `branch_name`, the branch the commit was read through
 * (null for a legacy assistant).
 */
export type SessionRuntime = typeof RuntimeResponse.Type & { readonly branch_name: string | null }

/** The files of a legacy assistant's snapshot, as stored (A11: never re-checked). */
const legacyFiles = (assistant: AssistantRow) => filesFromSnapshot((assistant.legacy_snapshot ?? {}) as SnapshotInput)

/** The runtime of a legacy assistant (A11): its legacy snapshot, no commit. */
const legacyRuntime = (assistant: AssistantRow) => ({
  assistant_id: assistant.id,
  commit_id: null,
  snapshot: snapshotOf(legacyFiles(assistant))
})

/** The key of a commit's snapshot in the cache. */
const snapshotKey = (organizationId: string, assistantId: string, commitId: string) =>
  `${organizationId}/${assistantId}/${commitId}`

/**
 * The snapshots of published commits by {@link snapshotKey}, for the runtime:
 * commits are immutable, so a snapshot is assembled once per process (every AI
 * run reads it), concurrent reads of one commit share one load, and entries
 * never go stale. A failed load is not kept.
 */
const makeSnapshots = (repo: AssistantsRepo["Service"]) =>
  Cache.makeWith(
    (key: string) => {
      const [organizationId, assistantId, commitId] = key.split("/") as [string, string, string]
      return Effect.map(repo.commitFiles(organizationId, assistantId, commitId), snapshotOf)
    },
    {
      capacity: SNAPSHOT_CACHE_SIZE,
      timeToLive: (exit) => (Exit.isSuccess(exit) ? Duration.infinity : Duration.zero)
    }
  )

const makeAssistants = (
  repo: AssistantsRepo["Service"],
  snapshots: Cache.Cache<string, Snapshot, SqlError.SqlError>,
  newId: () => string
): Assistants["Service"] => {
  const access = makeAccess(repo)

  const create = Effect.fn("Assistants.create")(
    function* (organizationId: string, payload: typeof CreateAssistantPayload.Type) {
      const versioned = payload.versioned ?? true
      // A2: the draft holds the assistant's context: its name and description unless the snapshot gives one.
      const files = filesFromSnapshot({
        ...payload.snapshot,
        context: payload.snapshot?.context ?? {
          assistant_name: payload.name,
          assistant_description: payload.description ?? ""
        }
      })
      if (versioned) {
        const issues = referenceIssues(files, (path, field) => ["body", "snapshot", path, ...field])
        if (issues.length > 0) return yield* new ValidationFailed({ detail: issues })
      }
      return yield* repo.withTransaction(
        Effect.gen(function* () {
          const assistant = yield* repo.insertAssistant({
            id: newId(),
            organizationId,
            name: payload.name,
            description: payload.description ?? null,
            versioned,
            legacySnapshot: versioned ? undefined : (payload.snapshot ?? {})
          })
          if (versioned) {
            const main = yield* repo.insertBranch({
              id: newId(),
              organizationId,
              assistantId: assistant.id,
              name: MAIN,
              head: null
            })
            if (main === undefined) return yield* Effect.die(new Error("a new assistant already has a main branch"))
            yield* repo.insertFiles(organizationId, assistant.id, [...files.values()])
            yield* repo.writeDraft(
              organizationId,
              main.id,
              new Map([...files].map(([path, file]) => [path, file.hash])),
              []
            )
          }
          return assistant
        })
      )
    },
    Effect.catchTag("SqlError", Effect.die)
  )

  const list = Effect.fn("Assistants.list")((organizationId: string, page: PageQuery) =>
    repo
      .listAssistants(organizationId, { limit: page.limit ?? DEFAULT_PAGE_LIMIT, afterId: page.after_id })
      .pipe(Effect.orDie)
  )

  const get = Effect.fn("Assistants.get")(
    function* (organizationId: string, assistantId: string) {
      const assistant = yield* repo.getAssistant(organizationId, assistantId)
      if (assistant === undefined) return yield* new AssistantNotFound()
      return assistant
    },
    Effect.catchTag("SqlError", Effect.die)
  )

  const update = Effect.fn("Assistants.update")(
    function* (organizationId: string, assistantId: string, patch: typeof UpdateAssistantPayload.Type) {
      const assistant = yield* repo.updateAssistant(organizationId, assistantId, patch)
      if (assistant === undefined) return yield* new AssistantNotFound()
      return assistant
    },
    Effect.catchTag("SqlError", Effect.die)
  )

  const remove = Effect.fn("Assistants.delete")(
    (organizationId: string, assistantId: string) =>
      repo.withTransaction(
        Effect.gen(function* () {
          if ((yield* repo.findAssistant(organizationId, assistantId, true)) === undefined) {
            return yield* new AssistantNotFound()
          }
          if (yield* repo.assistantHasAgent(organizationId, assistantId)) return yield* new AssistantInUse()
          yield* repo.deleteAssistant(organizationId, assistantId)
        })
      ),
    Effect.catchTag("SqlError", Effect.die)
  )

  const runtime = Effect.fn("Assistants.runtime")(
    function* (organizationId: string, assistantId: string) {
      const assistant = yield* repo.findAssistant(organizationId, assistantId)
      if (assistant === undefined) return yield* new AssistantNotFound()
      if (!assistant.versioned) return legacyRuntime(assistant)
      const main = yield* access.branch(organizationId, assistantId, MAIN)
      if (main.head_commit_id === null) return yield* new NoPublishedVersion()
      const snapshot: Snapshot = yield* Cache.get(
        snapshots,
        snapshotKey(organizationId, assistantId, main.head_commit_id)
      )
      return { assistant_id: assistant.id, commit_id: main.head_commit_id, snapshot }
    },
    Effect.catchTag("SqlError", Effect.die)
  )

  const sessionRuntime = Effect.fn("Assistants.sessionRuntime")(
    function* (organizationId: string, assistantId: string, sessionId: string) {
      const assistant = yield* repo.findAssistant(organizationId, assistantId)
      if (assistant === undefined) return yield* new AssistantNotFound()
      if (!assistant.versioned) return { ...legacyRuntime(assistant), branch_name: null }
      const read = (branchName: string, commitId: string) =>
        Effect.map(
          Cache.get(snapshots, snapshotKey(organizationId, assistantId, commitId)),
          (snapshot): SessionRuntime => ({
            assistant_id: assistant.id,
            commit_id: commitId,
            branch_name: branchName,
            snapshot
          })
        )
      /** The HEAD of `branchName`; `NoPublishedVersion` when it has none. */
      const head = Effect.fnUntraced(function* (branchName: string) {
        const branch = yield* access.branch(organizationId, assistantId, branchName)
        if (branch.head_commit_id === null) return yield* new NoPublishedVersion()
        return branch.head_commit_id
      })
      const pinned = assistant.session_pinning === "session"
      const assigned = yield* repo.findAssignment(organizationId, sessionId, assistantId)
      if (assigned !== undefined && pinned) return yield* read(assigned.branch_name, assigned.commit_id)
      const rollout = yield* repo.findRollout(organizationId, assistantId)
      if (assigned !== undefined) {
        if (assigned.rollout_id === null || assigned.rollout_id === rollout?.id) {
          return yield* read(assigned.branch_name, yield* head(assigned.branch_name))
        }
        // A12: the rollout that chose its branch ended or was replaced: back to main, for good.
        yield* repo.reassign(organizationId, sessionId, assistantId, MAIN)
        return yield* read(MAIN, yield* head(MAIN))
      }
      // The first run (A12): the split decides, and the choice and the commit read are recorded.
      const chosen = rollout !== undefined && inRollout(sessionId, rollout.percent) ? rollout : undefined
      const branchName = chosen?.branch_name ?? MAIN
      const commitId = yield* head(branchName)
      const recorded = yield* repo.insertAssignment(organizationId, sessionId, assistantId, {
        rollout_id: chosen?.id ?? null,
        branch_name: branchName,
        commit_id: commitId
      })
      if (recorded.branch_name === branchName && recorded.commit_id === commitId)
        return yield* read(branchName, commitId)
      // Another run of the session recorded first: read what it recorded, as a later run would.
      return yield* read(recorded.branch_name, pinned ? recorded.commit_id : yield* head(recorded.branch_name))
    },
    Effect.catchTag("SqlError", Effect.die)
  )

  const migrate = Effect.fn("Assistants.migrate")(
    (organizationId: string, assistantId: string) =>
      repo.withTransaction(
        Effect.gen(function* () {
          const assistant = yield* repo.findAssistant(organizationId, assistantId, true)
          if (assistant === undefined) return yield* new AssistantNotFound()
          if (assistant.versioned) return yield* new AssistantAlreadyVersioned()
          const files = legacyFiles(assistant)
          const main =
            (yield* repo.findBranch(organizationId, assistantId, MAIN, true)) ??
            (yield* repo.insertBranch({ id: newId(), organizationId, assistantId, name: MAIN, head: null }))
          if (main === undefined) return yield* Effect.die(new Error("main was neither found nor created"))
          yield* repo.insertFiles(organizationId, assistantId, [...files.values()])
          yield* repo.resetDraft(organizationId, assistantId, main.id, null)
          const hashes = new Map([...files].map(([path, file]) => [path, file.hash]))
          yield* repo.writeDraft(organizationId, main.id, hashes, [])
          const commit = yield* access.commit(
            organizationId,
            assistantId,
            main,
            hashes,
            { message: "Migrated from the legacy snapshot", author_type: "system" },
            null
          )
          yield* repo.markVersioned(organizationId, assistantId)
          const branch = yield* repo.findBranch(organizationId, assistantId, MAIN)
          if (branch === undefined) return yield* Effect.die(new Error("main vanished during the migration"))
          return { assistant_id: assistantId, branch, commit }
        })
      ),
    Effect.catchTag("SqlError", Effect.die)
  )

  const checkVersioned = (organizationId: string, assistantId: string) =>
    access.versioned(organizationId, assistantId).pipe(Effect.asVoid, Effect.catchTag("SqlError", Effect.die))

  const sideSnapshot = Effect.fn("Assistants.sideSnapshot")(
    function* (organizationId: string, assistantId: string, side: EvaluationSide) {
      yield* access.versioned(organizationId, assistantId)
      const read = (commitId: string) =>
        Effect.map(Cache.get(snapshots, snapshotKey(organizationId, assistantId, commitId)), (snapshot) => ({
          commit_id: commitId as string | null,
          snapshot
        }))
      if ("commit_id" in side) {
        const commit = yield* repo.findCommit(organizationId, assistantId, side.commit_id)
        if (commit === undefined) return yield* new CommitNotFound({ commit_id: side.commit_id })
        return yield* read(commit.id)
      }
      const branch = yield* access.branch(organizationId, assistantId, side.branch_name)
      if (side.draft === true) {
        return {
          commit_id: null,
          snapshot: snapshotOf(yield* repo.draftFiles(organizationId, assistantId, branch.id, ""))
        }
      }
      if (branch.head_commit_id === null) return yield* new BranchNotPublished({ branch_name: side.branch_name })
      return yield* read(branch.head_commit_id)
    },
    Effect.catchTag("SqlError", Effect.die)
  )

  return { create, list, get, update, delete: remove, runtime, checkVersioned, sessionRuntime, migrate, sideSnapshot }
}
