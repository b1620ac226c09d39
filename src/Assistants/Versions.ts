/**
 * Versions: the commits of an assistant, immutable once published
 * (assistants.md "Versions"; DECISIONS.md A5, A8). Reads only.
 */
import { Context, Effect, Layer } from "effect"
import { type AssistantAccessError, type BranchAccessError, makeAccess } from "./Access.ts"
import {
  DEFAULT_VERSIONS_LIMIT,
  type DiffResponse,
  type VersionResponse,
  type VersionsDiffQuery,
  type VersionsQuery,
  type VersionsResponse
} from "./Api.ts"
import { CommitNotFound } from "./Errors.ts"
import { diffFiles } from "./Files.ts"
import { AssistantsRepo } from "./Repo.ts"

/**
 * The version operations of an assistant. `organizationId` and `assistantId`
 * name it: every method fails with `AssistantNotFound` or
 * `AssistantNotVersioned` when they do not (A1); the docs below name the other
 * failures.
 */
export class Versions extends Context.Service<
  Versions,
  {
    /**
     * GET /versions: commits newest first, `limit` (default {@link DEFAULT_VERSIONS_LIMIT}) from `offset`
     * (default 0); with `branch_name`, only those reachable from that branch's
     * HEAD over both parent links (A8; none before its first publish).
     * `BranchNotFound` for an unknown `branch_name`.
     */
    readonly list: (
      organizationId: string,
      assistantId: string,
      query: typeof VersionsQuery.Type
    ) => Effect.Effect<typeof VersionsResponse.Type, BranchAccessError>
    /** GET /versions/{commit_id}: the commit and its files (spec "Files"), ordered by path. `CommitNotFound`. */
    readonly get: (
      organizationId: string,
      assistantId: string,
      commitId: string
    ) => Effect.Effect<typeof VersionResponse.Type, AssistantAccessError | CommitNotFound>
    /**
     * GET /versions/diff: the differences from `commit_a` to `commit_b`, file by
     * file (spec "Diff entry"). `CommitNotFound` names the first unknown one.
     */
    readonly diff: (
      organizationId: string,
      assistantId: string,
      query: typeof VersionsDiffQuery.Type
    ) => Effect.Effect<typeof DiffResponse.Type, AssistantAccessError | CommitNotFound>
  }
>()("parley/Assistants/Versions") {
  /** The service, its repository left open (the domain's `Assistants.layer` provides it); requires `AssistantsRepo`. */
  static readonly layerNoDeps = Layer.effect(
    Versions,
    Effect.gen(function* () {
      return Versions.of(makeVersions(yield* AssistantsRepo))
    })
  )
}

const makeVersions = (repo: AssistantsRepo["Service"]): Versions["Service"] => {
  const access = makeAccess(repo)

  const list = Effect.fn("Versions.list")(
    function* (organizationId: string, assistantId: string, query: typeof VersionsQuery.Type) {
      yield* access.versioned(organizationId, assistantId)
      const head =
        query.branch_name === undefined
          ? undefined
          : (yield* access.branch(organizationId, assistantId, query.branch_name)).head_commit_id
      const commits = yield* repo.listCommits(organizationId, assistantId, {
        head,
        limit: query.limit ?? DEFAULT_VERSIONS_LIMIT,
        offset: query.offset ?? 0
      })
      return { commits }
    },
    Effect.catchTag("SqlError", Effect.die)
  )

  const get = Effect.fn("Versions.get")(
    function* (organizationId: string, assistantId: string, commitId: string) {
      yield* access.versioned(organizationId, assistantId)
      const commit = yield* repo.findCommit(organizationId, assistantId, commitId)
      if (commit === undefined) return yield* new CommitNotFound({ commit_id: commitId })
      return { commit, files: yield* repo.listCommitFiles(organizationId, assistantId, commitId) }
    },
    Effect.catchTag("SqlError", Effect.die)
  )

  const diff = Effect.fn("Versions.diff")(
    function* (organizationId: string, assistantId: string, query: typeof VersionsDiffQuery.Type) {
      yield* access.versioned(organizationId, assistantId)
      for (const id of [query.commit_a, query.commit_b]) {
        if ((yield* repo.findCommit(organizationId, assistantId, id)) === undefined)
          return yield* new CommitNotFound({ commit_id: id })
      }
      return {
        diffs: diffFiles(
          yield* repo.commitFiles(organizationId, assistantId, query.commit_a),
          yield* repo.commitFiles(organizationId, assistantId, query.commit_b)
        )
      }
    },
    Effect.catchTag("SqlError", Effect.die)
  )

  return { list, get, diff }
}
