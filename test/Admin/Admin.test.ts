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
