/**
 * CORS for browser integrations (issue 15 item 3): `CORS_ORIGINS` (a comma
 * list; unset: no CORS headers), preflight `OPTIONS` responded to for the API
 * routes, and the headers a browser may read exposed: `X-Request-Id`,
 * `Retry-After`, `RateLimit-*` and `Idempotent-Replayed`.
 */
import { assert } from "@effect/vitest"
import { Effect } from "effect"
import { C, TestApi, withApp } from "../support/TestApp.ts"

const ALLOWED = "https://app.example.com"

withApp({ corsOrigins: [ALLOWED, "http://localhost:3000"] })("CORS_ORIGINS set", (it) => {
  it.effect("a preflight from an allowed origin is 204 with the method and the requested headers allowed", () =>
    Effect.gen(function* () {
      const api = yield* TestApi
      const preflight = yield* api.request("OPTIONS", `${C}/sessions`, {
        headers: {
          origin: ALLOWED,
          "access-control-request-method": "POST",
          "access-control-request-headers": "authorization, content-type, idempotency-key"
        }
      })
      assert.strictEqual(preflight.status, 204)
      assert.strictEqual(preflight.headers.get("access-control-allow-origin"), ALLOWED)
      assert.include(preflight.headers.get("access-control-allow-methods") ?? "", "POST")
      assert.include(preflight.headers.get("access-control-allow-methods") ?? "", "PATCH")
      assert.include(preflight.headers.get("access-control-allow-headers") ?? "", "idempotency-key")
      assert.strictEqual(preflight.headers.get("access-control-max-age"), "600")
    })
  )

  it.effect(
    "responses to an allowed origin, errors included, allow it and expose the documented headers; others are not allowed",
    () =>
      Effect.gen(function* () {
        const api = yield* TestApi
        const org = yield* api.organization()
        const created = yield* api.request("POST", `${C}/sessions`, {
          token: org.token,
          body: { contact_id: "cors", contact_name: "C" },
          headers: { origin: ALLOWED, "idempotency-key": "cors-1" }
        })
        assert.strictEqual(created.status, 201)
        assert.strictEqual(created.headers.get("access-control-allow-origin"), ALLOWED)
        const exposed = (created.headers.get("access-control-expose-headers") ?? "").split(",")
        for (const header of [
          "x-request-id",
          "retry-after",
          "ratelimit-limit",
          "ratelimit-remaining",
          "ratelimit-reset",
          "idempotent-replayed"
        ]) {
          assert.include(exposed, header)
        }
        const refused = yield* api.request("GET", `${C}/sessions/${created.body.id}`, {
          token: "prl_wrong",
          headers: { origin: ALLOWED }
        })
        assert.deepStrictEqual([refused.status, refused.headers.get("access-control-allow-origin")], [401, ALLOWED])
        const stranger = yield* api.request("GET", `${C}/sessions/${created.body.id}`, {
          token: org.token,
          headers: { origin: "https://evil.example" }
        })
        assert.strictEqual(stranger.status, 200)
        assert.isNull(stranger.headers.get("access-control-allow-origin"))
      })
  )
})

withApp()("CORS_ORIGINS unset", (it) => {
  it.effect("no CORS header on any response, and OPTIONS is not a preflight", () =>
    Effect.gen(function* () {
      const api = yield* TestApi
      const org = yield* api.organization()
      const created = yield* api.request("POST", `${C}/sessions`, {
        token: org.token,
        body: { contact_id: "cors", contact_name: "C" },
        headers: { origin: ALLOWED }
      })
      assert.strictEqual(created.status, 201)
      assert.isNull(created.headers.get("access-control-allow-origin"))
      const options = yield* api.request("OPTIONS", `${C}/sessions`, {
        headers: { origin: ALLOWED, "access-control-request-method": "POST" }
      })
      assert.notStrictEqual(options.status, 204)
      assert.isNull(options.headers.get("access-control-allow-origin"))
    })
  )
})
