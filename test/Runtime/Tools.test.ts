/**
 * Tool calls of the AI runtime (R2) under the SSRF guard of W6: with private
 * targets not allowed, loopback and private addresses (literal or resolved)
 * are refused before any connection, and a refusal is a failed tool result
 * for the model, not a failed run; with them allowed, the call goes through.
 */
import { createServer } from "node:http"
import { assert, describe, it } from "@effect/vitest"
import { Effect, Layer } from "effect"
import { AppConfig } from "../../src/Config.ts"
import { ToolCaller } from "../../src/Runtime/Tools.ts"

const callerWith = (allowPrivateNetworkTargets: boolean) =>
  ToolCaller.layer.pipe(Layer.provide(AppConfig.layerWith({ allowPrivateNetworkTargets })))

/** A loopback tool responding with `{"ok": true}` and counting requests. */
const loopbackTool = Effect.acquireRelease(
  Effect.promise(
    () =>
      new Promise<{ url: string; hits: () => number; close: () => void }>((resolve) => {
        let hits = 0
        const server = createServer((_, response) => {
          hits++
          response.writeHead(200, { "content-type": "application/json" }).end('{"ok":true}')
        })
        server.listen(0, "127.0.0.1", () => {
          const port = (server.address() as { port: number }).port
          resolve({ url: `http://127.0.0.1:${port}/tool`, hits: () => hits, close: () => server.close() })
        })
      })
  ),
  (tool) => Effect.sync(tool.close)
)

describe("tool calls", () => {
  it.live("W6: loopback and private targets are refused as error results, without a request", () =>
    Effect.gen(function* () {
      const tool = yield* loopbackTool
      const caller = yield* ToolCaller
      const port = new URL(tool.url).port
      for (const url of [tool.url, `http://localhost:${port}/tool`, "http://10.0.0.1/tool", "http://[::1]:80/x"]) {
        const outcome = yield* caller.call({ id: "lookup", url, method: "POST" }, { q: 1 })
        assert.strictEqual(outcome.isError, true, url)
        assert.match((outcome.result as { error: string }).error, /^Refused: /, url)
      }
      assert.strictEqual(tool.hits(), 0)
      const scheme = yield* caller.call({ id: "lookup", url: "file:///etc/passwd", method: "GET" }, {})
      assert.strictEqual(scheme.isError, true)
    }).pipe(Effect.provide(callerWith(false)))
  )

  it.live("with ALLOW_PRIVATE_NETWORK_TARGETS the call goes through; GET sends the arguments as the query", () =>
    Effect.gen(function* () {
      const tool = yield* loopbackTool
      const caller = yield* ToolCaller
      const outcome = yield* caller.call({ id: "lookup", url: tool.url, method: "GET" }, { q: "a b" })
      assert.deepStrictEqual(outcome, { result: { ok: true }, isError: false })
      assert.strictEqual(tool.hits(), 1)
    }).pipe(Effect.provide(callerWith(true)))
  )
})
