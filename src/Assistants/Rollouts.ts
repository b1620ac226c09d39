/**
 * Assistants in production (DECISIONS.md A12, A13; issue 17): a rollout of a
 * branch to a share of the new sessions, and the runtime settings (session
 * pinning). Which version a session's run reads is decided by
 * `Assistants.sessionRuntime` from what this service sets, with
 * {@link inRollout} as the one rule of the split.
 */
import { createHash } from "node:crypto"
import { Context, Effect, Layer } from "effect"
import type { Rollout, RuntimeSettings } from "../Domain/Assistant.ts"
import { Ids } from "../Shared/Ids.ts"
import { type AssistantAccessError, type BranchAccessError, makeAccess } from "./Access.ts"
import type { RolloutPayload } from "./Api.ts"
import { BranchNotPublished, NoRollout } from "./Errors.ts"
import { AssistantsRepo, type RolloutRow } from "./Repo.ts"

/**
 * The split of A12: whether session `sessionId` takes a rollout of `percent`
 * (0-100). Its bucket is the first 32 bits of the SHA-256 of the session id,
 * modulo 100; the session takes the rollout when the bucket is below
 * `percent`. The same session always gets the same result, in every process,
 * and raising `percent` only adds sessions.
 */
export const inRollout = (sessionId: string, percent: number): boolean =>
  createHash("sha256").update(sessionId).digest().readUInt32BE(0) % 100 < percent

/** The wire form of a rollout row (A12). */
const rolloutOf = (assistantId: string, row: RolloutRow): Rollout => ({
  assistant_id: assistantId,
  branch_name: row.branch_name,
  percent: row.percent,
  head_commit_id: row.head_commit_id,
  created_at: row.created_at,
  updated_at: row.updated_at
})

/**
 * Rollouts and runtime settings of an assistant. `organizationId` and
 * `assistantId` name it: every method fails with `AssistantNotFound` or
 * `AssistantNotVersioned` when they do not (A1); the docs below name the other
 * failures.
 */
export class Rollouts extends Context.Service<
  Rollouts,
  {
    /** GET /rollout: the rollout; `NoRollout` when none is set (A12). */
    readonly get: (
      organizationId: string,
      assistantId: string
    ) => Effect.Effect<Rollout, AssistantAccessError | NoRollout>
    /**
     * PUT /rollout (A12): rolls `branch_name` out to `percent` of the sessions
     * whose first run comes from now on. The same branch again changes the
     * percent of the running rollout (sessions keep their branch); another
     * branch replaces it (the sessions the old one took go back to `main`,
     * unless pinned). `BranchNotFound`; `BranchNotPublished` when the branch
     * has no HEAD. Serialized with the branch's publishes and its deletion.
     */
    readonly put: (
      organizationId: string,
      assistantId: string,
      payload: typeof RolloutPayload.Type
    ) => Effect.Effect<Rollout, BranchAccessError | BranchNotPublished>
    /** DELETE /rollout: ends it (A12); unpinned sessions go back to `main`. `NoRollout` when none is set. */
    readonly end: (organizationId: string, assistantId: string) => Effect.Effect<void, AssistantAccessError | NoRollout>
    /** GET /runtime-settings (A13). */
    readonly settings: (
      organizationId: string,
      assistantId: string
    ) => Effect.Effect<RuntimeSettings, AssistantAccessError>
    /** PUT /runtime-settings (A13): returns the settings now in force. */
    readonly putSettings: (
      organizationId: string,
      assistantId: string,
      settings: RuntimeSettings
    ) => Effect.Effect<RuntimeSettings, AssistantAccessError>
  }
>()("parley/Assistants/Rollouts") {
  /** The service, its repository left open (the domain's `Assistants.layer` provides it); requires `AssistantsRepo` and `Ids`. */
  static readonly layerNoDeps = Layer.effect(
    Rollouts,
    Effect.gen(function* () {
      return Rollouts.of(makeRollouts(yield* AssistantsRepo, (yield* Ids).newId))
    })
  )
}

const makeRollouts = (repo: AssistantsRepo["Service"], newId: () => string): Rollouts["Service"] => {
  const access = makeAccess(repo)

  const get = Effect.fn("Rollouts.get")(
    function* (organizationId: string, assistantId: string) {
      yield* access.versioned(organizationId, assistantId)
      const rollout = yield* repo.findRollout(organizationId, assistantId)
      if (rollout === undefined) return yield* new NoRollout()
      return rolloutOf(assistantId, rollout)
    },
    Effect.catchTag("SqlError", Effect.die)
  )

  const put = Effect.fn("Rollouts.put")(
    (organizationId: string, assistantId: string, payload: typeof RolloutPayload.Type) =>
      access.onBranch(organizationId, assistantId, payload.branch_name, (branch) =>
        Effect.gen(function* () {
          if (branch.head_commit_id === null) return yield* new BranchNotPublished({ branch_name: branch.name })
          const rollout = yield* repo.putRollout({
            id: newId(),
            organizationId,
            assistantId,
            branchId: branch.id,
            percent: payload.percent
          })
          return rolloutOf(assistantId, rollout)
        })
      ),
    Effect.catchTag("SqlError", Effect.die)
  )

  const end = Effect.fn("Rollouts.end")(
    function* (organizationId: string, assistantId: string) {
      yield* access.versioned(organizationId, assistantId)
      if (!(yield* repo.deleteRollout(organizationId, assistantId))) return yield* new NoRollout()
    },
    Effect.catchTag("SqlError", Effect.die)
  )

  const settings = Effect.fn("Rollouts.settings")(
    function* (organizationId: string, assistantId: string) {
      const assistant = yield* access.versioned(organizationId, assistantId)
      return { session_pinning: assistant.session_pinning }
    },
    Effect.catchTag("SqlError", Effect.die)
  )

  const putSettings = Effect.fn("Rollouts.putSettings")(
    function* (organizationId: string, assistantId: string, settings: RuntimeSettings) {
      yield* access.versioned(organizationId, assistantId)
      yield* repo.setPinning(organizationId, assistantId, settings.session_pinning)
      return { session_pinning: settings.session_pinning }
    },
    Effect.catchTag("SqlError", Effect.die)
  )

  return { get, put, end, settings, putSettings }
}
