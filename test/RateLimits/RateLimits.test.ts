/**
 * Rate limits per organization (DECISIONS.md D20, issue 15 item 2) on one
 * server: the settings, the token bucket's bound, 429 with `Retry-After`, the
 * `RateLimit-*` headers on every response to a limited organization, admin and
 * health routes never limited, a changed limit applied within a lease (1 s).
 * Two processes: test/Process/RateLimits.test.ts.
 */
import { assert } from "@effect/vitest"
import { Effect } from "effect"
import { ADMIN_TOKEN, C, TestApi, type TestOrganization, withApp } from "../support/TestApp.ts"

const settings = (org: TestOrganization, patch: Record<string, unknown>) =>
  Effect.flatMap(Effect.service(TestApi), (api) =>
    api.request("PATCH", `/admin/v1/organizations/${org.id}/settings`, { token: ADMIN_TOKEN, body: patch })
  )

withApp()("rate limits (D20)", (it) => {
  it.effect("D20: no limit by default: no RateLimit headers, never 429", () =>
    Effect.gen(function* () {
      const org = yield* (yield* TestApi).organization()
      for (let i = 0; i < 30; i++) {
        const response = yield* org.call("POST", "/sessions/search", { limit: 1 })
        assert.strictEqual(response.status, 200)
        assert.isNull(response.headers.get("ratelimit-limit"))
      }
    })
  )

  it.effect(
    "D20: a bucket of the burst refilled at the rate: 429 with Retry-After past it, headers on every response",
    () =>
      Effect.gen(function* () {
        const api = yield* TestApi
        const org = yield* api.organization()
        const set = yield* settings(org, { rate_limit_per_second: 5, rate_limit_burst: 10 })
        assert.deepStrictEqual([set.body.rate_limit_per_second, set.body.rate_limit_burst], [5, 10])
        const started = Date.now()
        const responses = []
        for (let i = 0; i < 40; i++) responses.push(yield* org.call("POST", "/sessions/search", { limit: 1 }))
        const seconds = (Date.now() - started) / 1000
        const allowed = responses.filter((response) => response.status === 200).length
        // The bucket's bound: the burst, and the rate over the time taken.
        assert.isAtMost(allowed, 10 + Math.ceil(5 * seconds))
        assert.isAtLeast(allowed, 10)
        const limited = responses.filter((response) => response.status === 429)
        assert.isAbove(limited.length, 0)
        for (const response of limited) {
          assert.deepStrictEqual(response.body, { detail: "Rate limit exceeded" })
          assert.match(response.headers.get("retry-after") ?? "", /^[1-9][0-9]*$/)
        }
        for (const response of responses) {
          assert.strictEqual(response.headers.get("ratelimit-limit"), "10")
          assert.match(response.headers.get("ratelimit-remaining") ?? "", /^\d+$/)
          assert.match(response.headers.get("ratelimit-reset") ?? "", /^\d+$/)
        }
        // Errors of a limited organization carry the headers too.
        const missing = yield* org.call("GET", "/sessions/00000000-0000-7000-8000-000000000000")
        assert.include([404, 429], missing.status)
        assert.strictEqual(missing.headers.get("ratelimit-limit"), "10")
        // Admin, health and docs routes are never limited.
        for (const [path, token] of [
          [`/admin/v1/organizations/${org.id}/settings`, ADMIN_TOKEN],
          ["/healthz", undefined],
          ["/openapi.json", undefined]
        ] as const) {
          const response = yield* api.request("GET", path, token === undefined ? {} : { token })
          assert.strictEqual(response.status, 200, path)
          assert.isNull(response.headers.get("ratelimit-limit"), path)
        }
        // After Retry-After, requests go through again.
        yield* Effect.sleep(`${Number(limited.at(-1)!.headers.get("retry-after"))} seconds`)
        assert.strictEqual((yield* org.call("POST", "/sessions/search", { limit: 1 })).status, 200)
      })
  )

  it.effect(
    "D20: another organization is not limited by this one's limit; lifting the limit applies within a second",
    () =>
      Effect.gen(function* () {
        const api = yield* TestApi
        const [limited, free] = [yield* api.organization(), yield* api.organization()]
        yield* settings(limited, { rate_limit_per_second: 1, rate_limit_burst: 1 })
        let refused = 0
        for (let i = 0; i < 5; i++) {
          if ((yield* limited.call("POST", "/sessions/search", { limit: 1 })).status === 429) refused++
          assert.strictEqual((yield* free.call("POST", "/sessions/search", { limit: 1 })).status, 200)
        }
        assert.isAtLeast(refused, 3)
        yield* settings(limited, { rate_limit_per_second: null })
        yield* Effect.sleep("1100 millis")
        for (let i = 0; i < 10; i++) {
          const response = yield* limited.call("POST", "/sessions/search", { limit: 1 })
          assert.strictEqual(response.status, 200)
          assert.isNull(response.headers.get("ratelimit-limit"))
        }
      })
  )

  it.effect("D20: the settings validate: a rate of 0 or a burst over 2,000,000 is 422", () =>
    Effect.gen(function* () {
      const org = yield* (yield* TestApi).organization()
      assert.strictEqual((yield* settings(org, { rate_limit_per_second: 0 })).status, 422)
      assert.strictEqual((yield* settings(org, { rate_limit_burst: 2_000_001 })).status, 422)
      const cleared = yield* settings(org, { rate_limit_per_second: null, rate_limit_burst: null })
      assert.deepStrictEqual([cleared.status, cleared.body.rate_limit_per_second], [200, null])
    })
  )

  it.effect(
    "D20 with D19: the burst defaults to twice the rate, assistants requests count too, and a 429 is not stored for its Idempotency-Key",
    () =>
      Effect.gen(function* () {
        const api = yield* TestApi
        const org = yield* api.organization()
        yield* settings(org, { rate_limit_per_second: 1, rate_limit_burst: null })
        const first = yield* org.call("POST", "/sessions/search", { limit: 1 })
        assert.strictEqual(first.headers.get("ratelimit-limit"), "2")
        // An assistants request takes the second token, and shows the same limit.
        const assistant = yield* api.request(
          "GET",
          "/assistants/api/v2/assistants/00000000-0000-7000-8000-000000000000/branches",
          {
            token: org.token
          }
        )
        assert.strictEqual(assistant.headers.get("ratelimit-limit"), "2")
        const body = { contact_id: "limited", contact_name: "L" }
        const refused = yield* api.request("POST", `${C}/sessions`, {
          token: org.token,
          body,
          headers: { "idempotency-key": "after-429" }
        })
        assert.strictEqual(refused.status, 429)
        yield* Effect.sleep(`${Number(refused.headers.get("retry-after"))} seconds`)
        const retried = yield* api.request("POST", `${C}/sessions`, {
          token: org.token,
          body,
          headers: { "idempotency-key": "after-429" }
        })
        assert.deepStrictEqual([retried.status, retried.headers.get("idempotent-replayed")], [201, null])
      })
  )
})
