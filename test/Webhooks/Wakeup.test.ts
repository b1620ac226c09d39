/**
 * How POST message wakes the delivery workers (issue 16 item 4, DECISIONS.md
 * W2, O1; src/Webhooks/Wakeup.ts): in a process whose own delivery worker
 * runs, the fan-out does not notify and the worker is woken in memory, and the
 * delivery arrives; in a process without one (PARLEY_ROLE=api) the fan-out
 * notifies every process, as before. Each layer has its own database, so the
 * only notifications on the channel are those of its test.
 */
import { PgClient } from "@effect/sql-pg"
import { assert, describe, it } from "@effect/vitest"
import { Effect, Queue } from "effect"
import { SqlClient } from "effect/sql"
import { deliveriesChannel } from "../../src/Webhooks/Repo.ts"
import { DeliveryWakeup } from "../../src/Webhooks/Wakeup.ts"
import { eventually, receiver } from "../support/Receiver.ts"
import { TestApi, type TestOrganization, withApp, withWorkers } from "../support/TestApp.ts"
import { createApp, listDeliveries } from "../support/Webhooks.ts"

/**
 * Listens on the deliveries channel for the test's scope; `settled` sends a
 * marker notification and waits until it arrives, so every notification of a
 * commit before it has been received (PostgreSQL delivers them in commit order).
 */
const listenToDeliveries = Effect.gen(function* () {
  const pg = yield* PgClient.PgClient
  const sql = yield* SqlClient.SqlClient
  const notifications = yield* pg.listen(deliveriesChannel)
  const received: Array<string> = []
  yield* Effect.forkScoped(
    Effect.forever(Effect.map(Queue.take(notifications), (notification) => received.push(notification.payload)))
  )
  const settled = (marker: string) =>
    Effect.gen(function* () {
      yield* sql`SELECT pg_notify(${deliveriesChannel}, ${marker})`
      yield* eventually(() => received.includes(marker), 10_000, `the marker ${marker}`)
    })
  return { received, settled }
})

/** An organization with an app subscribed to message.created only, and an open session. */
const setUp = (url: string) =>
  Effect.gen(function* () {
    const api = yield* TestApi
    const org = yield* api.organization()
    const app = yield* createApp(api, org, { webhook_url: url, events: ["message.created"] })
    const session = yield* org.session()
    return { api, org, app, session }
  })

const postMessage = (org: TestOrganization, sessionId: string) =>
  org
    .call("POST", `/sessions/${sessionId}/messages`, { role: "user", content: { type: "text", text: "hi" } })
    .pipe(Effect.map((response) => assert.strictEqual(response.status, 201, response.text)))

withWorkers({ allowPrivateNetworkTargets: true })("POST message with a delivery worker in the process", (it) => {
  it.effect("wakes that worker in memory: the delivery arrives and no notification is sent", () =>
    Effect.gen(function* () {
      const hook = yield* receiver()
      const { org, session } = yield* setUp(hook.url)
      const channel = yield* listenToDeliveries
      yield* channel.settled("before")
      yield* postMessage(org, session.id)
      yield* postMessage(org, session.id)
      yield* eventually(() => hook.received.length >= 2, 10_000, "2 deliveries")
      yield* channel.settled("after")
      assert.deepStrictEqual(channel.received, ["before", "after"])
    }).pipe(Effect.scoped)
  )
})

withApp({ allowPrivateNetworkTargets: true })("POST message with no delivery worker in the process", (it) => {
  it.effect("notifies the other processes' workers at commit, naming the organization (O11)", () =>
    Effect.gen(function* () {
      const { api, org, app, session } = yield* setUp("http://127.0.0.1:9/unused")
      const channel = yield* listenToDeliveries
      yield* channel.settled("before")
      yield* postMessage(org, session.id)
      yield* channel.settled("after")
      // The payload names the organization, which the workers claim without looking in every one (O11).
      assert.deepStrictEqual(channel.received, ["before", org.id, "after"])
      // Nothing here delivers it: it waits, pending, for a worker.
      const deliveries = yield* listDeliveries(api, org, app.id)
      assert.deepStrictEqual(
        deliveries.map((delivery: { status: string }) => delivery.status),
        ["pending"]
      )
    }).pipe(Effect.scoped)
  )
})

describe("the wakeup's hints (O11, W5)", () => {
  it.effect(
    "a wakeup naming an organization is a hint; none, an empty or a junk payload makes the claim look everywhere",
    () =>
      Effect.gen(function* () {
        const wakeup = yield* DeliveryWakeup
        const org = "01A21BBC-0000-7000-8000-00000000000A"
        wakeup.wake(org)
        wakeup.wake(org.toLowerCase())
        yield* wakeup.woken
        // Wakeups coalesce; the organizations they named accumulate, once each, until taken.
        assert.deepStrictEqual(wakeup.takeHints(), { organizations: [org.toLowerCase()], everywhere: false })
        assert.deepStrictEqual(wakeup.takeHints(), { organizations: [], everywhere: false })
        for (const payload of [undefined, "", "not-an-organization", "'; DROP TABLE apps; --"]) {
          wakeup.wake(payload)
          assert.deepStrictEqual(wakeup.takeHints(), { organizations: [], everywhere: true }, String(payload))
        }
      }).pipe(Effect.provide(DeliveryWakeup.layer))
  )
})
