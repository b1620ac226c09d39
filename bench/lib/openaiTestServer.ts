/**
 * An OpenAI-compatible test server (Chat Completions, the API of
 * `src/Runtime/Providers/OpenAi.ts`): answers every `POST .../chat/completions`
 * at once, with no model, so a benchmark measures Parley and not a model, and
 * a walkthrough can run an evaluation (A16) on a laptop with no API key.
 *
 * The answer is deterministic: `<first line of the system prompt> | <last
 * user text>`, so two versions of an assistant whose instructions differ
 * answer differently, and one version always answers the same. Usage counts
 * 10 input and 5 output tokens per call.
 *
 * Run alone: `node bench/lib/openaiTestServer.ts [port]` (default 11435)
 * prints its base URL (`http://127.0.0.1:<port>/v1`, for `OPENAI_BASE_URL`)
 * and serves until stopped.
 */
import { createServer, type Server } from "node:http"
import { fileURLToPath } from "node:url"

/** A running test server: its base URL (ending in `/v1`), the calls it answered, and its stop. */
export interface OpenAiTestServer {
  readonly baseUrl: string
  readonly calls: () => number
  readonly close: () => Promise<void>
}

/** The text of a chat message's `content` (a string or text parts). */
const textOf = (content: unknown): string =>
  typeof content === "string"
    ? content
    : Array.isArray(content)
      ? content.map((part) => (typeof part?.text === "string" ? part.text : "")).join("")
      : ""

/** The deterministic answer to a Chat Completions request body (see the module docs). */
export const answerOf = (request: {
  readonly model?: string
  readonly messages?: ReadonlyArray<{ role: string; content: unknown }>
}) => {
  const messages = request.messages ?? []
  const system = textOf(messages.find((m) => m.role === "system")?.content).split("\n")[0] ?? ""
  const user = textOf(messages.findLast((m) => m.role === "user")?.content)
  return {
    id: "chatcmpl-test",
    object: "chat.completion",
    created: Math.floor(Date.now() / 1000),
    model: request.model ?? "test",
    choices: [{ index: 0, message: { role: "assistant", content: `${system} | ${user}` }, finish_reason: "stop" }],
    usage: { prompt_tokens: 10, completion_tokens: 5, total_tokens: 15 }
  }
}

/** Starts the server on 127.0.0.1:`port` (0: any free port). */
export const startOpenAiTestServer = (port = 0): Promise<OpenAiTestServer> =>
  new Promise((resolve) => {
    let calls = 0
    const server: Server = createServer((req, res) => {
      let body = ""
      req.on("data", (chunk) => (body += chunk))
      req.on("end", () => {
        if (req.method !== "POST" || !req.url?.endsWith("/chat/completions")) {
          res.writeHead(404, { "content-type": "application/json" })
          res.end(JSON.stringify({ error: { message: "Not found" } }))
          return
        }
        calls++
        let parsed: Parameters<typeof answerOf>[0] = {}
        try {
          parsed = JSON.parse(body)
        } catch {}
        res.writeHead(200, { "content-type": "application/json" })
        res.end(JSON.stringify(answerOf(parsed)))
      })
    })
    server.keepAliveTimeout = 60_000
    server.listen(port, "127.0.0.1", () => {
      const address = server.address() as { port: number }
      resolve({
        baseUrl: `http://127.0.0.1:${address.port}/v1`,
        calls: () => calls,
        close: () =>
          new Promise<void>((done) => {
            server.closeAllConnections()
            server.close(() => done())
          })
      })
    })
  })

if (process.argv[1] !== undefined && fileURLToPath(import.meta.url) === process.argv[1]) {
  const server = await startOpenAiTestServer(Number(process.argv[2] ?? 11435))
  process.stdout.write(`OpenAI-compatible test server at ${server.baseUrl}\n`)
}
