/**
 * Webhook delivery across processes (DECISIONS.md W2, W5, O1, O5): two server
 * processes on one database deliver every event exactly once in normal
 * operation; a process killed with SIGKILL while 1,000 deliveries are pending
 * loses none of them after a restart (duplicates allowed, losses not).
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Redacted } from "effect"
import { SqlClient } from "effect/sql"
import * as Database from "../../src/Database/Database.ts"
import { ownDatabase, type ServerProcess, startServer } from "../support/Processes.ts"
import { startReceiver } from "../support/Receiver.ts"

const ADMIN = "process-admin-token"
const C = "/conversations/v2/api/v1"

/** This file's own database: its server processes claim every organization's deliveries. */
const databaseUrl = ownDatabase("parley_webhooks")

const env = (extra: Record<string, string> = {}) => ({
  DATABASE_URL: databaseUrl(),
  ADMIN_TOKEN: ADMIN,
  ALLOW_PRIVATE_NETWORK_TARGETS: "true",
  WEBHOOK_TIMEOUT_MS: "1000",
  WEBHOOK_RETRY_SCHEDULE: "200ms,500ms,1s",
  LOG_LEVEL: "info",
  ...extra
})

const call = async (server: ServerProcess, method: string, path: string, token: string, body?: unknown) => {
  const response = await fetch(`${server.baseUrl}${path}`, {
    method,
    headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
    ...(body !== undefined ? { body: JSON.stringify(body) } : {})
  })
  const text = await response.text()
  if (response.status >= 300) throw new Error(`${method} ${path}: ${response.status} ${text}`)
  return text === "" ? undefined : JSON.parse(text)
}

/** An organization with an API key and an app subscribed to message.created at `url`. */
const setUp = async (server: ServerProcess, url: string) => {
  const org = await call(server, "POST", "/admin/v1/organizations", ADMIN, { name: "processes" })
  const key = await call(server, "POST", `/admin/v1/organizations/${org.id}/api-keys`, ADMIN, {})
  const app = await call(server, "POST", `/admin/v1/organizations/${org.id}/apps`, ADMIN, {
    name: "receiver",
    webhook_url: url,
    events: ["message.created"]
  })
  return { orgId: org.id as string, token: key.token as string, appId: app.id as string }
}

const waitFor = async (condition: () => boolean, timeoutMs: number, what: string) => {
  const deadline = Date.now() + timeoutMs
  while (!condition()) {
    if (Date.now() > deadline) throw new Error(`Timed out after ${timeoutMs} ms waiting for ${what}`)
    await new Promise((resolve) => setTimeout(resolve, 50))
  }
}

const stop = async (server: ServerProcess) => {
  if (server.child.exitCode !== null || server.child.signalCode !== null) return null
  server.child.kill("SIGTERM")
  return await server.exited
}

const runSql = <A extends object>(statement: string, params: ReadonlyArray<unknown> = []) =>
  Effect.runPromise(
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      return (yield* sql.unsafe<A>(statement, params as Array<unknown>)) as ReadonlyArray<A>
    }).pipe(Effect.provide(Database.clientLayer(Redacted.make(databaseUrl()), 1)), Effect.scoped)
  )

/** Inserts `n` committed message.created events of the organization in one transaction (fan-out: W2). */
const insertEvents = (orgId: string, n: number) =>
  runSql(
    `WITH ids AS (SELECT parley_uuid_v7() AS id FROM generate_series(1, $2::int))
     INSERT INTO events (id, organization_id, type, body, created_at)
     SELECT id, $1::uuid, 'message.created',
       json_build_object('id', id::text, 'timestamp', 0, 'type', 'message.created',
         'organization_id', $1::text, 'data', json_build_object('object', json_build_object()))::text, now()
     FROM ids`,
    [orgId, n]
  )

