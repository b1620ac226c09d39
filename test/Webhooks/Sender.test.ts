/**
 * The delivery worker's sender over `undici` (`Worker.ts`
 * `undiciSendWebhook` with `Shared/Ssrf.ts` `guardedDispatcher`, DECISIONS.md W3-W6) against real sockets: the envelope
 * and headers arrive as sent, the response's status is read, a receiver that
 * does not respond is timed out and its request aborted, a closed port and a
 * refused address are recorded as such, an https URL speaks TLS, and a
 * response's body past 128 KiB is not read: its connection is closed instead.
 */
import { createServer, type IncomingMessage, type Server } from "node:http"
import type { AddressInfo } from "node:net"
import { assert, describe, it } from "@effect/vitest"
import { Duration, Effect } from "effect"
import { freePort } from "../../src/Database/Embedded.ts"
import { makeIdGenerator } from "../../src/Shared/Ids.ts"
import { guardedDispatcher } from "../../src/Shared/Ssrf.ts"
import type { ClaimedDelivery } from "../../src/Webhooks/Repo.ts"
import { generateSecret } from "../../src/Webhooks/Signing.ts"
import { makeAttempt, undiciSendWebhook } from "../../src/Webhooks/Worker.ts"

const newId = makeIdGenerator()

/**
 * A local server responding to each request with the status `statusOf` gives
 * (or never, when it gives undefined) and the body `responseBody`; it counts
 * the connections it saw closed.
 */
const serve = (
  statusOf: (request: IncomingMessage, body: string) => number | undefined,
  responseBody: string | Buffer = "a body the worker reads and drops"
) =>
  Effect.acquireRelease(
    Effect.promise(async () => {
      const requests: Array<{ url: string | undefined; headers: IncomingMessage["headers"]; body: string }> = []
      const closed: Array<boolean> = []
      const connections = { closed: 0 }
      const server: Server = createServer((request, response) => {
        const chunks: Array<Buffer> = []
        request.on("data", (chunk: Buffer) => chunks.push(chunk))
        request.on("end", () => {
          const body = Buffer.concat(chunks).toString("utf8")
          requests.push({ url: request.url, headers: request.headers, body })
          const status = statusOf(request, body)
          if (status === undefined) {
            response.on("close", () => closed.push(true))
            return
          }
          response.statusCode = status
          response.end(responseBody)
        })
      })
      server.on("connection", (socket) => socket.on("close", () => connections.closed++))
      await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
      return { server, requests, closed, connections, port: (server.address() as AddressInfo).port }
    }),
    ({ server }) =>
      Effect.promise(
        () =>
          new Promise<void>((resolve) => {
            server.closeAllConnections()
            server.close(() => resolve())
          })
      )
  )

const delivery = (webhookUrl: string): ClaimedDelivery => {
  const eventId = newId()
  return {
    organization_id: newId(),
    id: newId(),
    app_id: newId(),
    event_id: eventId,
    attempts: 0,
    webhook_url: webhookUrl,
    signing_secret: generateSecret(),
    previous_signing_secret: null,
    body: JSON.stringify({ id: eventId, type: "message.created", data: { object: { text: "héllo \u2028 ✓" } } }),
    traceparent: null
  }
}

/** The worker's sender over a guarded dispatcher (`allowPrivate`: W6 off), destroyed with the scope. */
const sender = (allowPrivate: boolean) => Effect.map(guardedDispatcher(allowPrivate), undiciSendWebhook)

const options = { timeoutMs: 300, schedule: [Duration.seconds(1)], allowPrivate: true }

describe("the worker's sender over undici (W3-W6)", () => {
  it.live("W3, W4: the envelope arrives byte for byte with its headers; the status is the response's", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const receiver = yield* serve(() => 202)
        const attempt = makeAttempt(yield* sender(true), options)
        const claimed = delivery(`http://127.0.0.1:${receiver.port}/hook?x=1`)
        const result = yield* attempt(claimed)
        assert.deepStrictEqual([result.status, result.statusCode, result.error], ["succeeded", 202, null])
        const [request] = receiver.requests
        assert.strictEqual(request!.url, "/hook?x=1")
        assert.strictEqual(request!.body, claimed.body)
        assert.strictEqual(request!.headers["webhook-id"], claimed.event_id)
        assert.strictEqual(request!.headers["content-type"], "application/json")
        assert.strictEqual(request!.headers["content-length"], String(Buffer.byteLength(claimed.body)))
        assert.strictEqual(request!.headers["user-agent"], "Parley-Webhooks/1")
        assert.match(String(request!.headers["webhook-signature"]), /^v1,[A-Za-z0-9+/]+=*$/)
        assert.match(String(request!.headers.traceparent), /^00-[0-9a-f]{32}-[0-9a-f]{16}-0[01]$/)
      })
    )
  )

  it.live("W5: a receiver that does not respond is timed out and its request aborted", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const receiver = yield* serve(() => undefined)
        const attempt = makeAttempt(yield* sender(true), options)
        const result = yield* attempt(delivery(`http://127.0.0.1:${receiver.port}/hook`))
        assert.deepStrictEqual(
          [result.status, result.statusCode, result.error],
          ["pending", null, "Timed out after 300 ms"]
        )
        yield* Effect.promise(() => new Promise((resolve) => setTimeout(resolve, 200)))
        assert.deepStrictEqual(receiver.closed, [true], "the request's connection was closed")
      })
    )
  )

  it.live("W5, W6: a closed port, a refused host name and an https URL to a plain-HTTP port are failures", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const receiver = yield* serve(() => 200)
        const port = yield* Effect.promise(() => freePort())
        const open = makeAttempt(yield* sender(true), options)
        const refusedPort = yield* open(delivery(`http://127.0.0.1:${port}/hook`))
        assert.match(String(refusedPort.error), /^ECONNREFUSED: /)
        const tls = yield* open(delivery(`https://127.0.0.1:${receiver.port}/hook`))
        assert.strictEqual(tls.statusCode, null)
        assert.notStrictEqual(tls.error, null)
        // W6: the guarded dispatcher's lookup refuses what a host name resolves to when it is not public.
        const guarded = makeAttempt(yield* sender(false), { ...options, allowPrivate: false })
        const refusedName = yield* guarded(delivery(`http://localhost:${receiver.port}/hook`))
        assert.match(String(refusedName.error), /^Refused: Address (127\.0\.0\.1|::1) is not a public address/)
        assert.strictEqual(receiver.requests.length, 0, "nothing reached the receiver")
      })
    )
  )

  it.live("W5: a response's body past 128 KiB is not read: the status counts and its connection is closed", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const receiver = yield* serve(() => 200, Buffer.alloc(4 * 1024 * 1024, 0x61))
        const attempt = makeAttempt(yield* sender(true), options)
        const result = yield* attempt(delivery(`http://127.0.0.1:${receiver.port}/hook`))
        assert.deepStrictEqual([result.status, result.statusCode, result.error], ["succeeded", 200, null])
        yield* Effect.promise(() => new Promise((resolve) => setTimeout(resolve, 200)))
        assert.strictEqual(receiver.connections.closed, 1, "the connection was closed, not read to its end")
        // The next attempt opens a new connection.
        const next = yield* attempt(delivery(`http://127.0.0.1:${receiver.port}/hook`))
        assert.strictEqual(next.statusCode, 200)
        assert.strictEqual(receiver.requests.length, 2)
      })
    )
  )
})
