/**
 * Input that storage cannot hold is a 422, never a 500 (DECISIONS.md D18, W6,
 * "Errors"): a NUL or a lone surrogate in any string of a body, path or query
 * (`string_invalid`), JSON nested deeper than 32 levels in a free-form member
 * (`too_deep`), integers outside their column (`out_of_range`), datetimes
 * outside years 1-9999 or not on the calendar; items stored before a limit
 * existed stay readable and editable.
 */
import { assert } from "@effect/vitest"
import { Effect } from "effect"
import { SqlClient } from "effect/sql"
import { contentHash } from "../../src/Assistants/Files.ts"
import { isPublicAddress } from "../../src/Shared/Ssrf.ts"
import { assistantFixture, llm } from "../support/Assistants.ts"
import { ADMIN_TOKEN, C, TestApi, withApp } from "../support/TestApp.ts"

/** `{"a": {"a": ... 1}}` nested `levels` objects deep. */
const nested = (levels: number): unknown => JSON.parse(`${'{"a":'.repeat(levels)}1${"}".repeat(levels)}`)

/** The body text of `value` wrapped at `key`, for JSON too deep for JSON.stringify. */
const deepBody = (prefix: string, levels: number, suffix: string) =>
  `${prefix}${'{"a":'.repeat(levels)}1${"}".repeat(levels)}${suffix}`

const entries = (body: any) =>
  (body.detail as Array<{ loc: Array<string | number>; type: string }>).map((d) => [d.loc, d.type])

