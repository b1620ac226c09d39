/**
 * One rendering for one shape (issue 39 item 8; migrations/0018_json_as_sent.ts):
 * a message, and a session with metadata, read back byte for byte as they were
 * first returned, from POST, GET, search, the export and the webhook event
 * alike; a stored JSON value keeps the members in the order the client sent
 * them (`type` first in content). Before, POST message answered PostgreSQL's
 * jsonb text (`{"text": "Hello!", "type": "text"}`) and GET
 * `{"type":"text","text":"Hello!"}`.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Redacted } from "effect"
import { SqlClient } from "effect/sql"
import * as Database from "../../src/Database/Database.ts"
import { emptyDatabase } from "../support/Database.ts"
import { TestApi, withApp } from "../support/TestApp.ts"

/** The raw `data.object` text of the organization's event of `type` about `id`, as the outbox stores it. */
const eventObjectText = (organizationId: string, type: string, id: string) =>
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const rows = yield* sql<{ body: string }>`SELECT body FROM events
      WHERE organization_id = ${organizationId} AND type = ${type} ORDER BY id`
    const prefix = '"data":{"object":'
    const texts = rows
      .map((row) => row.body.slice(row.body.indexOf(prefix) + prefix.length, -2))
      .filter((text) => JSON.parse(text).id === id)
    assert.strictEqual(texts.length, 1, `one ${type} event of ${id}`)
    return texts[0]!
  })

withApp()("one rendering for one shape (issue 39 item 8)", (it) => {
  it.effect("a message reads back byte for byte from POST, GET, search, the export and message.created", () =>
    Effect.gen(function* () {
      const api = yield* TestApi
      const org = yield* api.organization()
      const session = yield* org.session()
      // Members out of the order the schema lists them, and nested JSON in the function call of no type.
      const created = yield* org.call("POST", `/sessions/${session.id}/messages`, {
        role: "user",
        content: { text: "Hello!", type: "text" }
      })
      assert.strictEqual(created.status, 201)
      assert.include(created.text, '"content":{"type":"text","text":"Hello!"}')
      const path = `/sessions/${session.id}/messages/${created.body.id}`
      assert.strictEqual((yield* org.call("GET", path)).text, created.text)
      const searched = yield* org.call("POST", `/sessions/${session.id}/messages/search`, { session_id: session.id })
      assert.strictEqual(searched.text, `[${created.text}]`)
      const exported = yield* org.call("GET", `/data/messages?session_id=${session.id}`)
      assert.strictEqual(exported.status, 200, exported.text)
      assert.strictEqual(exported.text, `[${created.text}]`)
      assert.strictEqual(yield* eventObjectText(org.id, "message.created", created.body.id), created.text)

      // After a delivery update, the PATCH response, GET and message.updated are alike too.
      const updated = yield* org.call("PATCH", path, { delivery_status: "sent" })
      assert.strictEqual(updated.status, 200)
      assert.strictEqual((yield* org.call("GET", path)).text, updated.text)
      assert.strictEqual(yield* eventObjectText(org.id, "message.updated", created.body.id), updated.text)
    })
  )

  it.effect("an ingested message reads back from GET as its message.created event carries it", () =>
    Effect.gen(function* () {
      const api = yield* TestApi
      const org = yield* api.organization()
      const ingested = yield* org.call("POST", "/ingest", {
        to: "+4930123456",
        from: "+4915112345678",
        content: { url: "https://example.com/a.pdf", name: "a.pdf", mime_type: "application/pdf", type: "file" },
        provider_message_id: "wamid.render"
      })
      assert.strictEqual(ingested.status, 200, ingested.text)
      const read = yield* org.call("GET", `/sessions/${ingested.body.session_id}/messages/${ingested.body.message_id}`)
      assert.include(
        read.text,
        '"content":{"type":"file","url":"https://example.com/a.pdf","mime_type":"application/pdf","name":"a.pdf"}'
      )
      assert.strictEqual(yield* eventObjectText(org.id, "message.created", ingested.body.message_id), read.text)
    })
  )

  it.effect("a session's metadata keeps the client's order and spacing-free text everywhere (D2, W1)", () =>
    Effect.gen(function* () {
      const api = yield* TestApi
      const org = yield* api.organization()
      const body = '{"contact_id":"c1","contact_name":"Ada","metadata":{"b":1,"a":{"z":[1, 2],"y":null}}}'
      const created = yield* org.call("POST", "/sessions", body)
      assert.strictEqual(created.status, 201, created.text)
      assert.include(created.text, '"metadata":{"b":1,"a":{"z":[1,2],"y":null}}')
      assert.strictEqual((yield* org.call("GET", `/sessions/${created.body.id}`)).text, created.text)
      const searched = yield* org.call("POST", "/sessions/search", { metadata: { a: { y: null } } })
      assert.strictEqual(searched.text, `[${created.text}]`)
      const exported = yield* org.call("GET", "/data/sessions")
      assert.strictEqual(exported.text, `[${created.text}]`)
      assert.strictEqual(yield* eventObjectText(org.id, "session.created", created.body.id), created.text)
    })
  )
})

