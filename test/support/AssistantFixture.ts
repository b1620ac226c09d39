/**
 * An assistant of the assistants domain's production services (`Assistants`,
 * `Drafts`, `Branches`, `Versions` over `AssistantsRepo.layer`) on the test
 * file's database, with shortcuts bound to it, for tests of the rules with no
 * HTTP, on the TestClock (issue 37 item 1: no in-memory twin of the SQL).
 */
import { Effect } from "effect"
import { TestClock } from "effect/testing"
import type { ChangesetPayload, CreateAssistantPayload, PublishPayload } from "../../src/Assistants/Api.ts"
import { Assistants } from "../../src/Assistants/Assistants.ts"
import { Branches } from "../../src/Assistants/Branches.ts"
import { Drafts } from "../../src/Assistants/Drafts.ts"
import { Versions } from "../../src/Assistants/Versions.ts"
import { organization } from "./RulesDatabase.ts"

/**
 * A new versioned assistant (no snapshot unless given) of `organizationId`
 * (default: a new organization of its own), with the four services and
 * shortcuts bound to it. Requires the services and `SqlClient`.
 */
export const newAssistant = (payload: Partial<typeof CreateAssistantPayload.Type> = {}, organizationId?: string) =>
  Effect.gen(function* () {
    const assistants = yield* Assistants
    const drafts = yield* Drafts
    const branches = yield* Branches
    const versions = yield* Versions
    const orgId = organizationId ?? (yield* organization())
    const assistant = yield* assistants.create(orgId, { name: "Rules bot", ...payload })
    const id = assistant.id
    return {
      organizationId: orgId,
      id,
      assistants,
      drafts,
      branches,
      versions,
      /** PATCH {draft_base} of `branch`. */
      changeset: (branch: string, changeset: typeof ChangesetPayload.Type) =>
        drafts.applyChangeset(orgId, id, branch, changeset),
      /** PATCH of node `nodeId`'s name on `branch`'s draft. */
      rename: (branch: string, nodeId: string, name: string) =>
        drafts.patchItem(orgId, id, branch, "nodes", nodeId, { name }),
      /** Node `nodeId` of `branch`'s draft. */
      node: (branch: string, nodeId: string) => drafts.getItem(orgId, id, branch, "nodes", nodeId),
      /** Publishes `branch` a second after the last commit (commit ids include the time, A5); returns the commit. */
      publish: (branch = "main", payload: typeof PublishPayload.Type = { message: "publish" }) =>
        TestClock.adjust("1 second").pipe(
          Effect.andThen(branches.publish(orgId, id, branch, payload)),
          Effect.map((published) => published.commit)
        ),
      /** A branch `name` from `main`'s HEAD. */
      branch: (name: string) => branches.create(orgId, id, { name }),
      /** Merges `source` into `target`, committing the result unless `commit` is false. */
      merge: (target: string, source: string, commit = true) =>
        TestClock.adjust("1 second").pipe(
          Effect.andThen(branches.merge(orgId, id, target, { source_branch_name: source, commit }))
        ),
      /** The HEAD commit id of `branch`. */
      head: (branch: string) =>
        branches
          .list(orgId, id)
          .pipe(Effect.map((all) => all.find((candidate) => candidate.name === branch)?.head_commit_id ?? null)),
      /** The draft of `branch` as a snapshot. */
      draft: (branch: string) => drafts.get(orgId, id, branch, {})
    }
  })
