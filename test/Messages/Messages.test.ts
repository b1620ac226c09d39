/**
 * Messages (conversations.md "Messages", "Content types"; DECISIONS.md D1, D3,
 * D5, D12, D13, D17, W1-W3).
 */
import { assert } from "@effect/vitest"
import { Effect } from "effect"
import { assertMessage, ISO_UTC } from "../support/Shapes.ts"
import { TestApi, withApp } from "../support/TestApp.ts"

const text = (value: string) => ({ role: "user", content: { type: "text", text: value } })

withApp()("messages", (it) => {
  it.effect("POST creates a pending message with the spec's shape and its message.created event", () =>
    Effect.gen(function* () {
      const api = yield* TestApi
      const org = yield* api.organization()
      const session = yield* org.session()
      const response = yield* org.call("POST", `/sessions/${session.id}/messages`, {
        role: "assistant",
        content: { type: "text", text: "Hello!", unknown_member: 1 },
        provider_message_id: "wamid.1",
        replied_provider_message_id: "wamid.0",
        run_id: "run-1"
      })
      assert.strictEqual(response.status, 201)
      const message = assertMessage(response.body)
      assert.strictEqual(message.delivery_status, "pending")
      assert.strictEqual(message.session_id, session.id)
      assert.strictEqual(message.conversation_id, session.conversation_id)
      assert.strictEqual(message.organization_id, org.id)
      assert.strictEqual(message.role, "assistant")
      assert.deepStrictEqual(message.content, { type: "text", text: "Hello!" })
      assert.strictEqual(message.provider_message_id, "wamid.1")
      assert.strictEqual(message.replied_provider_message_id, "wamid.0")
      assert.strictEqual(message.run_id, "run-1")
      assert.deepStrictEqual(message.metadata, {})
      assert.strictEqual(message.updated_at, null)
      assert.match(message.created_at, ISO_UTC)
      const events = (yield* api.events(org.id)).filter((event) => event.type === "message.created")
      assert.strictEqual(events.length, 1)
      assert.deepStrictEqual(events[0].data.object, response.body)
    })
  )

  it.effect("every client content type is accepted with its fields (D12)", () =>
    Effect.gen(function* () {
      const api = yield* TestApi
      const org = yield* api.organization()
      const session = yield* org.session()
      const contents = [
        { type: "text", text: "hi" },
        { type: "image", url: "https://example.com/a.png" },
        { type: "audio", url: "https://example.com/a.ogg" },
        { type: "audio", url: "https://example.com/b.ogg", transcript: "hello" },
        { type: "video", url: "https://example.com/a.mp4" },
        { type: "file", url: "https://example.com/a.pdf", mime_type: "application/pdf", name: "a.pdf" }
      ]
      for (const content of contents) {
        const response = yield* org.call("POST", `/sessions/${session.id}/messages`, { role: "user", content })
        assert.strictEqual(response.status, 201, JSON.stringify(content))
        assert.deepStrictEqual(response.body.content, content)
      }
    })
  )

  it.effect("unknown and internal content types give 400; bad fields of a known type 422 (D12)", () =>
    Effect.gen(function* () {
      const api = yield* TestApi
      const org = yield* api.organization()
      const session = yield* org.session()
      for (const type of ["sticker", "function_call", "function_result", "thought", ""]) {
        const response = yield* org.call("POST", `/sessions/${session.id}/messages`, {
          role: "user",
          content: { type }
        })
        assert.strictEqual(response.status, 400, type)
        assert.deepStrictEqual(response.body, { detail: "Invalid content type" })
      }
      const badFile = yield* org.call("POST", `/sessions/${session.id}/messages`, {
        role: "user",
        content: { type: "file", url: "https://example.com/x" }
      })
      assert.strictEqual(badFile.status, 422)
      assert.deepStrictEqual(badFile.body, {
        detail: [
          { loc: ["body", "content", "mime_type"], msg: "Field required", type: "missing" },
          { loc: ["body", "content", "name"], msg: "Field required", type: "missing" }
        ]
      })
      const emptyText = yield* org.call("POST", `/sessions/${session.id}/messages`, text(""))
      assert.strictEqual(emptyText.status, 422)
      assert.deepStrictEqual(emptyText.body.detail[0].loc, ["body", "content", "text"])
      const noImageUrl = yield* org.call("POST", `/sessions/${session.id}/messages`, {
        role: "user",
        content: { type: "image" }
      })
      assert.strictEqual(noImageUrl.status, 422)
      const badRole = yield* org.call("POST", `/sessions/${session.id}/messages`, {
        role: "system",
        content: { type: "text", text: "x" }
      })
      assert.strictEqual(badRole.status, 422)
      assert.deepStrictEqual(badRole.body.detail, [
        { loc: ["body", "role"], msg: "Input should be 'user' or 'assistant'", type: "literal_error" }
      ])
      const noContent = yield* org.call("POST", `/sessions/${session.id}/messages`, { role: "user" })
      assert.deepStrictEqual(noContent.body.detail, [
        { loc: ["body", "content"], msg: "Field required", type: "missing" }
      ])
      const longId = yield* org.call("POST", `/sessions/${session.id}/messages`, {
        ...text("x"),
        provider_message_id: "p".repeat(256)
      })
      assert.strictEqual(longId.status, 422)
      // Nothing was stored.
      const search = yield* org.call("POST", `/sessions/${session.id}/messages/search`, { session_id: session.id })
      assert.deepStrictEqual(search.body, [])
    })
  )

  it.effect("POST on a closed session gives 400; on a missing session 404 (D1, D5)", () =>
    Effect.gen(function* () {
      const api = yield* TestApi
      const org = yield* api.organization()
      const session = yield* org.session()
      yield* org.call("POST", `/sessions/${session.id}/finish`, {})
      const closed = yield* org.call("POST", `/sessions/${session.id}/messages`, text("late"))
      assert.strictEqual(closed.status, 400)
      assert.deepStrictEqual(closed.body, { detail: "Session is not open" })
      const missing = yield* org.call("POST", "/sessions/01a20254-e46f-73c4-a817-d7a14c37efe6/messages", text("x"))
      assert.strictEqual(missing.status, 404)
      assert.deepStrictEqual(missing.body, { detail: "Session not found" })
      assert.isFalse((yield* api.events(org.id)).some((event) => event.type === "message.created"))
    })
  )

  it.effect("GET: 200; unknown message 404; another organization's message 403; wrong session 404 (D1)", () =>
    Effect.gen(function* () {
      const api = yield* TestApi
      const org = yield* api.organization()
      const other = yield* api.organization()
      const session = yield* org.session()
      const sibling = yield* org.session({ contact_id: "other" })
      const foreignSession = yield* other.session()
      const message = (yield* org.call("POST", `/sessions/${session.id}/messages`, text("hi"))).body
      const foreign = (yield* other.call("POST", `/sessions/${foreignSession.id}/messages`, text("theirs"))).body
      const found = yield* org.call("GET", `/sessions/${session.id}/messages/${message.id}`)
      assert.strictEqual(found.status, 200)
      assert.deepStrictEqual(found.body, message)
      const unknown = yield* org.call("GET", `/sessions/${session.id}/messages/01a20254-e46f-73c4-a817-d7a14c37efe6`)
      assert.strictEqual(unknown.status, 404)
      assert.deepStrictEqual(unknown.body, { detail: "Message not found" })
      const malformed = yield* org.call("GET", `/sessions/${session.id}/messages/nope`)
      assert.deepStrictEqual(malformed.body, { detail: "Message not found" })
      const forbidden = yield* org.call("GET", `/sessions/${session.id}/messages/${foreign.id}`)
      assert.strictEqual(forbidden.status, 403)
      assert.deepStrictEqual(forbidden.body, { detail: "Forbidden" })
      const wrongSession = yield* org.call("GET", `/sessions/${sibling.id}/messages/${message.id}`)
      assert.strictEqual(wrongSession.status, 404)
      assert.deepStrictEqual(wrongSession.body, { detail: "Message not found" })
      const foreignPath = yield* other.call("GET", `/sessions/${session.id}/messages/${message.id}`)
      assert.strictEqual(foreignPath.status, 404)
      assert.deepStrictEqual(foreignPath.body, { detail: "Session not found" })
      const forbiddenPatch = yield* org.call("PATCH", `/sessions/${session.id}/messages/${foreign.id}`, {
        delivery_status: "read"
      })
      assert.strictEqual(forbiddenPatch.status, 403)
      const untouched = yield* other.call("GET", `/sessions/${foreignSession.id}/messages/${foreign.id}`)
      assert.strictEqual(untouched.body.delivery_status, "pending")
    })
  )

  it.effect("PATCH tracks delivery; the status never regresses and failed is final (D13)", () =>
    Effect.gen(function* () {
      const api = yield* TestApi
      const org = yield* api.organization()
      const session = yield* org.session()
      const message = (yield* org.call("POST", `/sessions/${session.id}/messages`, text("out"))).body
      const path = `/sessions/${session.id}/messages/${message.id}`
      const sent = yield* org.call("PATCH", path, { delivery_status: "sent", provider_message_id: "wamid.9" })
      assert.strictEqual(sent.status, 200)
      assertMessage(sent.body)
      assert.strictEqual(sent.body.delivery_status, "sent")
      assert.strictEqual(sent.body.provider_message_id, "wamid.9")
      assert.match(sent.body.updated_at, ISO_UTC)
      assert.strictEqual(sent.body.delivered_at, null)
      const read = yield* org.call("PATCH", path, { delivery_status: "read" })
      assert.strictEqual(read.body.delivery_status, "read")
      // Skipping `delivered` still records when it was delivered.
      assert.match(read.body.delivered_at, ISO_UTC)
      const backwards = yield* org.call("PATCH", path, { delivery_status: "delivered", delivery_error_message: "late" })
      assert.strictEqual(backwards.status, 200)
      assert.strictEqual(backwards.body.delivery_status, "read")
      assert.strictEqual(backwards.body.delivery_error_message, "late")
      assert.strictEqual(backwards.body.content.text, "out")

      const second = (yield* org.call("POST", `/sessions/${session.id}/messages`, text("fails"))).body
      const path2 = `/sessions/${session.id}/messages/${second.id}`
      const delivered = yield* org.call("PATCH", path2, { delivery_status: "delivered" })
      assert.match(delivered.body.delivered_at, ISO_UTC)
      const given = yield* org.call("PATCH", path2, { delivered_at: "2026-01-02T03:04:05.678Z" })
      assert.strictEqual(given.body.delivered_at, "2026-01-02T03:04:05.678000Z")
      const failed = yield* org.call("PATCH", path2, {
        delivery_status: "failed",
        delivery_error_code: 131047,
        delivery_error_message: "Re-engagement message"
      })
      assert.strictEqual(failed.body.delivery_status, "failed")
      assert.strictEqual(failed.body.delivery_error_code, 131047)
      for (const status of ["read", "pending", "rejected"]) {
        const after = yield* org.call("PATCH", path2, { delivery_status: status })
        assert.strictEqual(after.body.delivery_status, "failed")
      }
      const bad = yield* org.call("PATCH", path2, { delivery_status: "lost", delivery_error_code: "x" })
      assert.strictEqual(bad.status, 422)
      assert.strictEqual(bad.body.detail.length, 2)
      // W1: message.updated only when a delivery field changed.
      const updated = (yield* api.events(org.id)).filter((event) => event.type === "message.updated")
      assert.strictEqual(updated.length, 6)
      assert.deepStrictEqual(updated[0].data.object, sent.body)
    })
  )

  it.effect("PATCH still works on a closed session (D5)", () =>
    Effect.gen(function* () {
      const api = yield* TestApi
      const org = yield* api.organization()
      const session = yield* org.session()
      const message = (yield* org.call("POST", `/sessions/${session.id}/messages`, text("bye"))).body
      yield* org.call("POST", `/sessions/${session.id}/finish`, {})
      const response = yield* org.call("PATCH", `/sessions/${session.id}/messages/${message.id}`, {
        delivery_status: "delivered"
      })
      assert.strictEqual(response.status, 200)
      assert.strictEqual(response.body.delivery_status, "delivered")
    })
  )

  it.effect("search: oldest first, filters, default 100, max 1000, session_id must match (D3)", () =>
    Effect.gen(function* () {
      const api = yield* TestApi
      const org = yield* api.organization()
      const session = yield* org.session()
      const ids: Array<string> = []
      for (let i = 0; i < 105; i++) {
        const body = i % 5 === 0 ? { ...text(`m${i}`), role: "assistant", provider_message_id: `p${i}` } : text(`m${i}`)
        ids.push((yield* org.call("POST", `/sessions/${session.id}/messages`, body)).body.id)
      }
      const path = `/sessions/${session.id}/messages/search`
      const first = yield* org.call("POST", path, { session_id: session.id })
      assert.strictEqual(first.status, 200)
      assert.deepStrictEqual(
        first.body.map((message: any) => message.id),
        ids.slice(0, 100)
      )
      const rest = yield* org.call("POST", path, { session_id: session.id, offset: 100 })
      assert.deepStrictEqual(
        rest.body.map((message: any) => message.id),
        ids.slice(100)
      )
      const assistant = yield* org.call("POST", path, { session_id: session.id, role: "assistant", limit: 1000 })
      assert.strictEqual(assistant.body.length, 21)
      const byProvider = yield* org.call("POST", path, { session_id: session.id, provider_message_id: "p10" })
      assert.deepStrictEqual(
        byProvider.body.map((message: any) => message.id),
        [ids[10]]
      )
      // A receipt that arrives before its message finds nothing (spec client rule 4).
      const none = yield* org.call("POST", path, { session_id: session.id, provider_message_id: "unknown" })
      assert.deepStrictEqual(none.body, [])
      const mismatch = yield* org.call("POST", path, { session_id: "another" })
      assert.strictEqual(mismatch.status, 422)
      assert.deepStrictEqual(mismatch.body.detail[0].loc, ["body", "session_id"])
      const tooMany = yield* org.call("POST", path, { session_id: session.id, limit: 1001 })
      assert.strictEqual(tooMany.status, 422)
      const missing = yield* org.call("POST", path, {})
      assert.deepStrictEqual(missing.body.detail, [
        { loc: ["body", "session_id"], msg: "Field required", type: "missing" }
      ])
    })
  )

  it.effect("20 concurrent POSTs on one session store 20 messages and 20 events", () =>
    Effect.gen(function* () {
      const api = yield* TestApi
      const org = yield* api.organization()
      const session = yield* org.session()
      const responses = yield* Effect.forEach(
        Array.from({ length: 20 }, (_, i) => i),
        (i) => org.call("POST", `/sessions/${session.id}/messages`, text(`parallel ${i}`)),
        { concurrency: "unbounded" }
      )
      assert.deepStrictEqual(
        responses.map((response) => response.status),
        Array(20).fill(201)
      )
      assert.strictEqual(new Set(responses.map((response) => response.body.id)).size, 20)
      const stored = yield* org.call("POST", `/sessions/${session.id}/messages/search`, { session_id: session.id })
      assert.strictEqual(stored.body.length, 20)
      const events = (yield* api.events(org.id)).filter((event) => event.type === "message.created")
      assert.deepStrictEqual(
        new Set(events.map((event) => event.data.object.id)),
        new Set(responses.map((response) => response.body.id))
      )
    })
  )

  it.effect("a finish racing 20 message POSTs: every message committed before the close, none after", () =>
    Effect.gen(function* () {
      const api = yield* TestApi
      const org = yield* api.organization()
      const session = yield* org.session()
      const posts = Array.from({ length: 20 }, (_, i) =>
        org.call("POST", `/sessions/${session.id}/messages`, text(`race ${i}`))
      )
      const results = yield* Effect.all([...posts, org.call("POST", `/sessions/${session.id}/finish`, {})], {
        concurrency: "unbounded"
      })
      const finish = results.at(-1)!
      assert.strictEqual(finish.status, 200)
      const created = results.slice(0, 20).filter((response) => response.status === 201)
      const refused = results.slice(0, 20).filter((response) => response.status === 400)
      assert.strictEqual(created.length + refused.length, 20)
      const stored = yield* org.call("POST", `/sessions/${session.id}/messages/search`, { session_id: session.id })
      assert.strictEqual(stored.body.length, created.length)
      const closedAt = Date.parse(finish.body.updated_at)
      assert.isTrue(stored.body.every((message: any) => Date.parse(message.created_at) <= closedAt))
    })
  )
})
