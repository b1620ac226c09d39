/**
 * Recovery (DECISIONS.md W9, issue 16 item 3): after an outage of an app's
 * endpoint, one call makes every `failed` delivery of the app created in a
 * range pending and due now; they are sent again (bodies byte for byte) and
 * the response is 202 with how many. The CLI does the same
 * (test/Process/Cli.test.ts).
 */
import { assert } from "@effect/vitest"
import { Duration, Effect } from "effect"
import { eventually, receiver } from "../support/Receiver.ts"
import { ADMIN_TOKEN, TestApi, withWorkers } from "../support/TestApp.ts"
import { createApp, listDeliveries } from "../support/Webhooks.ts"

withWorkers({ allowPrivateNetworkTargets: true, webhookRetrySchedule: [Duration.millis(50)] })(
  "recovery (W9)",
  (test) => {
    test.effect(
      "W9: recover sends the failed deliveries of the range again and responds 202 {deliveries}; others and other ranges are left",
      () =>
        Effect.gen(function* () {
          const api = yield* TestApi
          const org = yield* api.organization()
          const hook = yield* receiver(() => ({ status: 503 }))
          const apps = `/admin/v1/organizations/${org.id}/apps`
          const app = yield* createApp(api, org, { name: "down", webhook_url: hook.url, events: ["session.created"] })
          const since = new Date(Date.now() - 1_000).toISOString()
          for (let i = 0; i < 3; i++) yield* org.session({ contact_id: `outage-${i}` })
          const deliveries = (status: string) => listDeliveries(api, org, app.id, `?status=${status}`)
          // Two attempts each (the first and one retry), then failed.
          for (let waited = 0; (yield* deliveries("failed")).length < 3; waited++) {
            if (waited > 200) assert.fail("the deliveries never failed")
            yield* Effect.sleep("50 millis")
          }
          const failedBodies = hook.received.map((request) => request.body)

          const path = `${apps}/${app.id}/recover`
          const none = yield* api.request("POST", path, {
            token: ADMIN_TOKEN,
            body: { since: "2000-01-01T00:00:00Z", until: since }
          })
          assert.deepStrictEqual([none.status, none.body], [202, { deliveries: 0 }])

          hook.setResponder(() => ({ status: 204 }))
          const received = hook.received.length
          const recovered = yield* api.request("POST", path, { token: ADMIN_TOKEN, body: { since } })
          assert.deepStrictEqual([recovered.status, recovered.body], [202, { deliveries: 3 }])
          yield* eventually(() => hook.received.length >= received + 3, 10_000, "the recovered deliveries")
          for (let waited = 0; (yield* deliveries("succeeded")).length < 3; waited++) {
            if (waited > 200) assert.fail("the recovered deliveries never succeeded")
            yield* Effect.sleep("50 millis")
          }
          // Sent again byte for byte (W3).
          for (const request of hook.received.slice(received)) assert.include(failedBodies, request.body)
          assert.deepStrictEqual((yield* api.request("POST", path, { token: ADMIN_TOKEN, body: { since } })).body, {
            deliveries: 0
          })

          const missing = yield* api.request("POST", `${apps}/00000000-0000-7000-8000-000000000000/recover`, {
            token: ADMIN_TOKEN,
            body: { since }
          })
          assert.deepStrictEqual([missing.status, missing.body], [404, { detail: "App not found" }])
          const invalid = yield* api.request("POST", path, { token: ADMIN_TOKEN, body: {} })
          assert.strictEqual(invalid.status, 422)
          assert.deepStrictEqual(invalid.body.detail[0].loc, ["body", "since"])
        })
    )
  }
)
