/**
 * Merge (DECISIONS.md A6), history per branch (A8) and concurrency (A4).
 */
import { assert } from "@effect/vitest"
import { Effect } from "effect"
import { assistantFixture, llm } from "../support/Assistants.ts"
import { withApp } from "../support/TestApp.ts"

/** An assistant whose main has nodes a, b, c published, and a branch `feature` from it. */
const withFeature = Effect.gen(function* () {
  const fx = yield* assistantFixture()
  yield* fx.call("PATCH", fx.draft("main"), { nodes: { upsert: [llm("a"), llm("b"), llm("c")] } })
  const root = yield* fx.publish("main", "root")
  const branch = yield* fx.call("POST", "/branches", { name: "feature" })
  if (branch.status !== 201) throw new Error(branch.text)
  const rename = (branchName: string, id: string, name: string) =>
    fx.call("PATCH", `${fx.draft(branchName)}/nodes/${id}`, { name })
  const merge = (target: string, source: string, commit = true) =>
    fx.call("POST", `/branches/${encodeURIComponent(target)}/merge`, { source_branch_name: source, commit })
  const node = (branchName: string, id: string) => fx.call("GET", `${fx.draft(branchName)}/nodes/${id}`)
  return { ...fx, root, rename, merge, node }
})

withApp()("merge", (it) => {
  it.effect("a clean merge applies the source's changes and records a merge commit with both parents", () =>
    Effect.gen(function* () {
      const fx = yield* withFeature
      yield* fx.rename("feature", "a", "A from feature")
      const featureHead = yield* fx.publish("feature")
      yield* fx.rename("main", "b", "B from main")
      const mainHead = yield* fx.publish("main")
      const merged = yield* fx.merge("main", "feature")
      assert.strictEqual(merged.status, 200, merged.text)
      assert.strictEqual(merged.body.parent_commit_id, mainHead.id)
      assert.strictEqual(merged.body.merge_parent_commit_id, featureHead.id)
      assert.strictEqual((yield* fx.node("main", "a")).body.name, "A from feature")
      assert.strictEqual((yield* fx.node("main", "b")).body.name, "B from main")
      const runtime = yield* fx.call("GET", "/runtime")
      assert.strictEqual(runtime.body.commit_id, merged.body.id)
      // A8: the history of main now includes the feature's commit through the merge parent.
      const history = yield* fx.call("GET", "/versions?branch_name=main")
      assert.deepStrictEqual(
        history.body.commits.map((c: any) => c.id).sort(),
        [merged.body.id, mainHead.id, featureHead.id, fx.root.id].sort()
      )
      const featureHistory = yield* fx.call("GET", "/versions?branch_name=feature")
      assert.deepStrictEqual(
        featureHistory.body.commits.map((c: any) => c.id),
        [featureHead.id, fx.root.id]
      )
    })
  )

  it.effect("modify/modify and modify/delete conflicts get 409 with the sorted paths and change nothing", () =>
    Effect.gen(function* () {
      const fx = yield* withFeature
      yield* fx.rename("feature", "b", "B feature")
      yield* fx.call("DELETE", `${fx.draft("feature")}/nodes/c`)
      yield* fx.publish("feature")
      yield* fx.rename("main", "b", "B main")
      yield* fx.rename("main", "c", "C main")
      const before = yield* fx.call("GET", fx.draft("main"))
      const conflict = yield* fx.merge("main", "feature")
      assert.strictEqual(conflict.status, 409)
      assert.deepStrictEqual(conflict.body, { detail: "Merge conflict on paths: nodes/b, nodes/c" })
      assert.deepStrictEqual((yield* fx.call("GET", fx.draft("main"))).body, before.body)
    })
  )

  it.effect("identical changes on both sides are not conflicts; nothing to merge returns null", () =>
    Effect.gen(function* () {
      const fx = yield* withFeature
      yield* fx.rename("feature", "a", "Same")
      yield* fx.publish("feature")
      yield* fx.rename("main", "a", "Same")
      const merged = yield* fx.merge("main", "feature", false)
      assert.strictEqual(merged.status, 200)
      assert.strictEqual(merged.body, null)
      assert.strictEqual((yield* fx.node("main", "a")).body.name, "Same")
      // A source whose HEAD is already in the target's history: nothing to merge.
      const other = yield* fx.call("POST", "/branches", { name: "other" })
      assert.strictEqual(other.status, 201)
      const nothing = yield* fx.merge("main", "other")
      assert.strictEqual(nothing.status, 200)
      assert.strictEqual(nothing.body, null)
    })
  )

  it.effect("fast-forward: a target without changes of its own moves to the source's HEAD", () =>
    Effect.gen(function* () {
      const fx = yield* withFeature
      yield* fx.rename("feature", "a", "A1")
      yield* fx.publish("feature")
      yield* fx.rename("feature", "b", "B1")
      const featureHead = yield* fx.publish("feature")
      const merged = yield* fx.merge("main", "feature")
      assert.strictEqual(merged.status, 200)
      assert.strictEqual(merged.body.id, featureHead.id)
      const branches = yield* fx.call("GET", "/branches")
      const main = branches.body.find((b: any) => b.name === "main")
      assert.strictEqual(main.head_commit_id, featureHead.id)
      assert.deepStrictEqual((yield* fx.call("GET", "/branches/main/changes")).body, { has_changes: false })
    })
  )

  it.effect("re-merging after a merge uses the merge as base: no false conflict", () =>
    Effect.gen(function* () {
      const fx = yield* withFeature
      yield* fx.rename("feature", "a", "A1")
      yield* fx.publish("feature")
      yield* fx.rename("main", "b", "B1")
      yield* fx.publish("main")
      assert.strictEqual((yield* fx.merge("main", "feature")).status, 200)
      // The feature goes on changing `a`; main changes `c`. `a` was changed on main only by the merge.
      yield* fx.rename("feature", "a", "A2")
      yield* fx.publish("feature")
      yield* fx.rename("main", "c", "C1")
      yield* fx.publish("main")
      const again = yield* fx.merge("main", "feature")
      assert.strictEqual(again.status, 200, again.text)
      assert.strictEqual((yield* fx.node("main", "a")).body.name, "A2")
      assert.strictEqual((yield* fx.node("main", "c")).body.name, "C1")
    })
  )

  it.effect("merging into a branch with unpublished draft changes keeps them; commit false leaves HEAD", () =>
    Effect.gen(function* () {
      const fx = yield* withFeature
      yield* fx.rename("feature", "a", "A feature")
      yield* fx.publish("feature")
      yield* fx.rename("main", "b", "B draft only")
      const headBefore = (yield* fx.call("GET", "/runtime")).body.commit_id
      const merged = yield* fx.merge("main", "feature", false)
      assert.strictEqual(merged.status, 200)
      assert.strictEqual(merged.body, null)
      assert.strictEqual((yield* fx.node("main", "a")).body.name, "A feature")
      assert.strictEqual((yield* fx.node("main", "b")).body.name, "B draft only")
      assert.strictEqual((yield* fx.call("GET", "/runtime")).body.commit_id, headBefore)
      const unknown = yield* fx.merge("main", "ghost")
      assert.strictEqual(unknown.status, 404)
      assert.deepStrictEqual(unknown.body, { detail: "Branch not found" })
    })
  )

  it.effect("20 parallel publishes interleaved with edits give a linear history with no lost edit (A4)", () =>
    Effect.gen(function* () {
      const fx = yield* assistantFixture()
      yield* fx.call("PUT", `${fx.draft("main")}/nodes/seed`, llm("seed"))
      yield* fx.publish("main", "seed")
      const results = yield* Effect.forEach(
        Array.from({ length: 20 }, (_, i) => i),
        (i) =>
          Effect.gen(function* () {
            const edit = yield* fx.call("PUT", `${fx.draft("main")}/nodes/n${i}`, llm(`n${i}`))
            const publish = yield* fx.call("POST", "/branches/main/publish", { message: `p${i}` })
            return [edit.status, publish.status] as const
          }),
        { concurrency: "unbounded" }
      )
      assert.isTrue(results.every(([edit]) => edit === 200))
      // A publish may find its edit already published by another: then "No changes to publish".
      assert.isTrue(results.every(([, publish]) => publish === 200 || publish === 400))
      const draft = yield* fx.call("GET", fx.draft("main"))
      assert.strictEqual(draft.body.graph.nodes.length, 21)
      const runtime = yield* fx.call("GET", "/runtime")
      assert.strictEqual(runtime.body.snapshot.graph.nodes.length, 21)
      const history = (yield* fx.call("GET", "/versions?limit=100")).body.commits
      for (let i = 0; i < history.length - 1; i++) {
        assert.strictEqual(history[i].parent_commit_id, history[i + 1].id)
      }
      assert.strictEqual(history.at(-1).parent_commit_id, null)
      assert.strictEqual(history.length, results.filter(([, publish]) => publish === 200).length + 1)
    })
  )
})
