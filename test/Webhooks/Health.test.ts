/**
 * Endpoint health (DECISIONS.md W10), on PostgreSQL: the whole delivery
 * worker (`Worker.ts`) with a stub sender and time on `TestClock`
 * (test/support/WebhookWorker.ts: `advance` moves the database's clock and the
 * worker's), with `APP_DISABLE_AFTER` of 100 s (a fifth: 20 s) and retries
 * every 10-12 s, and the production `Webhooks` service for PATCH and recovery
 * (W9). Events are written by the outbox's statement, so the fan-out trigger
 * makes the deliveries (W2). Each test has an organization of its own.
 */
import { assert } from "@effect/vitest"
import { Duration, Effect, Layer, Schema } from "effect"
import { SqlClient } from "effect/sql"
import type { AppOrdering } from "../../src/Domain/App.ts"
import { WebhookEvent } from "../../src/Domain/Event.ts"
import type { EventType } from "../../src/Domain/EventType.ts"
import { Ids, makeIdGenerator } from "../../src/Shared/Ids.ts"
import { HostResolver } from "../../src/Shared/Ssrf.ts"
import { WebhooksRepo } from "../../src/Webhooks/Repo.ts"
import { Webhooks } from "../../src/Webhooks/Webhooks.ts"
import type { SendWebhook } from "../../src/Webhooks/Worker.ts"
import { eventsOf, onDatabase, organization, rowsOf } from "../support/RulesDatabase.ts"
import { testConfig } from "../support/TestApp.ts"
import { realSleep } from "../support/Wait.ts"
import {
  deliveryOf,
  publishEvent,
  type RunningWebhookWorker,
  startWebhookWorker,
  webhookApp
} from "../support/WebhookWorker.ts"

const newId = makeIdGenerator()

/** APP_DISABLE_AFTER of these tests. */
const DISABLE_AFTER = Duration.seconds(100)
/** A retry every 10 s (+0-20% jitter), more than the test needs. */
const SCHEDULE = Array.from({ length: 20 }, () => Duration.seconds(10))
/** One step: at least one retry delay with its jitter. */
const STEP_MS = 12_500

/** Public address literals (no DNS): the failing app's and the others'. */
const FAILING_URL = "https://93.184.215.14/failing"
const WATCHER_URL = "https://93.184.215.15/watcher"

/** The production `Webhooks` service over the file's repository (no DNS: public literals only). */
const webhooksLayer = Webhooks.layerNoDeps.pipe(
  Layer.provide(Layer.succeed(HostResolver, (host: string) => Promise.reject(new Error(`No DNS: ${host}`)))),
  Layer.provide(testConfig({ appDisableAfter: DISABLE_AFTER }))
)

/** A request the stub sender was given. */
interface Sent {
  readonly url: string
  readonly eventId: string
  readonly body: string
}

/** A stub sender: the failing URL answers `failing()`'s status (500 by default), every other URL 200. */
const stubSender = () => {
  const sent: Array<Sent> = []
  let status = 500
  const send: SendWebhook = (url, headers, body) =>
    Effect.sync(() => {
      sent.push({ url: url.toString(), eventId: headers["webhook-id"]!, body })
      return url.toString() === FAILING_URL ? status : 200
    })
  return {
    send,
    sent,
    to: (url: string) => sent.filter((request) => request.url === url),
    respond: (next: number) => {
      status = next
    }
  }
}

/** Waits, in real time and up to 15 s, until `done` holds (the worker's fibers run meanwhile). */
const settle = <E, R>(done: Effect.Effect<boolean, E, R>, what: string) =>
  Effect.gen(function* () {
    const deadline = Date.now() + 15_000
    for (;;) {
      if (yield* done) return
      if (Date.now() > deadline) return assert.fail(what)
      yield* realSleep(10)
    }
  })

/** The app's row as it is now. */
const appRow = (id: string) => Effect.map(rowsOf("apps", "id", id), (rows) => rows[0]!)

/** The organization's events of `type`. */
const eventsOfType = (organizationId: string, type: EventType) =>
  Effect.map(eventsOf(organizationId), (events) => events.filter((event) => event.type === type))

