/**
 * Ordered delivery per conversation across processes (DECISIONS.md W7, issue
 * 16 item 1): two server processes deliver to an app with `ordering:
 * conversation` while a receiver fails the first attempt of some events and
 * one process is killed with SIGKILL and started again. For each of 50
 * conversations (1,000 events), no request of an event reaches the receiver
 * before every earlier event of its conversation was acknowledged with a 2xx,
 * and the first 2xx receipts are in commit order.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { callJson, ownDatabase, type ServerProcess, startServer, waitUntil } from "../support/Processes.ts"
import { startReceiver } from "../support/Receiver.ts"

const ADMIN = "ordering-admin-token"
const C = "/conversations/v2/api/v1"
const databaseUrl = ownDatabase("parley_ordering")

const env = () => ({
  DATABASE_URL: databaseUrl(),
  ADMIN_TOKEN: ADMIN,
  ALLOW_PRIVATE_NETWORK_TARGETS: "true",
  // A killed process's leases are due again after the time-out + 10 s.
  WEBHOOK_TIMEOUT_MS: "2000",
  WEBHOOK_RETRY_SCHEDULE: "100ms,200ms,400ms,1s,2s,5s,10s",
  LOG_LEVEL: "info"
})

/** A request expected to get 2xx; returns the parsed body. */
const call = async (server: ServerProcess, method: string, path: string, token: string, body?: unknown) => {
  const response = await callJson(server.baseUrl, method, path, token, body)
  if (response.status >= 300) throw new Error(`${method} ${path}: ${response.status} ${JSON.stringify(response.body)}`)
  return response.body
}

const waitFor = async (condition: () => boolean, timeoutMs: number, what: string) =>
  assert.isTrue(await waitUntil(condition, timeoutMs), `waiting ${timeoutMs} ms for ${what}`)

/** The conversation an envelope is about, and the resource id that places it in its conversation's commit order. */
const placeOf = (event: any): { conversation: string; id: string } =>
  event.type === "conversation.created"
    ? { conversation: event.data.object.id, id: event.data.object.id }
    : { conversation: event.data.object.conversation_id, id: event.data.object.id }

describe("ordered delivery across processes (W7)", () => {
  it.live(
    "1,000 events over 50 conversations, first attempts failing, a worker killed with SIGKILL: each conversation in commit order",
    () =>
      Effect.promise(async () => {
        /** Per event id: the responses given, in order (true = 2xx). */
        const responses = new Map<string, Array<boolean>>()
        /** Requests in arrival order: the event, and the events of its conversation acknowledged (2xx) before it arrived. */
        const arrivals: Array<{ readonly event: any; readonly before: ReadonlySet<string> }> = []
        /** Per conversation: resource ids in commit order (filled as the API responds, so checked at the end). */
        const commitOrder = new Map<string, Array<string>>()
        /** Per conversation: the resource ids of its events acknowledged with a 2xx so far. */
        const acknowledged = new Map<string, Set<string>>()
        const receiver = await startReceiver((_n, body) => {
          const event = JSON.parse(body)
          const place = placeOf(event)
          const done = acknowledged.get(place.conversation) ?? new Set<string>()
          arrivals.push({ event, before: new Set(done) })
          const given = responses.get(event.id) ?? []
          // About one event in six fails its first attempt (503), whichever process sends it.
          const fail = given.length === 0 && Number.parseInt(event.id.slice(-4), 16) % 6 === 0
          given.push(!fail)
          responses.set(event.id, given)
          if (!fail) {
            done.add(place.id)
            acknowledged.set(place.conversation, done)
          }
          return { status: fail ? 503 : 200, delayMs: Number.parseInt(event.id.slice(-2), 16) % 4 }
        })
        const servers: Array<ServerProcess> = []
        try {
          servers.push(await startServer(env()), await startServer(env()))
          const api = servers[1]!
          const org = await call(api, "POST", "/admin/v1/organizations", ADMIN, { name: "ordering" })
          const { token } = await call(api, "POST", `/admin/v1/organizations/${org.id}/api-keys`, ADMIN, {})
          await call(api, "POST", `/admin/v1/organizations/${org.id}/apps`, ADMIN, {
            name: "ordered receiver",
            webhook_url: receiver.url,
            events: ["conversation.created", "message.created"],
            ordering: "conversation"
          })
          // The commit order is known before the receiver can see an event: each write is awaited before the next
          // of its conversation, and its id is recorded before the write.
          const conversation = async (n: number) => {
            const session = await call(api, "POST", `${C}/sessions`, token, {
              contact_id: `+1555000${String(n).padStart(4, "0")}`,
              contact_name: `Contact ${n}`
            })
            const order = [session.conversation_id]
            commitOrder.set(session.conversation_id, order)
            for (let i = 0; i < 19; i++) {
              const message = await call(api, "POST", `${C}/sessions/${session.id}/messages`, token, {
                role: "user",
                content: { type: "text", text: `message ${i}` }
              })
              order.push(message.id)
            }
          }
          const writing = Promise.all(Array.from({ length: 50 }, (_, n) => conversation(n)))
          // The other process is killed while deliveries are in flight, and started again.
          await waitFor(() => arrivals.length >= 150, 60_000, "150 requests")
          servers[0]!.child.kill("SIGKILL")
          await servers[0]!.exited
          await writing
          servers.push(await startServer(env()))

          assert.strictEqual(commitOrder.size, 50)
          for (const order of commitOrder.values()) assert.strictEqual(order.length, 20)
          const delivered = () =>
            [...commitOrder.entries()].every(([c, order]) => order.every((id) => acknowledged.get(c)?.has(id)))
          await waitFor(delivered, 90_000, "every event acknowledged with a 2xx")

          const events = new Set(arrivals.map((arrival) => arrival.event.id))
          assert.strictEqual(events.size, 1000)
          const retried = [...responses.values()].filter((given) => given[0] === false).length
          assert.isAbove(retried, 50, "first attempts failed")
          // Every event committed before this one in its conversation had been acknowledged with a 2xx when it arrived.
          const outOfOrder = arrivals.filter(({ event, before }) => {
            const place = placeOf(event)
            const order = commitOrder.get(place.conversation)!
            return order.slice(0, order.indexOf(place.id)).some((id) => !before.has(id))
          })
          assert.deepStrictEqual(
            outOfOrder.map((arrival) => `${arrival.event.type} ${placeOf(arrival.event).id}`),
            [],
            "no request before every earlier event of its conversation was acknowledged with a 2xx"
          )
          // The first 2xx receipt of each event, per conversation, is the commit order.
          const firstAcknowledged = new Map<string, Array<string>>()
          const seen = new Set<string>()
          const counts = new Map<string, number>()
          for (const { event } of arrivals) {
            const n = counts.get(event.id) ?? 0
            counts.set(event.id, n + 1)
            if (responses.get(event.id)![n] !== true || seen.has(event.id)) continue
            seen.add(event.id)
            const place = placeOf(event)
            firstAcknowledged.set(place.conversation, [...(firstAcknowledged.get(place.conversation) ?? []), place.id])
          }
          for (const [c, order] of commitOrder) assert.deepStrictEqual(firstAcknowledged.get(c), order, c)
        } finally {
          for (const server of servers) if (server.child.exitCode === null) server.child.kill("SIGKILL")
          await receiver.close()
        }
      }),
    180_000
  )
})
