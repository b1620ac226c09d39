/**
 * A database outage an operator can read (DECISIONS.md O9): a server process
 * reaches PostgreSQL through a TCP proxy the test cuts and restores. While the
 * database cannot be reached, API requests get 503
 * `{"detail":"Service unavailable"}` with `Retry-After: 1` and `/readyz` 503;
 * the log has one WARN when the outage starts and one INFO when it ends, not a
 * line per request or per worker retry; afterwards requests succeed again.
 * A database that refuses a request's work for now (a lock held past
 * `DATABASE_LOCK_TIMEOUT`) answers the same 503, without an outage: never a 500.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import postgres from "postgres"
import { callJson, ownDatabase, type ServerProcess, startServer } from "../support/Processes.ts"
import { proxiedDatabase } from "../support/TcpProxy.ts"

const databaseUrl = ownDatabase("parley_outage")

/** The admin token of this file's servers: 32 characters or more, so start-up logs no warning (issue 38 item 3). */
const ADMIN = "admin-token-of-the-outage-tests-0123456789"

describe("database outage (O9)", () => {
  it.live(
    "503 with Retry-After while PostgreSQL is unreachable, one WARN and one INFO in the log, then service again",
    () =>
      Effect.promise(async () => {
        const { gate, url: viaProxy } = await proxiedDatabase(databaseUrl())
        const server = await startServer({
          DATABASE_URL: viaProxy,
          ADMIN_TOKEN: ADMIN,
          LOG_FORMAT: "json",
          LOG_LEVEL: "info"
        })
        try {
          const org = await callJson(server.baseUrl, "POST", "/admin/v1/organizations", ADMIN, { name: "Outage" })
          const key = await callJson(
            server.baseUrl,
            "POST",
            `/admin/v1/organizations/${org.body.id}/api-keys`,
            ADMIN,
            {}
          )
          const create = () =>
            fetch(`${server.baseUrl}/conversations/v2/api/v1/sessions`, {
              method: "POST",
              headers: { authorization: `Bearer ${key.body.token}`, "content-type": "application/json" },
              body: JSON.stringify({ contact_id: "+1555", contact_name: "Ada" })
            })
          assert.strictEqual((await create()).status, 201)

          await gate.cut()
          const during: Array<number> = []
          for (let i = 0; i < 20; i++) {
            const response = await create()
            during.push(response.status)
            if (response.status === 503) {
              assert.strictEqual(response.headers.get("retry-after"), "1")
              assert.deepStrictEqual(await response.json(), { detail: "Service unavailable" })
            } else await response.text()
            await new Promise((resolve) => setTimeout(resolve, 150))
          }
          assert.deepStrictEqual(new Set(during), new Set([503]), JSON.stringify(during))
          assert.strictEqual((await fetch(`${server.baseUrl}/readyz`)).status, 503)

          await gate.open()
          const deadline = Date.now() + 15_000
          let status = 0
          while (Date.now() < deadline) {
            status = (await create()).status
            if (status === 201) break
            await new Promise((resolve) => setTimeout(resolve, 200))
          }
          assert.strictEqual(status, 201, "requests succeed once the database is back")
          // The probe notices within about a second.
          await new Promise((resolve) => setTimeout(resolve, 2_000))
        } finally {
          server.child.kill("SIGTERM")
          await server.exited
          await gate.cut()
        }
        const entries = server
          .output()
          .split("\n")
          .filter((line) => line.startsWith("{"))
          .map((line) => JSON.parse(line) as { level: string; message: unknown })
        const loud = entries.filter((entry) => entry.level === "WARN" || entry.level === "ERROR")
        assert.strictEqual(loud.length, 1, JSON.stringify(loud, null, 1).slice(0, 3000))
        assert.match(String(loud[0]!.message), /^Database unreachable: .*requests answer 503/)
        const back = entries.filter((entry) => String(entry.message).startsWith("Database reachable again"))
        assert.strictEqual(back.length, 1, JSON.stringify(entries.map((entry) => entry.message)))
      }),
    120_000
  )
})

/** A new organization named `name` on `server`, its API key's token and a session of it (asserted 201). */
const organizationWithSession = async (server: ServerProcess, admin: string, name: string) => {
  const org = await callJson(server.baseUrl, "POST", "/admin/v1/organizations", admin, { name })
  const key = await callJson(server.baseUrl, "POST", `/admin/v1/organizations/${org.body.id}/api-keys`, admin, {})
  const token = key.body.token as string
  const session = await callJson(server.baseUrl, "POST", "/conversations/v2/api/v1/sessions", token, {
    contact_id: "+1555",
    contact_name: "Ada"
  })
  assert.strictEqual(session.status, 201)
  return { token, session }
}

/** Parses the JSON log lines of a server's output. */
const logEntries = (output: string) =>
  output
    .split("\n")
    .filter((line) => line.startsWith("{"))
    .map((line) => JSON.parse(line) as { level: string; message: unknown; request_id?: string })

