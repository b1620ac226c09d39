/**
 * What the background workers leave, read through Stoplight Prism's validation
 * proxy (issue 39 item 4; test/support/Prism.ts). test/Http/Prism.test.ts
 * drives every operation with no worker running, so the responses it checks
 * hold deliveries never attempted, no AI run and erasures still pending. Here
 * the workers of the role run (O1: webhook deliveries to a loopback receiver
 * that fails one contact's deliveries, the AI's echo replies, the erasure job)
 * and the reads of their results go through Prism: deliveries succeeded and
 * failed with their attempts (W5), a retry of a failed one, the AI's messages
 * with their run, run statistics with runs (A14) and a completed erasure with
 * its counts (D22). Each must be answered 2xx with no violation of the request
 * or the response. Webhook URLs are on loopback only; media URLs are stored,
 * never fetched.
 */
import { assert } from "@effect/vitest"
import { Duration, Effect } from "effect"
import { aiFixture } from "../Replies/support.ts"
import { snapshotOf } from "../support/AssistantItems.ts"
import { llm } from "../support/Assistants.ts"
import { prismProxy, type Violation, violationsOf } from "../support/Prism.ts"
import { receiver } from "../support/Receiver.ts"
import { ADMIN_TOKEN, C, TestApi, withWorkers } from "../support/TestApp.ts"
import { waitFor } from "../support/Wait.ts"
import { createApp } from "../support/Webhooks.ts"

/** The contact whose deliveries the receiver always answers 500: they end `failed` after the retries. */
const FAILING_CONTACT = "+15550901"