/** The app ids the event's deliveries go to. */
const deliveredTo = (eventId: string) =>
  Effect.flatMap(Effect.service(SqlClient.SqlClient), (sql) =>
    sql<{ app_id: string }>`SELECT app_id::text FROM deliveries WHERE event_id = ${eventId} ORDER BY app_id`.pipe(
      Effect.map((rows) => rows.map((row) => row.app_id)),
      Effect.orDie
    )
  )

/** An organization with a failing app (subscribed to message.created and to the health events, so none must reach it) and a watcher. */
const setup = (ordering: AppOrdering = "none") =>
  Effect.gen(function* () {
    const organizationId = yield* organization()
    const failing = yield* webhookApp(organizationId, {
      url: FAILING_URL,
      events: ["message.created", "app.failing", "app.disabled"],
      ordering
    })
    const watcher = yield* webhookApp(organizationId, { url: WATCHER_URL, events: ["app.failing", "app.disabled"] })
    // Subscribed to neither health event: gets none.
    const bystander = yield* webhookApp(organizationId, { url: WATCHER_URL, events: ["message.created"] })
    return { organizationId, failing, watcher, bystander }
  })

/** Runs `test` while the worker runs with `send`, APP_DISABLE_AFTER 100 s and {@link SCHEDULE}. */
const withWorker = <A, E, R>(
  organizationId: string,
  send: SendWebhook,
  test: (worker: RunningWebhookWorker) => Effect.Effect<A, E, R>
) =>
  Effect.scoped(
    Effect.gen(function* () {
      const worker = yield* startWebhookWorker({
        organizationId,
        send,
        config: { webhookRetrySchedule: SCHEDULE, webhookTimeout: Duration.seconds(10), appDisableAfter: DISABLE_AFTER }
      })
      return yield* test(worker)
    })
  )

/** Steps `worker` on by {@link STEP_MS} until `done` holds, at most `steps` times. */
const stepUntil = <E, R>(
  worker: RunningWebhookWorker,
  done: Effect.Effect<boolean, E, R>,
  steps: number,
  what: string
) =>
  Effect.gen(function* () {
    for (let step = 0; step < steps; step++) {
      if (yield* done) return
      yield* worker.advance(STEP_MS)
      yield* worker.idle
      // The step's attempt results may still be being written: look for a while before the next step.
      for (let look = 0; look < 20; look++) {
        if (yield* done) return
        yield* realSleep(10)
      }
    }
    if (!(yield* done)) assert.fail(what)
  })

/**
 * The admin shape of the app without its secret, as the Webhooks service
 * answers it, `created_at` left out: `advance` moves the app's row back in
 * time (the database's clock), while an event keeps the moment it was written with.
 */
const withoutSecret = (organizationId: string, appId: string) =>
  Effect.gen(function* () {
    const { signing_secret: _, created_at: __, ...app } = yield* (yield* Webhooks).getApp(organizationId, appId)
    return app
  })

/** The `data.object` of a health event, `created_at` left out (see {@link withoutSecret}), checked present. */
const objectOf = (event: { readonly data: { readonly object: Record<string, any> } }) => {
  const { created_at, ...object } = event.data.object
  assert.match(created_at, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$/)
  return object
}