describe("migration 0018 (issue 39 item 8)", () => {
  it.live("stored jsonb content and metadata are rewritten as the service writes them", () =>
    Effect.gen(function* () {
      const database = yield* Effect.acquireRelease(
        Effect.promise(() => emptyDatabase("json_as_sent")),
        (owned) => Effect.promise(owned.drop)
      )
      yield* Effect.gen(function* () {
        const sql = yield* SqlClient.SqlClient
        yield* Database.migrateThrough(17)
        const [ids] = yield* sql<{ org: string; conversation: string; session: string; message: string }>`
          WITH o AS (INSERT INTO organizations (id, name, created_at) VALUES (gen_random_uuid(), 'before 0018', now())
            RETURNING id),
          c AS (INSERT INTO conversations (id, organization_id, contact_id, channel_type, channel_to, created_at)
            SELECT gen_random_uuid(), o.id, 'c1', '', '', now() FROM o RETURNING id, organization_id),
          s AS (INSERT INTO sessions (id, organization_id, conversation_id, contact_id, status, metadata, created_at)
            SELECT gen_random_uuid(), c.organization_id, c.id, 'c1', 'open', '{"b": 1, "a": [1, 2]}'::jsonb, now()
            FROM c RETURNING id, organization_id, conversation_id),
          m AS (INSERT INTO messages (id, organization_id, session_id, conversation_id, role, content, metadata, created_at)
            SELECT gen_random_uuid(), s.organization_id, s.id, s.conversation_id, 'user',
              '{"type": "audio", "url": "https://example.com/a.ogg", "transcript": "hi"}'::jsonb, '{"k": {"v": 1}}'::jsonb,
              now() FROM s RETURNING id)
          SELECT o.id AS org, c.id AS conversation, s.id AS session, m.id AS message FROM o, c, s, m`
        const [before] = yield* sql<{ content: string }>`SELECT content::text FROM messages WHERE id = ${ids!.message}`
        assert.strictEqual(before!.content, '{"url": "https://example.com/a.ogg", "type": "audio", "transcript": "hi"}')

        const applied = yield* Database.migrate
        assert.strictEqual(applied[0]?.[0], 18)
        const [message] = yield* sql<{ content: string; metadata: string }>`
          SELECT content::text, metadata::text FROM messages WHERE id = ${ids!.message}`
        assert.strictEqual(message!.content, '{"type":"audio","url":"https://example.com/a.ogg","transcript":"hi"}')
        assert.strictEqual(message!.metadata, '{"k":{"v":1}}')
        const [session] = yield* sql<{
          metadata: string
        }>`SELECT metadata::text FROM sessions WHERE id = ${ids!.session}`
        assert.strictEqual(session!.metadata, '{"a":[1,2],"b":1}')
        const found = yield* sql`SELECT id FROM sessions WHERE metadata::jsonb @> '{"a": [2]}'`
        assert.strictEqual(found.length, 1)
      }).pipe(Effect.provide(Database.clientLayer(Redacted.make(database.url), 1)))
    }).pipe(Effect.scoped)
  )
})
