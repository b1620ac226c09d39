/**
 * Unified ingest (conversations.md "Unified ingest", "Session status";
 * DECISIONS.md D6-D12, D17, W1, W2): the state table row by row, control
 * calls, agents, contacts, RFC 7396 metadata patches, events, idempotency and
 * the automatic reply.
 */
import { assert } from "@effect/vitest"
import { Effect } from "effect"
import { SqlClient } from "effect/sql"
import { assertMessage, assertSession } from "../support/Shapes.ts"
import { ADMIN_TOKEN, TestApi, type TestOrganization, type TestResponse, withApp } from "../support/TestApp.ts"

const FIELDS = ["conversation_id", "session_id", "message_id", "created_conversation", "created_session"]

const types = (events: ReadonlyArray<any>) => events.map((event) => event.type)

/** A text content object. */
const text = (value: string) => ({ type: "text", text: value })

/** POST /ingest for `org`, expecting 200 with exactly the five fields of the spec. */
const ingest = (org: TestOrganization, body: Record<string, unknown>) =>
  org.call("POST", "/ingest", body).pipe(
    Effect.map((response) => {
      if (response.status !== 200) throw new Error(`ingest responded ${response.status}: ${response.text}`)
      assert.deepStrictEqual(Object.keys(response.body), FIELDS)
      return response.body as {
        conversation_id: string
        session_id: string | null
        message_id: string | null
        created_conversation: boolean
        created_session: boolean
      }
    })
  )

/** The session through GET, decoded with the contract's schema. */
const session = (org: TestOrganization, id: string) =>
  org.call("GET", `/sessions/${id}`).pipe(
    Effect.map((response) => {
      assert.strictEqual(response.status, 200)
      return assertSession(response.body)
    })
  )

/** PATCH of the organization's settings through the admin API. */
const settings = (org: TestOrganization, body: Record<string, unknown>) =>
  Effect.gen(function* () {
    const api = yield* TestApi
    const response = yield* api.request("PATCH", `/admin/v1/organizations/${org.id}/settings`, {
      token: ADMIN_TOKEN,
      body
    })
    assert.strictEqual(response.status, 200, response.text)
  })

const issueLocs = (response: TestResponse) => response.body.detail.map((issue: any) => issue.loc.join("."))

