/**
 * The assistants domain (assistants.md; DECISIONS.md A1-A11), in four services
 * over one `AssistantsRepo`:
 *
 * - `Assistants` (this file): an assistant as a whole: creation (O6, A2), the
 *   runtime read other domains use (A11, R2) and the one-way migration of a
 *   legacy assistant (A11);
 * - `Drafts` (`Drafts.ts`): the working copy of a branch (changesets, items,
 *   discard, reset; A9, A10);
 * - `Branches` (`Branches.ts`): create, fork, publish, rollback, merge (A3, A4,
 *   A6, A7);
 * - `Versions` (`Versions.ts`): the commits and their diffs (A5, A8).
 *
 * Failures are the tagged errors of `Domain/AssistantErrors.ts`; `SqlError`
 * becomes a defect at each method.
 */
import { Cache, Context, Duration, Effect, Exit, Layer } from "effect"
import type { SqlError } from "effect/sql"
import type { Assistant, Snapshot, SnapshotInput } from "../Domain/Assistant.ts"
import {
  AssistantAlreadyVersioned,
  AssistantNotFound,
  type BranchNotFound,
  NoPublishedVersion
} from "../Domain/AssistantErrors.ts"
import { ValidationFailed } from "../Domain/Errors.ts"
import { Ids } from "../Shared/Ids.ts"
import { MAIN, makeAccess } from "./Access.ts"
import type { CreateAssistantPayload, MigrateAnswer, RuntimeAnswer } from "./Api.ts"
import { Branches } from "./Branches.ts"
import { Drafts } from "./Drafts.ts"
import { filesFromSnapshot, referenceIssues, snapshotOf } from "./Files.ts"
import { AssistantsRepo } from "./Repo.ts"
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
     * GET /runtime, and what the AI runtime answers from (R2, A11): the snapshot of
     * HEAD of `main`, or of a legacy assistant its legacy snapshot with `commit_id:
     * null`. `AssistantNotFound` (A1); `NoPublishedVersion` before the first publish
     * (A2). A commit's snapshot is assembled once per process, even under
     * concurrent reads.
     */
    readonly runtime: (
      organizationId: string,
      assistantId: string
    ) => Effect.Effect<typeof RuntimeAnswer.Type, AssistantNotFound | BranchNotFound | NoPublishedVersion>
    /**
     * POST /migrate (A11): a legacy assistant becomes versioned, one way: its
     * snapshot fills the draft of `main` and is published as the first commit
     * (author `system`). `AssistantAlreadyVersioned` for a versioned one.
     */
    readonly migrate: (
      organizationId: string,
      assistantId: string
    ) => Effect.Effect<typeof MigrateAnswer.Type, AssistantNotFound | AssistantAlreadyVersioned>
  }
>()("parley/Assistants") {
  /** `Assistants` alone; requires `AssistantsRepo` and `Ids`. */
  static readonly layerNoDeps = Layer.effect(
    Assistants,
    Effect.gen(function* () {
      const repo = yield* AssistantsRepo
      return Assistants.of(makeAssistants(repo, yield* makeSnapshots(repo), (yield* Ids).newId))
    })
  )

  /** The four services of the domain (`Assistants`, `Drafts`, `Branches`, `Versions`); require `AssistantsRepo`. */
  static readonly layerDomain = Layer.mergeAll(Assistants.layerNoDeps, Drafts.layer, Branches.layer, Versions.layer)

  /** The whole domain on PostgreSQL, its repository built once; requires `PgClient`. */
  static readonly layer = Assistants.layerDomain.pipe(Layer.provide(AssistantsRepo.layer))

  /** The whole domain in memory (`AssistantsRepo.layerTest`), the repository included for tests to inspect. */
  static readonly layerTest = Assistants.layerDomain.pipe(
    Layer.provideMerge(AssistantsRepo.layerTest),
    Layer.provideMerge(Ids.layer)
  )
}

/** The key of a commit's snapshot in the cache. */
const snapshotKey = (assistantId: string, commitId: string) => `${assistantId}/${commitId}`

/**
 * The snapshots of published commits by {@link snapshotKey}, for the runtime:
 * commits are immutable, so a snapshot is assembled once per process (every AI
 * run reads it), concurrent reads of one commit share one load, and entries
 * never go stale. A failed load is not kept.
 */
const makeSnapshots = (repo: AssistantsRepo["Service"]) =>
  Cache.makeWith(
    (key: string) => {
      const slash = key.indexOf("/")
      return Effect.map(repo.commitFiles(key.slice(0, slash), key.slice(slash + 1)), snapshotOf)
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
            const main = yield* repo.insertBranch({ id: newId(), assistantId: assistant.id, name: MAIN, head: null })
            if (main === undefined) return yield* Effect.die(new Error("a new assistant already has a main branch"))
            yield* repo.insertFiles(assistant.id, [...files.values()])
            yield* repo.writeDraft(main.id, new Map([...files].map(([path, file]) => [path, file.hash])), [])
          }
          return assistant
        })
      )
    },
    Effect.catchTag("SqlError", Effect.die)
  )

  const runtime = Effect.fn("Assistants.runtime")(
    function* (organizationId: string, assistantId: string) {
      const assistant = yield* repo.findAssistant(organizationId, assistantId)
      if (assistant === undefined) return yield* new AssistantNotFound()
      if (!assistant.versioned) {
        return {
          assistant_id: assistant.id,
          commit_id: null,
          snapshot: snapshotOf(filesFromSnapshot((assistant.legacy_snapshot ?? {}) as SnapshotInput))
        }
      }
      const main = yield* access.branch(assistantId, MAIN)
      if (main.head_commit_id === null) return yield* new NoPublishedVersion()
      const snapshot: Snapshot = yield* Cache.get(snapshots, snapshotKey(assistantId, main.head_commit_id))
      return { assistant_id: assistant.id, commit_id: main.head_commit_id, snapshot }
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
          const files = filesFromSnapshot((assistant.legacy_snapshot ?? {}) as SnapshotInput)
          const main =
            (yield* repo.findBranch(assistantId, MAIN, true)) ??
            (yield* repo.insertBranch({ id: newId(), assistantId, name: MAIN, head: null }))
          if (main === undefined) return yield* Effect.die(new Error("main was neither found nor created"))
          yield* repo.insertFiles(assistantId, [...files.values()])
          yield* repo.resetDraft(assistantId, main.id, null)
          const hashes = new Map([...files].map(([path, file]) => [path, file.hash]))
          yield* repo.writeDraft(main.id, hashes, [])
          const commit = yield* access.commit(
            assistantId,
            main,
            hashes,
            { message: "Migrated from the legacy snapshot", author_type: "system" },
            null
          )
          yield* repo.markVersioned(assistantId)
          const branch = yield* repo.findBranch(assistantId, MAIN)
          if (branch === undefined) return yield* Effect.die(new Error("main vanished during the migration"))
          return { assistant_id: assistantId, branch, commit }
        })
      ),
    Effect.catchTag("SqlError", Effect.die)
  )

  return { create, runtime, migrate }
}
