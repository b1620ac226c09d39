/**
 * Assistant version control (assistants.md "States and transitions",
 * "Endpoints"; DECISIONS.md A1-A11, O6).
 */
import { assert } from "@effect/vitest"
import { Effect } from "effect"
import { SqlClient } from "effect/sql"
import { contentHash } from "../../src/Assistants/Files.ts"
import { A, assistantFixture, llm, tool } from "../support/Assistants.ts"
import { ISO_UTC } from "../support/Shapes.ts"
import { ADMIN_TOKEN, TestApi, withApp } from "../support/TestApp.ts"

const HEX12 = /^[0-9a-f]{12}$/

withApp()("assistants", (it) => {
  it.effect("admin creates a versioned assistant: main with no HEAD, a draft holding the snapshot (O6, A2)", () =>
    Effect.gen(function* () {
      const fx = yield* assistantFixture({
        description: "Answers questions",
        snapshot: {
          context: { assistant_name: "Ada" },
          graph: { initial_node_id: "start", nodes: [llm("start")] }
        }
      })
      assert.deepStrictEqual(Object.keys(fx.created), [
        "id",
        "organization_id",
        "name",
        "description",
        "versioned",
        "created_at",
        "updated_at"
      ])
      assert.deepStrictEqual([fx.created.description, fx.created.updated_at], ["Answers questions", null])
      assert.strictEqual(fx.created.versioned, true)
      const branches = yield* fx.call("GET", "/branches")
      assert.strictEqual(branches.status, 200)
      assert.strictEqual(branches.body.length, 1)
      assert.strictEqual(branches.body[0].name, "main")
      assert.strictEqual(branches.body[0].head_commit_id, null)
      const draft = yield* fx.call("GET", fx.draft("main"))
      assert.deepStrictEqual(draft.body, {
        context: { assistant_name: "Ada" },
        graph: {
          initial_node_id: "start",
          nodes: [
            { id: "start", name: "Node start", description: "", type: "llm", config: { instructions: "You are start" } }
          ]
        },
        tools: [],
        variables: []
      })
      const runtime = yield* fx.call("GET", "/runtime")
      assert.strictEqual(runtime.status, 404)
      assert.deepStrictEqual(runtime.body, { detail: "Assistant has no published version" })
    })
  )

  it.effect("unknown or foreign assistants give 404; another organization's key cannot read (A1)", () =>
    Effect.gen(function* () {
      const fx = yield* assistantFixture()
      const api = yield* TestApi
      const other = yield* api.organization()
      for (const path of ["/branches", "/runtime", "/versions", "/branches/main/draft"]) {
        const response = yield* api.request("GET", `${A}/assistants/${fx.id}${path}`, { token: other.token })
        assert.strictEqual(response.status, 404, path)
        assert.deepStrictEqual(response.body, { detail: "Assistant not found" })
      }
      const unknown = yield* api.request("GET", `${A}/assistants/01a20254-e46f-73c4-a817-d7a14c37efe6/branches`, {
        token: fx.org.token
      })
      assert.deepStrictEqual(unknown.body, { detail: "Assistant not found" })
      const noBranch = yield* fx.call("GET", "/branches/nope/draft")
      assert.strictEqual(noBranch.status, 404)
      assert.deepStrictEqual(noBranch.body, { detail: "Branch not found" })
      const noKey = yield* api.request("GET", `${A}/assistants/${fx.id}/branches`)
      assert.strictEqual(noKey.status, 401)
    })
  )

  it.effect(
    "list, get, PATCH and DELETE of assistants in the assistants API and the admin API; another organization's 404 (A1, issue 39 item 6)",
    () =>
      Effect.gen(function* () {
        const api = yield* TestApi
        const fx = yield* assistantFixture({ description: "Answers" })
        const other = yield* api.organization()
        const adminCall = (method: string, path: string, body?: unknown, orgId = fx.org.id) =>
          api.request(method, `/admin/v1/organizations/${orgId}/assistants${path}`, {
            token: ADMIN_TOKEN,
            ...(body !== undefined ? { body } : {})
          })
        const keyCall = (method: string, path: string, body?: unknown, token = fx.org.token) =>
          api.request(method, `${A}/assistants${path}`, { token, ...(body !== undefined ? { body } : {}) })
        const second = (yield* adminCall("POST", "", { name: "Legacy", versioned: false })).body
        const third = (yield* adminCall("POST", "", { name: "Third" })).body
        const foreign = (yield* api.request("POST", `/admin/v1/organizations/${other.id}/assistants`, {
          token: ADMIN_TOKEN,
          body: { name: "Theirs" }
        })).body
        // Lists: oldest first, in keyset pages, the organization's only.
        for (const list of [(path: string) => keyCall("GET", path), (path: string) => adminCall("GET", path)]) {
          const all = yield* list("")
          assert.strictEqual(all.status, 200)
          assert.deepStrictEqual(all.body, [fx.created, second, third])
          assert.deepStrictEqual((yield* list("?limit=2")).body, [fx.created, second])
          assert.deepStrictEqual((yield* list(`?limit=2&after_id=${second.id}`)).body, [third])
          assert.deepStrictEqual((yield* list(`?after_id=${third.id}`)).body, [])
          assert.strictEqual((yield* list("?limit=1001")).status, 422)
        }
        assert.deepStrictEqual((yield* keyCall("GET", "", undefined, other.token)).body, [foreign])
        // Get.
        assert.deepStrictEqual((yield* keyCall("GET", `/${fx.id}`)).body, fx.created)
        assert.deepStrictEqual((yield* adminCall("GET", `/${fx.id}`)).body, fx.created)
        // PATCH: name and description; null clears the description; the draft's context stays.
        const renamed = yield* keyCall("PATCH", `/${fx.id}`, { name: "Renamed" })
        assert.strictEqual(renamed.status, 200)
        assert.deepStrictEqual({ ...renamed.body, updated_at: null }, { ...fx.created, name: "Renamed" })
        assert.match(renamed.body.updated_at, ISO_UTC)
        const cleared = yield* adminCall("PATCH", `/${fx.id}`, { description: null })
        assert.deepStrictEqual([cleared.body.name, cleared.body.description], ["Renamed", null])
        assert.deepStrictEqual((yield* keyCall("GET", `/${fx.id}`)).body, cleared.body)
        assert.strictEqual((yield* fx.call("GET", "/branches/main/draft/context")).body.assistant_name, "Support bot")
        assert.strictEqual((yield* keyCall("PATCH", `/${fx.id}`, { name: "" })).status, 422)
        // Another organization's assistant, an unknown id, a malformed one: 404 on every operation, nothing changed.
        for (const id of [foreign.id, "01a20254-e46f-73c4-a817-d7a14c37efe6", "nope"]) {
          for (const [method, body] of [
            ["GET", undefined],
            ["PATCH", { name: "Stolen" }],
            ["DELETE", undefined]
          ] as const) {
            for (const response of [yield* keyCall(method, `/${id}`, body), yield* adminCall(method, `/${id}`, body)]) {
              assert.strictEqual(response.status, 404, `${method} ${id}`)
              assert.deepStrictEqual(response.body, { detail: "Assistant not found" })
            }
          }
        }
        assert.strictEqual((yield* keyCall("GET", `/${foreign.id}`, undefined, other.token)).body.name, "Theirs")
        const unknownOrg = yield* adminCall("GET", "", undefined, "01a20254-e46f-73c4-a817-d7a14c37efe6")
        assert.deepStrictEqual([unknownOrg.status, unknownOrg.body], [404, { detail: "Organization not found" }])
        // DELETE: 409 while an AI agent answers from it; once the agent is deleted, 204 and gone.
        const agent = (yield* api.request("POST", `/admin/v1/organizations/${fx.org.id}/agents`, {
          token: ADMIN_TOKEN,
          body: { name: "Bot", type: "ai", assistant_id: fx.id }
        })).body
        for (const response of [yield* keyCall("DELETE", `/${fx.id}`), yield* adminCall("DELETE", `/${fx.id}`)]) {
          assert.strictEqual(response.status, 409)
          assert.deepStrictEqual(response.body, { detail: "Assistant is in use by an agent" })
        }
        assert.strictEqual((yield* fx.call("GET", "/branches")).status, 200)
        const agentPath = `/admin/v1/organizations/${fx.org.id}/agents/${agent.id}`
        assert.strictEqual((yield* api.request("DELETE", agentPath, { token: ADMIN_TOKEN })).status, 204)
        assert.strictEqual((yield* keyCall("DELETE", `/${fx.id}`)).status, 204)
        assert.strictEqual((yield* keyCall("GET", `/${fx.id}`)).status, 404)
        assert.strictEqual((yield* fx.call("GET", "/branches")).status, 404)
        assert.strictEqual((yield* keyCall("DELETE", `/${fx.id}`)).status, 404)
        assert.strictEqual((yield* adminCall("DELETE", `/${second.id}`)).status, 204)
        assert.deepStrictEqual((yield* keyCall("GET", "")).body, [third])
      })
  )

  it.effect(
    "changeset: merge-patched context and config, upserts referencing each other, counts, publish, runtime",
    () =>
      Effect.gen(function* () {
        const fx = yield* assistantFixture()
        const patch = yield* fx.call("PATCH", fx.draft("main"), {
          context: { assistant_name: "Ada", assistant_description: "Helps" },
          config: { initial_node_id: "a" },
          nodes: { upsert: [llm("a", { next_node: "b", tools: ["lookup"] }), llm("b")] },
          tools: { upsert: [tool("lookup")] },
          variables: { upsert: [{ name: "plan", permission: "read_write", type: "string", default_value: "free" }] }
        })
        assert.strictEqual(patch.status, 200, patch.text)
        assert.deepStrictEqual(patch.body, {
          context_updated: true,
          config_updated: true,
          nodes_upserted: 2,
          nodes_deleted: 0,
          tools_upserted: 1,
          tools_deleted: 0,
          variables_upserted: 1,
          variables_deleted: 0
        })
        // RFC 7396: null removes a key, omitted keys stay.
        yield* fx.call("PATCH", fx.draft("main"), { context: { assistant_description: null } })
        const context = yield* fx.call("GET", `${fx.draft("main")}/context`)
        assert.deepStrictEqual(context.body, { assistant_name: "Ada" })
        const index = yield* fx.call("GET", `${fx.draft("main")}/index`)
        assert.deepStrictEqual(index.body, [
          "config",
          "context",
          "nodes/a",
          "nodes/b",
          "tools/lookup",
          "variables/plan"
        ])
        const nodesOnly = yield* fx.call("GET", `${fx.draft("main")}/index?prefix=nodes/`)
        assert.deepStrictEqual(nodesOnly.body, ["nodes/a", "nodes/b"])
        const prefixed = yield* fx.call("GET", `${fx.draft("main")}?prefix=tools/`)
        assert.deepStrictEqual(
          prefixed.body.tools.map((t: any) => t.id),
          ["lookup"]
        )
        assert.deepStrictEqual(prefixed.body.graph.nodes, [])
        const changes = yield* fx.call("GET", "/branches/main/changes")
        assert.deepStrictEqual(changes.body, { has_changes: true })
        const commit = yield* fx.publish("main", "first")
        assert.match(commit.id, HEX12)
        assert.strictEqual(commit.parent_commit_id, null)
        assert.strictEqual(commit.author_type, "human")
        assert.strictEqual(commit.message, "first")
        assert.deepStrictEqual((yield* fx.call("GET", "/branches/main/changes")).body, { has_changes: false })
        const runtime = yield* fx.call("GET", "/runtime")
        assert.strictEqual(runtime.status, 200)
        assert.strictEqual(runtime.body.assistant_id, fx.id)
        assert.strictEqual(runtime.body.commit_id, commit.id)
        assert.strictEqual(runtime.body.snapshot.graph.initial_node_id, "a")
        assert.deepStrictEqual(
          runtime.body.snapshot.graph.nodes.map((n: any) => n.id),
          ["a", "b"]
        )
        // A4: publishing again without changes.
        const again = yield* fx.call("POST", "/branches/main/publish", {})
        assert.strictEqual(again.status, 400)
        assert.deepStrictEqual(again.body, { detail: "No changes to publish" })
        // Files are content-addressed: hash = SHA-256 of the RFC 8785 canonical JSON (A5).
        const version = yield* fx.call("GET", `/versions/${commit.id}`)
        assert.deepStrictEqual(version.body.commit, commit)
        const toolFile = version.body.files.find((f: any) => f.path === "tools/lookup")
        assert.strictEqual(toolFile.content_hash, contentHash({ ...tool("lookup"), id: "lookup" }))
        assert.strictEqual(toolFile.id, `${commit.id}:tools/lookup`)
      })
  )

  it.effect("identical content is stored once: unchanged files of later commits and branches add no rows (A5)", () =>
    Effect.gen(function* () {
      const fx = yield* assistantFixture()
      const sql = yield* SqlClient.SqlClient
      const count = sql<{ files: number; commitFiles: number }>`SELECT
          (SELECT count(*)::int FROM assistant_files WHERE assistant_id = ${fx.id}) AS files,
          (SELECT count(*)::int FROM assistant_commit_files WHERE assistant_id = ${fx.id}) AS "commitFiles"`
      yield* fx.call("PATCH", fx.draft("main"), { nodes: { upsert: [llm("a"), llm("b"), llm("c")] } })
      yield* fx.publish("main", "one")
      const after1 = (yield* count)[0]!
      assert.strictEqual(after1.files, 4) // context + 3 nodes
      yield* fx.call("PATCH", `${fx.draft("main")}/nodes/a`, { name: "A2" })
      yield* fx.publish("main", "two")
      yield* fx.call("POST", "/branches", { name: "copy" })
      const put = yield* fx.call("PUT", `${fx.draft("copy")}/nodes/d`, llm("d"))
      assert.strictEqual(put.status, 200)
      const after2 = (yield* count)[0]!
      assert.strictEqual(after2.files, 6) // one new version of a, one new node d
      assert.strictEqual(after2.commitFiles, 8) // 4 paths in each of two commits, hashes shared
    })
  )

  it.effect("A10: a dangling reference changes nothing and responds 422 with loc", () =>
    Effect.gen(function* () {
      const fx = yield* assistantFixture()
      yield* fx.call("PATCH", fx.draft("main"), {
        config: { initial_node_id: "a" },
        nodes: { upsert: [llm("a", { next_node: "b" }), llm("b")] },
        tools: { upsert: [tool("t1")] }
      })
      const before = yield* fx.call("GET", fx.draft("main"))
      const dangling = yield* fx.call("PATCH", fx.draft("main"), {
        nodes: { upsert: [llm("c", { next_node: "missing", tools: ["t1", "nope"] })] }
      })
      assert.strictEqual(dangling.status, 422)
      assert.deepStrictEqual(
        dangling.body.detail.map((issue: any) => issue.loc),
        [
          ["body", "nodes", "upsert", 0, "config", "next_node"],
          ["body", "nodes", "upsert", 0, "config", "tools", 1]
        ]
      )
      const badInitial = yield* fx.call("PATCH", fx.draft("main"), { config: { initial_node_id: "zzz" } })
      assert.deepStrictEqual(badInitial.body.detail[0].loc, ["body", "config", "initial_node_id"])
      const deleteReferenced = yield* fx.call("PATCH", fx.draft("main"), { nodes: { delete: ["b"] } })
      assert.strictEqual(deleteReferenced.status, 422)
      assert.deepStrictEqual(deleteReferenced.body.detail[0].loc, ["body", "nodes", "delete", 0])
      const deleteItem = yield* fx.call("DELETE", `${fx.draft("main")}/nodes/b`)
      assert.strictEqual(deleteItem.status, 422)
      assert.deepStrictEqual(deleteItem.body.detail[0].loc, ["path", "node_id"])
      assert.include(deleteItem.body.detail[0].msg, "nodes/a")
      assert.deepStrictEqual((yield* fx.call("GET", fx.draft("main"))).body, before.body)
      // Deleting both referrer and referee in one changeset is fine.
      const both = yield* fx.call("PATCH", fx.draft("main"), {
        config: { initial_node_id: null },
        nodes: { delete: ["a", "b"] }
      })
      assert.strictEqual(both.status, 200, both.text)
      assert.strictEqual(both.body.nodes_deleted, 2)
    })
  )

  it.effect("item operations for nodes, tools, variables, config and context (A9)", () =>
    Effect.gen(function* () {
      const fx = yield* assistantFixture()
      const base = fx.draft("main")
      const put = yield* fx.call("PUT", `${base}/nodes/greet`, { name: "Greet", type: "llm", config: { model: "x" } })
      assert.strictEqual(put.status, 200, put.text)
      assert.deepStrictEqual(put.body, {
        id: "greet",
        name: "Greet",
        description: "",
        type: "llm",
        config: { model: "x" }
      })
      const patched = yield* fx.call("PATCH", `${base}/nodes/greet`, {
        config: { temperature: 0.2 },
        description: "Hi"
      })
      assert.deepStrictEqual(patched.body.config, { model: "x", temperature: 0.2 })
      assert.strictEqual(patched.body.description, "Hi")
      assert.deepStrictEqual((yield* fx.call("GET", `${base}/nodes/greet`)).body, patched.body)
      assert.deepStrictEqual((yield* fx.call("GET", `${base}/nodes`)).body, [patched.body])
      const missing = yield* fx.call("GET", `${base}/nodes/nope`)
      assert.strictEqual(missing.status, 404)
      assert.deepStrictEqual(missing.body, { detail: "Node not found" })
      const wrongId = yield* fx.call("PUT", `${base}/nodes/greet`, { id: "other", name: "X", type: "llm" })
      assert.strictEqual(wrongId.status, 422)
      const badType = yield* fx.call("PATCH", `${base}/nodes/greet`, { type: "robot" })
      assert.strictEqual(badType.status, 422)

      const toolPut = yield* fx.call("PUT", `${base}/tools/search`, tool("search"))
      assert.strictEqual(toolPut.body.id, "search")
      const toolPatch = yield* fx.call("PATCH", `${base}/tools/search`, { should_close: true })
      assert.strictEqual(toolPatch.body.should_close, true)
      assert.strictEqual((yield* fx.call("DELETE", `${base}/tools/search`)).status, 204)
      assert.deepStrictEqual((yield* fx.call("GET", `${base}/tools/search`)).body, { detail: "Tool not found" })

      const variable = yield* fx.call("PUT", `${base}/variables/plan`, { permission: "read_only", type: "string" })
      assert.deepStrictEqual(variable.body, { name: "plan", permission: "read_only", type: "string" })
      assert.strictEqual((yield* fx.call("DELETE", `${base}/variables/plan`)).status, 204)
      assert.strictEqual((yield* fx.call("DELETE", `${base}/variables/plan`)).status, 404)

      const config = yield* fx.call("PUT", `${base}/config`, { initial_node_id: "greet", locale: "en" })
      assert.deepStrictEqual(config.body, { initial_node_id: "greet", locale: "en" })
      const configPatch = yield* fx.call("PATCH", `${base}/config`, { locale: null })
      assert.deepStrictEqual(configPatch.body, { initial_node_id: "greet" })
      const badConfig = yield* fx.call("PUT", `${base}/config`, { initial_node_id: "ghost" })
      assert.strictEqual(badConfig.status, 422)
      assert.deepStrictEqual(badConfig.body.detail[0].loc, ["body", "initial_node_id"])
      const contextPut = yield* fx.call("PUT", `${base}/context`, { assistant_name: "Bot" })
      assert.deepStrictEqual(contextPut.body, { assistant_name: "Bot" })
      assert.deepStrictEqual((yield* fx.call("GET", `${base}/context`)).body, { assistant_name: "Bot" })
      assert.strictEqual((yield* fx.call("DELETE", `${base}/nodes/greet`)).status, 422)
    })
  )

  it.effect("branches: create from main HEAD, fork with unpublished changes, names with '/', delete (A3)", () =>
    Effect.gen(function* () {
      const fx = yield* assistantFixture()
      yield* fx.call("PUT", `${fx.draft("main")}/nodes/a`, llm("a"))
      const first = yield* fx.publish()
      yield* fx.call("PUT", `${fx.draft("main")}/nodes/unpublished`, llm("unpublished"))
      const created = yield* fx.call("POST", "/branches", { name: "feature/greeting" })
      assert.strictEqual(created.status, 201, created.text)
      assert.strictEqual(created.body.head_commit_id, first.id)
      assert.strictEqual(created.body.name, "feature/greeting")
      const draft = yield* fx.call("GET", fx.draft("feature/greeting"))
      assert.deepStrictEqual(
        draft.body.graph.nodes.map((n: any) => n.id),
        ["a"]
      )
      const forked = yield* fx.call("POST", "/branches/main/fork", { name: "experiment" })
      assert.strictEqual(forked.status, 201)
      const forkDraft = yield* fx.call("GET", fx.draft("experiment"))
      assert.deepStrictEqual(
        forkDraft.body.graph.nodes.map((n: any) => n.id),
        ["a", "unpublished"]
      )
      const duplicate = yield* fx.call("POST", "/branches", { name: "experiment" })
      assert.strictEqual(duplicate.status, 409)
      assert.deepStrictEqual(duplicate.body, { detail: "Branch already exists" })
      for (const name of ["/lead", "trail/", "a..b", "sp ace", "x".repeat(101), ""]) {
        const invalid = yield* fx.call("POST", "/branches", { name })
        assert.strictEqual(invalid.status, 422, name)
      }
      const head = yield* fx.call("GET", `/branches/${encodeURIComponent("feature/greeting")}`)
      assert.strictEqual(head.status, 200)
      assert.deepStrictEqual(
        head.body.graph.nodes.map((n: any) => n.id),
        ["a"]
      )
      const list = yield* fx.call("GET", "/branches")
      assert.deepStrictEqual(list.body.map((b: any) => b.name).sort(), ["experiment", "feature/greeting", "main"])
      const mainDelete = yield* fx.call("DELETE", "/branches/main")
      assert.strictEqual(mainDelete.status, 400)
      assert.deepStrictEqual(mainDelete.body, { detail: "The main branch cannot be deleted" })
      assert.strictEqual((yield* fx.call("DELETE", "/branches/experiment")).status, 204)
      assert.strictEqual((yield* fx.call("GET", fx.draft("experiment"))).status, 404)
    })
  )

  it.effect("discard, reset, rollback (A7), diffs between draft and HEAD and between commits", () =>
    Effect.gen(function* () {
      const fx = yield* assistantFixture()
      const base = fx.draft("main")
      yield* fx.call("PUT", `${base}/nodes/a`, llm("a"))
      yield* fx.call("PUT", `${base}/nodes/b`, llm("b"))
      const c1 = yield* fx.publish("main", "one")
      yield* fx.call("PATCH", `${base}/nodes/a`, { name: "Renamed" })
      yield* fx.call("DELETE", `${base}/nodes/b`)
      yield* fx.call("PUT", `${base}/nodes/c`, llm("c"))
      const diff = yield* fx.call("GET", "/branches/main/diff")
      assert.deepStrictEqual(
        diff.body.diffs.map((d: any) => [d.path, d.status]),
        [
          ["nodes/a", "modified"],
          ["nodes/b", "removed"],
          ["nodes/c", "added"]
        ]
      )
      assert.deepStrictEqual(diff.body.diffs[0].changes, { name: { old: "Node a", new: "Renamed" } })
      assert.strictEqual(diff.body.diffs[1].new_content, null)
      assert.strictEqual(diff.body.diffs[2].old_content, null)
      assert.strictEqual((yield* fx.call("POST", `${base}/discard`, { path: "nodes/b" })).status, 204)
      assert.strictEqual((yield* fx.call("POST", `${base}/discard`, { path: "nodes/c" })).status, 204)
      assert.deepStrictEqual(
        (yield* fx.call("GET", "/branches/main/diff")).body.diffs.map((d: any) => d.path),
        ["nodes/a"]
      )
      const c2 = yield* fx.publish("main", "two")
      assert.strictEqual(c2.parent_commit_id, c1.id)
      const versions = yield* fx.call("GET", "/versions")
      assert.deepStrictEqual(
        versions.body.commits.map((c: any) => c.id),
        [c2.id, c1.id]
      )
      const paged = yield* fx.call("GET", "/versions?limit=1&offset=1")
      assert.deepStrictEqual(
        paged.body.commits.map((c: any) => c.id),
        [c1.id]
      )
      const between = yield* fx.call("GET", `/versions/diff?commit_a=${c1.id}&commit_b=${c2.id}`)
      assert.deepStrictEqual(
        between.body.diffs.map((d: any) => [d.path, d.status]),
        [["nodes/a", "modified"]]
      )
      const unknownCommit = yield* fx.call("GET", `/versions/diff?commit_a=${c1.id}&commit_b=000000000000`)
      assert.strictEqual(unknownCommit.status, 404)
      assert.deepStrictEqual(unknownCommit.body, { detail: "Commit not found" })
      // reset: the draft equals the commit; HEAD stays.
      assert.strictEqual((yield* fx.call("POST", `${base}/reset`, { commit_id: c1.id })).status, 204)
      assert.strictEqual((yield* fx.call("GET", `${base}/nodes/a`)).body.name, "Node a")
      assert.deepStrictEqual((yield* fx.call("GET", "/branches/main/changes")).body, { has_changes: true })
      // rollback: HEAD moves back, draft reset.
      const rolled = yield* fx.call("POST", "/branches/main/rollback", { commit_id: c1.id })
      assert.strictEqual(rolled.status, 200)
      assert.strictEqual(rolled.body.commit.id, c1.id)
      assert.strictEqual((yield* fx.call("GET", "/runtime")).body.commit_id, c1.id)
      assert.deepStrictEqual((yield* fx.call("GET", "/branches/main/changes")).body, { has_changes: false })
      // A7: a commit that is not an ancestor of HEAD (c2 after the rollback) is refused.
      const notInHistory = yield* fx.call("POST", "/branches/main/rollback", { commit_id: c2.id })
      assert.strictEqual(notInHistory.status, 400)
      assert.deepStrictEqual(notInHistory.body, { detail: "Commit is not in the history of this branch" })
    })
  )

  it.effect("legacy assistants: 409 on version operations, runtime from the snapshot, migrate once (A1, A11)", () =>
    Effect.gen(function* () {
      const fx = yield* assistantFixture({
        versioned: false,
        snapshot: { context: { assistant_name: "Old" }, graph: { initial_node_id: "n", nodes: [llm("n")] } }
      })
      assert.strictEqual(fx.created.versioned, false)
      const branches = yield* fx.call("GET", "/branches")
      assert.strictEqual(branches.status, 409)
      assert.deepStrictEqual(branches.body, { detail: "Assistant is not versioned" })
      const legacyRuntime = yield* fx.call("GET", "/runtime")
      assert.strictEqual(legacyRuntime.body.commit_id, null)
      assert.strictEqual(legacyRuntime.body.snapshot.graph.initial_node_id, "n")
      const migrated = yield* fx.call("POST", "/migrate")
      assert.strictEqual(migrated.status, 200, migrated.text)
      assert.strictEqual(migrated.body.assistant_id, fx.id)
      assert.strictEqual(migrated.body.branch.name, "main")
      assert.strictEqual(migrated.body.branch.head_commit_id, migrated.body.commit.id)
      assert.strictEqual(migrated.body.commit.author_type, "system")
      const runtime = yield* fx.call("GET", "/runtime")
      assert.strictEqual(runtime.body.commit_id, migrated.body.commit.id)
      assert.deepStrictEqual(runtime.body.snapshot.context, { assistant_name: "Old" })
      const again = yield* fx.call("POST", "/migrate")
      assert.strictEqual(again.status, 409)
      assert.deepStrictEqual(again.body, { detail: "Assistant is already versioned" })
    })
  )

  it.effect("admin assistant creation validates the snapshot and the organization", () =>
    Effect.gen(function* () {
      const api = yield* TestApi
      const org = yield* api.organization()
      const invalid = yield* api.request("POST", `/admin/v1/organizations/${org.id}/assistants`, {
        token: ADMIN_TOKEN,
        body: { name: "X", snapshot: { graph: { initial_node_id: "missing", nodes: [] } } }
      })
      assert.strictEqual(invalid.status, 422)
      const unknownOrg = yield* api.request(
        "POST",
        "/admin/v1/organizations/01a20254-e46f-73c4-a817-d7a14c37efe6/assistants",
        {
          token: ADMIN_TOKEN,
          body: { name: "X" }
        }
      )
      assert.strictEqual(unknownOrg.status, 404)
      assert.deepStrictEqual(unknownOrg.body, { detail: "Organization not found" })
    })
  )

  it.effect("A2: a new assistant without a snapshot drafts its context from its name and description", () =>
    Effect.gen(function* () {
      const fx = yield* assistantFixture({ description: "Answers questions" })
      const context = yield* fx.call("GET", `${fx.draft("main")}/context`)
      assert.deepStrictEqual(context.body, {
        assistant_name: "Support bot",
        assistant_description: "Answers questions"
      })
      // A later changeset's merge patch keeps what it does not name.
      const changed = yield* fx.call("PATCH", fx.draft("main"), { context: { assistant_description: "Books rooms" } })
      assert.strictEqual(changed.status, 200)
      const after = yield* fx.call("GET", fx.draft("main"))
      assert.deepStrictEqual(after.body.context, {
        assistant_name: "Support bot",
        assistant_description: "Books rooms"
      })
    })
  )

  it.effect('spec Node table: PUT of a node without config stores config {} (and description "")', () =>
    Effect.gen(function* () {
      const fx = yield* assistantFixture()
      const put = yield* fx.call("PUT", `${fx.draft("main")}/nodes/plain`, { name: "Plain", type: "router" })
      assert.strictEqual(put.status, 200, put.text)
      assert.deepStrictEqual(put.body, { id: "plain", name: "Plain", description: "", type: "router", config: {} })
      // RFC 7396: a PATCH removing config leaves the default.
      const patched = yield* fx.call("PATCH", `${fx.draft("main")}/nodes/plain`, { config: null })
      assert.strictEqual(patched.status, 200, patched.text)
      assert.deepStrictEqual(patched.body.config, {})
    })
  )

  it.effect("A5: discard of a path that is not a file path is 422 at body.path; a valid unknown path is 204", () =>
    Effect.gen(function* () {
      const fx = yield* assistantFixture()
      for (const path of ["nodes/", "nodes/a/b", "graph", "nodes", "tools/x/", ""]) {
        const bad = yield* fx.call("POST", `${fx.draft("main")}/discard`, { path })
        assert.strictEqual(bad.status, 422, path)
        assert.deepStrictEqual(
          (bad.body.detail as Array<{ loc: Array<string> }>).map((d) => d.loc),
          [["body", "path"]],
          path
        )
      }
      for (const path of ["nodes/never", "variables/v", "config", "context"]) {
        const ok = yield* fx.call("POST", `${fx.draft("main")}/discard`, { path })
        assert.strictEqual(ok.status, 204, `${path}: ${ok.text}`)
      }
    })
  )

  it.effect("diff entries name members like toString and __proto__ as any other key (A5, spec Diff entry)", () =>
    Effect.gen(function* () {
      const fx = yield* assistantFixture()
      yield* fx.call("PUT", `${fx.draft("main")}/config`, { mode: "strict" })
      yield* fx.publish()
      const put = yield* fx.call("PUT", `${fx.draft("main")}/config`, JSON.stringify({ toString: 1, ["__proto__"]: 2 }))
      assert.strictEqual(put.status, 200, put.text)
      const diff = yield* fx.call("GET", "/branches/main/diff")
      assert.strictEqual(diff.status, 200, diff.text)
      const config = diff.body.diffs.find((entry: { path: string }) => entry.path === "config")
      assert.deepStrictEqual(JSON.parse(JSON.stringify(config.changes)), {
        mode: { old: "strict", new: null },
        toString: { old: null, new: 1 },
        ["__proto__"]: { old: null, new: 2 }
      })
    })
  )
})