withApp()("ingest", (it) => {
  it.effect("a first message creates contact, conversation and session; the response has exactly five fields", () =>
    Effect.gen(function* () {
      const api = yield* TestApi
      const sql = yield* SqlClient.SqlClient
      const org = yield* api.organization()
      const first = yield* ingest(org, {
        to: "+4930000",
        from: "+4915100",
        contact: { name: "Ada", phone: "+4915100" },
        content: text("Hello"),
        provider_message_id: "wamid.1"
      })
      assert.strictEqual(first.created_conversation, true)
      assert.strictEqual(first.created_session, true)
      assert.isString(first.session_id)
      assert.isString(first.message_id)
      const opened = yield* session(org, first.session_id!)
      assert.strictEqual(opened.status, "open")
      assert.strictEqual(opened.contact_id, "+4915100")
      assert.strictEqual(opened.conversation_id, first.conversation_id)
      assert.strictEqual(opened.agent, null)
      assert.deepStrictEqual(opened.metadata, {})
      const message = yield* org.call("GET", `/sessions/${first.session_id}/messages/${first.message_id}`)
      assert.strictEqual(message.status, 200)
      assertMessage(message.body)
      assert.strictEqual(message.body.role, "user")
      assert.deepStrictEqual(message.body.content, text("Hello"))
      assert.strictEqual(message.body.provider_message_id, "wamid.1")
      assert.strictEqual(message.body.delivery_status, "pending")
      assert.strictEqual(message.body.conversation_id, first.conversation_id)
      // W1, W2: one event per change, in order; the objects are the committed resources.
      const events = yield* api.events(org.id)
      assert.deepStrictEqual(types(events), ["conversation.created", "session.created", "message.created"])
      // D8, D9: the conversation is (organization, from, channel_type = whatsapp, to).
      assert.deepStrictEqual(
        {
          id: events[0].data.object.id,
          contact_id: events[0].data.object.contact_id,
          channel_type: events[0].data.object.channel_type,
          channel_to: events[0].data.object.channel_to
        },
        { id: first.conversation_id, contact_id: "+4915100", channel_type: "whatsapp", channel_to: "+4930000" }
      )
      assert.deepStrictEqual(events[1].data.object, opened)
      assert.deepStrictEqual(events[2].data.object, message.body)
      // W4: the events carry the trace context of the call that produced them.
      const traced = yield* sql<{ traceparent: string | null }>`
        SELECT trace_context->>'traceparent' AS traceparent FROM events WHERE organization_id = ${org.id}`
      assert.strictEqual(traced.length, 3)
      for (const row of traced) assert.match(row.traceparent ?? "", /^00-[0-9a-f]{32}-[0-9a-f]{16}-0[01]$/)
      const contacts = yield* sql<{ name: string | null; phone: string | null }>`
        SELECT name, phone FROM contacts WHERE organization_id = ${org.id}`
      assert.deepStrictEqual(contacts, [{ name: "Ada", phone: "+4915100" }])
    })
  )

  it.effect("continue reuses the open session; another to or channel_type is another conversation (D8)", () =>
    Effect.gen(function* () {
      const api = yield* TestApi
      const org = yield* api.organization()
      const first = yield* ingest(org, { to: "line-1", from: "u1", content: text("one") })
      const second = yield* ingest(org, { to: "line-1", from: "u1", session: "continue", content: text("two") })
      assert.deepStrictEqual(
        { ...second, message_id: null },
        {
          conversation_id: first.conversation_id,
          session_id: first.session_id,
          message_id: null,
          created_conversation: false,
          created_session: false
        }
      )
      assert.notStrictEqual(second.message_id, first.message_id)
      const messages = yield* org.call("POST", `/sessions/${first.session_id}/messages/search`, {
        session_id: first.session_id
      })
      assert.deepStrictEqual(
        messages.body.map((m: any) => m.content.text),
        ["one", "two"]
      )
      const otherTo = yield* ingest(org, { to: "line-2", from: "u1", content: text("x") })
      const otherType = yield* ingest(org, { to: "line-1", from: "u1", channel_type: "telegram", content: text("x") })
      const otherFrom = yield* ingest(org, { to: "line-1", from: "u2", content: text("x") })
      const explicit = yield* ingest(org, { to: "line-1", from: "u1", channel_type: "whatsapp", content: text("x") })
      assert.strictEqual(new Set([first, otherTo, otherType, otherFrom].map((r) => r.conversation_id)).size, 4)
      assert.isTrue([otherTo, otherType, otherFrom].every((r) => r.created_conversation && r.created_session))
      assert.strictEqual(explicit.conversation_id, first.conversation_id)
      assert.strictEqual(explicit.session_id, first.session_id)
    })
  )

  it.effect("continue without content ensures an open session and inserts nothing (D9)", () =>
    Effect.gen(function* () {
      const api = yield* TestApi
      const org = yield* api.organization()
      const created = yield* ingest(org, { to: "t", from: "f" })
      assert.strictEqual(created.created_conversation, true)
      assert.strictEqual(created.created_session, true)
      assert.strictEqual(created.message_id, null)
      assert.strictEqual((yield* session(org, created.session_id!)).status, "open")
      const again = yield* ingest(org, { to: "t", from: "f", session: "continue" })
      assert.deepStrictEqual(again, {
        conversation_id: created.conversation_id,
        session_id: created.session_id,
        message_id: null,
        created_conversation: false,
        created_session: false
      })
      assert.deepStrictEqual(types(yield* api.events(org.id)), ["conversation.created", "session.created"])
    })
  )

  it.effect("new with an open session closes it (session.closed, action ingest, W1) and opens another", () =>
    Effect.gen(function* () {
      const api = yield* TestApi
      const org = yield* api.organization()
      const first = yield* ingest(org, { to: "t", from: "f", content: text("before") })
      const renewed = yield* ingest(org, { to: "t", from: "f", session: "new", content: text("after") })
      assert.strictEqual(renewed.conversation_id, first.conversation_id)
      assert.notStrictEqual(renewed.session_id, first.session_id)
      assert.strictEqual(renewed.created_conversation, false)
      assert.strictEqual(renewed.created_session, true)
      assert.isString(renewed.message_id)
      const old = yield* session(org, first.session_id!)
      assert.strictEqual(old.status, "closed")
      assert.strictEqual((yield* session(org, renewed.session_id!)).status, "open")
      const events = yield* api.events(org.id)
      assert.deepStrictEqual(types(events), [
        "conversation.created",
        "session.created",
        "message.created",
        "session.closed",
        "session.created",
        "message.created"
      ])
      // W1: ingest's close emits session.closed only (never session.finished), with action "ingest".
      assert.strictEqual(events[3].data.object.id, first.session_id)
      assert.strictEqual(events[3].data.object.status, "closed")
      assert.strictEqual(events[3].data.object.action, "ingest")
      assert.strictEqual(events[4].data.object.id, renewed.session_id)
      assert.strictEqual(events[5].data.object.session_id, renewed.session_id)
      // new without content: closes the open session and opens another, no message.
      const bare = yield* ingest(org, { to: "t", from: "f", session: "new" })
      assert.strictEqual(bare.created_session, true)
      assert.strictEqual(bare.message_id, null)
      assert.strictEqual((yield* session(org, renewed.session_id!)).status, "closed")
      assert.deepStrictEqual(types((yield* api.events(org.id)).slice(6)), ["session.closed", "session.created"])
    })
  )

  it.effect("new without an open session creates the conversation and a session", () =>
    Effect.gen(function* () {
      const api = yield* TestApi
      const org = yield* api.organization()
      const created = yield* ingest(org, { to: "t", from: "f", session: "new", content: text("hi") })
      assert.strictEqual(created.created_conversation, true)
      assert.strictEqual(created.created_session, true)
      assert.isString(created.message_id)
      assert.deepStrictEqual(types(yield* api.events(org.id)), [
        "conversation.created",
        "session.created",
        "message.created"
      ])
    })
  )

  it.effect("close inserts the message first, then closes the open session (action ingest)", () =>
    Effect.gen(function* () {
      const api = yield* TestApi
      const org = yield* api.organization()
      const first = yield* ingest(org, { to: "t", from: "f", content: text("hi") })
      const closed = yield* ingest(org, { to: "t", from: "f", session: "close", content: text("bye") })
      assert.strictEqual(closed.session_id, first.session_id)
      assert.strictEqual(closed.created_session, false)
      assert.isString(closed.message_id)
      const after = yield* session(org, first.session_id!)
      assert.strictEqual(after.status, "closed")
      const message = yield* org.call("GET", `/sessions/${first.session_id}/messages/${closed.message_id}`)
      assert.deepStrictEqual(message.body.content, text("bye"))
      const events = yield* api.events(org.id)
      assert.deepStrictEqual(types(events).slice(3), ["message.created", "session.closed"])
      assert.strictEqual(events[4].data.object.action, "ingest")
      assert.deepStrictEqual(events[4].data.object, { ...after, action: "ingest" })
      // The next message opens a new session of the same conversation (a closed session is never reopened).
      const next = yield* ingest(org, { to: "t", from: "f", content: text("again") })
      assert.strictEqual(next.conversation_id, first.conversation_id)
      assert.strictEqual(next.created_session, true)
      assert.notStrictEqual(next.session_id, first.session_id)
    })
  )

  it.effect("a session finished through the sessions API is not reused: the next message opens another", () =>
    Effect.gen(function* () {
      const api = yield* TestApi
      const org = yield* api.organization()
      const first = yield* ingest(org, { to: "t", from: "f", content: text("hi") })
      const finished = yield* org.call("POST", `/sessions/${first.session_id}/finish`, {})
      assert.strictEqual(finished.status, 200)
      const next = yield* ingest(org, { to: "t", from: "f", content: text("again") })
      assert.strictEqual(next.conversation_id, first.conversation_id)
      assert.strictEqual(next.created_session, true)
      assert.notStrictEqual(next.session_id, first.session_id)
      // A session of POST /sessions for the same contact belongs to the channel-less conversation (D8).
      const direct = yield* org.session({ contact_id: "f" })
      assert.notStrictEqual(direct.conversation_id, first.conversation_id)
      const afterDirect = yield* ingest(org, { to: "t", from: "f", content: text("still here") })
      assert.strictEqual(afterDirect.session_id, next.session_id)
    })
  )

  it.effect("close without content closes the open session; message_id is null", () =>
    Effect.gen(function* () {
      const api = yield* TestApi
      const org = yield* api.organization()
      const first = yield* ingest(org, { to: "t", from: "f", content: text("hi") })
      const closed = yield* ingest(org, { to: "t", from: "f", session: "close" })
      assert.deepStrictEqual(closed, {
        conversation_id: first.conversation_id,
        session_id: first.session_id,
        message_id: null,
        created_conversation: false,
        created_session: false
      })
      assert.strictEqual((yield* session(org, first.session_id!)).status, "closed")
      assert.deepStrictEqual(types(yield* api.events(org.id)).slice(3), ["session.closed"])
    })
  )

  it.effect("close with content and no open session stores the message in a new session and closes it", () =>
    Effect.gen(function* () {
      const api = yield* TestApi
      const org = yield* api.organization()
      const closed = yield* ingest(org, { to: "t", from: "f", session: "close", content: text("only") })
      assert.strictEqual(closed.created_conversation, true)
      assert.strictEqual(closed.created_session, true)
      assert.isString(closed.message_id)
      assert.strictEqual((yield* session(org, closed.session_id!)).status, "closed")
      assert.deepStrictEqual(types(yield* api.events(org.id)), [
        "conversation.created",
        "session.created",
        "message.created",
        "session.closed"
      ])
    })
  )

  it.effect("close without content and without an open session returns session_id null (D9)", () =>
    Effect.gen(function* () {
      const api = yield* TestApi
      const org = yield* api.organization()
      const nothing = yield* ingest(org, { to: "t", from: "f", session: "close" })
      assert.strictEqual(nothing.session_id, null)
      assert.strictEqual(nothing.message_id, null)
      assert.strictEqual(nothing.created_conversation, true)
      assert.strictEqual(nothing.created_session, false)
      const again = yield* ingest(org, { to: "t", from: "f", session: "close" })
      assert.deepStrictEqual(again, {
        conversation_id: nothing.conversation_id,
        session_id: null,
        message_id: null,
        created_conversation: false,
        created_session: false
      })
      assert.deepStrictEqual(types(yield* api.events(org.id)), ["conversation.created"])
    })
  )

  it.effect(
    "agent_id: a value assigns (transferred, thread D7), same agent is no change, null removes, omitted keeps",
    () =>
      Effect.gen(function* () {
        const api = yield* TestApi
        const org = yield* api.organization()
        const ai = yield* org.agent("ai", "Bot")
        const human = yield* org.agent("human", "Operator")
        const first = yield* ingest(org, { to: "t", from: "f", content: text("hi") })
        assert.strictEqual((yield* session(org, first.session_id!)).thread_id, null)
        // Agent change only (a control call without content).
        const assigned = yield* ingest(org, { to: "t", from: "f", agent_id: ai })
        assert.deepStrictEqual(assigned, {
          ...first,
          message_id: null,
          created_conversation: false,
          created_session: false
        })
        const withAi = yield* session(org, first.session_id!)
        assert.strictEqual(withAi.agent?.id, ai)
        assert.isString(withAi.thread_id)
        yield* ingest(org, { to: "t", from: "f", agent_id: ai.toUpperCase(), content: text("same agent") })
        yield* ingest(org, { to: "t", from: "f", content: text("omitted keeps") })
        assert.strictEqual((yield* session(org, first.session_id!)).agent?.id, ai)
        yield* ingest(org, { to: "t", from: "f", agent_id: human })
        const withHuman = yield* session(org, first.session_id!)
        assert.strictEqual(withHuman.agent?.type, "human")
        assert.strictEqual(withHuman.thread_id, withAi.thread_id)
        yield* ingest(org, { to: "t", from: "f", agent_id: null })
        const without = yield* session(org, first.session_id!)
        assert.strictEqual(without.agent, null)
        assert.strictEqual(without.thread_id, withAi.thread_id)
        const events = yield* api.events(org.id)
        assert.deepStrictEqual(types(events).slice(3), [
          "session.transferred",
          "message.created",
          "message.created",
          "session.transferred",
          "session.transferred"
        ])
        assert.strictEqual(events[3].data.object.agent.id, ai)
        assert.strictEqual(events[6].data.object.agent.id, human)
        assert.strictEqual(events[7].data.object.agent, null)
      })
  )

  it.effect("an unknown agent_id gives 400 Agent not found and writes nothing (D6)", () =>
    Effect.gen(function* () {
      const api = yield* TestApi
      const org = yield* api.organization()
      const other = yield* api.organization()
      const foreign = yield* other.agent("ai")
      for (const agent_id of [foreign, "not-an-id", "01a20254-e46f-73c4-a817-d7a14c37efe6"]) {
        for (const body of [
          { to: "t", from: "f", agent_id, content: text("hi") },
          { to: "t", from: "f", agent_id },
          { to: "t", from: "f", agent_id, session: "new" }
        ]) {
          const response = yield* org.call("POST", "/ingest", body)
          assert.strictEqual(response.status, 400)
          assert.deepStrictEqual(response.body, { detail: "Agent not found" })
        }
      }
      assert.deepStrictEqual(yield* api.events(org.id), [])
      // The same on an existing conversation with an open session.
      const first = yield* ingest(org, { to: "t", from: "f" })
      const refused = yield* org.call("POST", "/ingest", { to: "t", from: "f", agent_id: foreign, content: text("x") })
      assert.strictEqual(refused.status, 400)
      assert.strictEqual((yield* session(org, first.session_id!)).agent, null)
      assert.deepStrictEqual(types(yield* api.events(org.id)), ["conversation.created", "session.created"])
    })
  )

  it.effect("a new session gets the organization's default_agent_id unless agent_id is given (D9)", () =>
    Effect.gen(function* () {
      const api = yield* TestApi
      const org = yield* api.organization()
      const bot = yield* org.agent("ai", "Default bot")
      const human = yield* org.agent("human")
      yield* settings(org, { default_agent_id: bot })
      const first = yield* ingest(org, { to: "t", from: "a", content: text("hi") })
      const created = yield* session(org, first.session_id!)
      assert.strictEqual(created.agent?.id, bot)
      assert.isString(created.thread_id)
      const events = yield* api.events(org.id)
      // W1: the agent of a new session is carried by session.created, not a transfer.
      assert.deepStrictEqual(types(events), ["conversation.created", "session.created", "message.created"])
      assert.strictEqual(events[1].data.object.agent.id, bot)
      // The default applies to sessions created by new too, not to the open session of continue.
      yield* ingest(org, { to: "t", from: "a", agent_id: human })
      const renewed = yield* ingest(org, { to: "t", from: "a", session: "new" })
      assert.strictEqual((yield* session(org, renewed.session_id!)).agent?.id, bot)
      const explicit = yield* ingest(org, { to: "t", from: "b", agent_id: human, content: text("hi") })
      const withHuman = yield* session(org, explicit.session_id!)
      assert.strictEqual(withHuman.agent?.id, human)
      assert.strictEqual(withHuman.thread_id, null)
      const none = yield* ingest(org, { to: "t", from: "c", agent_id: null, content: text("hi") })
      assert.strictEqual((yield* session(org, none.session_id!)).agent, null)
    })
  )

  it.effect("contact: created from from, name and phone upserted; an empty contact object is 422", () =>
    Effect.gen(function* () {
      const api = yield* TestApi
      const sql = yield* SqlClient.SqlClient
      const org = yield* api.organization()
      const contact = sql<{ name: string | null; phone: string | null; updated: boolean }>`
        SELECT name, phone, updated_at IS NOT NULL AS updated FROM contacts
        WHERE organization_id = ${org.id} AND contact_id = 'f'`
      yield* ingest(org, { to: "t", from: "f", content: text("hi") })
      assert.deepStrictEqual(yield* contact, [{ name: null, phone: null, updated: false }])
      yield* ingest(org, { to: "t", from: "f", contact: { name: "Ada" }, content: text("hi") })
      assert.deepStrictEqual(yield* contact, [{ name: "Ada", phone: null, updated: true }])
      yield* ingest(org, { to: "t", from: "f", contact: { phone: "+49151" } })
      assert.deepStrictEqual(yield* contact, [{ name: "Ada", phone: "+49151", updated: true }])
      yield* ingest(org, { to: "t", from: "f", contact: { name: "Ada Lovelace", phone: null }, session: "new" })
      assert.deepStrictEqual(yield* contact, [{ name: "Ada Lovelace", phone: "+49151", updated: true }])
      // The same contact on another channel is one contact (D8).
      yield* ingest(org, { to: "t2", from: "f", channel_type: "sms" })
      assert.strictEqual((yield* contact).length, 1)
      for (const bad of [{}, { name: null }, { name: null, phone: null }]) {
        const response = yield* org.call("POST", "/ingest", { to: "t", from: "f", contact: bad })
        assert.strictEqual(response.status, 422)
        assert.deepStrictEqual(
          response.body.detail.map((issue: any) => issue.loc),
          [["body", "contact"]]
        )
      }
      const wrongType = yield* org.call("POST", "/ingest", { to: "t", from: "f", contact: { name: 5 } })
      assert.strictEqual(wrongType.status, 422)
      assert.deepStrictEqual(wrongType.body.detail[0].loc, ["body", "contact", "name"])
    })
  )

  it.effect("metadata is an RFC 7396 merge patch: the Appendix A examples with object target and result", () =>
    Effect.gen(function* () {
      const api = yield* TestApi
      const org = yield* api.organization()
      const examples: ReadonlyArray<readonly [object, object, object]> = [
        [{ a: "b" }, { a: "c" }, { a: "c" }],
        [{ a: "b" }, { b: "c" }, { a: "b", b: "c" }],
        [{ a: "b" }, { a: null }, {}],
        [{ a: "b", b: "c" }, { a: null }, { b: "c" }],
        [{ a: ["b"] }, { a: "c" }, { a: "c" }],
        [{ a: "c" }, { a: ["b"] }, { a: ["b"] }],
        [{ a: { b: "c" } }, { a: { b: "d", c: null } }, { a: { b: "d" } }],
        [{ a: [{ b: "c" }] }, { a: [1] }, { a: [1] }],
        [{ e: null }, { a: 1 }, { e: null, a: 1 }],
        [{}, { a: { bb: { ccc: null } } }, { a: { bb: {} } }]
      ]
      const first = yield* ingest(org, { to: "t", from: "f" })
      for (const [target, patch, result] of examples) {
        // The target is set whole with PATCH /sessions (it may hold nulls), the patch applied by ingest.
        const set = yield* org.call("PATCH", `/sessions/${first.session_id}`, { fields: { metadata: target } })
        assert.strictEqual(set.status, 200)
        assert.deepStrictEqual(set.body.metadata, target)
        const patched = yield* ingest(org, { to: "t", from: "f", metadata: patch })
        assert.strictEqual(patched.session_id, first.session_id)
        assert.deepStrictEqual((yield* session(org, first.session_id!)).metadata, result, JSON.stringify(patch))
      }
      // Omitted leaves metadata unchanged; a patch with a message applies too; a new session starts from {}.
      yield* ingest(org, { to: "t", from: "f", content: text("no metadata") })
      assert.deepStrictEqual((yield* session(org, first.session_id!)).metadata, { a: { bb: {} } })
      yield* ingest(org, { to: "t", from: "f", metadata: { wa_instance_id: "i-1", a: null }, content: text("hi") })
      assert.deepStrictEqual((yield* session(org, first.session_id!)).metadata, { wa_instance_id: "i-1" })
      const renewed = yield* ingest(org, { to: "t", from: "f", session: "new", metadata: { x: { y: 1, z: null } } })
      const fresh = yield* session(org, renewed.session_id!)
      assert.deepStrictEqual(fresh.metadata, { x: { y: 1 } })
      const events = yield* api.events(org.id)
      assert.deepStrictEqual(events[events.length - 1].data.object.metadata, { x: { y: 1 } })
      // Member names JavaScript treats specially are ordinary JSON members (a 500, or a patch cut short, before).
      const odd = JSON.parse('{"hasOwnProperty":1,"constructor":"c","a":1}')
      yield* org.call("PATCH", `/sessions/${renewed.session_id}`, { fields: { metadata: odd } })
      yield* ingest(org, { to: "t", from: "f", metadata: JSON.parse('{"a":null,"__proto__":{"p":1},"after":2}') })
      assert.deepStrictEqual(Object.entries((yield* session(org, renewed.session_id!)).metadata).sort(), [
        ["__proto__", { p: 1 }],
        ["after", 2],
        ["constructor", "c"],
        ["hasOwnProperty", 1]
      ])
    })
  )

  it.effect("a metadata patch changes updated_at only when it changes the metadata; no event (W1)", () =>
    Effect.gen(function* () {
      const api = yield* TestApi
      const org = yield* api.organization()
      const first = yield* ingest(org, { to: "t", from: "f", metadata: { wa_instance_id: "i-1", nested: { a: 1 } } })
      const created = yield* session(org, first.session_id!)
      assert.strictEqual(created.updated_at, null)
      yield* ingest(org, { to: "t", from: "f", metadata: { wa_instance_id: "i-1", nested: { a: 1 }, gone: null } })
      assert.strictEqual((yield* session(org, first.session_id!)).updated_at, null)
      yield* ingest(org, { to: "t", from: "f", metadata: { nested: { b: 2 } } })
      const changed = yield* session(org, first.session_id!)
      assert.isString(changed.updated_at)
      assert.deepStrictEqual(changed.metadata, { wa_instance_id: "i-1", nested: { a: 1, b: 2 } })
      assert.deepStrictEqual(types(yield* api.events(org.id)), ["conversation.created", "session.created"])
    })
  )

  it.effect("metadata over 16 KiB after the patch gives 422 at body.metadata and changes nothing (D17)", () =>
    Effect.gen(function* () {
      const api = yield* TestApi
      const org = yield* api.organization()
      const first = yield* ingest(org, { to: "t", from: "f", metadata: { blob: "y".repeat(10_000) } })
      const before = yield* api.events(org.id)
      const tooBig = yield* org.call("POST", "/ingest", {
        to: "t",
        from: "f",
        metadata: { more: "z".repeat(10_000) },
        content: text("hi")
      })
      assert.strictEqual(tooBig.status, 422)
      assert.deepStrictEqual(issueLocs(tooBig), ["body.metadata"])
      assert.deepStrictEqual((yield* session(org, first.session_id!)).metadata, { blob: "y".repeat(10_000) })
      assert.strictEqual((yield* api.events(org.id)).length, before.length)
      const replaced = yield* ingest(org, { to: "t", from: "f", metadata: { blob: null, more: "z".repeat(10_000) } })
      assert.deepStrictEqual((yield* session(org, replaced.session_id!)).metadata, { more: "z".repeat(10_000) })
    })
  )

  it.effect("validation: 422 with loc for every problem, 400 Invalid content type (D12, D17)", () =>
    Effect.gen(function* () {
      const api = yield* TestApi
      const org = yield* api.organization()
      const missing = yield* org.call("POST", "/ingest", { role: "bot", session: "reopen", metadata: [] })
      assert.strictEqual(missing.status, 422)
      assert.includeMembers(issueLocs(missing), ["body.to", "body.from", "body.role", "body.session", "body.metadata"])
      assert.deepStrictEqual(
        missing.body.detail.find((issue: any) => issue.loc.join(".") === "body.to"),
        { loc: ["body", "to"], msg: "Field required", type: "missing" }
      )
      const tooLong = yield* org.call("POST", "/ingest", { to: "t", from: "f".repeat(256) })
      assert.strictEqual(tooLong.status, 422)
      assert.deepStrictEqual(issueLocs(tooLong), ["body.from"])
      for (const type of ["sticker", "function_call", "thought"]) {
        const invalid = yield* org.call("POST", "/ingest", { to: "t", from: "f", content: { type, text: "x" } })
        assert.strictEqual(invalid.status, 400)
        assert.deepStrictEqual(invalid.body, { detail: "Invalid content type" })
      }
      const empty = yield* org.call("POST", "/ingest", { to: "t", from: "f", content: { type: "text", text: "" } })
      assert.strictEqual(empty.status, 422)
      assert.deepStrictEqual(issueLocs(empty), ["body.content.text"])
      const file = yield* org.call("POST", "/ingest", { to: "t", from: "f", content: { type: "file", url: "u" } })
      assert.strictEqual(file.status, 422)
      assert.includeMembers(issueLocs(file), ["body.content.mime_type", "body.content.name"])
      const unauthorized = yield* api.request("POST", "/conversations/v2/api/v1/ingest", {
        body: { to: "t", from: "f" }
      })
      assert.strictEqual(unauthorized.status, 401)
      // Nothing was written by any refused call.
      assert.deepStrictEqual(yield* api.events(org.id), [])
      // The endpoint is in the OpenAPI document (O4).
      const openapi = yield* api.request("GET", "/openapi.json")
      assert.property(openapi.body.paths, "/conversations/v2/api/v1/ingest")
    })
  )

  it.effect("assistant-role messages and other content types are stored as sent", () =>
    Effect.gen(function* () {
      const api = yield* TestApi
      const org = yield* api.organization()
      const image = yield* ingest(org, {
        to: "t",
        from: "f",
        role: "assistant",
        content: { type: "image", url: "https://example.com/a.png", extra: "dropped" }
      })
      const stored = yield* org.call("GET", `/sessions/${image.session_id}/messages/${image.message_id}`)
      assert.strictEqual(stored.body.role, "assistant")
      assert.deepStrictEqual(stored.body.content, { type: "image", url: "https://example.com/a.png" })
      assert.strictEqual(stored.body.provider_message_id, null)
    })
  )

  it.effect("the same provider_message_id sent 10 times concurrently stores one message, one event (D10)", () =>
    Effect.gen(function* () {
      const api = yield* TestApi
      const sql = yield* SqlClient.SqlClient
      const org = yield* api.organization()
      const body = { to: "t", from: "f", content: text("once"), provider_message_id: "wamid.dup" }
      const responses = yield* Effect.all(
        Array.from({ length: 10 }, () => ingest(org, body)),
        { concurrency: "unbounded" }
      )
      const ids = new Set(responses.map((a) => `${a.conversation_id}/${a.session_id}/${a.message_id}`))
      assert.strictEqual(ids.size, 1)
      // Exactly one call created; the nine others returned the first call's ids with created_* false.
      assert.strictEqual(responses.filter((a) => a.created_session).length, 1)
      assert.strictEqual(responses.filter((a) => !a.created_conversation && !a.created_session).length, 9)
      const messages = yield* sql<{ count: number }>`SELECT count(*)::int AS count FROM messages
        WHERE organization_id = ${org.id}`
      assert.strictEqual(messages[0]!.count, 1)
      assert.deepStrictEqual(types(yield* api.events(org.id)), [
        "conversation.created",
        "session.created",
        "message.created"
      ])
      // The same on the open session of an existing conversation (the one-statement path).
      const second = { ...body, provider_message_id: "wamid.dup2", content: text("twice") }
      const repeated = yield* Effect.all(
        Array.from({ length: 10 }, () => ingest(org, second)),
        { concurrency: "unbounded" }
      )
      assert.strictEqual(new Set(repeated.map((a) => a.message_id)).size, 1)
      assert.isTrue(repeated.every((a) => a.session_id === responses[0]!.session_id && !a.created_session))
      const afterSecond = yield* sql<{ count: number }>`SELECT count(*)::int AS count FROM messages
        WHERE organization_id = ${org.id}`
      assert.strictEqual(afterSecond[0]!.count, 2)
      assert.strictEqual(types(yield* api.events(org.id)).filter((type) => type === "message.created").length, 2)
      // Later repeats return the same ids even after the session was replaced, and change nothing:
      // not the session (new), not the agent, not the metadata.
      const agent = yield* org.agent("ai")
      yield* ingest(org, { to: "t", from: "f", session: "new" })
      const eventsBefore = (yield* api.events(org.id)).length
      const repeat = yield* ingest(org, { ...body, session: "new", agent_id: agent, metadata: { k: 1 } })
      assert.deepStrictEqual(repeat, { ...responses[0]!, created_conversation: false, created_session: false })
      assert.strictEqual((yield* api.events(org.id)).length, eventsBefore)
      // The id is scoped to the conversation: another pair stores its own message.
      const elsewhere = yield* ingest(org, { ...body, from: "g" })
      assert.notStrictEqual(elsewhere.message_id, responses[0]!.message_id)
      assert.strictEqual(elsewhere.created_conversation, true)
      // Without content provider_message_id claims nothing.
      const control = yield* ingest(org, { to: "t", from: "h", provider_message_id: "wamid.ctl" })
      const withContent = yield* ingest(org, {
        to: "t",
        from: "h",
        provider_message_id: "wamid.ctl",
        content: text("x")
      })
      assert.strictEqual(control.message_id, null)
      assert.isString(withContent.message_id)
    })
  )

  it.effect("concurrent first calls for one pair make one conversation and one open session (D9)", () =>
    Effect.gen(function* () {
      const api = yield* TestApi
      const sql = yield* SqlClient.SqlClient
      const org = yield* api.organization()
      const responses = yield* Effect.all(
        Array.from({ length: 20 }, (_, i) => ingest(org, { to: "t", from: "f", content: text(`m${i}`) })),
        { concurrency: "unbounded" }
      )
      assert.strictEqual(new Set(responses.map((a) => a.conversation_id)).size, 1)
      assert.strictEqual(new Set(responses.map((a) => a.session_id)).size, 1)
      assert.strictEqual(responses.filter((a) => a.created_conversation).length, 1)
      assert.strictEqual(responses.filter((a) => a.created_session).length, 1)
      const counts = yield* sql<{ conversations: number; sessions: number; messages: number; contacts: number }>`
        SELECT (SELECT count(*)::int FROM conversations WHERE organization_id = ${org.id}) AS conversations,
          (SELECT count(*)::int FROM sessions WHERE organization_id = ${org.id}) AS sessions,
          (SELECT count(*)::int FROM messages WHERE organization_id = ${org.id}) AS messages,
          (SELECT count(*)::int FROM contacts WHERE organization_id = ${org.id}) AS contacts`
      assert.deepStrictEqual(counts[0], { conversations: 1, sessions: 1, messages: 20, contacts: 1 })
    })
  )

  it.effect("auto reply (D11): a user message in an AI-agent session makes a pending reply job with the debounce", () =>
    Effect.gen(function* () {
      const api = yield* TestApi
      const sql = yield* SqlClient.SqlClient
      const org = yield* api.organization()
      const ai = yield* org.agent("ai")
      const human = yield* org.agent("human")
      yield* settings(org, { reply_debounce_seconds: 7 })
      const jobs = (sessionId: string) =>
        sql<{ status: string; delay: number; triggers: number }>`
          SELECT status, round(extract(epoch FROM due_at - created_at))::int AS delay, triggers
          FROM reply_jobs WHERE session_id = ${sessionId}`
      const user = yield* ingest(org, { to: "t", from: "ai-user", agent_id: ai, content: text("help") })
      assert.deepStrictEqual(yield* jobs(user.session_id!), [{ status: "pending", delay: 7, triggers: 1 }])
      // The plain-message path triggers too, and the debounce is trailing (one job, R1).
      yield* ingest(org, { to: "t", from: "ai-user", content: text("more") })
      assert.deepStrictEqual(yield* jobs(user.session_id!), [{ status: "pending", delay: 7, triggers: 2 }])
      const assistant = yield* ingest(org, {
        to: "t",
        from: "ai-assistant",
        agent_id: ai,
        role: "assistant",
        content: text("hello from the bot")
      })
      assert.deepStrictEqual(yield* jobs(assistant.session_id!), [])
      const humanSession = yield* ingest(org, { to: "t", from: "human", agent_id: human, content: text("help") })
      assert.deepStrictEqual(yield* jobs(humanSession.session_id!), [])
      const noAgent = yield* ingest(org, { to: "t", from: "none", content: text("help") })
      assert.deepStrictEqual(yield* jobs(noAgent.session_id!), [])
      // A session transferred to the AI agent by the same call answers that message.
      const transferred = yield* ingest(org, { to: "t", from: "none", agent_id: ai, content: text("now?") })
      assert.deepStrictEqual(yield* jobs(transferred.session_id!), [{ status: "pending", delay: 7, triggers: 1 }])
      // A control call without content triggers nothing; closing drops the pending job.
      yield* ingest(org, { to: "t", from: "ai-assistant" })
      assert.deepStrictEqual(yield* jobs(assistant.session_id!), [])
      yield* ingest(org, { to: "t", from: "ai-user", session: "close", content: text("bye") })
      assert.deepStrictEqual(yield* jobs(user.session_id!), [])
    })
  )
})
