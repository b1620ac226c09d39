/**
 * The assistants' errors on the wire (issue 13 item 5; DECISIONS.md "Errors",
 * A1-A12): tagged errors with data in the service, `{"detail": "<text>"}` and
 * nothing else on the wire, and back into the right error from the text.
 */
import { assert, describe, it } from "@effect/vitest"
import { Schema } from "effect"
import {
  AssistantAlreadyVersioned,
  AssistantNotFound,
  AssistantNotVersioned,
  BranchAlreadyExists,
  BranchNotFound,
  BranchNotPublished,
  CommitNotFound,
  CommitNotInHistory,
  ItemNotFound,
  MainBranchUndeletable,
  MergeConflict,
  NoPublishedVersion,
  NoRollout,
  NothingToPublish
} from "../../src/Assistants/Errors.ts"

const cases = [
  [AssistantNotFound.Wire, new AssistantNotFound(), 404, "Assistant not found"],
  [AssistantNotVersioned.Wire, new AssistantNotVersioned(), 409, "Assistant is not versioned"],
  [AssistantAlreadyVersioned.Wire, new AssistantAlreadyVersioned(), 409, "Assistant is already versioned"],
  [NoPublishedVersion.Wire, new NoPublishedVersion(), 404, "Assistant has no published version"],
  [BranchNotFound.Wire, new BranchNotFound({ branch_name: "feature/x" }), 404, "Branch not found"],
  [BranchAlreadyExists.Wire, new BranchAlreadyExists({ branch_name: "main" }), 409, "Branch already exists"],
  [MainBranchUndeletable.Wire, new MainBranchUndeletable(), 400, "The main branch cannot be deleted"],
  [CommitNotFound.Wire, new CommitNotFound({ commit_id: "0123456789ab" }), 404, "Commit not found"],
  [
    CommitNotInHistory.Wire,
    new CommitNotInHistory({ commit_id: "0123456789ab" }),
    400,
    "Commit is not in the history of this branch"
  ],
  [NothingToPublish.Wire, new NothingToPublish(), 400, "No changes to publish"],
  [
    MergeConflict.Wire,
    new MergeConflict({ paths: ["nodes/a", "tools/t"] }),
    409,
    "Merge conflict on paths: nodes/a, tools/t"
  ],
  [ItemNotFound.Wire, new ItemNotFound({ kind: "nodes", id: "n1" }), 404, "Node not found"],
  [ItemNotFound.Wire, new ItemNotFound({ kind: "tools", id: "t1" }), 404, "Tool not found"],
  [ItemNotFound.Wire, new ItemNotFound({ kind: "variables", id: "v" }), 404, "Variable not found"],
  [BranchNotPublished.Wire, new BranchNotPublished({ branch_name: "b" }), 400, "Branch has no published version"],
  [NoRollout.Wire, new NoRollout(), 404, "No rollout"]
] as const

describe("assistants errors", () => {
  it("encode to exactly {detail} with the texts of A1-A12: no _tag, no data members", () => {
    for (const [wire, error, , text] of cases) {
      const encoded = Schema.encodeUnknownSync(wire as Schema.Codec<unknown, unknown>)(error)
      assert.deepStrictEqual(encoded, { detail: text }, error._tag)
      assert.strictEqual(error.detail, text)
    }
  })

  it("carry their status (httpApiStatus) as the endpoints respond with it", () => {
    for (const [, error, status] of cases) {
      const annotations = (error.constructor as unknown as Schema.Top).ast.annotations as
        | { readonly httpApiStatus?: number }
        | undefined
      assert.strictEqual(annotations?.httpApiStatus, status, error._tag)
    }
  })

  it("decode from the wire into the error of that text, with what the text carries", () => {
    for (const [wire, error, , text] of cases) {
      const decoded = Schema.decodeUnknownSync(wire as Schema.Codec<unknown, unknown>)({ detail: text }) as {
        readonly _tag: string
        readonly detail: string
      }
      assert.strictEqual(decoded._tag, error._tag)
      assert.strictEqual(decoded.detail, text)
    }
    const conflict = Schema.decodeUnknownSync(MergeConflict.Wire)({
      detail: "Merge conflict on paths: nodes/b, nodes/c"
    })
    assert.deepStrictEqual(conflict.paths, ["nodes/b", "nodes/c"])
    assert.strictEqual(Schema.decodeUnknownSync(ItemNotFound.Wire)({ detail: "Tool not found" }).kind, "tools")
    // Another text is not this error: a client tells the 404s of one endpoint apart by their text.
    assert.throws(() => Schema.decodeUnknownSync(BranchNotFound.Wire)({ detail: "Commit not found" }))
  })
})
