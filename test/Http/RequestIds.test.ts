/**
 * Request ids (DECISIONS.md O8): every response carries `X-Request-Id`, the
 * request's own when it sent one of 1-200 visible ASCII characters, else a new
 * UUIDv7; the id is on the request's log lines (an unhandled error's line also
 * names the method and route). Its server span attribute is checked in
 * test/Telemetry/Traces.test.ts.
 */
import { assert, layer } from "@effect/vitest"
import { Effect, Layer, Logger } from "effect"
import { brokenSessions } from "../support/Broken.ts"
import { C, TestApi, TestApp } from "../support/TestApp.ts"

const UUID_V7 = /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/

/** Log entries of the app, as the structured logger sees them. */
const logged: Array<{ message: unknown; annotations: Record<string, unknown> }> = []
const capture = Logger.layer([
  Logger.make((options) => {
    const entry = Logger.formatStructured.log(options) as { message: unknown; annotations: Record<string, unknown> }
    logged.push({ message: entry.message, annotations: entry.annotations })
  })
])

layer(TestApp({}, brokenSessions("boom")).pipe(Layer.provide(capture)), {
  excludeTestServices: true
})("request ids (O8)", (it) => {
  it.effect("O8: a valid X-Request-Id is echoed on every kind of response; others get a new UUIDv7", () =>
    Effect.gen(function* () {
      const api = yield* TestApi
      const org = yield* api.organization()
      const requests = [
        ["GET", "/healthz", undefined],
        ["GET", `${C}/sessions/${"0".repeat(8)}-0000-7000-8000-${"0".repeat(12)}`, org.token],
        ["POST", `${C}/sessions`, org.token],
        ["GET", `${C}/sessions`, undefined],
        ["GET", "/nowhere", undefined]
      ] as const
      for (const [method, path, token] of requests) {
        const given = "req-~!#$%&'*+.^_`|-0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ"
        const echoed = yield* api.request(method, path, {
          ...(token !== undefined ? { token } : {}),
          headers: { "x-request-id": given },
          ...(method === "POST" ? { body: {} } : {})
        })
        assert.strictEqual(echoed.headers.get("x-request-id"), given, `${method} ${path} ${echoed.status}`)
        for (const invalid of ["", "a b", "é", "x".repeat(201)]) {
          const fresh = yield* api.request(method, path, {
            ...(token !== undefined ? { token } : {}),
            headers: { "x-request-id": invalid },
            ...(method === "POST" ? { body: {} } : {})
          })
          assert.match(fresh.headers.get("x-request-id") ?? "", UUID_V7, JSON.stringify(invalid))
        }
        const none = yield* api.request(method, path, token !== undefined ? { token } : {})
        assert.match(none.headers.get("x-request-id") ?? "", UUID_V7)
      }
      assert.strictEqual(
        (yield* api.request("GET", "/healthz", { headers: { "x-request-id": "x".repeat(200) } })).headers.get(
          "x-request-id"
        ),
        "x".repeat(200)
      )
    })
  )

  it.effect("O8: an unhandled error's log line carries the request id, method and route", () =>
    Effect.gen(function* () {
      const api = yield* TestApi
      const org = yield* api.organization()
      const session = yield* org.session()
      const response = yield* api.request("GET", `${C}/sessions/${session.id}`, {
        token: org.token,
        headers: { "x-request-id": "trace-me-7" }
      })
      assert.strictEqual(response.status, 500)
      assert.strictEqual(response.headers.get("x-request-id"), "trace-me-7")
      const line = logged.find((entry) => entry.annotations.request_id === "trace-me-7")
      assert.ok(line !== undefined, JSON.stringify(logged))
      assert.include(String(line.message), "Unhandled error in request")
      assert.strictEqual(line.annotations["http.request.method"], "GET")
      assert.strictEqual(line.annotations["http.route"], `${C}/sessions/:session_id`)
    })
  )
})
