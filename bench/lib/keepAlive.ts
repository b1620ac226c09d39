/**
 * Lean HTTP/1.1 over keep-alive connections, for load phases that share the
 * machine's two cores with the server and PostgreSQL (`npm run bench --
 * webhooks`): a client sending one request at a time per connection, its
 * bytes built once by the caller, and a receiver responding to every request
 * with 200 and no body. Messages are framed by their `content-length` (chunked
 * ones are refused). Node's `http.request` cost the benchmark process about
 * 0.2 ms of CPU per request end to end, and Node's `http` server about 0.1 ms
 * per webhook, CPU the server then did not get (bench/README.md "webhooks:
 * delivery"; measured in "Fewer writes per delivery, and a lighter load
 * generator" and "A lighter receiver" of `git show 73e3eb4:bench/README.md`).
 */
import { connect, createServer, type Server, type Socket } from "node:net"

/** A response: the status code and the body as UTF-8 text. */
export interface LeanResponse {
  readonly status: number
  readonly body: string
}

/** A connection to `host:port` sending requests built with {@link requestBytes}. */
export interface KeepAliveConnection {
  /** Sends `request` and returns the response; fails if the connection is closed or errs first. */
  readonly send: (request: Buffer) => Promise<LeanResponse>
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

/** One HTTP/1.1 message: its head (start line and headers, latin1, no blank line) and its body. */
interface Message {
  readonly head: string
  readonly body: Buffer
}

/**
 * The message at the start of `buffered`, framed by its `content-length`, and
 * the bytes after it; undefined while it is incomplete; an error for a head
 * without a `content-length` of digits.
 */
const takeMessage = (buffered: Buffer): { readonly message: Message; readonly rest: Buffer } | Error | undefined => {
  const end = buffered.indexOf(headerEnd)
  if (end < 0) return undefined
  const head = buffered.subarray(0, end).toString("latin1")
  const length = headerOf(head, "content-length")?.trim()
  if (length === undefined || !/^\d+$/.test(length)) {
    return new Error(`message without a content-length: ${head.split("\r\n")[0]}`)
  }
  const total = end + 4 + Number(length)
  if (buffered.length < total) return undefined
  return { message: { head, body: buffered.subarray(end + 4, total) }, rest: buffered.subarray(total) }
}

/**
 * Reads the messages of `socket` ({@link takeMessage}): the complete ones of
 * each chunk go to `onMessages`, in order; a message without a
 * `content-length` destroys the socket with an error (`error` and `close`
 * events), after the messages before it.
 */
const readMessages = (socket: Socket, onMessages: (messages: ReadonlyArray<Message>) => void): void => {
  let buffered: Buffer = Buffer.alloc(0)
  socket.on("data", (chunk: Buffer) => {
    buffered = buffered.length === 0 ? chunk : Buffer.concat([buffered, chunk])
    const messages: Array<Message> = []
    let taken = takeMessage(buffered)
    while (taken !== undefined && !(taken instanceof Error)) {
      messages.push(taken.message)
      buffered = taken.rest
      taken = takeMessage(buffered)
    }
    if (messages.length > 0) onMessages(messages)
    if (taken instanceof Error) socket.destroy(taken)
  })
}

const headerPatterns = new Map<string, RegExp>()

/** The value of header `name` (lower case) in a message's `head`, or undefined. */
export const headerOf = (head: string, name: string): string | undefined => {
  let pattern = headerPatterns.get(name)
  if (pattern === undefined) {
    pattern = new RegExp(`\r\n${name}: *([^\r]*)`, "i")
    headerPatterns.set(name, pattern)
  }
  return pattern.exec(head)?.[1]
}

/** Opens a connection to `host:port`. */
export const openKeepAlive = (host: string, port: number): Promise<KeepAliveConnection> =>
  new Promise((resolve, reject) => {
    const socket: Socket = connect({ host, port, noDelay: true })
    let pending: { resolve: (response: LeanResponse) => void; reject: (error: unknown) => void } | undefined
    /** The request waiting for its response, now no longer waiting. */
    const take = () => {
      const waiting = pending
      pending = undefined
      return waiting
    }
    const fail = (error: unknown) => take()?.reject(error)
    readMessages(socket, (messages) => {
      for (const { head, body } of messages) {
        take()?.resolve({ status: Number(head.slice(9, 12)), body: body.toString("utf8") })
      }
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
          new Promise<LeanResponse>((resolveResponse, rejectResponse) => {
            // A connection the server closed between requests fails the request, not hangs it.
            if (closed) return rejectResponse(new Error("connection closed"))
            pending = { resolve: resolveResponse, reject: rejectResponse }
            socket.write(request)
          }),
        close: () => socket.end()
      })
    )
  })

/** A receiver listening on 127.0.0.1 ({@link listenLean}). */
export interface LeanReceiver {
  readonly port: number
  /** Stops listening and closes every connection. */
  readonly close: () => Promise<void>
}

const ok = Buffer.from("HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n")

/**
 * Listens on 127.0.0.1 (a free port) and responds to every request with 200 and no
 * body, in order, after calling `onRequest` with its head ({@link headerOf};
 * the request line is its first line) and body. A request without a
 * `content-length` gets no response and closes its connection; an
 * exception of `onRequest` is thrown, as Node's `http` server would.
 */
export const listenLean = (onRequest: (head: string, body: Buffer) => void): Promise<LeanReceiver> =>
  new Promise((resolve, reject) => {
    const sockets = new Set<Socket>()
    const server: Server = createServer({ noDelay: true }, (socket) => {
      sockets.add(socket)
      socket.on("close", () => sockets.delete(socket))
      socket.on("error", () => socket.destroy())
      readMessages(socket, (requests) => {
        for (const { head, body } of requests) onRequest(head, body)
        socket.write(requests.length === 1 ? ok : Buffer.concat(requests.map(() => ok)))
      })
    })
    server.once("error", reject)
    server.listen(0, "127.0.0.1", () =>
      resolve({
        port: (server.address() as { port: number }).port,
        close: () =>
          new Promise<void>((closed) => {
            for (const socket of sockets) socket.destroy()
            server.close(() => closed())
          })
      })
    )
  })
