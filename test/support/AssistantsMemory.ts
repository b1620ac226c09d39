/**
 * An assistant in the in-memory assistants domain (`Assistants.layerTest`: the
 * services over `AssistantsRepo.layerTest`), for fast tests of the rules with
 * no database and no HTTP. Provide `Assistants.layerTest` to each test for a
 * store of its own.
 */
import { Effect } from "effect"
import { TestClock } from "effect/testing"
import type { ChangesetPayload, CreateAssistantPayload, PublishPayload } from "../../src/Assistants/Api.ts"
import { Assistants } from "../../src/Assistants/Assistants.ts"
import { Branches } from "../../src/Assistants/Branches.ts"
import { Drafts } from "../../src/Assistants/Drafts.ts"
import { Versions } from "../../src/Assistants/Versions.ts"
import { makeIdGenerator } from "../../src/Shared/Ids.ts"

/** Ids for the fixtures (UUIDv7, as the application makes them). */
const newId = makeIdGenerator()

/**
 * A new versioned assistant (no snapshot unless given) with the four services
 * and shortcuts bound to it; over the in-memory or the PostgreSQL repository.
 */
export const memoryAssistant = (
  payload: Partial<typeof CreateAssistantPayload.Type> = {},
  /** The organization: a new id (the in-memory repository keeps no organizations), or one that exists in a database. */
  organizationId: string = newId()
) =>
  Effect.gen(function* () {
    const assistants = yield* Assistants
    const drafts = yield* Drafts
    const branches = yield* Branches
    const versions = yield* Versions
    const assistant = yield* assistants.create(organizationId, { name: "Rules bot", ...payload })
    const id = assistant.id
    return {
      organizationId,
      id,
      assistants,
      drafts,
      branches,
      versions,
      /** PATCH {draft_base} of `branch`. */
      changeset: (branch: string, changeset: typeof ChangesetPayload.Type) =>
        drafts.applyChangeset(organizationId, id, branch, changeset),
      /** PATCH of node `nodeId`'s name on `branch`'s draft. */
      rename: (branch: string, nodeId: string, name: string) =>
        drafts.patchItem(organizationId, id, branch, "nodes", nodeId, { name }),
      /** Node `nodeId` of `branch`'s draft. */
      node: (branch: string, nodeId: string) => drafts.getItem(organizationId, id, branch, "nodes", nodeId),
      /** Publishes `branch` a second after the last commit (commit ids include the time, A5); answers the commit. */
      publish: (branch = "main", payload: typeof PublishPayload.Type = { message: "publish" }) =>
        TestClock.adjust("1 second").pipe(
          Effect.andThen(branches.publish(organizationId, id, branch, payload)),
          Effect.map((answer) => answer.commit)
        ),
      /** A branch `name` from `main`'s HEAD. */
      branch: (name: string) => branches.create(organizationId, id, { name }),
      /** Merges `source` into `target`, committing the result unless `commit` is false. */
      merge: (target: string, source: string, commit = true) =>
        TestClock.adjust("1 second").pipe(
          Effect.andThen(branches.merge(organizationId, id, target, { source_branch_name: source, commit }))
        ),
      /** The HEAD commit id of `branch`. */
      head: (branch: string) =>
        branches
          .list(organizationId, id)
          .pipe(Effect.map((all) => all.find((candidate) => candidate.name === branch)?.head_commit_id ?? null)),
      /** The draft of `branch` as a snapshot. */
      draft: (branch: string) => drafts.get(organizationId, id, branch, {})
    }
  })
