/**
 * Redaction of one message (issue 40 item 3; DECISIONS.md D23, with D1, D5,
 * D12, W1, W3): one test per sentence of D23. No background workers run, so
 * deliveries stay as each test sets them.
 */
import { assert } from "@effect/vitest"
import { Effect } from "effect"
import { SqlClient } from "effect/sql"
import { Messages } from "../../src/Messages/Messages.ts"
import { makeIdGenerator } from "../../src/Shared/Ids.ts"
import { assertMessage, ISO_UTC } from "../support/Shapes.ts"
import { C, TestApi, type TestOrganization, withApp } from "../support/TestApp.ts"
import { createApp } from "../support/Webhooks.ts"

const newId = makeIdGenerator()

const text = (value: string) => ({ role: "user", content: { type: "text", text: value } })

/** POST a message; returns its wire JSON (parsed) and text. */
const post = (org: TestOrganization, sessionId: string, body: unknown) =>
  Effect.map(org.call("POST", `/sessions/${sessionId}/messages`, body), (response) => {
    assert.strictEqual(response.status, 201, response.text)
    return response
  })

const redactPath = (sessionId: string, messageId: string) => `/sessions/${sessionId}/messages/${messageId}/redact`

/** The organization's stored events about message `id` (every type), oldest first, as stored: id, type, body text. */
const eventsOf = (organizationId: string, id: string) =>
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const rows = yield* sql<{ id: string; type: string; body: string }>`SELECT id::text, type, body FROM events
      WHERE organization_id = ${organizationId} ORDER BY id`
    return rows.filter((row) => JSON.parse(row.body).data.object.id === id)
  })

/** The raw text of `data.object` inside an event body (W3: the envelope ends with `}}`). */
const objectText = (body: string) => {
  const prefix = '"data":{"object":'
  return body.slice(body.indexOf(prefix) + prefix.length, -2)
}

/** Sets the status of every delivery of event `eventId` (what the delivery worker would have recorded). */
const setDeliveries = (eventId: string, status: "succeeded" | "failed") =>
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const updated = yield* sql`UPDATE deliveries SET status = ${status} WHERE event_id = ${eventId} RETURNING id`
    assert.strictEqual(updated.length, 1, "one delivery (one app)")
  })

