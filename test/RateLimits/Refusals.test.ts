/**
 * Refusals from memory (DECISIONS.md D20, issue 38 item 4,
 * `RateLimits/RateLimiter.ts`): once the bucket refused a key, the process
 * refuses the key's next requests itself until the bucket can hold a token,
 * before authentication, so such a 429 costs no database round trip (the
 * request gets its 429 with the database out of reach:
 * test/Process/RateLimits.test.ts) and no server span (here, with an in-memory
 * span exporter). A key revoked meanwhile gets 429 instead of 401 for at most
 * that refusal, then 401.
 */
import * as NodeSdk from "@effect/opentelemetry/NodeSdk"
import { assert, layer } from "@effect/vitest"
import { InMemorySpanExporter, SimpleSpanProcessor } from "@opentelemetry/sdk-trace-base"
import { Effect, Layer } from "effect"
import { ADMIN_TOKEN, C, TestApi, TestApp } from "../support/TestApp.ts"
import { waitFor } from "../support/Wait.ts"

const exporter = new InMemorySpanExporter()
const tracing = NodeSdk.layer(() => ({
  resource: { serviceName: "parley-test" },
  spanProcessor: new SimpleSpanProcessor(exporter)
}))

/** The finished spans carrying `requestId` as their `parley.request_id` (the server span, O8). */
const spansOf = (requestId: string) =>
  exporter.getFinishedSpans().filter((span) => span.attributes["parley.request_id"] === requestId)

/** An organization limited to 1 request/s with a burst of 1, and an API key of it (its id and token). */
const limitedOrganization = Effect.gen(function* () {
  const api = yield* TestApi
  const admin = (method: string, path: string, body?: unknown) =>
    api.request(method, `/admin/v1/organizations${path}`, { token: ADMIN_TOKEN, body })
  const org = yield* admin("POST", "", { name: "Limited" })
  const set = yield* admin("PATCH", `/${org.body.id}/settings`, { rate_limit_per_second: 1, rate_limit_burst: 1 })
  assert.strictEqual(set.status, 200, set.text)
  const key = yield* admin("POST", `/${org.body.id}/api-keys`, { name: "limited" })
  assert.strictEqual(key.status, 201, key.text)
  return { id: org.body.id as string, keyId: key.body.id as string, token: key.body.token as string }
})

/** POST /sessions/search with the API key `token` and `requestId` as its X-Request-Id. */
const search = (token: string, requestId: string) =>
  Effect.flatMap(Effect.service(TestApi), (api) =>
    api.request("POST", `${C}/sessions/search`, { token, body: { limit: 1 }, headers: { "x-request-id": requestId } })
  )

layer(TestApp().pipe(Layer.provide(tracing)), { excludeTestServices: true, timeout: "120 seconds" })(
  "refusals from memory (D20, issue 38 item 4)",
  (it) => {
    it.effect("D20, issue 38 item 4: a request refused from memory gets no server span", () =>
      Effect.gen(function* () {
        const api = yield* TestApi
        const { token } = yield* limitedOrganization
        const free = yield* api.organization()
        const run = crypto.randomUUID()
        assert.strictEqual((yield* search(token, `${run}-allowed`)).status, 200)
        // Refused by the bucket (a lease, after authentication): the request is traced as any other.
        assert.strictEqual((yield* search(token, `${run}-bucket`)).status, 429)
        // Refused from memory, before the tracer starts a span.
        const refused = yield* search(token, `${run}-memory`)
        assert.strictEqual(refused.status, 429)
        assert.strictEqual(refused.headers.get("x-request-id"), `${run}-memory`)
        // Spans end before their responses are sent: once the next request's span is there, the refused one's would be.
        assert.strictEqual((yield* search(free.token, `${run}-after`)).status, 200)
        yield* waitFor(
          Effect.sync(() => spansOf(`${run}-after`)),
          (spans) => spans.length === 1
        )
        assert.deepStrictEqual(
          [`${run}-allowed`, `${run}-bucket`, `${run}-memory`].map((id) => spansOf(id).length),
          [1, 1, 0]
        )
        assert.strictEqual(spansOf(`${run}-bucket`)[0]!.attributes["http.response.status_code"], 429)
      })
    )

    it.effect(
      "D20, issue 38 item 4: a key revoked while it is refused gets 429 until the refusal ends (under 1 s at 1/s), then 401",
      () =>
        Effect.gen(function* () {
          const api = yield* TestApi
          const org = yield* limitedOrganization
          assert.strictEqual((yield* search(org.token, "revoked-allowed")).status, 200)
          assert.strictEqual((yield* search(org.token, "revoked-bucket")).status, 429)
          const revoked = yield* api.request("DELETE", `/admin/v1/organizations/${org.id}/api-keys/${org.keyId}`, {
            token: ADMIN_TOKEN
          })
          assert.strictEqual(revoked.status, 204, revoked.text)
          // Within the refusal the process does not ask the database about the key: 429 as before the revocation.
          assert.strictEqual((yield* search(org.token, "revoked-memory")).status, 429)
          yield* Effect.sleep("1100 millis")
          const after = yield* search(org.token, "revoked-after")
          assert.strictEqual(after.status, 401, after.text)
          assert.strictEqual((yield* search(org.token, "revoked-again")).status, 401)
        })
    )
  }
)
