/**
 * A local webhook receiver for tests: a node:http server on 127.0.0.1 only
 * (loopback, never another address) that records every request and responds
 * with a status (and after a delay) chosen per request.
 */
import { createServer, type IncomingHttpHeaders } from "node:http"
import type { AddressInfo } from "node:net"
import { Effect } from "effect"

/** One request the receiver got. */
export interface Received {
  readonly headers: IncomingHttpHeaders
  readonly body: string
  /** Epoch ms when the body was complete. */
  readonly at: number
}

/** How to respond to the `n`-th request (0-based) carrying `body`: status and delay in ms. */
export type Responder = (n: number, body: string) => { readonly status: number; readonly delayMs?: number }

/** A running receiver. */
export interface Receiver {
  readonly url: string
  readonly received: Array<Received>
  /** The parsed envelopes received, in order. */
  readonly events: () => Array<any>
  /** Replaces the responder. */
  setResponder(responder: Responder): void
  close(): Promise<void>
}

/** Starts a receiver on 127.0.0.1 (promise form, for process tests). */
export const startReceiver = async (responder: Responder = () => ({ status: 200 })): Promise<Receiver> => {
  const received: Array<Received> = []
  let respond = responder
  let n = 0
  const server = createServer((request, response) => {
    const chunks: Array<Buffer> = []
    request.on("data", (chunk: Buffer) => chunks.push(chunk))
    request.on("end", () => {
      const body = Buffer.concat(chunks).toString("utf8")
      received.push({ headers: request.headers, body, at: Date.now() })
      const chosen = respond(n++, body)
      const send = () => {
        response.statusCode = chosen.status
        response.end("ok")
      }
      if (chosen.delayMs === undefined || chosen.delayMs <= 0) send()
      else setTimeout(send, chosen.delayMs)
    })
  })
  server.keepAliveTimeout = 60_000
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  const { port } = server.address() as AddressInfo
  return {
    url: `http://127.0.0.1:${port}/hook`,
    received,
    events: () => received.map((r) => JSON.parse(r.body)),
    setResponder: (next) => {
      respond = next
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections()
        server.close(() => resolve())
      })
  }
}

/** A receiver closed with the test's scope. */
export const receiver = (responder?: Responder) =>
  Effect.acquireRelease(
    Effect.promise(() => startReceiver(responder)),
    (r) => Effect.promise(() => r.close())
  )

/** Waits (polling every 20 ms) until `condition` holds; fails after `timeoutMs`. */
export const eventually = (condition: () => boolean, timeoutMs = 10_000, what = "condition") =>
  Effect.promise(async () => {
    const deadline = Date.now() + timeoutMs
    while (!condition()) {
      if (Date.now() > deadline) throw new Error(`Timed out after ${timeoutMs} ms waiting for ${what}`)
      await new Promise((resolve) => setTimeout(resolve, 20))
    }
  })
