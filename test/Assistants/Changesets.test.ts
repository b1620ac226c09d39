/**
 * One schema per value of a draft, whichever route writes it (issue 37 item 3;
 * assistants.md "Drafts", "Config and context"; DECISIONS.md A2, A5, A9, A10,
 * "Errors"): a changeset's `context` and `config` patches, the admin API's
 * snapshot at creation and an item's PATCH accept and refuse what the PUT of
 * that file does, a refused write stores nothing, and what was accepted can be
 * read back (no 500).
 */
import { assert } from "@effect/vitest"
import { Effect } from "effect"
import { SqlClient } from "effect/sql"
import { assistantFixture, llm, tool } from "../support/Assistants.ts"
import { ADMIN_TOKEN, TestApi, withApp } from "../support/TestApp.ts"

const notString = (loc: ReadonlyArray<string>) => ({ loc, msg: "Input should be a valid string", type: "string_type" })

withApp()("changesets and their PUTs", (it) => {
  it.effect(
    "issue 37 item 3 (assistants.md 'Drafts', A10): a changeset's context patch is checked by the PUT's schema: 422 at the member, nothing stored, GET context gets 200",
    () =>
      Effect.gen(function* () {
        const fx = yield* assistantFixture({ snapshot: { context: { assistant_name: "Ada" } } })
        const before = yield* fx.call("GET", fx.draft("main"))
        const put = yield* fx.call("PUT", `${fx.draft("main")}/context`, { assistant_name: 5 })
        assert.deepStrictEqual([put.status, put.body.detail], [422, [notString(["body", "assistant_name"])]])
        const patch = yield* fx.call("PATCH", fx.draft("main"), { context: { assistant_name: 5 } })
        assert.strictEqual(patch.status, 422, patch.text)
        assert.deepStrictEqual(patch.body.detail, [notString(["body", "context", "assistant_name"])])
        // The merge patch is applied first: a member the patch does not name is checked too.
        const description = yield* fx.call("PATCH", fx.draft("main"), { context: { assistant_description: 7 } })
        assert.deepStrictEqual(description.body.detail, [notString(["body", "context", "assistant_description"])])
        // Nothing stored: the draft is as before, and its context is read back.
        assert.deepStrictEqual((yield* fx.call("GET", fx.draft("main"))).body, before.body)
        const context = yield* fx.call("GET", `${fx.draft("main")}/context`)
        assert.deepStrictEqual([context.status, context.body], [200, { assistant_name: "Ada" }])
        // The same member with a value its schema takes, and null removing it (RFC 7396), still pass.
        const renamed = yield* fx.call("PATCH", fx.draft("main"), { context: { assistant_name: "Bea", extra: [1] } })
        assert.strictEqual(renamed.status, 200, renamed.text)
        const removed = yield* fx.call("PATCH", fx.draft("main"), { context: { assistant_name: null } })
        assert.strictEqual(removed.status, 200, removed.text)
        const after = yield* fx.call("GET", `${fx.draft("main")}/context`)
        assert.deepStrictEqual([after.status, after.body], [200, { extra: [1] }])
      })
  )

  it.effect(
    "issue 37 item 3 (assistants.md 'Drafts', A10): a changeset's config patch is checked by the PUT's schema; every problem of the changeset at once, no item stored",
    () =>
      Effect.gen(function* () {
        const fx = yield* assistantFixture()
        const before = yield* fx.call("GET", fx.draft("main"))
        const put = yield* fx.call("PUT", `${fx.draft("main")}/config`, { initial_node_id: 5 })
        assert.deepStrictEqual([put.status, put.body.detail], [422, [notString(["body", "initial_node_id"])]])
        const patch = yield* fx.call("PATCH", fx.draft("main"), {
          context: { assistant_name: 5 },
          config: { initial_node_id: 5 },
          nodes: { upsert: [llm("a")] }
        })
        assert.strictEqual(patch.status, 422, patch.text)
        assert.deepStrictEqual(patch.body.detail, [
          notString(["body", "context", "assistant_name"]),
          notString(["body", "config", "initial_node_id"])
        ])
        assert.deepStrictEqual((yield* fx.call("GET", fx.draft("main"))).body, before.body)
        const config = yield* fx.call("GET", `${fx.draft("main")}/config`)
        assert.deepStrictEqual([config.status, config.body], [200, {}])
        // A valid config still goes through the reference check (A10) after the schema's.
        const dangling = yield* fx.call("PATCH", fx.draft("main"), { config: { initial_node_id: "nope" } })
        assert.strictEqual(dangling.status, 422)
        assert.deepStrictEqual(dangling.body.detail[0].loc, ["body", "config", "initial_node_id"])
        assert.strictEqual(dangling.body.detail[0].type, "reference_error")
        const valid = yield* fx.call("PATCH", fx.draft("main"), {
          config: { initial_node_id: "a" },
          nodes: { upsert: [llm("a")] }
        })
        assert.strictEqual(valid.status, 200, valid.text)
        assert.strictEqual((yield* fx.call("GET", `${fx.draft("main")}/config`)).body.initial_node_id, "a")
      })
  )

  it.effect(
    "issue 37 item 3 (O6, A2): the snapshot of a new assistant is checked as PUT context checks it: 422, no assistant created",
    () =>
      Effect.gen(function* () {
        const api = yield* TestApi
        const sql = yield* SqlClient.SqlClient
        const org = yield* api.organization()
        for (const versioned of [true, false]) {
          const created = yield* api.request("POST", `/admin/v1/organizations/${org.id}/assistants`, {
            token: ADMIN_TOKEN,
            body: { name: "Bot", versioned, snapshot: { context: { assistant_name: 5 } } }
          })
          assert.strictEqual(created.status, 422, created.text)
          assert.deepStrictEqual(created.body.detail, [notString(["body", "snapshot", "context", "assistant_name"])])
          const config = yield* api.request("POST", `/admin/v1/organizations/${org.id}/assistants`, {
            token: ADMIN_TOKEN,
            body: { name: "Bot", versioned, snapshot: { graph: { initial_node_id: 5 } } }
          })
          assert.strictEqual(config.status, 422, config.text)
          assert.deepStrictEqual(config.body.detail, [notString(["body", "snapshot", "graph", "initial_node_id"])])
        }
        const rows = yield* sql<{
          count: number
        }>`SELECT count(*)::int AS count FROM assistants WHERE organization_id = ${org.id}`
        assert.strictEqual(rows[0]!.count, 0)
      })
  )

  it.effect(
    "issue 37 item 3 (A5, A9): a tool's PATCH is checked as its PUT: a name that is no id is 422 and the tool unchanged",
    () =>
      Effect.gen(function* () {
        const fx = yield* assistantFixture()
        const path = `${fx.draft("main")}/tools/lookup`
        const created = yield* fx.call("PUT", path, tool("lookup"))
        assert.strictEqual(created.status, 200, created.text)
        for (const name of ["a/b", ""]) {
          const put = yield* fx.call("PUT", path, tool(name))
          const patch = yield* fx.call("PATCH", path, { name })
          assert.strictEqual(put.status, 422, put.text)
          assert.deepStrictEqual([patch.status, patch.body], [put.status, put.body], name)
        }
        assert.deepStrictEqual((yield* fx.call("GET", path)).body, created.body)
        const renamed = yield* fx.call("PATCH", path, { name: "search" })
        assert.deepStrictEqual([renamed.status, renamed.body.id, renamed.body.name], [200, "lookup", "search"])
      })
  )

  it.effect(
    "issue 37 item 3 (A4, DECISIONS 'Errors'): publish takes no body or an object; a JSON null body is 422 like any other non-object",
    () =>
      Effect.gen(function* () {
        const fx = yield* assistantFixture({ snapshot: { graph: { initial_node_id: "a", nodes: [llm("a")] } } })
        for (const body of ["null", "[]", "5"]) {
          const refused = yield* fx.call("POST", "/branches/main/publish", body)
          assert.strictEqual(refused.status, 422, body)
          assert.deepStrictEqual(refused.body.detail, [
            { loc: ["body"], msg: "Input should be a valid dictionary", type: "dict_type" }
          ])
        }
        assert.deepStrictEqual((yield* fx.call("GET", "/versions")).body.commits, [])
        const published = yield* fx.call("POST", "/branches/main/publish")
        assert.strictEqual(published.status, 200, published.text)
        assert.strictEqual(published.body.commit.message, null)
      })
  )
})