describe("webhook workers in several processes", () => {
  it.live(
    "two processes deliver a burst of 500 events each exactly once (W2, O1)",
    () =>
      Effect.promise(async () => {
        const receiver = await startReceiver()
        const servers: Array<ServerProcess> = []
        try {
          // A generous attempt time-out: on a loaded machine an attempt timed out at 1 s is retried and its event
          // arrives twice, as at-least-once allows (W2, W5); this test is about two processes never claiming one
          // delivery both.
          const burstEnv = env({ WEBHOOK_TIMEOUT_MS: "10000" })
          servers.push(await startServer(burstEnv), await startServer(burstEnv))
          const [a, b] = servers as [ServerProcess, ServerProcess]
          const { token } = await setUp(a, receiver.url)
          const session = await call(a, "POST", `${C}/sessions`, token, { contact_id: "+1", contact_name: "P" })
          const burst = async (server: ServerProcess, label: string) => {
            for (let i = 0; i < 500; i += 25) {
              await Promise.all(
                Array.from({ length: 25 }, (_, j) =>
                  call(server, "POST", `${C}/sessions/${session.id}/messages`, token, {
                    role: "user",
                    content: { type: "text", text: `${label}-${i + j}` }
                  })
                )
              )
            }
          }
          await Promise.all([burst(a, "a"), burst(b, "b")])
          await waitFor(() => receiver.received.length >= 1000, 90_000, "1000 deliveries")
          await new Promise((resolve) => setTimeout(resolve, 1500))
          const ids = receiver.received.map((r) => String(r.headers["webhook-id"]))
          assert.strictEqual(new Set(ids).size, 1000)
          assert.strictEqual(ids.length, 1000, "no event was delivered twice")
          const codes = await Promise.all(servers.map(stop))
          assert.deepStrictEqual(codes, [0, 0])
        } finally {
          for (const server of servers) if (server.child.exitCode === null) server.child.kill("SIGKILL")
          await receiver.close()
        }
      }),
    // 1,000 POSTs: about 25 s on a Citus cluster beside another file, past 120 s in one .ci/run (O11).
    240_000
  )

  it.live(
    "kill -9 with 1,000 deliveries pending: after a restart every event arrives (W2, O5)",
    () =>
      Effect.promise(async () => {
        const receiver = await startReceiver(() => ({ status: 200, delayMs: 100 }))
        const servers: Array<ServerProcess> = []
        try {
          const first = await startServer(env())
          servers.push(first)
          const { orgId } = await setUp(first, receiver.url)
          // 1,000 committed events in one transaction: the fan-out makes 1,000 pending deliveries (W2).
          await insertEvents(orgId, 1000)
          await waitFor(() => receiver.received.length >= 20, 20_000, "the first deliveries")
          first.child.kill("SIGKILL")
          await first.exited
          const [{ pending }] = (await runSql<{ pending: number }>(
            `SELECT count(*)::int AS pending FROM deliveries WHERE organization_id = $1 AND status = 'pending'`,
            [orgId]
          )) as [{ pending: number }]
          assert.isAtLeast(pending, 900)

          const second = await startServer(env())
          servers.push(second)
          const expected = await runSql<{ id: string }>(`SELECT id::text FROM events WHERE organization_id = $1`, [
            orgId
          ])
          assert.strictEqual(expected.length, 1000)
          const seen = () => new Set(receiver.received.map((r) => String(r.headers["webhook-id"])))
          await waitFor(() => seen().size >= 1000, 60_000, "all 1000 event ids")
          const ids = seen()
          for (const { id } of expected) assert.isTrue(ids.has(id), id)
          assert.strictEqual(await stop(second), 0)
        } finally {
          for (const server of servers) if (server.child.exitCode === null) server.child.kill("SIGKILL")
          await receiver.close()
        }
      }),
    120_000
  )

  it.live(
    "SIGTERM: attempts in flight finish and are recorded, no lease is left behind, exit 0 (O5)",
    () =>
      Effect.promise(async () => {
        const receiver = await startReceiver(() => ({ status: 200, delayMs: 300 }))
        // A timeout well above the receiver's delay: under load an attempt must not time out (it would
        // be recorded as a failure while the receiver counted it).
        const server = await startServer(env({ WEBHOOK_TIMEOUT_MS: "10000" }))
        try {
          const { orgId } = await setUp(server, receiver.url)
          await insertEvents(orgId, 200)
          await waitFor(() => receiver.received.length >= 10, 20_000, "deliveries in flight")
          server.child.kill("SIGTERM")
          assert.strictEqual(await server.exited, 0)
          const [row] = (await runSql<{ succeeded: number; leased: number; pending: number; attempts: number }>(
            `SELECT count(*) FILTER (WHERE status = 'succeeded')::int AS succeeded,
               count(*) FILTER (WHERE leased_by IS NOT NULL)::int AS leased,
               count(*) FILTER (WHERE status = 'pending')::int AS pending,
               coalesce(sum(cardinality(attempt_log)), 0)::int AS attempts
             FROM deliveries WHERE organization_id = $1`,
            [orgId]
          )) as [{ succeeded: number; leased: number; pending: number; attempts: number }]
          assert.strictEqual(row.leased, 0, server.output())
          // Every request the receiver saw was an attempt that finished and was recorded.
          assert.strictEqual(row.attempts, receiver.received.length)
          assert.strictEqual(row.succeeded, receiver.received.length)
          assert.strictEqual(row.succeeded + row.pending, 200)
        } finally {
          if (server.child.exitCode === null) server.child.kill("SIGKILL")
          await receiver.close()
        }
      }),
    60_000
  )
})