onDatabase(Layer.mergeAll(WebhooksRepo.layer, Ids.layer))("endpoint health (W10)", (it) => {
  it.effect(
    "W10: failing from its first failed attempt, app.failing once at a fifth of APP_DISABLE_AFTER, then disabled (enabled false, disabled_reason failing, disabled_at) with app.disabled, both to the organization's other subscribed apps only, carrying the app without its secret",
    () =>
      Effect.gen(function* () {
        const { organizationId, failing, watcher } = yield* setup()
        const stub = stubSender()
        yield* withWorker(organizationId, stub.send, (worker) =>
          Effect.gen(function* () {
            const mine = (yield* publishEvent(organizationId)).find((made) => made.app_id === failing.id)
            const delivery = deliveryOf(mine!.id)
            yield* settle(
              Effect.map(delivery, (d) => d.attempts === 1),
              "the first attempt"
            )
            // Counted from the first failed attempt after creation.
            const first = yield* appRow(failing.id)
            assert.isNotNull(first.failing_since)
            assert.isNull(first.failing_warned_at)
            assert.strictEqual(first.enabled, true)
            const failingSince = (first.failing_since as Date).getTime()

            // Before a fifth (20 s) has passed: no warning.
            yield* worker.advance(STEP_MS)
            yield* settle(
              Effect.map(delivery, (d) => d.attempts === 2),
              "the second attempt"
            )
            assert.deepStrictEqual(yield* eventsOfType(organizationId, "app.failing"), [])

            yield* stepUntil(
              worker,
              Effect.map(eventsOfType(organizationId, "app.failing"), (events) => events.length > 0),
              3,
              "app.failing at a fifth"
            )
            const [warning] = yield* eventsOfType(organizationId, "app.failing")
            const warned = yield* appRow(failing.id)
            assert.isNotNull(warned.failing_warned_at)
            // The period did not restart: the same start (moved back with the database's clock by advance).
            assert.isTrue((warned.failing_since as Date).getTime() < failingSince)
            assert.deepStrictEqual(objectOf(warning!), yield* withoutSecret(organizationId, failing.id))
            assert.notProperty(warning!.data.object, "signing_secret")
            assert.deepStrictEqual(yield* deliveredTo(warning!.id), [watcher.id])

            // Disabled once the failures have lasted 100 s; no second warning in the period.
            yield* stepUntil(
              worker,
              Effect.map(appRow(failing.id), (app) => app.enabled === false),
              10,
              "disabled after APP_DISABLE_AFTER"
            )
            assert.strictEqual((yield* eventsOfType(organizationId, "app.failing")).length, 1)
            const disabled = yield* appRow(failing.id)
            assert.strictEqual(disabled.disabled_reason, "failing")
            assert.isNotNull(disabled.disabled_at)
            const notices = yield* eventsOfType(organizationId, "app.disabled")
            assert.strictEqual(notices.length, 1)
            const notice = notices[0]!
            const app = yield* withoutSecret(organizationId, failing.id)
            assert.deepStrictEqual(objectOf(notice), app)
            assert.strictEqual(app.enabled, false)
            assert.strictEqual(app.disabled_reason, "failing")
            assert.match(app.disabled_at!, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$/)
            assert.deepStrictEqual(yield* deliveredTo(notice.id), [watcher.id])
            // Both arrived at the watcher, each a valid event of its type (the OpenAPI document's webhooks).
            yield* settle(
              Effect.sync(() => stub.to(WATCHER_URL).some((request) => request.eventId === notice.id)),
              "app.disabled delivered to the watcher"
            )
            for (const event of [warning!, notice]) {
              const request = stub.to(WATCHER_URL).find((each) => each.eventId === event.id)!
              const decoded = Schema.decodeUnknownSync(WebhookEvent)(JSON.parse(request.body))
              assert.strictEqual(decoded.type, event.type)
            }
            assert.isFalse(stub.to(FAILING_URL).some((request) => [warning!.id, notice.id].includes(request.eventId)))

            // Its pending delivery stays pending while it is disabled: no more attempts.
            const attempts = stub.to(FAILING_URL).length
            yield* worker.advance(STEP_MS * 3)
            yield* worker.idle
            assert.strictEqual(stub.to(FAILING_URL).length, attempts)
            assert.strictEqual((yield* delivery).status, "pending")
          })
        )
      }).pipe(Effect.provide(webhooksLayer))
  )

  it.effect(
    "W10: a success ends the failing period: the next one is counted from its own first failure and warns again once",
    () =>
      Effect.gen(function* () {
        const { organizationId, failing } = yield* setup()
        const stub = stubSender()
        yield* withWorker(organizationId, stub.send, (worker) =>
          Effect.gen(function* () {
            yield* publishEvent(organizationId)
            yield* settle(
              Effect.sync(() => stub.to(FAILING_URL).length === 1),
              "the first attempt"
            )
            yield* worker.advance(STEP_MS)
            yield* settle(
              Effect.sync(() => stub.to(FAILING_URL).length === 2),
              "the second attempt"
            )
            // 12.5-25 s of failures, then a success: the period ends before the fifth (20 s) was seen.
            stub.respond(204)
            yield* worker.advance(STEP_MS)
            yield* settle(
              Effect.map(appRow(failing.id), (app) => app.failing_since === null),
              "the success ends the period"
            )
            assert.deepStrictEqual(yield* eventsOfType(organizationId, "app.failing"), [])

            // A new period: 12.5 s of it is not a fifth, though the first failure was 25 s ago and more.
            stub.respond(500)
            yield* publishEvent(organizationId)
            yield* settle(
              Effect.map(appRow(failing.id), (app) => app.failing_since !== null),
              "a new period"
            )
            yield* worker.advance(STEP_MS)
            yield* worker.idle
            assert.deepStrictEqual(yield* eventsOfType(organizationId, "app.failing"), [])
            yield* stepUntil(
              worker,
              Effect.map(eventsOfType(organizationId, "app.failing"), (events) => events.length === 1),
              2,
              "app.failing of the new period"
            )

            // Another success and another period: warned again, once.
            stub.respond(204)
            yield* publishEvent(organizationId)
            yield* stepUntil(
              worker,
              Effect.map(appRow(failing.id), (app) => app.failing_since === null && app.failing_warned_at === null),
              2,
              "the second period ends"
            )
            stub.respond(500)
            yield* publishEvent(organizationId)
            yield* stepUntil(
              worker,
              Effect.map(eventsOfType(organizationId, "app.failing"), (events) => events.length === 2),
              4,
              "app.failing of the third period"
            )
            yield* worker.advance(STEP_MS)
            yield* worker.idle
            assert.strictEqual((yield* eventsOfType(organizationId, "app.failing")).length, 2)
            assert.strictEqual((yield* appRow(failing.id)).enabled, true)
          })
        )
      }).pipe(Effect.provide(webhooksLayer))
  )

  it.effect(
    "W10: while disabled its deliveries are held and new events still make held ones; PATCH enabled: true clears disabled_reason and disabled_at and they go out in commit order (W7); W9 recovers the failed ones",
    () =>
      Effect.gen(function* () {
        const sql = yield* SqlClient.SqlClient
        const webhooks = yield* Webhooks
        const { organizationId, failing } = yield* setup("conversation")
        const stub = stubSender()
        const conversation = newId()
        yield* withWorker(organizationId, stub.send, (worker) =>
          Effect.gen(function* () {
            // A delivery of another conversation that ended failed before (as W5's last retry leaves it).
            const [early] = (yield* publishEvent(organizationId, { conversationId: newId() })).filter(
              (made) => made.app_id === failing.id
            )
            yield* settle(
              Effect.map(deliveryOf(early!.id), (d) => d.attempts === 1),
              "the early delivery's attempt"
            )
            yield* sql`UPDATE deliveries SET status = 'failed', next_attempt_at = NULL WHERE id = ${early!.id}`

            // Three events of one conversation: the first fails and waits for its retry, the others behind it.
            const before: Array<string> = []
            for (let i = 0; i < 3; i++) {
              const made = yield* publishEvent(organizationId, { conversationId: conversation })
              before.push(made.find((each) => each.app_id === failing.id)!.event_id)
            }
            yield* settle(
              Effect.sync(() => stub.to(FAILING_URL).some((request) => request.eventId === before[0])),
              "the head's first attempt"
            )
            // The failures have lasted APP_DISABLE_AFTER: the next failed attempt disables the app.
            yield* sql`UPDATE apps SET failing_since = statement_timestamp() - interval '200 seconds',
              failing_warned_at = statement_timestamp() WHERE id = ${failing.id}`
            yield* stepUntil(
              worker,
              Effect.map(appRow(failing.id), (app) => app.enabled === false),
              3,
              "disabled"
            )
            assert.strictEqual((yield* appRow(failing.id)).disabled_reason, "failing")

            // New events still make deliveries for it, held pending with no due time.
            const after: Array<string> = []
            for (let i = 0; i < 2; i++) {
              const made = yield* publishEvent(organizationId, { conversationId: conversation })
              const held = made.find((each) => each.app_id === failing.id)
              assert.isDefined(held, "a delivery for the disabled app")
              after.push(held!.event_id)
              const row = yield* deliveryOf(held!.id)
              assert.strictEqual(row.status, "pending")
              assert.isNull(row.next_attempt_at)
            }
            const attempts = stub.to(FAILING_URL).length
            yield* worker.advance(STEP_MS * 4)
            yield* worker.idle
            assert.strictEqual(stub.to(FAILING_URL).length, attempts, "nothing sent while disabled")
            const pending = yield* webhooks.listDeliveries(organizationId, failing.id, { status: "pending" })
            assert.strictEqual(JSON.parse(pending).length, 5)

            // Re-enabled: the reason and the moment are cleared, the held deliveries go out in commit order.
            stub.respond(200)
            const sentBefore = stub.to(FAILING_URL).length
            const enabled = yield* webhooks.updateApp(organizationId, failing.id, { enabled: true })
            assert.strictEqual(enabled.enabled, true)
            assert.isNull(enabled.disabled_reason)
            assert.isNull(enabled.disabled_at)
            const row = yield* appRow(failing.id)
            assert.isNull(row.failing_since)
            assert.isNull(row.failing_warned_at)
            // No clock moves: the PATCH's notification wakes the worker and the held deliveries are due now.
            yield* settle(
              Effect.sync(() => stub.to(FAILING_URL).length >= sentBefore + 5),
              "the held deliveries go out"
            )
            assert.deepStrictEqual(
              stub
                .to(FAILING_URL)
                .slice(sentBefore)
                .map((request) => request.eventId),
              [...before, ...after]
            )
            // W9: the failed one is recovered and sent.
            const recovered = yield* webhooks.recover(organizationId, failing.id, { since: "2000-01-01T00:00:00Z" })
            assert.deepStrictEqual(recovered, { deliveries: 1 })
            yield* settle(
              Effect.map(deliveryOf(early!.id), (d) => d.status === "succeeded"),
              "the recovered delivery succeeds"
            )
            assert.deepStrictEqual(yield* eventsOfType(organizationId, "app.failing"), [])
          })
        )
      }).pipe(Effect.provide(webhooksLayer))
  )

  it.effect(
    "W10: an app disabled by a PATCH is unchanged: no disabled_reason, no new deliveries, no health events; its re-enabling sends its pending ones",
    () =>
      Effect.gen(function* () {
        const webhooks = yield* Webhooks
        const { organizationId, failing } = yield* setup()
        const stub = stubSender()
        yield* withWorker(organizationId, stub.send, (worker) =>
          Effect.gen(function* () {
            const [made] = (yield* publishEvent(organizationId)).filter((each) => each.app_id === failing.id)
            yield* settle(
              Effect.map(deliveryOf(made!.id), (d) => d.attempts === 1),
              "the first attempt"
            )
            const disabled = yield* webhooks.updateApp(organizationId, failing.id, { enabled: false })
            assert.deepStrictEqual(
              [disabled.enabled, disabled.disabled_reason, disabled.disabled_at],
              [false, null, null]
            )
            const none = (yield* publishEvent(organizationId)).filter((each) => each.app_id === failing.id)
            assert.deepStrictEqual(none, [])
            yield* worker.advance(STEP_MS * 10)
            yield* worker.idle
            assert.strictEqual(stub.to(FAILING_URL).length, 1)
            assert.deepStrictEqual(yield* eventsOfType(organizationId, "app.failing"), [])
            assert.deepStrictEqual(yield* eventsOfType(organizationId, "app.disabled"), [])
            assert.strictEqual((yield* appRow(failing.id)).disabled_reason, null)

            stub.respond(200)
            yield* webhooks.updateApp(organizationId, failing.id, { enabled: true })
            yield* settle(
              Effect.map(deliveryOf(made!.id), (d) => d.status === "succeeded"),
              "its pending delivery goes out"
            )
          })
        )
      }).pipe(Effect.provide(webhooksLayer))
  )
})
