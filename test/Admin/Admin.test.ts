/**
 * The admin API and API keys (DECISIONS.md O6, "Errors" 401).
 */
import { assert } from "@effect/vitest"
import { Effect } from "effect"
import { SqlClient } from "effect/sql"
import { assertAgent, ISO_UTC } from "../support/Shapes.ts"
import { ADMIN_TOKEN, C, TestApi, withApp } from "../support/TestApp.ts"

withApp()("admin API", (it) => {
  const admin = (method: string, path: string, body?: unknown, token = ADMIN_TOKEN) =>
    Effect.gen(function* () {
      const api = yield* TestApi
      return yield* api.request(method, `/admin/v1${path}`, { token, ...(body !== undefined ? { body } : {}) })
    })

  it.effect("organizations: create 201, get 200, unknown 404 Organization not found", () =>
    Effect.gen(function* () {
      const created = yield* admin("POST", "/organizations", { name: "Acme" })
      assert.strictEqual(created.status, 201)
      assert.deepStrictEqual(Object.keys(created.body), ["id", "name", "created_at"])
      assert.match(created.body.created_at, ISO_UTC)
      const found = yield* admin("GET", `/organizations/${created.body.id}`)
      assert.deepStrictEqual(found.body, created.body)
      for (const id of ["01a20254-e46f-73c4-a817-d7a14c37efe6", "nope"]) {
        const missing = yield* admin("GET", `/organizations/${id}`)
        assert.strictEqual(missing.status, 404)
        assert.deepStrictEqual(missing.body, { detail: "Organization not found" })
      }
      const invalid = yield* admin("POST", "/organizations", { name: "" })
      assert.strictEqual(invalid.status, 422)
    })
  )

  it.effect("the admin API refuses a wrong or missing admin token with 401", () =>
    Effect.gen(function* () {
      const api = yield* TestApi
      const org = yield* api.organization()
      for (const token of [undefined, "wrong", org.token, `${ADMIN_TOKEN}x`]) {
        const response = yield* api.request("POST", "/admin/v1/organizations", {
          ...(token !== undefined ? { token } : {}),
          body: { name: "x" }
        })
        assert.strictEqual(response.status, 401)
        assert.deepStrictEqual(response.body, { detail: "Invalid or expired token" })
        assert.strictEqual(response.headers.get("www-authenticate"), "Bearer")
      }
    })
  )

  it.effect("API keys: random tokens shown once, stored as SHA-256, revocable at once", () =>
    Effect.gen(function* () {
      const api = yield* TestApi
      const sql = yield* SqlClient.SqlClient
      const org = (yield* admin("POST", "/organizations", { name: "Keys" })).body
      const key = yield* admin("POST", `/organizations/${org.id}/api-keys`, { name: "ci" })
      assert.strictEqual(key.status, 201)
      assert.deepStrictEqual(Object.keys(key.body), ["id", "name", "token", "created_at", "expires_at"])
      assert.strictEqual(key.body.expires_at, null)
      const token: string = key.body.token
      // >= 32 random bytes in base64url after the prefix.
      assert.isAtLeast(Buffer.from(token.replace(/^prl_/, ""), "base64url").length, 32)
      const other = yield* admin("POST", `/organizations/${org.id}/api-keys`, {})
      assert.notStrictEqual(other.body.token, token)
      const stored = yield* sql<{
        hex: string
      }>`SELECT encode(token_hash, 'hex') AS hex FROM api_keys WHERE id = ${key.body.id}`
      const { createHash } = yield* Effect.promise(() => import("node:crypto"))
      assert.strictEqual(stored[0]!.hex, createHash("sha256").update(token).digest("hex"))
      const dump = yield* sql<{
        row: string
      }>`SELECT row_to_json(k)::text AS row FROM api_keys k WHERE organization_id = ${org.id}`
      assert.isFalse(dump.some((row) => row.row.includes(token)))
      // The key works, then stops working at once when revoked.
      const before = yield* api.request("POST", `${C}/sessions/search`, { token, body: {} })
      assert.strictEqual(before.status, 200)
      const revoked = yield* admin("DELETE", `/organizations/${org.id}/api-keys/${key.body.id}`)
      assert.strictEqual(revoked.status, 204)
      const after = yield* api.request("POST", `${C}/sessions/search`, { token, body: {} })
      assert.strictEqual(after.status, 401)
      assert.deepStrictEqual(after.body, { detail: "Invalid or expired token" })
      assert.strictEqual(
        (yield* api.request("POST", `${C}/sessions/search`, { token: other.body.token, body: {} })).status,
        200
      )
      const unknown = yield* admin("DELETE", `/organizations/${org.id}/api-keys/01a20254-e46f-73c4-a817-d7a14c37efe6`)
      assert.strictEqual(unknown.status, 404)
      assert.deepStrictEqual(unknown.body, { detail: "API key not found" })
      // A key of another organization is not found through this one.
      const elsewhere = (yield* admin("POST", "/organizations", { name: "Else" })).body
      const foreign = yield* admin("DELETE", `/organizations/${elsewhere.id}/api-keys/${other.body.id}`)
      assert.strictEqual(foreign.status, 404)
    })
  )

  it.effect("API keys with an expiry stop working when it passes", () =>
    Effect.gen(function* () {
      const api = yield* TestApi
      const org = (yield* admin("POST", "/organizations", { name: "Expiry" })).body
      const past = yield* admin("POST", `/organizations/${org.id}/api-keys`, { expires_at: "2020-01-01T00:00:00Z" })
      assert.strictEqual(past.body.expires_at, "2020-01-01T00:00:00.000000Z")
      assert.strictEqual(
        (yield* api.request("POST", `${C}/sessions/search`, { token: past.body.token, body: {} })).status,
        401
      )
      const soon = new Date(Date.now() + 1500).toISOString()
      const short = yield* admin("POST", `/organizations/${org.id}/api-keys`, { expires_at: soon })
      assert.strictEqual(
        (yield* api.request("POST", `${C}/sessions/search`, { token: short.body.token, body: {} })).status,
        200
      )
      yield* Effect.sleep("2 seconds")
      assert.strictEqual(
        (yield* api.request("POST", `${C}/sessions/search`, { token: short.body.token, body: {} })).status,
        401
      )
      const bad = yield* admin("POST", `/organizations/${org.id}/api-keys`, { expires_at: "tomorrow" })
      assert.strictEqual(bad.status, 422)
      assert.deepStrictEqual(bad.body.detail[0].loc, ["body", "expires_at"])
    })
  )

  it.effect("agents: create ai and human with the spec's shape, list them; the type's id is required", () =>
    Effect.gen(function* () {
      const org = (yield* admin("POST", "/organizations", { name: "Agents" })).body
      const ai = yield* admin("POST", `/organizations/${org.id}/agents`, {
        name: "Bot",
        type: "ai",
        assistant_id: "asst_1"
      })
      assert.strictEqual(ai.status, 201)
      assertAgent(ai.body)
      assert.strictEqual(ai.body.assistant_id, "asst_1")
      assert.isFalse("profile_id" in ai.body)
      const human = yield* admin("POST", `/organizations/${org.id}/agents`, {
        name: "Operator",
        type: "human",
        profile_id: "user_7"
      })
      assertAgent(human.body)
      assert.isFalse("assistant_id" in human.body)
      const list = yield* admin("GET", `/organizations/${org.id}/agents`)
      assert.deepStrictEqual(list.body, [ai.body, human.body])
      const missing = yield* admin("POST", `/organizations/${org.id}/agents`, { name: "X", type: "ai" })
      assert.strictEqual(missing.status, 422)
      assert.deepStrictEqual(missing.body.detail, [
        { loc: ["body", "assistant_id"], msg: "Field required", type: "missing" }
      ])
      const badType = yield* admin("POST", `/organizations/${org.id}/agents`, { name: "X", type: "robot" })
      assert.strictEqual(badType.status, 422)
      const unknownOrg = yield* admin("GET", "/organizations/01a20254-e46f-73c4-a817-d7a14c37efe6/agents")
      assert.deepStrictEqual(unknownOrg.body, { detail: "Organization not found" })
    })
  )

  it.effect("organizations: GET /organizations lists them oldest first in keyset pages (issue 39 item 6)", () =>
    Effect.gen(function* () {
      const made: Array<{ id: string }> = []
      for (const name of ["List 1", "List 2", "List 3"])
        made.push((yield* admin("POST", "/organizations", { name })).body)
      // Pages of 2 from the first of ours to the end: ours follow in creation order, each once.
      const ids: Array<string> = []
      let after = made[0]!.id
      for (;;) {
        const page = yield* admin("GET", `/organizations?limit=2&after_id=${after}`)
        assert.strictEqual(page.status, 200)
        assert.isAtMost(page.body.length, 2)
        if (page.body.length === 0) break
        for (const each of page.body) assert.deepStrictEqual(Object.keys(each), ["id", "name", "created_at"])
        ids.push(...page.body.map((o: { id: string }) => o.id))
        after = page.body.at(-1).id
      }
      assert.deepStrictEqual(
        ids.filter((id) => made.some((o) => o.id === id)),
        [made[1]!.id, made[2]!.id]
      )
      assert.deepStrictEqual(new Set(ids).size, ids.length)
      const found = (yield* admin("GET", `/organizations/${made[1]!.id}`)).body
      assert.deepStrictEqual((yield* admin("GET", `/organizations?limit=1&after_id=${made[0]!.id}`)).body, [found])
      assert.strictEqual((yield* admin("GET", "/organizations?limit=0")).status, 422)
      assert.strictEqual((yield* admin("GET", "/organizations?limit=1001")).status, 422)
      assert.deepStrictEqual((yield* admin("GET", "/organizations?after_id=nope")).body, [])
      // Admin only: an organization's API key gets 401.
      const api = yield* TestApi
      const org = yield* api.organization()
      assert.strictEqual((yield* api.request("GET", "/admin/v1/organizations", { token: org.token })).status, 401)
    })
  )

  it.effect("API keys: the list shows each key's last 4 characters and never its token (issue 39 item 6)", () =>
    Effect.gen(function* () {
      const org = (yield* admin("POST", "/organizations", { name: "Key list" })).body
      const ci = (yield* admin("POST", `/organizations/${org.id}/api-keys`, { name: "ci" })).body
      const expiring = (yield* admin("POST", `/organizations/${org.id}/api-keys`, {
        expires_at: "2100-01-01T00:00:00Z"
      })).body
      yield* admin("DELETE", `/organizations/${org.id}/api-keys/${ci.id}`)
      const list = yield* admin("GET", `/organizations/${org.id}/api-keys`)
      assert.strictEqual(list.status, 200)
      assert.strictEqual(list.body.length, 2)
      for (const [listed, created] of [
        [list.body[0], ci],
        [list.body[1], expiring]
      ]) {
        assert.deepStrictEqual(Object.keys(listed), [
          "id",
          "name",
          "token_last4",
          "created_at",
          "expires_at",
          "revoked_at"
        ])
        assert.strictEqual(listed.id, created.id)
        assert.strictEqual(listed.token_last4, created.token.slice(-4))
        assert.strictEqual(listed.created_at, created.created_at)
        assert.strictEqual(listed.expires_at, created.expires_at)
        // No token, nor any longer part of it than its last 4 characters.
        assert.notInclude(list.text, created.token.slice(-5))
      }
      assert.strictEqual(list.body[0].name, "ci")
      assert.match(list.body[0].revoked_at, ISO_UTC)
      assert.strictEqual(list.body[1].revoked_at, null)
      assert.strictEqual(list.body[1].expires_at, "2100-01-01T00:00:00.000000Z")
      // Another organization's keys are not in this list; an unknown organization is 404.
      const other = (yield* admin("POST", "/organizations", { name: "Other keys" })).body
      assert.deepStrictEqual((yield* admin("GET", `/organizations/${other.id}/api-keys`)).body, [])
      const unknown = yield* admin("GET", "/organizations/01a20254-e46f-73c4-a817-d7a14c37efe6/api-keys")
      assert.strictEqual(unknown.status, 404)
      assert.deepStrictEqual(unknown.body, { detail: "Organization not found" })
    })
  )

  it.effect("agents: GET and PATCH one; unknown, deleted or another organization's 404; the type never changes", () =>
    Effect.gen(function* () {
      const api = yield* TestApi
      const org = yield* api.organization()
      const other = yield* api.organization()
      const aiId = yield* org.agent("ai", "Bot")
      const humanId = yield* org.agent("human", "Ada")
      const path = (id: string, orgId = org.id) => `/organizations/${orgId}/agents/${id}`
      const ai = yield* admin("GET", path(aiId))
      assert.strictEqual(ai.status, 200)
      assertAgent(ai.body)
      assert.deepStrictEqual(
        [ai.body.id, ai.body.name, ai.body.type, ai.body.assistant_id],
        [aiId, "Bot", "ai", "asst_test"]
      )
      const renamed = yield* admin("PATCH", path(aiId), { name: "Bot 2", assistant_id: "asst_2" })
      assert.strictEqual(renamed.status, 200)
      assert.deepStrictEqual(renamed.body, { ...ai.body, name: "Bot 2", assistant_id: "asst_2" })
      assert.deepStrictEqual((yield* admin("GET", path(aiId))).body, renamed.body)
      // A session embeds the agent as it is now.
      const session = yield* org.session({ agent_id: aiId })
      assert.strictEqual(session.agent.name, "Bot 2")
      const human = yield* admin("PATCH", path(humanId), { profile_id: "user_9" })
      assert.deepStrictEqual([human.body.type, human.body.profile_id, human.body.name], ["human", "user_9", "Ada"])
      const wrongMember = yield* admin("PATCH", path(humanId), { assistant_id: "asst_1" })
      assert.strictEqual(wrongMember.status, 422)
      assert.deepStrictEqual(wrongMember.body.detail[0].loc, ["body", "assistant_id"])
      const wrongMemberAi = yield* admin("PATCH", path(aiId), { profile_id: "user_1" })
      assert.strictEqual(wrongMemberAi.status, 422)
      assert.deepStrictEqual(wrongMemberAi.body.detail[0].loc, ["body", "profile_id"])
      assert.strictEqual((yield* admin("PATCH", path(aiId), { name: "" })).status, 422)
      assert.strictEqual((yield* admin("GET", path(aiId))).body.name, "Bot 2")
      // Another organization's agent, an unknown id and a malformed one: 404 on every operation.
      for (const [orgId, id] of [
        [other.id, aiId],
        [org.id, "01a20254-e46f-73c4-a817-d7a14c37efe6"],
        [org.id, "nope"]
      ] as const) {
        for (const [method, body] of [
          ["GET", undefined],
          ["PATCH", { name: "Stolen" }],
          ["DELETE", undefined]
        ] as const) {
          const response = yield* admin(method, path(id, orgId), body)
          assert.strictEqual(response.status, 404, `${method} ${orgId} ${id}`)
          assert.deepStrictEqual(response.body, { detail: "Agent not found" })
        }
      }
      assert.strictEqual((yield* admin("GET", path(aiId))).body.name, "Bot 2")
      const unknownOrg = yield* admin("GET", path(aiId, "01a20254-e46f-73c4-a817-d7a14c37efe6"))
      assert.deepStrictEqual([unknownOrg.status, unknownOrg.body], [404, { detail: "Organization not found" }])
    })
  )

  it.effect(
    "agents: DELETE is 409 Agent is in use while an open session has it; after, its sessions keep it, nothing can assign it (issue 39 item 6, D6)",
    () =>
      Effect.gen(function* () {
        const api = yield* TestApi
        const org = yield* api.organization()
        const agentId = yield* org.agent("human", "Ada")
        const keep = yield* org.agent("human", "Kept")
        const path = `/organizations/${org.id}/agents/${agentId}`
        yield* admin("PATCH", `/organizations/${org.id}/settings`, { default_agent_id: agentId })
        const session = yield* org.session({ agent_id: agentId })
        const inUse = yield* admin("DELETE", path)
        assert.strictEqual(inUse.status, 409)
        assert.deepStrictEqual(inUse.body, { detail: "Agent is in use" })
        assert.strictEqual((yield* admin("GET", path)).status, 200)
        // Closed, the session no longer holds the agent.
        assert.strictEqual((yield* org.call("POST", `/sessions/${session.id}/finish`, {})).status, 200)
        const deleted = yield* admin("DELETE", path)
        assert.strictEqual(deleted.status, 204)
        assert.strictEqual((yield* admin("GET", path)).status, 404)
        assert.strictEqual((yield* admin("DELETE", path)).status, 404)
        const listed = (yield* admin("GET", `/organizations/${org.id}/agents`)).body
        assert.deepStrictEqual(
          listed.map((agent: { id: string }) => agent.id),
          [keep]
        )
        // Its session still reads back with its agent (history).
        const read = yield* org.call("GET", `/sessions/${session.id}`)
        assert.strictEqual(read.status, 200)
        assert.deepStrictEqual([read.body.agent.id, read.body.agent.name], [agentId, "Ada"])
        // It is no more the default agent and cannot be assigned (D6).
        assert.strictEqual((yield* admin("GET", `/organizations/${org.id}/settings`)).body.default_agent_id, null)
        const create = yield* org.call("POST", "/sessions", {
          contact_id: "+15550002",
          contact_name: "Bo",
          agent_id: agentId
        })
        assert.deepStrictEqual([create.status, create.body], [400, { detail: "Agent not found" }])
        const open = yield* org.session({ contact_id: "+15550003" })
        const transfer = yield* org.call("POST", `/sessions/${open.id}/transfer`, { agent_id: agentId })
        assert.deepStrictEqual([transfer.status, transfer.body], [400, { detail: "Agent not found" }])
        const ingest = yield* org.call("POST", "/ingest", {
          to: "+15550100",
          from: "+15550004",
          agent_id: agentId,
          content: { type: "text", text: "Hi" }
        })
        assert.strictEqual(ingest.status, 400)
        assert.deepStrictEqual(ingest.body, { detail: "Agent not found" })
        const setDefault = yield* admin("PATCH", `/organizations/${org.id}/settings`, { default_agent_id: agentId })
        assert.deepStrictEqual([setDefault.status, setDefault.body], [400, { detail: "Agent not found" }])
        // An agent with only closed sessions deletes; the other agent was never in use.
        assert.strictEqual((yield* admin("DELETE", `/organizations/${org.id}/agents/${keep}`)).status, 204)
      })
  )

  it.effect("settings: defaults, PATCH of some members, bounds, default agent of the organization only", () =>
    Effect.gen(function* () {
      const org = (yield* admin("POST", "/organizations", { name: "Settings" })).body
      const other = (yield* admin("POST", "/organizations", { name: "Other" })).body
      const defaults = yield* admin("GET", `/organizations/${org.id}/settings`)
      // No rate limit (D20); sessions kept forever, events 30 days (D21).
      const noLimit = {
        rate_limit_per_second: null,
        rate_limit_burst: null,
        message_retention_days: null,
        event_retention_days: 30
      }
      assert.deepStrictEqual(defaults.body, {
        reply_debounce_seconds: 3,
        session_idle_timeout_seconds: null,
        default_agent_id: null,
        ...noLimit
      })
      const agent = (yield* admin("POST", `/organizations/${org.id}/agents`, {
        name: "Bot",
        type: "ai",
        assistant_id: "a"
      })).body
      const patched = yield* admin("PATCH", `/organizations/${org.id}/settings`, {
        reply_debounce_seconds: 0,
        default_agent_id: agent.id
      })
      assert.deepStrictEqual(patched.body, {
        reply_debounce_seconds: 0,
        session_idle_timeout_seconds: null,
        default_agent_id: agent.id,
        ...noLimit
      })
      const again = yield* admin("PATCH", `/organizations/${org.id}/settings`, { session_idle_timeout_seconds: 3600 })
      assert.deepStrictEqual(again.body, {
        reply_debounce_seconds: 0,
        session_idle_timeout_seconds: 3600,
        default_agent_id: agent.id,
        ...noLimit
      })
      const cleared = yield* admin("PATCH", `/organizations/${org.id}/settings`, {
        session_idle_timeout_seconds: null,
        default_agent_id: null
      })
      assert.strictEqual(cleared.body.session_idle_timeout_seconds, null)
      assert.strictEqual(cleared.body.default_agent_id, null)
      const outOfRange = yield* admin("PATCH", `/organizations/${org.id}/settings`, {
        reply_debounce_seconds: 61,
        session_idle_timeout_seconds: 0
      })
      assert.strictEqual(outOfRange.status, 422)
      assert.strictEqual(outOfRange.body.detail.length, 2)
      const foreign = yield* admin("PATCH", `/organizations/${other.id}/settings`, { default_agent_id: agent.id })
      assert.strictEqual(foreign.status, 400)
      assert.deepStrictEqual(foreign.body, { detail: "Agent not found" })
      assert.deepStrictEqual((yield* admin("GET", `/organizations/${org.id}/settings`)).body, cleared.body)
    })
  )

  it.effect("D21: retention settings in whole days, null keeps forever, bounds 1-36500 and 1-3650", () =>
    Effect.gen(function* () {
      const org = (yield* admin("POST", "/organizations", { name: "Retention" })).body
      const path = `/organizations/${org.id}/settings`
      const set = yield* admin("PATCH", path, { message_retention_days: 365, event_retention_days: 7 })
      assert.strictEqual(set.status, 200)
      assert.deepStrictEqual([set.body.message_retention_days, set.body.event_retention_days], [365, 7])
      const highest = yield* admin("PATCH", path, { message_retention_days: 36_500, event_retention_days: 3_650 })
      assert.deepStrictEqual([highest.body.message_retention_days, highest.body.event_retention_days], [36_500, 3_650])
      for (const refused of [
        { message_retention_days: 0 },
        { message_retention_days: 36_501 },
        { message_retention_days: 1.5 },
        { event_retention_days: 0 },
        { event_retention_days: 3_651 },
        { event_retention_days: "30" }
      ]) {
        const response = yield* admin("PATCH", path, refused)
        assert.strictEqual(response.status, 422, JSON.stringify(refused))
        assert.deepStrictEqual(response.body.detail[0].loc, ["body", Object.keys(refused)[0]])
      }
      const forever = yield* admin("PATCH", path, { message_retention_days: null, event_retention_days: null })
      assert.deepStrictEqual([forever.body.message_retention_days, forever.body.event_retention_days], [null, null])
      assert.deepStrictEqual((yield* admin("GET", path)).body, forever.body)
    })
  )
})

withApp({ adminToken: undefined })("admin API without ADMIN_TOKEN", (it) => {
  it.effect("responds 401 to everything (O6)", () =>
    Effect.gen(function* () {
      const api = yield* TestApi
      for (const token of [undefined, "", ADMIN_TOKEN]) {
        const response = yield* api.request("POST", "/admin/v1/organizations", {
          ...(token !== undefined ? { token } : {}),
          body: { name: "x" }
        })
        assert.strictEqual(response.status, 401)
      }
    })
  )
})