withApp({ allowPrivateNetworkTargets: true })("redaction of one message (D23)", (it) => {
  it.effect("200 with content {type: redacted} and redacted_at; the stored content is overwritten (D23)", () =>
    Effect.gen(function* () {
      const api = yield* TestApi
      const org = yield* api.organization()
      const session = yield* org.session()
      const created = yield* post(org, session.id, text("my card is 4111 1111 1111 1111"))
      assert.strictEqual(created.body.redacted_at, null)
      const redacted = yield* org.call("POST", redactPath(session.id, created.body.id))
      assert.strictEqual(redacted.status, 200, redacted.text)
      const message = assertMessage(redacted.body)
      assert.deepStrictEqual(message.content, { type: "redacted" })
      assert.match(message.redacted_at!, ISO_UTC)
      assert.strictEqual(message.updated_at, message.redacted_at)
      // Everything else is the message as it was.
      assert.deepStrictEqual(
        { ...redacted.body, content: created.body.content, redacted_at: null, updated_at: null },
        created.body
      )
      assert.include(redacted.text, '"content":{"type":"redacted"},"redacted_at":"')
      assert.notInclude(redacted.text, "4111")
      // Stored as the service writes content (Json.ts contentColumnText), nothing of the text kept in the row.
      const sql = yield* SqlClient.SqlClient
      const [row] = yield* sql<{ row: string }>`SELECT m::text AS row FROM messages m WHERE id = ${created.body.id}`
      assert.notInclude(row!.row, "4111")
      const [content] = yield* sql<{
        content: string
      }>`SELECT content::text FROM messages WHERE id = ${created.body.id}`
      assert.strictEqual(content!.content, '{"type":"redacted"}')
      assert.strictEqual(
        (yield* org.call("GET", `/sessions/${session.id}/messages/${created.body.id}`)).text,
        redacted.text
      )
    })
  )

  it.effect("a message.updated event follows, carrying the redacted message (D23, W1)", () =>
    Effect.gen(function* () {
      const api = yield* TestApi
      const org = yield* api.organization()
      const session = yield* org.session()
      const created = yield* post(org, session.id, text("secret"))
      const redacted = yield* org.call("POST", redactPath(session.id, created.body.id))
      const events = yield* eventsOf(org.id, created.body.id)
      assert.deepStrictEqual(
        events.map((event) => event.type),
        ["message.created", "message.updated"]
      )
      assert.strictEqual(objectText(events[1]!.body), redacted.text)
    })
  )

  it.effect("redacting again answers the same message and emits nothing (D23)", () =>
    Effect.gen(function* () {
      const api = yield* TestApi
      const org = yield* api.organization()
      const session = yield* org.session()
      const created = yield* post(org, session.id, text("twice"))
      const first = yield* org.call("POST", redactPath(session.id, created.body.id))
      const before = yield* api.events(org.id)
      const second = yield* org.call("POST", redactPath(session.id, created.body.id))
      assert.strictEqual(second.status, 200)
      assert.strictEqual(second.text, first.text)
      assert.deepStrictEqual(yield* api.events(org.id), before)
    })
  )

  it.effect("a closed session's messages can be redacted (D5 does not apply)", () =>
    Effect.gen(function* () {
      const api = yield* TestApi
      const org = yield* api.organization()
      const session = yield* org.session()
      const created = yield* post(org, session.id, text("closed"))
      assert.strictEqual((yield* org.call("POST", `/sessions/${session.id}/finish`, {})).status, 200)
      const redacted = yield* org.call("POST", redactPath(session.id, created.body.id))
      assert.strictEqual(redacted.status, 200, redacted.text)
      assert.deepStrictEqual(redacted.body.content, { type: "redacted" })
      assert.strictEqual((yield* eventsOf(org.id, created.body.id)).at(-1)!.type, "message.updated")
    })
  )

  it.effect(
    "events not yet delivered are rewritten (pending, failed, none), a delivered one is left byte for byte (D23, W3)",
    () =>
      Effect.gen(function* () {
        const api = yield* TestApi
        const org = yield* api.organization()
        const session = yield* org.session()
        // Before any app: its message.created has no delivery.
        const created = yield* post(org, session.id, text("wire me 100 EUR"))
        yield* createApp(api, org, {
          webhook_url: "http://127.0.0.1:9/hooks",
          events: ["message.created", "message.updated"]
        })
        const sent = yield* org.call("PATCH", `/sessions/${session.id}/messages/${created.body.id}`, {
          delivery_status: "sent"
        })
        const delivered = yield* org.call("PATCH", `/sessions/${session.id}/messages/${created.body.id}`, {
          delivery_status: "delivered"
        })
        const read = yield* org.call("PATCH", `/sessions/${session.id}/messages/${created.body.id}`, {
          delivery_status: "read"
        })
        const before = yield* eventsOf(org.id, created.body.id)
        assert.deepStrictEqual(
          before.map((event) => event.type),
          ["message.created", "message.updated", "message.updated", "message.updated"]
        )
        assert.deepStrictEqual(
          before.map((event) => objectText(event.body)),
          [created.text, sent.text, delivered.text, read.text]
        )
        const [none, succeeded, failed, pending] = before
        yield* setDeliveries(succeeded!.id, "succeeded")
        yield* setDeliveries(failed!.id, "failed")

        const redacted = yield* org.call("POST", redactPath(session.id, created.body.id))
        assert.strictEqual(redacted.status, 200, redacted.text)
        const redactedAt: string = redacted.body.redacted_at
        /** The body with the message's content and redacted_at as a redaction leaves them, every other byte kept. */
        const rewritten = (body: string) =>
          body.replace(
            '"content":{"type":"text","text":"wire me 100 EUR"},"redacted_at":null',
            `"content":{"type":"redacted"},"redacted_at":"${redactedAt}"`
          )
        const after = yield* eventsOf(org.id, created.body.id)
        assert.strictEqual(after.length, 5)
        assert.strictEqual(after[0]!.body, rewritten(none!.body))
        assert.strictEqual(after[1]!.body, succeeded!.body)
        assert.include(after[1]!.body, "wire me 100 EUR")
        assert.strictEqual(after[2]!.body, rewritten(failed!.body))
        assert.strictEqual(after[3]!.body, rewritten(pending!.body))
        for (const event of [after[0]!, after[2]!, after[3]!]) assert.notInclude(event.body, "wire me")
        assert.notStrictEqual(after[3]!.body, pending!.body)
        // The rewritten pending event keeps what it said of the delivery then; only the content changed.
        assert.strictEqual(JSON.parse(objectText(after[3]!.body)).delivery_status, "read")
        assert.strictEqual(JSON.parse(objectText(after[2]!.body)).delivery_status, "delivered")
        // The redaction's message.updated carries the redacted message; its delivery is pending.
        assert.strictEqual(after[4]!.type, "message.updated")
        assert.strictEqual(objectText(after[4]!.body), redacted.text)
        const sql = yield* SqlClient.SqlClient
        const statuses = yield* sql<{ status: string }>`SELECT status FROM deliveries WHERE event_id = ${after[4]!.id}`
        assert.deepStrictEqual(
          statuses.map((row) => row.status),
          ["pending"]
        )
      })
  )

  it.effect("an event written before redacted_at existed is rewritten with it, after content (D23)", () =>
    Effect.gen(function* () {
      const api = yield* TestApi
      const org = yield* api.organization()
      const session = yield* org.session()
      const created = yield* post(org, session.id, text("old shape"))
      const sql = yield* SqlClient.SqlClient
      const [event] = yield* eventsOf(org.id, created.body.id)
      // The shape events had before migration 0021: no redacted_at member.
      const old = event!.body.replace(',"redacted_at":null', "")
      assert.notStrictEqual(old, event!.body)
      yield* sql`UPDATE events SET body = ${old} WHERE id = ${event!.id}`
      const redacted = yield* org.call("POST", redactPath(session.id, created.body.id))
      const [after] = yield* eventsOf(org.id, created.body.id)
      assert.strictEqual(
        after!.body,
        old.replace(
          '"content":{"type":"text","text":"old shape"}',
          `"content":{"type":"redacted"},"redacted_at":"${redacted.body.redacted_at}"`
        )
      )
    })
  )

  it.effect(
    "the function_call/function_result messages of the message's run are overwritten too, each with its message.updated (D23, R2)",
    () =>
      Effect.gen(function* () {
        const api = yield* TestApi
        const org = yield* api.organization()
        const session = yield* org.session()
        const messages = yield* Messages
        const runtimeMessage = (content: Record<string, unknown> & { type: string }, runId: string) =>
          messages
            .append(org.id, session.id, {
              role: "assistant",
              content,
              provider_message_id: null,
              replied_provider_message_id: null,
              run_id: runId
            })
            .pipe(Effect.map((body) => JSON.parse(body)))
        const question = yield* post(org, session.id, text("Where is order 42? My address is 1 Main St"))
        const call = yield* runtimeMessage(
          { type: "function_call", call_id: "c1", name: "lookup", arguments: { address: "1 Main St" } },
          "run-a"
        )
        const result = yield* runtimeMessage(
          { type: "function_result", call_id: "c1", name: "lookup", result: { at: "1 Main St" }, is_error: false },
          "run-a"
        )
        const reply = yield* runtimeMessage({ type: "text", text: "Shipped to 1 Main St" }, "run-a")
        const otherRun = yield* runtimeMessage(
          { type: "function_call", call_id: "c2", name: "lookup", arguments: { order: 43 } },
          "run-b"
        )

        const redacted = yield* org.call("POST", redactPath(session.id, reply.id))
        assert.strictEqual(redacted.status, 200, redacted.text)
        const read = (id: string) =>
          Effect.map(org.call("GET", `/sessions/${session.id}/messages/${id}`), (response) => response.body)
        for (const id of [call.id, result.id, reply.id]) {
          const message = yield* read(id)
          assert.deepStrictEqual(message.content, { type: "redacted" }, id)
          assert.strictEqual(message.redacted_at, redacted.body.redacted_at)
          const events = yield* eventsOf(org.id, id)
          assert.deepStrictEqual(
            events.map((event) => event.type),
            ["message.created", "message.updated"]
          )
          assert.strictEqual(objectText(events[1]!.body), JSON.stringify(message))
          for (const event of events) assert.notInclude(event.body, "1 Main St")
        }
        // Another run's payload and the contact's message are not the reply's.
        assert.deepStrictEqual((yield* read(otherRun.id)).content, otherRun.content)
        assert.deepStrictEqual((yield* read(question.body.id)).content, question.body.content)

        // A payload redacted on its own: its run's other payloads go with it, the run's text reply does not.
        const call2 = yield* runtimeMessage({ type: "function_call", call_id: "c3", name: "x", arguments: {} }, "run-c")
        const result2 = yield* runtimeMessage(
          { type: "function_result", call_id: "c3", name: "x", result: 1, is_error: false },
          "run-c"
        )
        const reply2 = yield* runtimeMessage({ type: "text", text: "Done" }, "run-c")
        assert.strictEqual((yield* org.call("POST", redactPath(session.id, call2.id))).status, 200)
        assert.deepStrictEqual((yield* read(result2.id)).content, { type: "redacted" })
        assert.deepStrictEqual((yield* read(reply2.id)).content, { type: "text", text: "Done" })
      })
  )

  it.effect(
    "the run's records of its tool calls (A15) lose their arguments and results too; another run's stay (D23)",
    () =>
      Effect.gen(function* () {
        const api = yield* TestApi
        const org = yield* api.organization()
        const session = yield* org.session()
        const messages = yield* Messages
        const sql = yield* SqlClient.SqlClient
        const [redactedRun, keptRun] = [newId(), newId()]
        const record = (order: number) => ({
          node_id: "desk",
          tool_id: "lookup",
          arguments: { address: "1 Main St", order },
          result: { at: "1 Main St" }
        })
        for (const [runId, order] of [
          [redactedRun, 42],
          [keptRun, 43]
        ] as const) {
          yield* sql`INSERT INTO runs (id, organization_id, session_id, trigger, status, started_at, finished_at,
            duration_ms, tool_calls)
          VALUES (${runId}, ${org.id}, ${session.id}, 'reply', 'succeeded', now(), now(), 5,
            ${JSON.stringify([record(order), { ...record(order), tool_id: "track" }])}::jsonb)`
        }
        const reply = JSON.parse(
          yield* messages.append(org.id, session.id, {
            role: "assistant",
            content: { type: "text", text: "Shipped to 1 Main St" },
            provider_message_id: null,
            replied_provider_message_id: null,
            run_id: redactedRun
          })
        )
        assert.strictEqual((yield* org.call("POST", redactPath(session.id, reply.id))).status, 200)
        const records = yield* sql<{ id: string; tool_calls: unknown }>`SELECT id::text AS id, tool_calls FROM runs
        WHERE session_id = ${session.id} ORDER BY id`
        const byRun = Object.fromEntries(records.map((row) => [row.id, row.tool_calls]))
        assert.deepStrictEqual(byRun[redactedRun], [
          { node_id: "desk", tool_id: "lookup", redacted: true },
          { node_id: "desk", tool_id: "track", redacted: true }
        ])
        assert.deepStrictEqual(byRun[keptRun], [record(43), { ...record(43), tool_id: "track" }])
      })
  )

  it.effect("redacted messages stay in the AI history as the text [redacted] (D23, R2)", () =>
    Effect.gen(function* () {
      const api = yield* TestApi
      const org = yield* api.organization()
      const session = yield* org.session()
      const messages = yield* Messages
      yield* post(org, session.id, text("Hello"))
      const secret = yield* post(org, session.id, text("My password is hunter2"))
      const image = yield* post(org, session.id, {
        role: "user",
        content: { type: "image", url: "https://example.com/passport.png" }
      })
      yield* post(org, session.id, { role: "assistant", content: { type: "text", text: "Noted" } })
      const before = yield* messages.history(org.id, session.id, 200)
      assert.deepStrictEqual(
        before.map((entry) => entry.text),
        ["Hello", "My password is hunter2", "Noted"]
      )
      for (const id of [secret.body.id, image.body.id]) {
        assert.strictEqual((yield* org.call("POST", redactPath(session.id, id))).status, 200)
      }
      // The same turns as before, the redacted text as [redacted]; the image was not text and stays out.
      assert.deepStrictEqual(yield* messages.history(org.id, session.id, 200), [
        { role: "user", text: "Hello" },
        { role: "user", text: "[redacted]" },
        { role: "assistant", text: "Noted" }
      ])
    })
  )

  it.effect("redacted messages stay in searches and the export, rendered as GET renders them (D23, D3, D14)", () =>
    Effect.gen(function* () {
      const api = yield* TestApi
      const org = yield* api.organization()
      const session = yield* org.session()
      const kept = yield* post(org, session.id, text("kept"))
      const created = yield* post(org, session.id, text("gone"))
      const redacted = yield* org.call("POST", redactPath(session.id, created.body.id))
      const searched = yield* org.call("POST", `/sessions/${session.id}/messages/search`, { session_id: session.id })
      assert.strictEqual(searched.text, `[${kept.text},${redacted.text}]`)
      const exported = yield* org.call("GET", `/data/messages?session_id=${session.id}`)
      assert.strictEqual(exported.text, `[${kept.text},${redacted.text}]`)
      // A sync by updated_at sees the redaction after what it had (D14).
      const synced = yield* org.call("GET", `/data/messages?sort_by=updated_at&after_id=${kept.body.id}`)
      assert.strictEqual(synced.status, 200, synced.text)
      assert.strictEqual(synced.text, `[${redacted.text}]`)
    })
  )

  it.effect("errors as GET message: 404 session, 403 another organization's message, 404 message (D1)", () =>
    Effect.gen(function* () {
      const api = yield* TestApi
      const org = yield* api.organization()
      const other = yield* api.organization()
      const session = yield* org.session()
      const sibling = yield* org.session({ contact_id: "other" })
      const foreignSession = yield* other.session()
      const message = (yield* post(org, session.id, text("mine"))).body
      const foreign = (yield* post(other, foreignSession.id, text("theirs"))).body
      const cases: ReadonlyArray<readonly [TestOrganization, string, number, string]> = [
        [org, redactPath(session.id, foreign.id), 403, "Forbidden"],
        [other, redactPath(session.id, message.id), 404, "Session not found"],
        [org, redactPath(foreignSession.id, foreign.id), 404, "Session not found"],
        [org, redactPath(session.id, "01a20254-e46f-73c4-a817-d7a14c37efe6"), 404, "Message not found"],
        [org, redactPath(session.id, "nope"), 404, "Message not found"],
        [org, redactPath("nope", message.id), 404, "Session not found"],
        [org, redactPath(sibling.id, message.id), 404, "Message not found"]
      ]
      for (const [caller, path, status, detail] of cases) {
        const response = yield* caller.call("POST", path)
        assert.deepStrictEqual([response.status, response.body], [status, { detail }], path)
      }
      // Nothing was redacted, nothing emitted.
      const untouched = yield* other.call("GET", `/sessions/${foreignSession.id}/messages/${foreign.id}`)
      assert.deepStrictEqual(untouched.body.content, { type: "text", text: "theirs" })
      assert.strictEqual(untouched.body.redacted_at, null)
      assert.deepStrictEqual(
        (yield* eventsOf(other.id, foreign.id)).map((event) => event.type),
        ["message.created"]
      )
    })
  )

  it.effect("a stored Idempotency-Key response that carried the message replays it redacted (D23, D19)", () =>
    Effect.gen(function* () {
      const api = yield* TestApi
      const org = yield* api.organization()
      const session = yield* org.session()
      const keyed = (method: string, path: string, key: string, body: unknown) =>
        api.request(method, `${C}${path}`, { token: org.token, body, headers: { "idempotency-key": key } })
      const body = text("my IBAN is DE89 3704 0044 0532 0130 00")
      const created = yield* keyed("POST", `/sessions/${session.id}/messages`, "post-1", body)
      assert.strictEqual(created.status, 201, created.text)
      const other = yield* post(org, session.id, text("unrelated"))
      const searchBody = { session_id: session.id }
      const searched = yield* keyed("POST", `/sessions/${session.id}/messages/search`, "search-1", searchBody)
      assert.strictEqual(searched.text, `[${created.text},${other.text}]`)

      const redacted = yield* org.call("POST", redactPath(session.id, created.body.id))
      const redactedAt: string = redacted.body.redacted_at
      const rewritten = (text: string) =>
        text.replace(
          '"content":{"type":"text","text":"my IBAN is DE89 3704 0044 0532 0130 00"},"redacted_at":null',
          `"content":{"type":"redacted"},"redacted_at":"${redactedAt}"`
        )
      const replayed = yield* keyed("POST", `/sessions/${session.id}/messages`, "post-1", body)
      assert.strictEqual(replayed.status, 201)
      assert.strictEqual(replayed.headers.get("idempotent-replayed"), "true")
      assert.strictEqual(replayed.text, rewritten(created.text))
      assert.notInclude(replayed.text, "IBAN")
      const replayedSearch = yield* keyed("POST", `/sessions/${session.id}/messages/search`, "search-1", searchBody)
      assert.strictEqual(replayedSearch.headers.get("idempotent-replayed"), "true")
      assert.strictEqual(replayedSearch.text, `[${rewritten(created.text)},${other.text}]`)
      // Still one message: the replay ran nothing.
      const all = yield* org.call("POST", `/sessions/${session.id}/messages/search`, searchBody)
      assert.strictEqual(all.body.length, 2)
    })
  )

  it.effect("a client cannot send the redacted content type (D12)", () =>
    Effect.gen(function* () {
      const api = yield* TestApi
      const org = yield* api.organization()
      const session = yield* org.session()
      const response = yield* org.call("POST", `/sessions/${session.id}/messages`, {
        role: "user",
        content: { type: "redacted" }
      })
      assert.deepStrictEqual([response.status, response.body], [400, { detail: "Invalid content type" }])
    })
  )
})
