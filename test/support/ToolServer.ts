/**
 * A recording tool server for AI runtime tests (R2, A15, A16): an HTTP
 * server on loopback that answers each request with `respond(body)` and
 * records it, so a test sees what a run sent to a tool URL, or that nothing
 * was sent.
 */
import { createServer, type IncomingHttpHeaders } from "node:http"
import { Effect } from "effect"

/** A tool server on loopback responding with JSON; records each request. */
export const toolServer = (respond: (body: any) => { status: number; json: unknown }) =>
  Effect.acquireRelease(
    Effect.promise(
      () =>
        new Promise<{
          url: string
          requests: Array<{ method: string; url: string; headers: IncomingHttpHeaders; body: any }>
          close: () => Promise<void>
        }>((resolve) => {
          const requests: Array<{ method: string; url: string; headers: IncomingHttpHeaders; body: any }> = []
          const server = createServer((req, res) => {
            let text = ""
            req.on("data", (chunk) => (text += chunk))
            req.on("end", () => {
              const body = text === "" ? undefined : JSON.parse(text)
              requests.push({ method: req.method!, url: req.url!, headers: req.headers, body })
              const response = respond(body)
              res.writeHead(response.status, { "content-type": "application/json" })
              res.end(JSON.stringify(response.json))
            })
          })
          server.listen(0, "127.0.0.1", () => {
            const address = server.address() as { port: number }
            resolve({
              url: `http://127.0.0.1:${address.port}/tools`,
              requests,
              close: () =>
                new Promise<void>((done) => {
                  server.closeAllConnections()
                  server.close(() => done())
                })
            })
          })
        })
    ),
    (server) => Effect.promise(() => server.close())
  )
