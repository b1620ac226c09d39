/**
 * Telemetry hook-up (issue 2 item 10): with OTEL_EXPORTER_OTLP_ENDPOINT set,
 * the request's server span, the service's `Effect.fn` span and SQL spans are
 * exported by OTLP/HTTP; unset, nothing is installed.
 */
import { createServer } from "node:http"
import { assert, describe, it } from "@effect/vitest"
import { Effect, Layer } from "effect"
import * as Telemetry from "../../src/Telemetry/Telemetry.ts"
import { TestApi, TestApp, testConfig } from "../support/TestApp.ts"

/** A local OTLP/HTTP receiver collecting the names of exported spans. */
const receiver = Effect.acquireRelease(
  Effect.promise(
    () =>
      new Promise<{ url: string; spans: Array<string>; close: () => void }>((resolve) => {
        const spans: Array<string> = []
        const server = createServer((request, response) => {
          let body = ""
          request.on("data", (chunk) => (body += chunk))
          request.on("end", () => {
            if (request.url === "/v1/traces") {
              for (const resource of JSON.parse(body).resourceSpans ?? []) {
                for (const scope of resource.scopeSpans ?? [])
                  for (const span of scope.spans ?? []) spans.push(span.name)
              }
            }
            response.writeHead(200, { "content-type": "application/json" }).end("{}")
          })
        })
        server.listen(0, "127.0.0.1", () => {
          const address = server.address() as { port: number }
          resolve({ url: `http://127.0.0.1:${address.port}`, spans, close: () => server.close() })
        })
      })
  ),
  (receiver) => Effect.sync(receiver.close)
)

describe("tracing", () => {
  it.live(
    "exports the server span, the service span and SQL spans over OTLP when configured",
    () =>
      Effect.gen(function* () {
        const otlp = yield* receiver
        yield* Effect.scoped(
          Effect.gen(function* () {
            const api = yield* TestApi
            const org = yield* api.organization()
            const created = yield* org.session()
            assert.strictEqual(created.status, "open")
            // A change in a transaction (finish), for the transaction's span.
            const finished = yield* org.call("POST", `/sessions/${created.id}/finish`, {})
            assert.strictEqual(finished.status, 200)
          }).pipe(
            Effect.provide(
              TestApp({ otlpEndpoint: otlp.url }).pipe(
                Layer.provide(Telemetry.TracingLive.pipe(Layer.provide(testConfig({ otlpEndpoint: otlp.url }))))
              )
            )
          )
        )
        // Closing the layer shut the SDK down, which flushes the batch processor.
        assert.include(otlp.spans, "Sessions.create")
        // The HTTP server span (named `{method} {route}`) and the SQL spans of @effect/sql-pg.
        assert.include(otlp.spans, "POST /conversations/v2/api/v1/sessions")
        assert.include(otlp.spans, "postgres")
        assert.include(otlp.spans, "sql.transaction")
      }),
    60_000
  )

  it.effect("installs nothing without an endpoint", () =>
    Effect.gen(function* () {
      const context = yield* Layer.build(Telemetry.TracingLive.pipe(Layer.provide(testConfig())))
      // Only the layer system's own memo map: no tracer, no resource, no exporter.
      assert.deepStrictEqual([...context.mapUnsafe.keys()], ["effect/Layer/CurrentMemoMap"])
    })
  )
})
