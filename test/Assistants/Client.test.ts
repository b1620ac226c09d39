/**
 * A typed client of the contract (`HttpApiClient.make(ParleyApi)`) against the
 * test app: each assistants endpoint declares its own failures, so the client
 * tells a missing branch from a merge conflict by their decoded errors (issue 13
 * item 5; DECISIONS.md A1, A6), while the wire stays `{detail}`.
 */
import { assert } from "@effect/vitest"
import { Effect } from "effect"
import { FetchHttpClient, HttpClient, HttpClientRequest } from "effect/http"
import { HttpApiClient } from "effect/http-api"
import { ParleyApi } from "../../src/Api.ts"
import { assistantFixture, llm } from "../support/Assistants.ts"
import { withApp } from "../support/TestApp.ts"

withApp()("typed client", (it) => {
  it.effect("A1, A6: BranchNotFound, MergeConflict {paths} and CommitNotFound decode as themselves", () =>
    Effect.gen(function* () {
      const fx = yield* assistantFixture()
      const client = yield* HttpApiClient.make(ParleyApi, {
        baseUrl: fx.api.baseUrl,
        transformClient: HttpClient.mapRequest(HttpClientRequest.bearerToken(fx.org.token))
      })
      const path = { assistant_id: fx.id, branch_name: "main" }
      yield* client.assistants.applyChangeset({ params: path, payload: { nodes: { upsert: [llm("a"), llm("b")] } } })
      yield* client.assistants.publish({ params: path, payload: { message: "root" } })
      yield* client.assistants.createBranch({ params: { assistant_id: fx.id }, payload: { name: "feature" } })
      const feature = { assistant_id: fx.id, branch_name: "feature" }
      yield* client.assistants.patch_nodes({ params: { ...feature, node_id: "a" }, payload: { name: "A feature" } })
      yield* client.assistants.patch_nodes({ params: { ...feature, node_id: "b" }, payload: { name: "B feature" } })
      yield* client.assistants.publish({ params: feature, payload: {} })
      yield* client.assistants.patch_nodes({ params: { ...path, node_id: "b" }, payload: { name: "B main" } })
      yield* client.assistants.patch_nodes({ params: { ...path, node_id: "a" }, payload: { name: "A main" } })

      const missing = yield* Effect.flip(
        client.assistants.merge({ params: path, payload: { source_branch_name: "ghost", commit: true } })
      )
      assert.strictEqual(missing._tag, "BranchNotFound")
      const conflict = yield* Effect.flip(
        client.assistants.merge({ params: path, payload: { source_branch_name: "feature", commit: true } })
      )
      assert.strictEqual(conflict._tag, "MergeConflict")
      assert.deepStrictEqual(conflict._tag === "MergeConflict" && conflict.paths, ["nodes/a", "nodes/b"])
      const commit = yield* Effect.flip(
        client.assistants.getVersion({ params: { assistant_id: fx.id, commit_id: "000000000000" } })
      )
      assert.strictEqual(commit._tag, "CommitNotFound")
    }).pipe(Effect.provide(FetchHttpClient.layer))
  )

  it.effect("A12-A14: rollouts, runtime settings and statistics through the client, with their decoded errors", () =>
    Effect.gen(function* () {
      const fx = yield* assistantFixture({ snapshot: { graph: { initial_node_id: "a", nodes: [llm("a")] } } })
      const client = yield* HttpApiClient.make(ParleyApi, {
        baseUrl: fx.api.baseUrl,
        transformClient: HttpClient.mapRequest(HttpClientRequest.bearerToken(fx.org.token))
      })
      const params = { assistant_id: fx.id }
      assert.strictEqual((yield* Effect.flip(client.assistants.getRollout({ params })))._tag, "NoRollout")
      const unpublished = yield* Effect.flip(
        client.assistants.putRollout({ params, payload: { branch_name: "main", percent: 10 } })
      )
      assert.strictEqual(unpublished._tag, "BranchNotPublished")
      const commit = yield* fx.publish()
      const rollout = yield* client.assistants.putRollout({ params, payload: { branch_name: "main", percent: 10 } })
      assert.deepStrictEqual([rollout.branch_name, rollout.percent, rollout.head_commit_id], ["main", 10, commit.id])
      assert.deepStrictEqual(yield* client.assistants.getRollout({ params }), rollout)
      yield* client.assistants.deleteRollout({ params })
      const pinned = yield* client.assistants.putRuntimeSettings({ params, payload: { session_pinning: "session" } })
      assert.deepStrictEqual(pinned, { session_pinning: "session" })
      assert.deepStrictEqual(yield* client.assistants.runStats({ params, query: {} }), { commits: [] })
    }).pipe(Effect.provide(FetchHttpClient.layer))
  )
})
