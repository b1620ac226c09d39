/**
 * The rules of assistant version control (issue 37 item 1): merge
 * (DECISIONS.md A6), publish (A4, A5), rollback (A7), references (A10) and the
 * runtime's snapshot cache (R2), on the production services of the assistants
 * domain over the file's database (test/support/RulesDatabase.ts), on the
 * TestClock; no HTTP. Each test's assistants belong to an organization of their
 * own.
 */
import { assert, describe } from "@effect/vitest"
import { Context, Effect, Layer, Ref } from "effect"
import { Assistants } from "../../src/Assistants/Assistants.ts"
import { AssistantsRepo } from "../../src/Assistants/Repo.ts"
import { newAssistant } from "../support/AssistantFixture.ts"
import { llm, tool } from "../support/AssistantItems.ts"
import { onDatabase } from "../support/RulesDatabase.ts"

/** An assistant whose main has nodes a, b, c published, and a branch `feature` from that commit. */
const withFeature = Effect.gen(function* () {
  const fx = yield* newAssistant()
  yield* fx.changeset("main", { nodes: { upsert: [llm("a"), llm("b"), llm("c")] } })
  const root = yield* fx.publish("main", { message: "root" })
  yield* fx.branch("feature")
  return { ...fx, root }
})

/** How many times commit files were loaded from the repository. */
class CommitLoads extends Context.Service<CommitLoads, Ref.Ref<number>>()("test/Assistants/CommitLoads") {}

/**
 * The domain's services over the PostgreSQL repository with `commitFiles`
 * counted; the ids and the pool are the file's. Fresh: the file's layer built
 * `Assistants.layerNoDeps` already, and a test's `Effect.provide` would reuse
 * that build (layers are memoized), its snapshot cache and uncounted repository
 * included.
 */
const countingDomain = Layer.fresh(
  Assistants.layerNoDeps.pipe(
    Layer.provideMerge(
      Layer.effect(
        AssistantsRepo,
        Effect.gen(function* () {
          const loads = yield* CommitLoads
          const repo = yield* AssistantsRepo
          return AssistantsRepo.of({
            ...repo,
            commitFiles: (organizationId, assistantId, commitId) =>
              Ref.update(loads, (n) => n + 1).pipe(
                Effect.andThen(repo.commitFiles(organizationId, assistantId, commitId))
              )
          })
        })
      ).pipe(Layer.provide(AssistantsRepo.layer))
    ),
    Layer.provideMerge(Layer.effect(CommitLoads, Ref.make(0)))
  )
)