withApp()("input limits (D18)", (it) => {
  it.effect("D18: a NUL or a lone surrogate in a body string, key, path or query is 422 string_invalid", () =>
    Effect.gen(function* () {
      const api = yield* TestApi
      const org = yield* api.organization()
      const session = yield* org.session()
      const post = (body: string) =>
        api.request("POST", `${C}/sessions/${session.id}/messages`, { token: org.token, body })

      const nul = yield* post(`{"role":"user","content":{"type":"text","text":"a\\u0000b"}}`)
      assert.strictEqual(nul.status, 422, nul.text)
      assert.deepStrictEqual(entries(nul.body), [[["body", "content", "text"], "string_invalid"]])

      const surrogate = yield* post(`{"role":"user","content":{"type":"text","text":"a\\ud800b"}}`)
      assert.strictEqual(surrogate.status, 422)
      assert.deepStrictEqual(entries(surrogate.body), [[["body", "content", "text"], "string_invalid"]])

      // Every problem of the request at once: the bad string and a missing role (Errors).
      const both = yield* post(`{"content":{"type":"text","text":"\\udc00"}}`)
      assert.strictEqual(both.status, 422)
      assert.sameDeepMembers(entries(both.body), [
        [["body", "content", "text"], "string_invalid"],
        [["body", "role"], "missing"]
      ])

      // A key of a free-form member, and a member the server would ignore.
      const key = yield* api.request("POST", `${C}/sessions`, {
        token: org.token,
        body: `{"contact_id":"c1","contact_name":"Ada","metadata":{"k\\u0000":1},"extra":"\\ud83d"}`
      })
      assert.strictEqual(key.status, 422)
      assert.sameDeepMembers(entries(key.body), [
        [["body", "metadata", "k\u0000"], "string_invalid"],
        [["body", "extra"], "string_invalid"]
      ])

      const path = yield* api.request("GET", `${C}/sessions/a%00b`, { token: org.token })
      assert.strictEqual(path.status, 422)
      assert.deepStrictEqual(entries(path.body), [[["path", "session_id"], "string_invalid"]])
      // A percent-encoded lone surrogate (ill-formed UTF-8) cannot even be routed: refused the same way.
      const encoded = yield* api.request("GET", `${C}/sessions/%ED%A0%80`, { token: org.token })
      assert.strictEqual(encoded.status, 422)
      assert.deepStrictEqual(entries(encoded.body), [[["path"], "string_invalid"]])

      const query = yield* api.request("GET", `${C}/data/sessions?after_id=x%00`, { token: org.token })
      assert.strictEqual(query.status, 422)
      assert.deepStrictEqual(entries(query.body), [[["query", "after_id"], "string_invalid"]])

      // The same message without the NUL is stored: nothing else was refused.
      const ok = yield* post(`{"role":"user","content":{"type":"text","text":"a\\u00e9b \\ud83d\\ude00"}}`)
      assert.strictEqual(ok.status, 201, ok.text)
      assert.strictEqual(ok.body.content.text, "a\u00e9b \u{1F600}")
    })
  )

  it.effect(
    "D18: JSON nested deeper than 32 levels in a free-form member is 422 too_deep, at 40 and 10,000 levels",
    () =>
      Effect.gen(function* () {
        const api = yield* TestApi
        const org = yield* api.organization()
        const assistant = yield* assistantFixture()
        const okDepth = yield* api.request("POST", `${C}/sessions`, {
          token: org.token,
          body: { contact_id: "c", contact_name: "A", metadata: nested(31) }
        })
        assert.strictEqual(okDepth.status, 201, okDepth.text)
        for (const levels of [40, 10_000]) {
          const session = yield* api.request("POST", `${C}/sessions`, {
            token: org.token,
            body: deepBody(`{"contact_id":"c","contact_name":"A","metadata":`, levels, "}")
          })
          assert.strictEqual(session.status, 422, session.text.slice(0, 300))
          assert.deepStrictEqual(entries(session.body), [[["body", "metadata"], "too_deep"]])

          const ingest = yield* api.request("POST", `${C}/ingest`, {
            token: org.token,
            body: deepBody(`{"to":"t","from":"f","metadata":`, levels, "}")
          })
          assert.strictEqual(ingest.status, 422)
          assert.deepStrictEqual(entries(ingest.body), [[["body", "metadata"], "too_deep"]])

          const node = yield* assistant.call(
            "PUT",
            `${assistant.draft("main")}/nodes/n1`,
            deepBody(`{"name":"N","type":"llm","config":`, levels, "}")
          )
          assert.strictEqual(node.status, 422)
          assert.deepStrictEqual(entries(node.body), [[["body", "config"], "too_deep"]])

          const created = yield* api.request("POST", `/admin/v1/organizations/${org.id}/assistants`, {
            token: ADMIN_TOKEN,
            body: deepBody(`{"name":"Deep","snapshot":{"context":`, levels, "}}")
          })
          assert.strictEqual(created.status, 422)
          assert.deepStrictEqual(entries(created.body), [[["body", "snapshot", "context"], "too_deep"]])
        }
      })
  )

  it.effect("D18: a node stored 2,500 levels deep before the limit stays readable and editable", () =>
    Effect.gen(function* () {
      const assistant = yield* assistantFixture()
      const sql = yield* SqlClient.SqlClient
      const put = yield* assistant.call("PUT", `${assistant.draft("main")}/nodes/deep`, llm("deep"))
      assert.strictEqual(put.status, 200, put.text)
      // As an older version stored it: the node file with a config 2,500 levels deep, in the draft.
      const content = { ...put.body, config: { ...put.body.config, deep: nested(2_500) } }
      const hash = contentHash(content)
      yield* sql.unsafe(
        `INSERT INTO assistant_files (organization_id, assistant_id, content_hash, content)
          SELECT organization_id, id, $2, $3::jsonb FROM assistants WHERE id = $1`,
        [assistant.id, hash, JSON.stringify(content)]
      )
      yield* sql.unsafe(
        `UPDATE assistant_draft_files SET content_hash = $1 WHERE path = 'nodes/deep'
           AND branch_id = (SELECT id FROM assistant_branches WHERE assistant_id = $2 AND name = 'main')`,
        [hash, assistant.id]
      )
      const read = yield* assistant.call("GET", `${assistant.draft("main")}/nodes/deep`)
      assert.strictEqual(read.status, 200)
      const patched = yield* assistant.call("PATCH", `${assistant.draft("main")}/nodes/deep`, { name: "Renamed" })
      assert.strictEqual(patched.status, 200, patched.text.slice(0, 300))
      assert.strictEqual(patched.body.name, "Renamed")
      const published = yield* assistant.call("POST", "/branches/main/publish", { message: "deep" })
      assert.strictEqual(published.status, 200, published.text.slice(0, 300))
    })
  )

  it.effect("D18: integers outside their column are 422 out_of_range", () =>
    Effect.gen(function* () {
      const api = yield* TestApi
      const org = yield* api.organization()
      const session = yield* org.session()
      const message = yield* org.call("POST", `/sessions/${session.id}/messages`, {
        role: "assistant",
        content: { type: "text", text: "hi" }
      })
      // 1e20 also fails the integer check (beyond 2^53): reported by the column's range alone.
      for (const code of [2147483648, -2147483649, 1e20]) {
        const patch = yield* org.call("PATCH", `/sessions/${session.id}/messages/${message.body.id}`, {
          delivery_status: "failed",
          delivery_error_code: code
        })
        assert.strictEqual(patch.status, 422)
        assert.deepStrictEqual(entries(patch.body), [[["body", "delivery_error_code"], "out_of_range"]])
      }
      const fits = yield* org.call("PATCH", `/sessions/${session.id}/messages/${message.body.id}`, {
        delivery_error_code: 2147483647
      })
      assert.strictEqual(fits.status, 200)
      assert.strictEqual(fits.body.delivery_error_code, 2147483647)
      const settings = yield* api.request("PATCH", `/admin/v1/organizations/${org.id}/settings`, {
        token: ADMIN_TOKEN,
        body: { session_idle_timeout_seconds: 2147483648 }
      })
      assert.strictEqual(settings.status, 422)
      assert.deepStrictEqual(entries(settings.body), [[["body", "session_idle_timeout_seconds"], "out_of_range"]])
      // A range's issue alone too: 0-60, and 1e20 beyond 2^53.
      const debounce = yield* api.request("PATCH", `/admin/v1/organizations/${org.id}/settings`, {
        token: ADMIN_TOKEN,
        body: { reply_debounce_seconds: 1e20 }
      })
      assert.strictEqual(debounce.status, 422)
      assert.deepStrictEqual(entries(debounce.body), [[["body", "reply_debounce_seconds"], "value_error"]])
    })
  )

  it.effect("D18: datetimes before year 1, after 9999 or off the calendar are 422; offsets are read exactly", () =>
    Effect.gen(function* () {
      const api = yield* TestApi
      const org = yield* api.organization()
      const session = yield* org.session()
      for (const moment of ["0000-01-01T00:00:00Z", "0001-01-01T00:30:00+01:00"]) {
        const exported = yield* org.call("GET", `/data/sessions?created_after=${encodeURIComponent(moment)}`)
        assert.strictEqual(exported.status, 422, exported.text)
        assert.deepStrictEqual(entries(exported.body), [[["query", "created_after"], "out_of_range"]])
        const scheduled = yield* org.call("POST", `/sessions/${session.id}/schedule`, {
          scheduled_for: moment,
          config: { type: "message", message: { type: "text", text: "x" } }
        })
        assert.strictEqual(scheduled.status, 422)
        assert.deepStrictEqual(entries(scheduled.body), [[["body", "scheduled_for"], "out_of_range"]])
      }
      for (const text of ["10000-01-01T00:00:00Z", "2026-02-30T00:00:00Z", "2026-01-01T24:00:00Z", "2026-01-01"]) {
        const key = yield* api.request("POST", `/admin/v1/organizations/${org.id}/api-keys`, {
          token: ADMIN_TOKEN,
          body: { expires_at: text }
        })
        assert.strictEqual(key.status, 422, text)
        assert.deepStrictEqual(entries(key.body), [[["body", "expires_at"], "datetime_parsing"]])
      }
      const message = yield* org.call("POST", `/sessions/${session.id}/messages`, {
        role: "assistant",
        content: { type: "text", text: "hi" }
      })
      const delivered = yield* org.call("PATCH", `/sessions/${session.id}/messages/${message.body.id}`, {
        delivery_status: "delivered",
        delivered_at: "2026-11-22T09:02:07.123+01:00"
      })
      assert.strictEqual(delivered.status, 200)
      assert.strictEqual(delivered.body.delivered_at, "2026-11-22T08:02:07.123000Z")
      // Microseconds are kept, as the wire writes them (they were cut to milliseconds before).
      const exact = yield* org.call("PATCH", `/sessions/${session.id}/messages/${message.body.id}`, {
        delivered_at: "2026-11-22T09:02:07.123456+01:00"
      })
      assert.strictEqual(exact.body.delivered_at, "2026-11-22T08:02:07.123456Z")
      const key = yield* api.request("POST", `/admin/v1/organizations/${org.id}/api-keys`, {
        token: ADMIN_TOKEN,
        body: { expires_at: "2099-01-02T03:04:05.654321-02:00" }
      })
      assert.strictEqual(key.body.expires_at, "2099-01-02T05:04:05.654321Z")
      const scheduled = yield* org.call("POST", `/sessions/${session.id}/schedule`, {
        scheduled_for: "2099-01-02T03:04:05.000001Z",
        config: { type: "node", node_id: "later" }
      })
      assert.strictEqual(scheduled.body.scheduled_for, "2099-01-02T03:04:05.000001Z")
      const last = yield* org.call(
        "GET",
        `/data/sessions?created_before=${encodeURIComponent("9999-12-31T23:59:59.999999Z")}`
      )
      assert.strictEqual(last.status, 200)
      assert.strictEqual(last.body.length, 1)
    })
  )

  it.effect("W6: IPv6 forms embedding IPv4 are refused, IPv4-compatible ::/96 included", () =>
    Effect.gen(function* () {
      for (const address of [
        "::127.0.0.1",
        "::7f00:1",
        "::8.8.8.8",
        "::ffff:8.8.8.8",
        "64:ff9b::808:808",
        "2002:808:808::1"
      ]) {
        assert.isFalse(isPublicAddress(address), address)
      }
      assert.isTrue(isPublicAddress("2606:4700:4700::1111"))
      const api = yield* TestApi
      const org = yield* api.organization()
      const app = yield* api.request("POST", `/admin/v1/organizations/${org.id}/apps`, {
        token: ADMIN_TOKEN,
        body: { name: "hook", webhook_url: "http://[::127.0.0.1]/", events: ["message.created"] }
      })
      assert.strictEqual(app.status, 422)
      assert.deepStrictEqual(
        (app.body.detail as Array<{ loc: Array<string> }>).map((d) => d.loc),
        [["body", "webhook_url"]]
      )
    })
  )
})
