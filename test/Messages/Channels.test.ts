/**
 * What the channels carry (DECISIONS.md D24, issue 42 item 1): replies,
 * reactions and edits, through POST message, PATCH and ingest; the AI
 * history; no reply triggered; W1's message.updated.
 */
import { assert } from "@effect/vitest"
import { Effect } from "effect"
import { SqlClient } from "effect/sql"
import { Messages } from "../../src/Messages/Messages.ts"
import { assertMessage, ISO_UTC } from "../support/Shapes.ts"
import { ADMIN_TOKEN, TestApi, withApp } from "../support/TestApp.ts"

type Organization = Effect.Success<ReturnType<TestApi["Service"]["organization"]>>

const text = (value: string) => ({ type: "text", text: value })

const post = (org: Organization, sessionId: string, body: Record<string, unknown>) =>
  org.call("POST", `/sessions/${sessionId}/messages`, body)

const ingest = (org: Organization, body: Record<string, unknown>) =>
  org.call("POST", "/ingest", body).pipe(
    Effect.map((response) => {
      if (response.status !== 200) throw new Error(`ingest responded ${response.status}: ${response.text}`)
      return response.body as { conversation_id: string; session_id: string; message_id: string | null }
    })
  )

const getMessage = (org: Organization, sessionId: string, messageId: string) =>
  org
    .call("GET", `/sessions/${sessionId}/messages/${messageId}`)
    .pipe(Effect.map((response) => assertMessage(response.body)))

/** The message.updated events of `messageId`, oldest first. */
const updatedEvents = (organizationId: string, messageId: string) =>
  Effect.flatMap(Effect.service(TestApi), (api) => api.events(organizationId)).pipe(
    Effect.map((events) =>
      events.filter((event) => event.type === "message.updated" && event.data.object.id === messageId)
    )
  )

const replyJobs = (sessionId: string) =>
  Effect.flatMap(Effect.service(SqlClient.SqlClient), (sql) =>
    sql<{ triggers: number }>`SELECT triggers FROM reply_jobs WHERE session_id = ${sessionId}`.pipe(Effect.orDie)
  )