withWorkers({
  allowPrivateNetworkTargets: true,
  webhookRetrySchedule: [Duration.millis(100), Duration.millis(100), Duration.millis(100)]
})("Prism over the workers' results (issue 39 item 4)", (it) => {
  it.effect("deliveries, AI runs and a completed erasure conform to the document through Prism", () =>
    Effect.gen(function* () {
      const started = performance.now()
      const api = yield* TestApi
      const document = (yield* api.request("GET", "/openapi.json")).body
      const prism = yield* prismProxy(document, api.baseUrl)
      const hook = yield* receiver((_, body) => ({ status: body.includes(FAILING_CONTACT) ? 500 : 204 }))

      // Set-up straight to the app (its requests are Prism.test.ts's to check).
      const fx = yield* aiFixture(snapshotOf([llm("start")]))
      const org = fx.org
      const O = `/admin/v1/organizations/${org.id}`
      const app = yield* createApp(api, org, {
        webhook_url: hook.url,
        events: ["session.created", "message.created", "contact.erased"]
      })
      const served = yield* fx.session({ contact_id: "+15550900" })
      yield* org.call("POST", `/sessions/${served.id}/messages`, {
        role: "user",
        content: { type: "image", url: "https://93.184.215.14/media/parley.png" }
      })
      const reply = yield* org.call("POST", `/sessions/${served.id}/reply`, { debounce_time: 0 })
      assert.strictEqual(reply.status, 200, reply.text)
      yield* org.session({ contact_id: FAILING_CONTACT })
      yield* org.session({ contact_id: "+15550902" })
      const erasure = yield* org.call("DELETE", "/contacts/%2B15550902")
      assert.strictEqual(erasure.status, 202, erasure.text)

      const admin = (path: string) => api.request("GET", `${O}${path}`, { token: ADMIN_TOKEN })
      yield* waitFor(org.call("GET", `/erasures/${erasure.body.id}`), (r) => r.body.status === "completed")
      yield* waitFor(
        org.call("POST", `/sessions/${served.id}/messages/search`, { session_id: served.id }),
        (r) => Array.isArray(r.body) && r.body.some((m: any) => m.role === "assistant")
      )
      yield* waitFor(
        api.request("GET", `/assistants/api/v2/assistants/${fx.id}/runs/stats`, { token: org.token }),
        (r) => r.body.commits?.length > 0
      )
      const failed = yield* waitFor(admin(`/apps/${app.id}/deliveries?status=failed`), (r) => r.body.length > 0)
      yield* waitFor(admin(`/apps/${app.id}/deliveries?status=succeeded`), (r) => r.body.length > 0)

      // Through Prism.
      const problems: Array<string> = []
      let requests = 0
      let violations = 0
      const through = (method: string, path: string, token: string, body?: unknown) =>
        Effect.promise(async () => {
          const response = await fetch(`${prism.url}${path}`, {
            method,
            headers: {
              authorization: `Bearer ${token}`,
              ...(body !== undefined ? { "content-type": "application/json" } : {})
            },
            ...(body !== undefined ? { body: JSON.stringify(body) } : {})
          })
          const text = await response.text()
          const found: ReadonlyArray<Violation> = violationsOf(response.headers)
          requests++
          violations += found.length
          if (found.length > 0 || response.status < 200 || response.status > 299) {
            problems.push(
              `${method} ${path} -> ${response.status}${found
                .map((v) => `\n    ${v.severity} ${v.location.join(".")}: ${v.message}`)
                .join("")}${found.length === 0 ? ` ${text.slice(0, 300)}` : ""}`
            )
          }
          return text === "" ? undefined : JSON.parse(text)
        })
      const asOrg = (method: string, path: string, body?: unknown) => through(method, path, org.token, body)
      const asAdmin = (method: string, path: string, body?: unknown) => through(method, path, ADMIN_TOKEN, body)

      const done = yield* asOrg("GET", `${C}/erasures/${erasure.body.id}`)
      assert.strictEqual(done.status, "completed")
      assert.isNotNull(done.counts)
      const stats = yield* asOrg("GET", `/assistants/api/v2/assistants/${fx.id}/runs/stats`)
      assert.isAbove(stats.commits.length, 0)
      yield* asOrg("GET", `/assistants/api/v2/assistants/${fx.id}/runs/stats?since=2000-01-01T00:00:00Z`)
      yield* asOrg("GET", `/assistants/api/v2/assistants/${fx.id}/runtime`)
      yield* asOrg("GET", `${C}/sessions/${served.id}`)
      const messages = yield* asOrg("POST", `${C}/sessions/${served.id}/messages/search`, { session_id: served.id })
      const answer = messages.find((m: any) => m.role === "assistant")
      yield* asOrg("GET", `${C}/sessions/${served.id}/messages/${answer.id}`)
      yield* asOrg("GET", `${C}/data/messages?session_id=${served.id}`)
      yield* asOrg("GET", `${C}/data/sessions`)
      const all = yield* asAdmin("GET", `${O}/apps/${app.id}/deliveries`)
      assert.isTrue(
        all.some((d: any) => d.status === "succeeded") && all.some((d: any) => d.status === "failed"),
        "succeeded and failed deliveries"
      )
      yield* asAdmin("GET", `${O}/apps/${app.id}/deliveries?status=succeeded`)
      yield* asAdmin("GET", `${O}/apps/${app.id}/deliveries?status=failed&limit=1`)
      yield* asAdmin("POST", `${O}/apps/${app.id}/deliveries/${failed.body[0].id}/retry`)
      yield* asAdmin("POST", `${O}/apps/${app.id}/recover`, { since: new Date(Date.now() - 3_600_000).toISOString() })
      yield* asAdmin("GET", `${O}/apps/${app.id}`)

      process.stderr.write(
        `[prism workers] ${requests} requests through Prism ${prism.version}, ${violations} violations, ` +
          `${((performance.now() - started) / 1000).toFixed(1)} s; ${all.length} deliveries, ${hook.received.length} attempts received\n`
      )
      if (problems.length > 0)
        assert.fail(`${problems.length} problems:\n${problems.map((p) => `  - ${p}`).join("\n")}`)
    })
  )
})