describe("a database that does not respond (O9, issue 38 item 1)", () => {
  it.live(
    "requests respond 503 within REQUEST_TIMEOUT, one WARN and one INFO without a request id, and a keyed write retried afterwards is stored once",
    () =>
      Effect.promise(async () => {
        const { gate, url: viaProxy } = await proxiedDatabase(databaseUrl())
        const server = await startServer({
          DATABASE_URL: viaProxy,
          ADMIN_TOKEN: "admin-token-of-the-stalled-database-test",
          LOG_FORMAT: "json",
          LOG_LEVEL: "info",
          REQUEST_TIMEOUT: "2s",
          DATABASE_CONNECT_TIMEOUT: "1s"
        })
        const admin = "admin-token-of-the-stalled-database-test"
        try {
          const { token, session } = await organizationWithSession(server, admin, "Stall")
          const messages = `${server.baseUrl}/conversations/v2/api/v1/sessions/${session.body.id}/messages`
          const post = (text: string, idempotencyKey?: string) =>
            fetch(messages, {
              method: "POST",
              headers: {
                authorization: `Bearer ${token}`,
                "content-type": "application/json",
                ...(idempotencyKey === undefined ? {} : { "idempotency-key": idempotencyKey })
              },
              body: JSON.stringify({ role: "user", content: { type: "text", text } })
            })

          gate.stall()
          const started = Date.now()
          const during = await Promise.all([
            post("stalled, keyed", "stall-key-1"),
            post("stalled, plain"),
            fetch(`${server.baseUrl}/conversations/v2/api/v1/sessions/${session.body.id}`, {
              headers: { authorization: `Bearer ${token}` }
            }),
            fetch(`${server.baseUrl}/conversations/v2/api/v1/sessions`, {
              method: "POST",
              headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
              body: JSON.stringify({ contact_id: "+1556", contact_name: "Bea" })
            })
          ])
          const waited = Date.now() - started
          for (const response of during) {
            assert.strictEqual(response.status, 503)
            assert.strictEqual(response.headers.get("retry-after"), "1")
            assert.deepStrictEqual(await response.json(), { detail: "Service unavailable" })
          }
          // Bounded: REQUEST_TIMEOUT (2 s) and the time to give up the stuck statements, not forever.
          assert.isBelow(waited, 15_000)
          // A request arriving while the outage is known responds 503 too.
          const later = await post("later")
          assert.strictEqual(later.status, 503)
          await later.text()

          gate.release()
          const deadline = Date.now() + 20_000
          let status = 0
          while (Date.now() < deadline) {
            const response = await post("after the stall")
            status = response.status
            await response.text()
            if (status === 201) break
            await new Promise((resolve) => setTimeout(resolve, 200))
          }
          assert.strictEqual(status, 201, "requests succeed once the database responds again")
          // The retry of the keyed write: stored once, whether or not the stalled attempt committed (D19).
          const retried = await post("stalled, keyed", "stall-key-1")
          assert.strictEqual(retried.status, 201)
          await retried.text()
          const listed = await callJson(
            server.baseUrl,
            "POST",
            `/conversations/v2/api/v1/sessions/${session.body.id}/messages/search`,
            token,
            { session_id: session.body.id, limit: 1000 }
          )
          const keyed = (listed.body as Array<{ content: { text?: string } }>).filter(
            (message) => message.content.text === "stalled, keyed"
          )
          assert.strictEqual(keyed.length, 1)
          await new Promise((resolve) => setTimeout(resolve, 2_000))
        } finally {
          server.child.kill("SIGTERM")
          await server.exited
          await gate.cut()
        }
        const entries = logEntries(server.output())
        const loud = entries.filter((entry) => entry.level === "WARN" || entry.level === "ERROR")
        assert.strictEqual(loud.length, 1, JSON.stringify(loud, null, 1).slice(0, 3000))
        assert.match(String(loud[0]!.message), /^Database unreachable: /)
        const back = entries.filter((entry) => String(entry.message).startsWith("Database reachable again"))
        assert.strictEqual(back.length, 1, JSON.stringify(entries.map((entry) => entry.message)))
        // Issue 38 item 6: the end of an outage belongs to no request.
        assert.strictEqual(back[0]!.request_id, undefined)
      }),
    120_000
  )
})

describe("a database that refuses work for now (O9)", () => {
  it.live(
    "a lock held past DATABASE_LOCK_TIMEOUT answers 503 with Retry-After, one WARN, no outage and no 500; the retry then succeeds",
    () =>
      Effect.promise(async () => {
        const admin = "admin-token-of-the-lock-timeout-test-0123"
        const server = await startServer({
          DATABASE_URL: databaseUrl(),
          ADMIN_TOKEN: admin,
          LOG_FORMAT: "json",
          LOG_LEVEL: "info",
          DATABASE_LOCK_TIMEOUT: "200ms"
        })
        // Another client holds the messages table against writes (reads go on) while a message is posted.
        const holder = postgres(databaseUrl(), { max: 1, onnotice: () => {} })
        try {
          const { token, session } = await organizationWithSession(server, admin, "Locked")
          const post = () =>
            fetch(`${server.baseUrl}/conversations/v2/api/v1/sessions/${session.body.id}/messages`, {
              method: "POST",
              headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
              body: JSON.stringify({ role: "user", content: { type: "text", text: "Hello" } })
            })
          const locked = await holder.reserve()
          await locked`BEGIN`
          await locked`LOCK TABLE messages IN EXCLUSIVE MODE`
          const refused = await post()
          await locked`ROLLBACK`
          locked.release()
          assert.strictEqual(refused.status, 503)
          assert.strictEqual(refused.headers.get("retry-after"), "1")
          assert.deepStrictEqual(await refused.json(), { detail: "Service unavailable" })
          // Not an outage: the server is ready, and the retry is stored.
          assert.strictEqual((await fetch(`${server.baseUrl}/readyz`)).status, 200)
          const retried = await post()
          assert.strictEqual(retried.status, 201)
          await retried.text()
        } finally {
          await holder.end()
          server.child.kill("SIGTERM")
          await server.exited
        }
        const loud = logEntries(server.output()).filter((entry) => entry.level === "WARN" || entry.level === "ERROR")
        assert.strictEqual(loud.length, 1, JSON.stringify(loud, null, 1).slice(0, 3000))
        assert.strictEqual(loud[0]!.level, "WARN")
        assert.match(String(loud[0]!.message), /^Request refused by the database for now/)
      }),
    120_000
  )
})