withApp()("replies, reactions and edits (D24)", (it) => {
  it.effect("D24: reply_to_message_id names a message of the same conversation, else 400 Message not found", () =>
    Effect.gen(function* () {
      const api = yield* TestApi
      const org = yield* api.organization()
      const session = yield* org.session()
      const first = yield* post(org, session.id, { role: "user", content: text("Where is my order?") })
      const reply = yield* post(org, session.id, {
        role: "assistant",
        content: text("On its way"),
        reply_to_message_id: first.body.id
      })
      assert.strictEqual(reply.status, 201, reply.text)
      const message = assertMessage(reply.body)
      assert.strictEqual(message.reply_to_message_id, first.body.id)
      assert.strictEqual(message.replied_provider_message_id, null)
      assert.deepStrictEqual(message.reactions, [])
      assert.deepStrictEqual(message.edits, [])
      assert.strictEqual(message.edited_at, null)
      // message.created and GET carry it.
      const created = (yield* api.events(org.id)).find(
        (event) => event.type === "message.created" && event.data.object.id === message.id
      )
      assert.strictEqual(created.data.object.reply_to_message_id, first.body.id)
      assert.strictEqual((yield* getMessage(org, session.id, message.id)).reply_to_message_id, first.body.id)
      // Another contact's conversation (same organization), another organization, not a uuid: 400, nothing stored.
      const other = yield* org.session({ contact_id: "+15550002" })
      const elsewhere = yield* post(org, other.id, { role: "user", content: text("x") })
      const stranger = yield* api.organization()
      const strangerSession = yield* stranger.session()
      const strangers = yield* post(stranger, strangerSession.id, { role: "user", content: text("x") })
      for (const id of [elsewhere.body.id, strangers.body.id, "not-a-uuid", "00000000-0000-0000-0000-000000000000"]) {
        const refused = yield* post(org, session.id, { role: "user", content: text("y"), reply_to_message_id: id })
        assert.strictEqual(refused.status, 400, id)
        assert.deepStrictEqual(refused.body, { detail: "Message not found" })
      }
      const search = yield* org.call("POST", `/sessions/${session.id}/messages/search`, { session_id: session.id })
      assert.strictEqual(search.body.length, 2)
      // A missing session is still 404 first.
      const missing = yield* post(org, "00000000-0000-0000-0000-000000000001", {
        role: "user",
        content: text("y"),
        reply_to_message_id: first.body.id
      })
      assert.strictEqual(missing.status, 404)
      // A session of the same conversation (a later one) may reply to the earlier session's message.
      yield* org.call("POST", `/sessions/${session.id}/finish`)
      const later = yield* org.session()
      assert.strictEqual(later.conversation_id, session.conversation_id)
      const across = yield* post(org, later.id, {
        role: "user",
        content: text("again"),
        reply_to_message_id: first.body.id
      })
      assert.strictEqual(across.status, 201, across.text)
    })
  )

  it.effect(
    "D24: replied_provider_message_id resolves within the conversation, else it is kept with reply_to_message_id null",
    () =>
      Effect.gen(function* () {
        const api = yield* TestApi
        const org = yield* api.organization()
        const session = yield* org.session()
        const outbound = yield* post(org, session.id, { role: "assistant", content: text("Your code is 1234") })
        // The channel's id arrives later, by PATCH (the usual outbound path).
        yield* org.call("PATCH", `/sessions/${session.id}/messages/${outbound.body.id}`, {
          provider_message_id: "wamid.OUT1",
          delivery_status: "sent"
        })
        const quoted = yield* post(org, session.id, {
          role: "user",
          content: text("It does not work"),
          replied_provider_message_id: "wamid.OUT1"
        })
        assert.strictEqual(quoted.body.reply_to_message_id, outbound.body.id)
        assert.strictEqual(quoted.body.replied_provider_message_id, "wamid.OUT1")
        const unknown = yield* post(org, session.id, {
          role: "user",
          content: text("About that"),
          replied_provider_message_id: "wamid.BEFORE-PARLEY"
        })
        assert.strictEqual(unknown.status, 201)
        assert.strictEqual(unknown.body.reply_to_message_id, null)
        assert.strictEqual(unknown.body.replied_provider_message_id, "wamid.BEFORE-PARLEY")
        // The same channel id in another conversation does not resolve here.
        const other = yield* org.session({ contact_id: "+15550003" })
        const otherQuote = yield* post(org, other.id, {
          role: "user",
          content: text("?"),
          replied_provider_message_id: "wamid.OUT1"
        })
        assert.strictEqual(otherQuote.body.reply_to_message_id, null)
      })
  )

  it.effect("D24 via ingest: a quote resolves to the message, an unknown one is stored, never refused", () =>
    Effect.gen(function* () {
      const api = yield* TestApi
      const org = yield* api.organization()
      const first = yield* ingest(org, {
        to: "biz",
        from: "+1777",
        content: text("Hello"),
        provider_message_id: "wamid.A"
      })
      const reply = yield* ingest(org, {
        to: "biz",
        from: "+1777",
        content: text("As I said"),
        provider_message_id: "wamid.B",
        replied_provider_message_id: "wamid.A"
      })
      const message = yield* getMessage(org, reply.session_id, reply.message_id!)
      assert.strictEqual(message.reply_to_message_id, first.message_id)
      assert.strictEqual(message.replied_provider_message_id, "wamid.A")
      // Through the new-session statement too (session: new), across sessions of the conversation.
      const fresh = yield* ingest(org, {
        to: "biz",
        from: "+1777",
        session: "new",
        content: text("Back again"),
        provider_message_id: "wamid.C",
        replied_provider_message_id: "wamid.A"
      })
      assert.notStrictEqual(fresh.session_id, reply.session_id)
      assert.strictEqual(
        (yield* getMessage(org, fresh.session_id, fresh.message_id!)).reply_to_message_id,
        first.message_id
      )
      const unknown = yield* ingest(org, {
        to: "biz",
        from: "+1777",
        content: text("Re: something old"),
        provider_message_id: "wamid.D",
        replied_provider_message_id: "wamid.UNKNOWN"
      })
      const stored = yield* getMessage(org, unknown.session_id, unknown.message_id!)
      assert.strictEqual(stored.reply_to_message_id, null)
      assert.strictEqual(stored.replied_provider_message_id, "wamid.UNKNOWN")
    })
  )

  it.effect(
    'D24: a reaction is stored as a message and summarized on its target; one per role, replaced, "" removes; message.updated follows a change',
    () =>
      Effect.gen(function* () {
        const api = yield* TestApi
        const org = yield* api.organization()
        const session = yield* org.session()
        const target = yield* post(org, session.id, { role: "assistant", content: text("Your order shipped") })
        const react = (role: string, emoji: string) =>
          post(org, session.id, { role, content: { type: "reaction", emoji, message_id: target.body.id } })
        const thumbs = yield* react("user", "👍")
        assert.strictEqual(thumbs.status, 201, thumbs.text)
        assert.deepStrictEqual(thumbs.body.content, { type: "reaction", emoji: "👍", message_id: target.body.id })
        assert.deepStrictEqual((yield* getMessage(org, session.id, target.body.id)).reactions, [
          { emoji: "👍", count: 1 }
        ])
        yield* react("assistant", "👍")
        let summary = yield* getMessage(org, session.id, target.body.id)
        assert.deepStrictEqual(summary.reactions, [{ emoji: "👍", count: 2 }])
        assert.match(summary.updated_at!, ISO_UTC)
        // The user's new reaction replaces its old one (a family emoji with ZWJ is one grapheme).
        yield* react("user", "👨‍👩‍👧")
        summary = yield* getMessage(org, session.id, target.body.id)
        assert.deepStrictEqual(summary.reactions, [
          { emoji: "👍", count: 1 },
          { emoji: "👨‍👩‍👧", count: 1 }
        ])
        const eventsBefore = (yield* updatedEvents(org.id, target.body.id)).length
        assert.strictEqual(eventsBefore, 3)
        // The same reaction again changes nothing: no event.
        yield* react("user", "👨‍👩‍👧")
        assert.strictEqual((yield* updatedEvents(org.id, target.body.id)).length, 3)
        // "" removes the role's reaction.
        yield* react("user", "")
        yield* react("assistant", "")
        const events = yield* updatedEvents(org.id, target.body.id)
        assert.strictEqual(events.length, 5)
        assert.deepStrictEqual(events[4].data.object.reactions, [])
        assert.deepStrictEqual((yield* getMessage(org, session.id, target.body.id)).reactions, [])
        // Every reaction is a message of the session.
        const search = yield* org.call("POST", `/sessions/${session.id}/messages/search`, { session_id: session.id })
        assert.strictEqual(search.body.filter((m: any) => m.content.type === "reaction").length, 6)
      })
  )

  it.effect("D24: 24 concurrent reactions of both roles on one message leave each role's latest in the summary", () =>
    Effect.gen(function* () {
      const api = yield* TestApi
      const sql = yield* SqlClient.SqlClient
      const org = yield* api.organization()
      const session = yield* org.session()
      const target = yield* post(org, session.id, { role: "user", content: text("Vote") })
      const emojis = ["👍", "❤️", "😂", "🎉", "🙏", ""]
      const responses = yield* Effect.forEach(
        Array.from({ length: 24 }, (_, i) => i),
        (i) =>
          post(org, session.id, {
            role: i % 2 === 0 ? "user" : "assistant",
            content: { type: "reaction", emoji: emojis[i % emojis.length], message_id: target.body.id }
          }),
        { concurrency: "unbounded" }
      )
      assert.deepStrictEqual(
        responses.map((response) => response.status),
        responses.map(() => 201)
      )
      // The reactions took the target's lock one at a time: the latest stored per role is what counts.
      const latest = yield* sql<{
        role: string
        emoji: string
      }>`SELECT DISTINCT ON (role) role, content->>'emoji' AS emoji
        FROM messages WHERE session_id = ${session.id} AND content->>'type' = 'reaction'
        ORDER BY role, created_at DESC, id DESC`
      const counts = new Map<string, number>()
      for (const row of latest) if (row.emoji !== "") counts.set(row.emoji, (counts.get(row.emoji) ?? 0) + 1)
      const order = (a: { emoji: string; count: number }, b: { emoji: string; count: number }) =>
        b.count - a.count || (a.emoji < b.emoji ? -1 : 1)
      const expected = [...counts].map(([emoji, count]) => ({ emoji, count })).sort(order)
      const summary = (yield* getMessage(org, session.id, target.body.id)).reactions
      assert.deepStrictEqual([...summary].sort(order), expected)
    })
  )

  it.effect("D24, D19: a reaction POSTed twice with one Idempotency-Key is stored once and replayed", () =>
    Effect.gen(function* () {
      const api = yield* TestApi
      const org = yield* api.organization()
      const session = yield* org.session()
      const target = yield* post(org, session.id, { role: "user", content: text("Deal?") })
      const send = () =>
        api.request("POST", `/conversations/v2/api/v1/sessions/${session.id}/messages`, {
          token: org.token,
          headers: { "idempotency-key": "reaction-1" },
          body: { role: "assistant", content: { type: "reaction", emoji: "🤝", message_id: target.body.id } }
        })
      const first = yield* send()
      const second = yield* send()
      assert.strictEqual(first.status, 201, first.text)
      assert.strictEqual(second.status, 201)
      assert.strictEqual(second.text, first.text)
      assert.strictEqual(second.headers.get("idempotent-replayed"), "true")
      const search = yield* org.call("POST", `/sessions/${session.id}/messages/search`, { session_id: session.id })
      assert.strictEqual(search.body.filter((m: any) => m.content.type === "reaction").length, 1)
      assert.deepStrictEqual((yield* getMessage(org, session.id, target.body.id)).reactions, [
        { emoji: "🤝", count: 1 }
      ])
      assert.strictEqual((yield* updatedEvents(org.id, target.body.id)).length, 1)
      // A reaction refused (400) is stored under its key as refused, and nothing else is written.
      const refusedBody = { role: "user", content: { type: "reaction", emoji: "👎", message_id: "not-a-message" } }
      const refused = yield* api.request("POST", `/conversations/v2/api/v1/sessions/${session.id}/messages`, {
        token: org.token,
        headers: { "idempotency-key": "reaction-2" },
        body: refusedBody
      })
      assert.strictEqual(refused.status, 400)
      assert.strictEqual((yield* updatedEvents(org.id, target.body.id)).length, 1)
    })
  )

  it.effect(
    "D24: a reaction's emoji is one grapheme or empty (422), its target a message of the conversation (400)",
    () =>
      Effect.gen(function* () {
        const api = yield* TestApi
        const org = yield* api.organization()
        const session = yield* org.session()
        const target = yield* post(org, session.id, { role: "user", content: text("hi") })
        for (const emoji of ["👍👍", "ab", 7]) {
          const bad = yield* post(org, session.id, {
            role: "user",
            content: { type: "reaction", emoji, message_id: target.body.id }
          })
          assert.strictEqual(bad.status, 422, String(emoji))
        }
        const noTarget = yield* post(org, session.id, { role: "user", content: { type: "reaction", emoji: "👍" } })
        assert.strictEqual(noTarget.status, 422)
        const other = yield* org.session({ contact_id: "+15550009" })
        const elsewhere = yield* post(org, other.id, { role: "user", content: text("x") })
        for (const id of [elsewhere.body.id, "wamid.X"]) {
          const refused = yield* post(org, session.id, {
            role: "user",
            content: { type: "reaction", emoji: "👍", message_id: id }
          })
          assert.strictEqual(refused.status, 400, id)
          assert.deepStrictEqual(refused.body, { detail: "Message not found" })
        }
        assert.deepStrictEqual((yield* getMessage(org, session.id, target.body.id)).reactions, [])
      })
  )

  it.effect(
    "D24: PATCH content edits: edited_at, the former content in edits, message.updated; same content changes nothing",
    () =>
      Effect.gen(function* () {
        const api = yield* TestApi
        const org = yield* api.organization()
        const session = yield* org.session()
        const original = yield* post(org, session.id, { role: "user", content: text("See you at 5") })
        const path = `/sessions/${session.id}/messages/${original.body.id}`
        const first = yield* org.call("PATCH", path, { content: text("See you at 6") })
        assert.strictEqual(first.status, 200, first.text)
        const edited = assertMessage(first.body)
        assert.deepStrictEqual(edited.content, text("See you at 6"))
        assert.match(edited.edited_at!, ISO_UTC)
        assert.deepStrictEqual(edited.edits, [{ content: text("See you at 5"), edited_at: edited.edited_at! }])
        const second = assertMessage(
          (yield* org.call("PATCH", path, { content: text("See you at 7"), delivery_status: "read" })).body
        )
        assert.deepStrictEqual(
          second.edits.map((edit) => edit.content),
          [text("See you at 5"), text("See you at 6")]
        )
        assert.strictEqual(second.delivery_status, "read")
        assert.ok(second.edited_at! > edited.edited_at!)
        let events = yield* updatedEvents(org.id, original.body.id)
        assert.strictEqual(events.length, 2)
        assert.deepStrictEqual(events[1].data.object, second)
        // The same content again: nothing changes, no event.
        const same = assertMessage((yield* org.call("PATCH", path, { content: text("See you at 7") })).body)
        assert.strictEqual(same.edits.length, 2)
        assert.strictEqual(same.edited_at, second.edited_at)
        events = yield* updatedEvents(org.id, original.body.id)
        assert.strictEqual(events.length, 2)
        // Edits work on a closed session too (like delivery tracking, D5).
        yield* org.call("POST", `/sessions/${session.id}/finish`)
        const closed = yield* org.call("PATCH", path, { content: text("Sorry, 8") })
        assert.strictEqual(closed.status, 200, closed.text)
        // Bad content: 422 for bad fields, 400 for a reaction or an internal type.
        assert.strictEqual((yield* org.call("PATCH", path, { content: { type: "text", text: "" } })).status, 422)
        for (const content of [{ type: "reaction", emoji: "👍", message_id: original.body.id }, { type: "thought" }]) {
          const refused = yield* org.call("PATCH", path, { content })
          assert.strictEqual(refused.status, 400)
          assert.deepStrictEqual(refused.body, { detail: "Invalid content type" })
        }
      })
  )

  it.effect(
    "D24, D23: a reaction is not edited (400); a redacted message is not edited (409) and its edits are emptied",
    () =>
      Effect.gen(function* () {
        const api = yield* TestApi
        const org = yield* api.organization()
        const session = yield* org.session()
        const target = yield* post(org, session.id, { role: "user", content: text("secret 1") })
        const reaction = yield* post(org, session.id, {
          role: "user",
          content: { type: "reaction", emoji: "👍", message_id: target.body.id }
        })
        const reactionEdit = yield* org.call("PATCH", `/sessions/${session.id}/messages/${reaction.body.id}`, {
          content: text("no")
        })
        assert.strictEqual(reactionEdit.status, 400)
        const path = `/sessions/${session.id}/messages/${target.body.id}`
        yield* org.call("PATCH", path, { content: text("secret 2") })
        const redacted = yield* org.call("POST", `${path}/redact`)
        assert.deepStrictEqual(redacted.body.edits, [])
        assert.notStrictEqual(redacted.body.edited_at, null)
        const sql = yield* SqlClient.SqlClient
        const [row] = yield* sql<{
          edits: string
        }>`SELECT edits::text AS edits FROM messages WHERE id = ${target.body.id}`
        assert.strictEqual(row!.edits, "[]")
        const refused = yield* org.call("PATCH", path, { content: text("secret 3") })
        assert.strictEqual(refused.status, 409)
        assert.deepStrictEqual(refused.body, { detail: "Message is redacted" })
      })
  )

  it.effect(
    "D24 via ingest: a reaction names its target by the channel's id (stored with the Parley id), an edit by edit_of_provider_message_id; neither triggers a reply (D11)",
    () =>
      Effect.gen(function* () {
        const api = yield* TestApi
        const org = yield* api.organization()
        const ai = yield* org.agent("ai")
        const settings = yield* api.request("PATCH", `/admin/v1/organizations/${org.id}/settings`, {
          token: ADMIN_TOKEN,
          body: { reply_debounce_seconds: 60 }
        })
        assert.strictEqual(settings.status, 200, settings.text)
        const first = yield* ingest(org, {
          to: "biz",
          from: "+1888",
          agent_id: ai,
          content: text("Can I change my address?"),
          provider_message_id: "wamid.Q"
        })
        const sessionId = first.session_id
        assert.deepStrictEqual(yield* replyJobs(sessionId), [{ triggers: 1 }])
        const reaction = yield* ingest(org, {
          to: "biz",
          from: "+1888",
          content: { type: "reaction", emoji: "❤️", message_id: "wamid.Q" },
          provider_message_id: "wamid.R"
        })
        assert.strictEqual(reaction.session_id, sessionId)
        const stored = yield* getMessage(org, sessionId, reaction.message_id!)
        assert.deepStrictEqual(stored.content, { type: "reaction", emoji: "❤️", message_id: first.message_id })
        assert.deepStrictEqual((yield* getMessage(org, sessionId, first.message_id!)).reactions, [
          { emoji: "❤️", count: 1 }
        ])
        // A reaction to an unknown channel id is stored as given, summarizing nothing.
        const stray = yield* ingest(org, {
          to: "biz",
          from: "+1888",
          content: { type: "reaction", emoji: "👍", message_id: "wamid.GONE" },
          provider_message_id: "wamid.S"
        })
        assert.deepStrictEqual((yield* getMessage(org, sessionId, stray.message_id!)).content, {
          type: "reaction",
          emoji: "👍",
          message_id: "wamid.GONE"
        })
        // The edit.
        const edit = yield* ingest(org, {
          to: "biz",
          from: "+1888",
          content: text("Can I change my delivery address?"),
          provider_message_id: "wamid.E",
          edit_of_provider_message_id: "wamid.Q"
        })
        assert.strictEqual(edit.message_id, first.message_id)
        assert.strictEqual(edit.session_id, sessionId)
        const edited = yield* getMessage(org, sessionId, first.message_id!)
        assert.deepStrictEqual(edited.content, text("Can I change my delivery address?"))
        assert.deepStrictEqual(
          edited.edits.map((e) => e.content),
          [text("Can I change my address?")]
        )
        // A repeat of the edit call is a no-op answering the same ids (D10).
        const repeat = yield* ingest(org, {
          to: "biz",
          from: "+1888",
          content: text("Can I change my delivery address?"),
          provider_message_id: "wamid.E",
          edit_of_provider_message_id: "wamid.Q"
        })
        assert.strictEqual(repeat.message_id, first.message_id)
        assert.strictEqual((yield* getMessage(org, sessionId, first.message_id!)).edits.length, 1)
        // None of these moved the pending reply (one trigger).
        assert.deepStrictEqual(yield* replyJobs(sessionId), [{ triggers: 1 }])
        // An edit of an unknown message is stored as a new message, and triggers nothing either.
        const orphan = yield* ingest(org, {
          to: "biz",
          from: "+1888",
          content: text("(edited)"),
          provider_message_id: "wamid.F",
          edit_of_provider_message_id: "wamid.NEVER-SEEN"
        })
        assert.notStrictEqual(orphan.message_id, null)
        assert.deepStrictEqual((yield* getMessage(org, sessionId, orphan.message_id!)).content, text("(edited)"))
        assert.deepStrictEqual(yield* replyJobs(sessionId), [{ triggers: 1 }])
        // An edit with a session change or metadata is refused (422).
        const combined = yield* org.call("POST", "/ingest", {
          to: "biz",
          from: "+1888",
          content: text("x"),
          edit_of_provider_message_id: "wamid.Q",
          metadata: { a: 1 }
        })
        assert.strictEqual(combined.status, 422)
      })
  )

  it.effect(
    "D24: the AI history shows the latest edit and renders a reply as a quote of its target; reactions are left out",
    () =>
      Effect.gen(function* () {
        const api = yield* TestApi
        const messages = yield* Messages
        const org = yield* api.organization()
        const session = yield* org.session()
        const question = yield* post(org, session.id, { role: "assistant", content: text("Which size?\nS, M or L") })
        yield* post(org, session.id, { role: "user", content: text("M"), reply_to_message_id: question.body.id })
        const typo = yield* post(org, session.id, { role: "user", content: text("red plase") })
        yield* org.call("PATCH", `/sessions/${session.id}/messages/${typo.body.id}`, { content: text("red please") })
        yield* post(org, session.id, {
          role: "user",
          content: { type: "reaction", emoji: "👍", message_id: question.body.id }
        })
        const image = yield* post(org, session.id, {
          role: "user",
          content: { type: "image", url: "https://example.com/a.png" }
        })
        yield* post(org, session.id, { role: "user", content: text("like this"), reply_to_message_id: image.body.id })
        const history = yield* messages.history(org.id, session.id, 50)
        assert.deepStrictEqual(history, [
          { role: "assistant", text: "Which size?\nS, M or L" },
          { role: "user", text: "> Which size?\n> S, M or L\n\nM" },
          { role: "user", text: "red please" },
          { role: "user", text: "> [image]\n\nlike this" }
        ])
      })
  )
})
