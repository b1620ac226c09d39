/**
 * A lean HTTP/1.1 keep-alive client for load phases that share the machine's
 * two cores with the server and PostgreSQL (`npm run bench -- webhooks`, end
 * to end): one request at a time per connection, its bytes built once by the
 * caller, the answer read by its `content-length` (chunked answers are
 * refused). Node's `http.request` cost the benchmark process about 0.2 ms of
 * CPU per request there, CPU the server then did not get (bench/README.md
 * "A lighter load generator").
 */
import { connect, type Socket } from "node:net"

/** An answer: the status code and the body as UTF-8 text. */
export interface Answer {
  readonly status: number
  readonly body: string
}

/** A connection to `host:port` sending requests built with {@link requestBytes}. */
export interface KeepAliveConnection {
  /** Sends `request` and answers the response; fails if the connection is closed or errs first. */
  readonly send: (request: Buffer) => Promise<Answer>
  readonly close: () => void
}

/** The bytes of a request with a JSON body (`content-length` set, keep-alive). */
export const requestBytes = (
  method: string,
  host: string,
  path: string,
  headers: Readonly<Record<string, string>>,
  body: string
): Buffer => {
  const lines = [`${method} ${path} HTTP/1.1`, `host: ${host}`]
  for (const [name, value] of Object.entries(headers)) lines.push(`${name}: ${value}`)
  lines.push(`content-length: ${Buffer.byteLength(body)}`, "", body)
  return Buffer.from(lines.join("\r\n"))
}

const headerEnd = Buffer.from("\r\n\r\n")

/** Opens a connection to `host:port`. */
export const openKeepAlive = (host: string, port: number): Promise<KeepAliveConnection> =>
  new Promise((resolve, reject) => {
    const socket: Socket = connect({ host, port, noDelay: true })
    let pending: { resolve: (answer: Answer) => void; reject: (error: unknown) => void } | undefined
    let buffered: Buffer = Buffer.alloc(0)
    /** The request waiting for its answer, now no longer waiting. */
    const take = () => {
      const waiting = pending
      pending = undefined
      return waiting
    }
    const fail = (error: unknown) => take()?.reject(error)
    socket.on("data", (chunk: Buffer) => {
      buffered = buffered.length === 0 ? chunk : Buffer.concat([buffered, chunk])
      const end = buffered.indexOf(headerEnd)
      if (end < 0) return
      const head = buffered.subarray(0, end).toString("latin1")
      const length = /\r\ncontent-length: *(\d+)/i.exec(head)
      if (length === null) {
        fail(new Error(`answer without content-length: ${head.split("\r\n")[0]}`))
        socket.destroy()
        return
      }
      const total = end + 4 + Number(length[1])
      if (buffered.length < total) return
      const answer = { status: Number(head.slice(9, 12)), body: buffered.subarray(end + 4, total).toString("utf8") }
      buffered = buffered.subarray(total)
      take()?.resolve(answer)
    })
    socket.on("error", (error) => {
      fail(error)
      reject(error)
    })
    let closed = false
    socket.on("close", () => {
      closed = true
      fail(new Error("connection closed"))
    })
    socket.once("connect", () =>
      resolve({
        send: (request) =>
          new Promise<Answer>((resolveAnswer, rejectAnswer) => {
            // A connection the server closed between requests fails the request, not hangs it.
            if (closed) return rejectAnswer(new Error("connection closed"))
            pending = { resolve: resolveAnswer, reject: rejectAnswer }
            socket.write(request)
          }),
        close: () => socket.end()
      })
    )
  })
