/**
 * Ingest across two server processes on one database (D9: calls for one
 * (organization, channel_type, to, from) are serialized across every process by
 * a PostgreSQL advisory lock; D10: idempotency holds across processes too).
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { callJson, ownDatabase, startServer } from "../support/Processes.ts"

/** This file's own database: its server processes claim every organization's work. */
const databaseUrl = ownDatabase("parley_ingest")

const C = "/conversations/v2/api/v1"

describe("ingest on two server processes", () => {
  it.live(
    "50 concurrent calls for one pair over both give one conversation, one open session and 50 messages",
    () =>
      Effect.promise(async () => {
        // The 50 calls queue on one pair's lock (D9); on a loaded Citus cluster the last waits longer than the
        // default DATABASE_LOCK_TIMEOUT (10 s), and is then refused with 503 (test/Process/Outage.test.ts).
        // Here the wait is the point, so the bound is REQUEST_TIMEOUT's (30 s).
        const env = {
          DATABASE_URL: databaseUrl(),
          ADMIN_TOKEN: "ingest-processes",
          LOG_LEVEL: "error",
          DATABASE_LOCK_TIMEOUT: "30s"
        }
        const [one, two] = await Promise.all([startServer(env), startServer(env)])
        try {
          const json = callJson
          const org = (await json(one.baseUrl, "POST", "/admin/v1/organizations", "ingest-processes", { name: "I" }))
            .body
          const key = (
            await json(two.baseUrl, "POST", `/admin/v1/organizations/${org.id}/api-keys`, "ingest-processes", {})
          ).body
          const call = (i: number) =>
            json(i % 2 === 0 ? one.baseUrl : two.baseUrl, "POST", `${C}/ingest`, key.token, {
              to: "+4930123",
              from: "+4915199",
              contact: { name: "Ada" },
              content: { type: "text", text: `m${i}` },
              provider_message_id: `wamid.${i}`
            })
          const responses = await Promise.all(Array.from({ length: 50 }, (_, i) => call(i)))
          assert.deepStrictEqual(
            responses.map((response) => response.status),
            Array(50).fill(200),
            `${JSON.stringify(responses.filter((response) => response.status !== 200).slice(0, 3))}\n${one.output().slice(-3000)}\n${two.output().slice(-3000)}`
          )
          const bodies = responses.map((response) => response.body)
          assert.strictEqual(new Set(bodies.map((body) => body.conversation_id)).size, 1)
          assert.strictEqual(new Set(bodies.map((body) => body.session_id)).size, 1)
          assert.strictEqual(new Set(bodies.map((body) => body.message_id)).size, 50)
          assert.strictEqual(bodies.filter((body) => body.created_conversation).length, 1)
          assert.strictEqual(bodies.filter((body) => body.created_session).length, 1)
          const sessions = await json(two.baseUrl, "POST", `${C}/sessions/search`, key.token, {
            contact_id: "+4915199",
            limit: 100
          })
          assert.strictEqual(sessions.body.length, 1)
          assert.strictEqual(sessions.body[0].status, "open")
          assert.strictEqual(sessions.body[0].id, bodies[0].session_id)
          const sessionId: string = bodies[0].session_id
          const stored = await json(one.baseUrl, "POST", `${C}/sessions/${sessionId}/messages/search`, key.token, {
            session_id: sessionId,
            limit: 1000
          })
          assert.strictEqual(stored.body.length, 50)
          // D10 across processes: the same 50 calls again, concurrently, store nothing and return the first ids.
          const replayed = await Promise.all(Array.from({ length: 50 }, (_, i) => call(49 - i)))
          for (const [index, response] of replayed.entries()) {
            const first = bodies[49 - index]
            assert.strictEqual(response.status, 200)
            assert.deepStrictEqual(response.body, { ...first, created_conversation: false, created_session: false })
          }
          const again = await json(two.baseUrl, "POST", `${C}/sessions/${sessionId}/messages/search`, key.token, {
            session_id: sessionId,
            limit: 1000
          })
          assert.strictEqual(again.body.length, 50)
        } finally {
          one.child.kill("SIGTERM")
          two.child.kill("SIGTERM")
          assert.deepStrictEqual(await Promise.all([one.exited, two.exited]), [0, 0])
        }
      }),
    120_000
  )
})
