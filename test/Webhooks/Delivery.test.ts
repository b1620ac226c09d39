/**
 * Webhook delivery by the in-process worker (DECISIONS.md W1-W5, O6): signed
 * Standard Webhooks requests with the stored envelope byte for byte, retries on
 * the schedule, exhaustion and admin retry, subscriptions, and per-app isolation.
 */
import { assert } from "@effect/vitest"
import { Duration, Effect } from "effect"
import { SqlClient } from "effect/sql"
import { Webhook } from "standardwebhooks"
import { applicationName, parleyConnection } from "../../src/Database/Database.ts"
import { claimStatement, completeStatement, deliveriesChannel, discoverStatement } from "../../src/Webhooks/Repo.ts"
import { eventually, receiver } from "../support/Receiver.ts"
import { ADMIN_TOKEN, TestApi, type TestOrganization, withWorkers } from "../support/TestApp.ts"
import { waitFor } from "../support/Wait.ts"
import { createApp, listDeliveries } from "../support/Webhooks.ts"

const message = (org: TestOrganization, sessionId: string, text = "hi") =>
  org.call("POST", `/sessions/${sessionId}/messages`, { role: "user", content: { type: "text", text } })

withWorkers({
  allowPrivateNetworkTargets: true,
  webhookRetrySchedule: [Duration.millis(100), Duration.millis(200)],
  webhookTimeout: Duration.millis(2000)
})("webhook delivery", (it) => {
  it.effect(
    "a subscribed event arrives signed (Standard Webhooks, W4) with the stored envelope byte for byte (W3)",
    () =>
      Effect.gen(function* () {
        const api = yield* TestApi
        const sql = yield* SqlClient.SqlClient
        const org = yield* api.organization()
        const hook = yield* receiver()
        const app = yield* createApp(api, org, {
          webhook_url: hook.url,
          events: ["session.created", "message.created"]
        })
        assert.match(app.signing_secret, /^whsec_[A-Za-z0-9+/]+=*$/)
        const session = yield* org.session()
        yield* message(org, session.id)
        yield* eventually(() => hook.received.length >= 2, 10_000, "2 deliveries")
        const stored = yield* sql<{ id: string; body: string }>`SELECT id::text, body FROM events
        WHERE organization_id = ${org.id} AND type IN ('session.created', 'message.created') ORDER BY id`
        assert.strictEqual(stored.length, 2)
        const verifier = new Webhook(app.signing_secret)
        for (const event of stored) {
          const request = hook.received.find((r) => r.headers["webhook-id"] === event.id)
          assert.isDefined(request, `delivery of ${event.id}`)
          assert.strictEqual(request!.body, event.body)
          assert.strictEqual(request!.headers["content-type"], "application/json")
          assert.match(String(request!.headers.traceparent), /^00-[0-9a-f]{32}-[0-9a-f]{16}-0[01]$/)
          const headers = {
            "webhook-id": String(request!.headers["webhook-id"]),
            "webhook-timestamp": String(request!.headers["webhook-timestamp"]),
            "webhook-signature": String(request!.headers["webhook-signature"])
          }
          assert.match(headers["webhook-signature"], /^v1,[A-Za-z0-9+/]+=*$/)
          const verified: any = verifier.verify(request!.body, headers)
          assert.strictEqual(verified.id, event.id)
          assert.deepStrictEqual(Object.keys(verified), ["id", "timestamp", "type", "organization_id", "data"])
          assert.throws(() =>
            new Webhook(`whsec_${Buffer.alloc(32, 1).toString("base64")}`).verify(request!.body, headers)
          )
        }
        // The worker records an attempt after the receiver answered it (its completions are batched, W5): on
        // a Citus cluster that record often commits after both requests arrived. Wait for it to be recorded.
        const listed = yield* waitFor(listDeliveries(api, org, app.id), (deliveries) =>
          deliveries.every((delivery) => delivery.status !== "pending")
        )
        assert.strictEqual(listed.length, 2)
        for (const delivery of listed) {
          assert.strictEqual(delivery.status, "succeeded")
          assert.strictEqual(delivery.app_id, app.id)
          assert.strictEqual(delivery.last_status_code, 200)
          assert.strictEqual(delivery.next_attempt_at, null)
          assert.strictEqual(delivery.attempt_log.length, 1)
          assert.strictEqual(delivery.attempts, 1) // O6: the count
          assert.strictEqual(delivery.attempt_log[0].status_code, 200)
          assert.isNumber(delivery.attempt_log[0].duration_ms)
        }
      })
  )

  it.effect("the worker claims, completes and listens on a pool of its own, not the API's (O1, Repo.ts)", () =>
    Effect.gen(function* () {
      const api = yield* TestApi
      const sql = yield* SqlClient.SqlClient
      const org = yield* api.organization()
      const hook = yield* receiver()
      yield* createApp(api, org, { webhook_url: hook.url, events: ["session.created"] })
      yield* org.session()
      yield* eventually(() => hook.received.length >= 1, 10_000, "1 delivery")
      // pg_stat_activity shows each connection's last statement, cut at 1 kB: compare the openings.
      const opening = (text: string) => text.slice(0, 120)
      const workerStatements = [
        opening(discoverStatement.text),
        opening(claimStatement.text),
        opening(completeStatement.text)
      ]
      const connections = yield* sql<{ application_name: string; query: string; counted: boolean }>`SELECT
        application_name, query, ${sql.literal(parleyConnection)} AS counted
        FROM pg_stat_activity WHERE datname = current_database()`
      const ofPool = (name: string) => connections.filter((c) => c.application_name === name).map((c) => c.query)
      const worker = ofPool(applicationName("webhooks"))
      assert.isTrue(
        worker.some((query) => query.includes(deliveriesChannel) && /^LISTEN/i.test(query)),
        "LISTEN on the worker's pool"
      )
      assert.isTrue(
        worker.some((query) => workerStatements.includes(opening(query))),
        "a discovery, claim or completion on it"
      )
      assert.isFalse(
        ofPool(applicationName()).some((query) => workerStatements.includes(opening(query))),
        "no discovery, claim or completion on the API's pool"
      )
      // parley.db.connections counts both pools' connections (Telemetry/Metrics.ts).
      for (const c of connections) {
        assert.strictEqual(c.counted, [applicationName(), applicationName("webhooks")].includes(c.application_name))
      }
      assert.isTrue(connections.some((c) => c.application_name === applicationName("webhooks") && c.counted))
      // The API's connections keep the planner's full choice (WORKER_PLANNER_SETTINGS are the worker's alone).
      const seqscan = yield* sql<{ enable_seqscan: string }>`SHOW enable_seqscan`
      assert.strictEqual(seqscan[0]!.enable_seqscan, "on")
    })
  )

  it.effect("failures are retried on the schedule with the same id and body until success (W5)", () =>
    Effect.gen(function* () {
      const api = yield* TestApi
      const org = yield* api.organization()
      const hook = yield* receiver((n) => ({ status: n < 2 ? 500 : 204 }))
      const app = yield* createApp(api, org, { webhook_url: hook.url, events: ["session.created"] })
      yield* org.session()
      yield* eventually(() => hook.received.length >= 3, 10_000, "3 attempts")
      const [first, second, third] = hook.received
      assert.strictEqual(second!.body, first!.body)
      assert.strictEqual(third!.body, first!.body)
      assert.strictEqual(second!.headers["webhook-id"], first!.headers["webhook-id"])
      assert.strictEqual(third!.headers["webhook-id"], first!.headers["webhook-id"])
      // Delays of 100 ms and 200 ms, with at most +20% jitter.
      assert.isAtLeast(second!.at - first!.at, 95)
      assert.isAtLeast(third!.at - second!.at, 195)
      // The result is recorded in the worker's next batch: wait for it rather than a fixed time.
      let delivery: any
      for (let tries = 0; tries < 100; tries++) {
        delivery = (yield* listDeliveries(api, org, app.id))[0]
        if (delivery?.status === "succeeded") break
        yield* Effect.sleep(50)
      }
      assert.strictEqual(delivery.status, "succeeded")
      assert.strictEqual(delivery.last_status_code, 204)
      assert.deepStrictEqual(
        delivery.attempt_log.map((a: any) => [a.attempt, a.status_code, a.error]),
        [
          [1, 500, "HTTP status 500"],
          [2, 500, "HTTP status 500"],
          [3, 204, null]
        ]
      )
      yield* Effect.sleep(400)
      assert.strictEqual(hook.received.length, 3)
    })
  )

  it.effect("after the last retry the delivery is failed; the admin retry re-queues it (W5, O6)", () =>
    Effect.gen(function* () {
      const api = yield* TestApi
      const org = yield* api.organization()
      const hook = yield* receiver(() => ({ status: 503 }))
      const app = yield* createApp(api, org, { webhook_url: hook.url, events: ["session.created"] })
      yield* org.session()
      yield* eventually(() => hook.received.length >= 3, 10_000, "3 attempts")
      let failed: any
      for (let tries = 0; tries < 100 && failed === undefined; tries++) {
        failed = (yield* listDeliveries(api, org, app.id, "?status=failed"))[0]
        if (failed === undefined) yield* Effect.sleep(50)
      }
      assert.strictEqual(hook.received.length, 3)
      assert.strictEqual(failed.status, "failed")
      assert.strictEqual(failed.attempt_log.length, 3)
      assert.strictEqual(failed.attempts, 3) // O6: the count
      assert.strictEqual(failed.last_status_code, 503)
      assert.strictEqual(failed.next_attempt_at, null)
      assert.deepStrictEqual(yield* listDeliveries(api, org, app.id, "?status=pending"), [])

      hook.setResponder(() => ({ status: 200 }))
      const retry = yield* api.request(
        "POST",
        `/admin/v1/organizations/${org.id}/apps/${app.id}/deliveries/${failed.id}/retry`,
        { token: ADMIN_TOKEN }
      )
      assert.strictEqual(retry.status, 202)
      yield* eventually(() => hook.received.length >= 4, 10_000, "the retried attempt")
      assert.strictEqual(hook.received[3]!.body, hook.received[0]!.body)
      let succeeded: any
      for (let tries = 0; tries < 100; tries++) {
        succeeded = (yield* listDeliveries(api, org, app.id))[0]
        if (succeeded?.status === "succeeded") break
        yield* Effect.sleep(50)
      }
      assert.strictEqual(succeeded.status, "succeeded")
      assert.strictEqual(succeeded.attempt_log.length, 4)
      assert.strictEqual(succeeded.attempts, 4) // O6: the count

      const unknown = yield* api.request(
        "POST",
        `/admin/v1/organizations/${org.id}/apps/${app.id}/deliveries/0190f5a3-0000-7000-8000-000000000000/retry`,
        { token: ADMIN_TOKEN }
      )
      assert.strictEqual(unknown.status, 404)
      assert.deepStrictEqual(unknown.body, { detail: "Delivery not found" })
    })
  )

  it.effect("an app receives only its subscribed types; disabled apps and other organizations nothing (W1)", () =>
    Effect.gen(function* () {
      const api = yield* TestApi
      const org = yield* api.organization()
      const other = yield* api.organization()
      const hook = yield* receiver()
      const off = yield* receiver()
      yield* createApp(api, org, { webhook_url: hook.url, events: ["message.created"] })
      yield* createApp(api, org, { webhook_url: off.url, events: ["message.created"], enabled: false })
      const session = yield* org.session()
      yield* message(org, session.id)
      yield* org.call("POST", `/sessions/${session.id}/finish`)
      const otherSession = yield* other.session()
      yield* message(other, otherSession.id)
      yield* eventually(() => hook.received.length >= 1, 10_000, "message.created")
      yield* Effect.sleep(500)
      assert.deepStrictEqual(
        hook.events().map((event) => event.type),
        ["message.created"]
      )
      assert.strictEqual(hook.events()[0].organization_id, org.id)
      assert.strictEqual(off.received.length, 0)
    })
  )

  it.effect("a slow app does not delay another app (W5)", () =>
    Effect.gen(function* () {
      const api = yield* TestApi
      const sql = yield* SqlClient.SqlClient
      const org = yield* api.organization()
      const slow = yield* receiver(() => ({ status: 200, delayMs: 1500 }))
      const fast = yield* receiver()
      yield* createApp(api, org, { webhook_url: slow.url, events: ["message.created"] })
      yield* createApp(api, org, { webhook_url: fast.url, events: ["message.created"] })
      // 300 committed events at once (the fan-out makes 300 deliveries per app).
      yield* sql`WITH ids AS (SELECT parley_uuid_v7() AS id FROM generate_series(1, 300))
        INSERT INTO events (id, organization_id, type, body, created_at)
        SELECT id, ${org.id}, 'message.created', json_build_object('id', id::text, 'timestamp', 0,
          'type', 'message.created', 'organization_id', ${org.id}::text, 'data', json_build_object('object', '{}'::json))::text, now()
        FROM ids`
      yield* eventually(() => fast.received.length >= 300, 10_000, "300 fast deliveries")
      // The slow app holds at most MAX_IN_FLIGHT_PER_APP (128) slots at 1.5 s each: it needs three rounds
      // (> 3 s) for 300, and the fast app is done within its first two.
      assert.isAtMost(slow.received.length, 256, `slow app had ${slow.received.length} when the fast one finished`)
    })
  )
})