onDatabase()("assistants' rules on PostgreSQL", (it) => {
  describe("merge (A6)", () => {
    it.effect("A6: a target without changes of its own fast-forwards to the source's HEAD", () =>
      Effect.gen(function* () {
        const fx = yield* withFeature
        yield* fx.rename("feature", "a", "A1")
        yield* fx.publish("feature")
        yield* fx.rename("feature", "b", "B1")
        const featureHead = yield* fx.publish("feature")
        const merged = yield* fx.merge("main", "feature")
        assert.deepStrictEqual(merged, featureHead)
        assert.strictEqual(yield* fx.head("main"), featureHead.id)
        const changes = yield* fx.branches.changes(fx.organizationId, fx.id, "main")
        assert.deepStrictEqual(changes, { has_changes: false })
        assert.strictEqual((yield* fx.node("main", "b")).name, "B1")
      })
    )

    it.effect("A6: a fast-forward without commit moves the draft only", () =>
      Effect.gen(function* () {
        const fx = yield* withFeature
        yield* fx.rename("feature", "a", "A1")
        yield* fx.publish("feature")
        assert.isNull(yield* fx.merge("main", "feature", false))
        assert.strictEqual(yield* fx.head("main"), fx.root.id)
        assert.strictEqual((yield* fx.node("main", "a")).name, "A1")
      })
    )

    it.effect("A6: a three-way merge applies the source's changes and records both parents (A8 follows both)", () =>
      Effect.gen(function* () {
        const fx = yield* withFeature
        yield* fx.rename("feature", "a", "A from feature")
        const featureHead = yield* fx.publish("feature")
        yield* fx.rename("main", "b", "B from main")
        const mainHead = yield* fx.publish("main")
        const merged = yield* fx.merge("main", "feature")
        assert.isNotNull(merged)
        assert.strictEqual(merged!.parent_commit_id, mainHead.id)
        assert.strictEqual(merged!.merge_parent_commit_id, featureHead.id)
        assert.strictEqual(merged!.message, "Merge branch 'feature'")
        assert.strictEqual((yield* fx.node("main", "a")).name, "A from feature")
        assert.strictEqual((yield* fx.node("main", "b")).name, "B from main")
        const runtime = yield* fx.assistants.runtime(fx.organizationId, fx.id)
        assert.strictEqual(runtime.commit_id, merged!.id)
        const history = yield* fx.versions.list(fx.organizationId, fx.id, { branch_name: "main" })
        assert.deepStrictEqual(
          history.commits.map((commit) => commit.id),
          [merged!.id, mainHead.id, featureHead.id, fx.root.id]
        )
      })
    )

    it.effect("A6: paths changed on both sides differently are a MergeConflict, sorted, and nothing changes", () =>
      Effect.gen(function* () {
        const fx = yield* withFeature
        yield* fx.rename("feature", "c", "C feature")
        yield* fx.drafts.deleteItem(fx.organizationId, fx.id, "feature", "nodes", "b")
        yield* fx.publish("feature")
        yield* fx.rename("main", "b", "B main")
        yield* fx.rename("main", "c", "C main")
        const before = yield* fx.draft("main")
        const headBefore = yield* fx.head("main")
        const conflict = yield* Effect.flip(fx.merge("main", "feature"))
        assert.strictEqual(conflict._tag, "MergeConflict")
        if (conflict._tag !== "MergeConflict") return
        assert.deepStrictEqual(conflict.paths, ["nodes/b", "nodes/c"])
        assert.strictEqual(conflict.detail, "Merge conflict on paths: nodes/b, nodes/c")
        assert.deepStrictEqual(yield* fx.draft("main"), before)
        assert.strictEqual(yield* fx.head("main"), headBefore)
      })
    )

    it.effect("A6: identical changes on both sides are not conflicts", () =>
      Effect.gen(function* () {
        const fx = yield* withFeature
        yield* fx.rename("feature", "a", "Same")
        yield* fx.publish("feature")
        yield* fx.rename("main", "a", "Same")
        yield* fx.rename("main", "b", "Main only")
        assert.isNull(yield* fx.merge("main", "feature", false))
        assert.strictEqual((yield* fx.node("main", "a")).name, "Same")
        assert.strictEqual((yield* fx.node("main", "b")).name, "Main only")
      })
    )

    it.effect("A6: re-merging the same source takes the previous merge as base: no false conflict", () =>
      Effect.gen(function* () {
        const fx = yield* withFeature
        yield* fx.rename("feature", "a", "A1")
        yield* fx.publish("feature")
        yield* fx.rename("main", "b", "B1")
        yield* fx.publish("main")
        yield* fx.merge("main", "feature")
        // The feature changes `a` again; on main `a` was changed by the merge only.
        yield* fx.rename("feature", "a", "A2")
        yield* fx.publish("feature")
        yield* fx.rename("main", "c", "C1")
        yield* fx.publish("main")
        const again = yield* fx.merge("main", "feature")
        assert.isNotNull(again)
        assert.strictEqual((yield* fx.node("main", "a")).name, "A2")
        assert.strictEqual((yield* fx.node("main", "c")).name, "C1")
      })
    )

    it.effect("A6: nothing to merge returns null: a source never published, or already in the target's history", () =>
      Effect.gen(function* () {
        const fx = yield* newAssistant()
        yield* fx.branch("empty")
        assert.isNull(yield* fx.merge("main", "empty"))
        yield* fx.changeset("main", { nodes: { upsert: [llm("a")] } })
        yield* fx.publish("main")
        yield* fx.branch("behind")
        yield* fx.rename("main", "a", "A1")
        const head = yield* fx.publish("main")
        assert.isNull(yield* fx.merge("main", "behind"))
        assert.strictEqual(yield* fx.head("main"), head.id)
      })
    )

    it.effect("A6, A1: an unknown source branch is BranchNotFound naming it", () =>
      Effect.gen(function* () {
        const fx = yield* withFeature
        const error = yield* Effect.flip(fx.merge("main", "ghost"))
        assert.strictEqual(error._tag, "BranchNotFound")
        if (error._tag !== "BranchNotFound") return
        assert.strictEqual(error.branch_name, "ghost")
        assert.strictEqual(error.detail, "Branch not found")
      })
    )

    it.effect("A6, A10: a merge whose result breaks a reference fails at body.source_branch_name", () =>
      Effect.gen(function* () {
        const fx = yield* withFeature
        // The feature deletes c; main starts pointing at c: each side is valid, the merge is not.
        yield* fx.drafts.deleteItem(fx.organizationId, fx.id, "feature", "nodes", "c")
        yield* fx.publish("feature")
        yield* fx.drafts.patchItem(fx.organizationId, fx.id, "main", "nodes", "a", { config: { next_node: "c" } })
        const error = yield* Effect.flip(fx.merge("main", "feature", false))
        assert.strictEqual(error._tag, "ValidationFailed")
        if (error._tag !== "ValidationFailed") return
        assert.deepStrictEqual(
          error.detail.map((issue) => issue.loc),
          [["body", "source_branch_name"]]
        )
        assert.isDefined((yield* fx.draft("main")).graph.nodes.find((node) => node.id === "c"))
      })
    )
  })

  describe("publish (A4) and rollback (A7)", () => {
    it.effect("A4: the first publish commits; publishing without changes is NothingToPublish; a change commits", () =>
      Effect.gen(function* () {
        const fx = yield* newAssistant()
        const first = yield* fx.publish("main", { message: "first" })
        assert.isNull(first.parent_commit_id)
        assert.strictEqual(first.author_type, "human")
        assert.match(first.id, /^[0-9a-f]{12}$/)
        const unchanged = yield* Effect.flip(fx.publish("main"))
        assert.strictEqual(unchanged._tag, "NothingToPublish")
        assert.strictEqual(unchanged.detail, "No changes to publish")
        yield* fx.changeset("main", { nodes: { upsert: [llm("a")] } })
        const second = yield* fx.publish("main", { message: "second", author_type: "agent", author_id: "bot-1" })
        assert.strictEqual(second.parent_commit_id, first.id)
        assert.strictEqual(second.author_type, "agent")
        assert.strictEqual(second.author_id, "bot-1")
        assert.strictEqual(yield* fx.head("main"), second.id)
      })
    )

    it.effect("A5: two branches at one HEAD publishing the same change in the same millisecond share one commit", () =>
      Effect.gen(function* () {
        const fx = yield* withFeature
        const change = { nodes: { upsert: [llm("d")] } }
        yield* fx.changeset("main", change)
        yield* fx.changeset("feature", change)
        // No clock step between them: the same parent, files, message, author and time give the same id.
        const [onMain, onFeature] = yield* Effect.all(
          ["main", "feature"].map((branch) => fx.branches.publish(fx.organizationId, fx.id, branch, { message: "d" }))
        )
        assert.strictEqual(onMain!.commit.id, onFeature!.commit.id)
        assert.deepStrictEqual(onFeature!.commit, onMain!.commit)
        assert.strictEqual(yield* fx.head("main"), yield* fx.head("feature"))
      })
    )

    it.effect("A4: an edit and its revert before publishing leave nothing to publish", () =>
      Effect.gen(function* () {
        const fx = yield* newAssistant()
        yield* fx.changeset("main", { nodes: { upsert: [llm("a")] } })
        yield* fx.publish("main")
        yield* fx.rename("main", "a", "Changed")
        yield* fx.rename("main", "a", "Node a")
        assert.strictEqual((yield* Effect.flip(fx.publish("main")))._tag, "NothingToPublish")
      })
    )

    it.effect("A4: concurrent edits and publishes on one branch are serialized: none is lost, history is linear", () =>
      Effect.gen(function* () {
        const fx = yield* newAssistant()
        yield* fx.changeset("main", { nodes: { upsert: [llm("seed")] } })
        yield* fx.publish("main")
        const results = yield* Effect.forEach(
          Array.from({ length: 10 }, (_, i) => i),
          (i) =>
            Effect.gen(function* () {
              yield* fx.drafts.putItem(fx.organizationId, fx.id, "main", "nodes", `n${i}`, llm(`n${i}`))
              return yield* Effect.exit(fx.publish("main"))
            }),
          { concurrency: "unbounded" }
        )
        assert.strictEqual((yield* fx.draft("main")).graph.nodes.length, 11)
        const runtime = yield* fx.assistants.runtime(fx.organizationId, fx.id)
        assert.strictEqual(runtime.snapshot.graph.nodes.length, 11)
        const history = (yield* fx.versions.list(fx.organizationId, fx.id, { limit: 100 })).commits
        for (let i = 0; i < history.length - 1; i++)
          assert.strictEqual(history[i]!.parent_commit_id, history[i + 1]!.id)
        assert.strictEqual(history.length, results.filter((exit) => exit._tag === "Success").length + 1)
      })
    )

    it.effect("A7: rollback moves HEAD to an ancestor and resets the draft; others are refused", () =>
      Effect.gen(function* () {
        const fx = yield* newAssistant()
        yield* fx.changeset("main", { nodes: { upsert: [llm("a")] } })
        const c1 = yield* fx.publish("main")
        yield* fx.rename("main", "a", "Two")
        const c2 = yield* fx.publish("main")
        yield* fx.rename("main", "a", "Draft only")
        const rolled = yield* fx.branches.rollback(fx.organizationId, fx.id, "main", { commit_id: c1.id })
        assert.deepStrictEqual(rolled.commit, c1)
        assert.strictEqual(yield* fx.head("main"), c1.id)
        assert.strictEqual((yield* fx.node("main", "a")).name, "Node a")
        assert.deepStrictEqual(yield* fx.branches.changes(fx.organizationId, fx.id, "main"), { has_changes: false })
        // c2 is no ancestor of HEAD any more.
        const notInHistory = yield* Effect.flip(
          fx.branches.rollback(fx.organizationId, fx.id, "main", { commit_id: c2.id })
        )
        assert.strictEqual(notInHistory._tag, "CommitNotInHistory")
        if (notInHistory._tag !== "CommitNotInHistory") return
        assert.strictEqual(notInHistory.commit_id, c2.id)
        assert.strictEqual(notInHistory.detail, "Commit is not in the history of this branch")
        // A1: a commit of another assistant is unknown here.
        const other = yield* newAssistant()
        const foreign = yield* other.publish("main")
        const unknown = yield* Effect.flip(
          fx.branches.rollback(fx.organizationId, fx.id, "main", { commit_id: foreign.id })
        )
        assert.strictEqual(unknown._tag, "CommitNotFound")
        if (unknown._tag !== "CommitNotFound") return
        assert.strictEqual(unknown.commit_id, foreign.id)
      })
    )
  })

  describe("references (A10)", () => {
    it.effect("A10: an edit naming a missing item changes nothing and fails with loc at the offending member", () =>
      Effect.gen(function* () {
        const fx = yield* newAssistant()
        yield* fx.changeset("main", {
          config: { initial_node_id: "a" },
          nodes: { upsert: [llm("a", { next_node: "b" }), llm("b")] },
          tools: { upsert: [tool("t1")] }
        })
        const before = yield* fx.draft("main")
        const dangling = yield* Effect.flip(
          fx.changeset("main", { nodes: { upsert: [llm("c", { next_node: "missing", tools: ["t1", "nope"] })] } })
        )
        assert.strictEqual(dangling._tag, "ValidationFailed")
        if (dangling._tag !== "ValidationFailed") return
        assert.deepStrictEqual(
          dangling.detail.map((issue) => [issue.loc, issue.type]),
          [
            [["body", "nodes", "upsert", 0, "config", "next_node"], "reference_error"],
            [["body", "nodes", "upsert", 0, "config", "tools", 1], "reference_error"]
          ]
        )
        const initial = yield* Effect.flip(fx.changeset("main", { config: { initial_node_id: "zzz" } }))
        assert.deepStrictEqual(initial._tag === "ValidationFailed" && initial.detail[0]!.loc, [
          "body",
          "config",
          "initial_node_id"
        ])
        const deleteReferenced = yield* Effect.flip(fx.changeset("main", { nodes: { delete: ["b"] } }))
        assert.deepStrictEqual(deleteReferenced._tag === "ValidationFailed" && deleteReferenced.detail[0]!.loc, [
          "body",
          "nodes",
          "delete",
          0
        ])
        const put = yield* Effect.flip(
          fx.drafts.putSingleton(fx.organizationId, fx.id, "main", "config", { initial_node_id: "ghost" })
        )
        assert.deepStrictEqual(put._tag === "ValidationFailed" && put.detail[0]!.loc, ["body", "initial_node_id"])
        assert.deepStrictEqual(yield* fx.draft("main"), before)
        // Referrer and referee deleted in one changeset: fine.
        const both = yield* fx.changeset("main", { config: { initial_node_id: null }, nodes: { delete: ["a", "b"] } })
        assert.strictEqual(both.nodes_deleted, 2)
      })
    )

    it.effect("A10: DELETE of a referenced item fails at the path parameter, naming the referrers", () =>
      Effect.gen(function* () {
        const fx = yield* newAssistant()
        yield* fx.changeset("main", {
          config: { initial_node_id: "a" },
          nodes: { upsert: [llm("a", { next_node: "b", tools: ["lookup"] }), llm("b"), llm("c", { next_node: "b" })] },
          tools: { upsert: [tool("lookup")] }
        })
        const node = yield* Effect.flip(fx.drafts.deleteItem(fx.organizationId, fx.id, "main", "nodes", "b"))
        assert.strictEqual(node._tag, "ValidationFailed")
        if (node._tag !== "ValidationFailed") return
        assert.deepStrictEqual(node.detail, [
          { loc: ["path", "node_id"], msg: "Node b is still referenced by: nodes/a, nodes/c", type: "reference_error" }
        ])
        const initial = yield* Effect.flip(fx.drafts.deleteItem(fx.organizationId, fx.id, "main", "nodes", "a"))
        assert.deepStrictEqual(
          initial._tag === "ValidationFailed" && initial.detail[0]!.msg,
          "Node a is still referenced by: config"
        )
        const toolInUse = yield* Effect.flip(fx.drafts.deleteItem(fx.organizationId, fx.id, "main", "tools", "lookup"))
        assert.deepStrictEqual(toolInUse._tag === "ValidationFailed" && toolInUse.detail[0]!.loc, ["path", "tool_id"])
        const missing = yield* Effect.flip(fx.drafts.deleteItem(fx.organizationId, fx.id, "main", "variables", "v"))
        assert.strictEqual(missing._tag, "ItemNotFound")
        assert.strictEqual(missing.detail, "Variable not found")
        // Once nothing refers to it, the item goes.
        yield* fx.changeset("main", { nodes: { upsert: [llm("c")] } })
        yield* fx.drafts.patchItem(fx.organizationId, fx.id, "main", "nodes", "a", { config: { next_node: null } })
        yield* fx.drafts.deleteItem(fx.organizationId, fx.id, "main", "nodes", "b")
        const index = yield* fx.drafts.index(fx.organizationId, fx.id, "main", { prefix: "nodes/" })
        assert.deepStrictEqual(index, ["nodes/a", "nodes/c"])
      })
    )
  })

  describe("runtime (R2, A2)", () => {
    it.effect("A2: no published version before the first publish; concurrent reads load a commit's snapshot once", () =>
      Effect.gen(function* () {
        const fx = yield* newAssistant({ snapshot: { graph: { initial_node_id: "a", nodes: [llm("a")] } } })
        const none = yield* Effect.flip(fx.assistants.runtime(fx.organizationId, fx.id))
        assert.strictEqual(none._tag, "NoPublishedVersion")
        const commit = yield* fx.publish("main")
        const loads = yield* CommitLoads
        const before = yield* Ref.get(loads)
        const runtimes = yield* Effect.forEach(
          Array.from({ length: 8 }, () => fx.assistants.runtime(fx.organizationId, fx.id)),
          (read) => read,
          { concurrency: "unbounded" }
        )
        assert.isTrue(runtimes.every((runtime) => runtime.commit_id === commit.id))
        assert.strictEqual(runtimes[0]!.snapshot.graph.initial_node_id, "a")
        assert.strictEqual((yield* Ref.get(loads)) - before, 1)
      }).pipe(Effect.provide(countingDomain))
    )
  })
})
