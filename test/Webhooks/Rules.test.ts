/**
 * The rules of webhooks (DECISIONS.md O6, W1-W7; issue 13 item 8, issue 37
 * item 1), on PostgreSQL: the production `Webhooks` service with `it.effect`
 * over the webhooks repository on the file's database (a clone of the
 * migrated template, test/support/RulesDatabase.ts), host names resolved by a
 * stub (`HostResolver`), never by DNS; the attempt rules of `Worker.ts`
 * directly and over a stub sender; and the whole delivery worker on its own
 * pool over a second database of the file's, with a stub sender and time on
 * `TestClock` (test/support/WebhookWorker.ts). Events are written by the
 * outbox's statement, so the fan-out trigger makes the deliveries (W2). Due
 * times and timestamps are the database's (`statement_timestamp()`): a test
 * moves them with the rows, and compares moments with the database's clock.
 * Each test has an organization of its own. The integration suite
 * (Apps.test.ts, Delivery.test.ts, Processes.test.ts) checks the same through
 * the API and real HTTP.
 */

import { PgClient } from "@effect/sql-pg"
import { assert, describe, it } from "@effect/vitest"
import { Clock, Duration, Effect, Fiber, Layer, Queue } from "effect"
import { SqlClient } from "effect/sql"
import { TestClock } from "effect/testing"
import { Webhook } from "standardwebhooks"
import { isoTimestamp } from "../../src/Database/Json.ts"
import type { AppOrdering } from "../../src/Domain/App.ts"
import { Ids, makeIdGenerator } from "../../src/Shared/Ids.ts"
import { HostResolver, type ResolveHost, TargetRefused } from "../../src/Shared/Ssrf.ts"
import type { Delivery } from "../../src/Webhooks/Api.ts"
import { type ClaimedDelivery, deliveriesChannel, WebhooksRepo } from "../../src/Webhooks/Repo.ts"
import { generateSecret } from "../../src/Webhooks/Signing.ts"
import { Webhooks } from "../../src/Webhooks/Webhooks.ts"
import { attemptVerdict, makeAttempt, retryDelayMs, type SendWebhook } from "../../src/Webhooks/Worker.ts"
import { onDatabase, organization, rowsOf, setColumn } from "../support/RulesDatabase.ts"
import { testConfig } from "../support/TestApp.ts"
import { realSleep } from "../support/Wait.ts"
import {
  deliveryExists,
  deliveryOf,
  deliveryOfEvent,
  EVENT_TRACEPARENT,
  publishEvent,
  type RunningWebhookWorker,
  startWebhookWorker,
  webhookApp
} from "../support/WebhookWorker.ts"

/** Ids for the fixtures (UUIDv7, as the application makes them). */
const newId = makeIdGenerator()

/** A public address literal: accepted by the W6 guard with no DNS. */
const PUBLIC_URL = "https://93.184.215.14/hooks/parley"
const seconds = (n: number) => Duration.seconds(n)

/** The file's services: the webhooks repository on the file's database, and the application's ids. */
const WebhooksServices = Layer.mergeAll(WebhooksRepo.layer, Ids.layer)

/** What a test sets for the `Webhooks` service (W6). */
interface WebhooksOptions {
  /** `ALLOW_PRIVATE_NETWORK_TARGETS`; false by default. */
  readonly allowPrivateNetworkTargets?: boolean
  /** Resolves host names for the W6 check; by default no name resolves (no real DNS in these tests). */
  readonly resolveHost?: ResolveHost
}

/** The resolver of these tests unless they give one: no name resolves. */
const noDns: ResolveHost = (hostname) => Promise.reject(new Error(`No DNS in tests: ${hostname}`))

/** The production `Webhooks` service over the file's repository, with `options` (`WebhooksRepo` and `Ids` required). */
const webhooksLayer = (options: WebhooksOptions = {}) =>
  Webhooks.layerNoDeps.pipe(
    Layer.provide(Layer.succeed(HostResolver, options.resolveHost ?? noDns)),
    Layer.provide(testConfig({ allowPrivateNetworkTargets: options.allowPrivateNetworkTargets ?? false }))
  )

/** Runs `f` with a new organization and the Webhooks service with `options`. */
const withWebhooks = <A, E, R>(
  f: (webhooks: Webhooks["Service"], organizationId: string) => Effect.Effect<A, E, R>,
  options: WebhooksOptions = {}
) =>
  Effect.gen(function* () {
    const organizationId = yield* organization()
    return yield* f(yield* Webhooks, organizationId)
  }).pipe(Effect.provide(webhooksLayer(options)))

/** The deliveries listing, parsed. */
const deliveries = (
  webhooks: Webhooks["Service"],
  organizationId: string,
  appId: string,
  query: Parameters<Webhooks["Service"]["listDeliveries"]>[2] = {}
) =>
  Effect.map(webhooks.listDeliveries(organizationId, appId, query), (text): ReadonlyArray<Delivery> => JSON.parse(text))

/** The database's clock now, as the repository writes moments (ISO 8601 with microseconds; `SqlClient` required). */
const databaseNow = Effect.flatMap(Effect.service(SqlClient.SqlClient), (sql) =>
  sql<{ now: string }>`SELECT ${sql.literal(isoTimestamp("statement_timestamp()"))} AS now`.pipe(
    Effect.map((rows) => rows[0]!.now),
    Effect.orDie
  )
)

/** Notifies the deliveries channel with `payload`, as the fan-out and the admin retry do (`SqlClient` required). */
const databaseNotify = (payload: string) =>
  Effect.flatMap(Effect.service(SqlClient.SqlClient), (sql) =>
    Effect.orDie(sql`SELECT pg_notify(${deliveriesChannel}, ${payload})`)
  )

/** A stored envelope (W3) of a new event of `type`. */
const envelope = (organizationId: string, type: string) => {
  const id = newId()
  return {
    id,
    body: JSON.stringify({ id, timestamp: 1_700_000_000, type, organization_id: organizationId, data: { object: {} } }),
    traceparent: EVENT_TRACEPARENT
  }
}

/** A request the stub client was given. */
interface Sent {
  readonly method: string
  readonly url: string
  readonly headers: Readonly<Record<string, string>>
  readonly body: string
  /** Test clock time, epoch ms. */
  readonly at: number
}

/**
 * A stub `SendWebhook` that records every request and responds to the `n`-th
 * (0-based) with the status `respond` gives, or fails with the error `respond`
 * fails with (as Node's client fails: no response).
 */
const stubSender = (respond: (n: number) => Effect.Effect<number, unknown> = () => Effect.succeed(200)) => {
  const sent: Array<Sent> = []
  const send: SendWebhook = (url, headers, body) =>
    Effect.gen(function* () {
      const at = yield* Clock.currentTimeMillis
      sent.push({ method: "POST", url: url.toString(), headers: { ...headers }, body, at })
      return yield* respond(sent.length - 1)
    })
  return { send, sent }
}

/** A claimed delivery of a new event, as the claim returns it. */
const claimed = (fields: Partial<ClaimedDelivery> = {}): ClaimedDelivery => {
  const event = envelope(newId(), "message.created")
  return {
    organization_id: newId(),
    id: newId(),
    app_id: newId(),
    event_id: event.id,
    attempts: 0,
    webhook_url: PUBLIC_URL,
    previous_signing_secret: null,
    signing_secret: generateSecret(),
    body: event.body,
    traceparent: event.traceparent,
    ...fields
  }
}

onDatabase(WebhooksServices)("the Webhooks service on PostgreSQL", (it) => {
  describe("apps (O6, W1, W4)", () => {
    it.effect(
      "O6, W4, W7: an app gets a whsec_ secret and ordering none; its events are kept once each, in the order given",
      () =>
        withWebhooks((webhooks, org) =>
          Effect.gen(function* () {
            const before = yield* databaseNow
            const app = yield* webhooks.createApp(org, {
              name: "CRM",
              webhook_url: PUBLIC_URL,
              events: ["session.created", "message.created", "session.created", "session.closed", "message.created"]
            })
            assert.deepStrictEqual(Object.keys(app), [
              "id",
              "name",
              "webhook_url",
              "events",
              "enabled",
              "disabled_reason",
              "disabled_at",
              "ordering",
              "signing_secret",
              "created_at"
            ])
            assert.deepStrictEqual(app.events, ["session.created", "message.created", "session.closed"])
            assert.strictEqual(app.enabled, true)
            assert.strictEqual(app.ordering, "none")
            assert.match(app.signing_secret, /^whsec_[A-Za-z0-9+/]{43}=$/)
            // The database's moment of the insert (statement_timestamp()), with microseconds.
            const after = yield* databaseNow
            assert.match(app.created_at, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$/)
            assert.isTrue(before <= app.created_at && app.created_at <= after, `${before} ${app.created_at} ${after}`)
            const other = yield* webhooks.createApp(org, {
              name: "Off",
              webhook_url: PUBLIC_URL,
              events: ["message.created"],
              enabled: false
            })
            assert.strictEqual(other.enabled, false)
            assert.notStrictEqual(other.signing_secret, app.signing_secret)
            assert.deepStrictEqual(yield* webhooks.listApps(org), [app, other])
            assert.deepStrictEqual(yield* webhooks.getApp(org, app.id), app)
          })
        )
    )

    it.effect(
      "O6: PATCH changes only the members given (events kept once each, in order); DELETE removes the app and its deliveries",
      () =>
        withWebhooks((webhooks, org) =>
          Effect.gen(function* () {
            const app = yield* webhooks.createApp(org, {
              name: "CRM",
              webhook_url: PUBLIC_URL,
              events: ["message.created"]
            })
            const renamed = yield* webhooks.updateApp(org, app.id, { name: "CRM 2" })
            assert.deepStrictEqual(renamed, { ...app, name: "CRM 2" })
            const patched = yield* webhooks.updateApp(org, app.id, {
              webhook_url: "http://93.184.215.15:8443/other",
              events: ["session.finished", "session.created", "session.finished"],
              enabled: false
            })
            assert.deepStrictEqual(patched, {
              ...app,
              name: "CRM 2",
              webhook_url: "http://93.184.215.15:8443/other",
              events: ["session.finished", "session.created"],
              enabled: false
            })
            assert.deepStrictEqual(yield* webhooks.getApp(org, app.id), patched)

            yield* webhooks.updateApp(org, app.id, { enabled: true })
            const [delivery] = yield* publishEvent(org, { type: "session.created" })
            assert.isDefined(delivery)
            yield* webhooks.deleteApp(org, app.id)
            assert.strictEqual((yield* Effect.flip(webhooks.getApp(org, app.id)))._tag, "AppNotFound")
            assert.isFalse(yield* deliveryExists(delivery!.id))
            assert.deepStrictEqual(yield* webhooks.listApps(org), [])
          })
        )
    )

    it.effect(
      "O6: an unknown organization is OrganizationNotFound; an unknown or foreign app is AppNotFound everywhere",
      () =>
        withWebhooks((webhooks, org) =>
          Effect.gen(function* () {
            const other = yield* organization()
            const app = yield* webhooks.createApp(org, {
              name: "CRM",
              webhook_url: PUBLIC_URL,
              events: ["message.created"]
            })
            const unknownOrg = newId()
            const orgTags = [
              (yield* Effect.flip(
                webhooks.createApp(unknownOrg, { name: "x", webhook_url: PUBLIC_URL, events: ["message.created"] })
              ))._tag,
              (yield* Effect.flip(webhooks.listApps(unknownOrg)))._tag,
              (yield* Effect.flip(webhooks.getApp(unknownOrg, app.id)))._tag,
              (yield* Effect.flip(webhooks.deleteApp(unknownOrg, app.id)))._tag
            ]
            assert.deepStrictEqual(orgTags, Array(4).fill("OrganizationNotFound"))
            for (const [organizationId, appId] of [
              [other, app.id],
              [org, newId()],
              [org, "not-a-uuid"]
            ] as const) {
              const errors = [
                yield* Effect.flip(webhooks.getApp(organizationId, appId)),
                yield* Effect.flip(webhooks.updateApp(organizationId, appId, { enabled: false })),
                yield* Effect.flip(webhooks.deleteApp(organizationId, appId)),
                yield* Effect.flip(webhooks.listDeliveries(organizationId, appId, {})),
                yield* Effect.flip(webhooks.retryDelivery(organizationId, appId, newId()))
              ]
              assert.deepStrictEqual(
                errors.map((error) => [error._tag, error.detail]),
                Array(5).fill(["AppNotFound", "App not found"])
              )
            }
            // The foreign PATCH and DELETE changed nothing.
            assert.deepStrictEqual(yield* webhooks.getApp(org, app.id), app)
          })
        )
    )
  })

  describe("webhook URLs at creation and PATCH (W6)", () => {
    /** A resolver of fixed answers; other names do not resolve. It records the names asked. */
    const resolver = (answers: Record<string, ReadonlyArray<string>>) => {
      const asked: Array<string> = []
      const resolveHost: ResolveHost = (hostname) => {
        asked.push(hostname)
        const found = answers[hostname]
        return found === undefined ? Promise.reject(new Error("ENOTFOUND")) : Promise.resolve(found)
      }
      return { resolveHost, asked }
    }

    const dns = resolver({
      "hooks.example.com": ["93.184.215.14", "2606:4700:4700::1111"],
      "mixed.example.com": ["93.184.215.14", "10.0.0.7"],
      "metadata.example.com": ["169.254.169.254"],
      "v6.example.com": ["::ffff:127.0.0.1"]
    })

    /** The 422 message of creating an app with `url`, or "created". */
    const attempt = (webhooks: Webhooks["Service"], org: string, url: string) =>
      webhooks.createApp(org, { name: "x", webhook_url: url, events: ["message.created"] }).pipe(
        Effect.as("created"),
        Effect.catchTag("ValidationFailed", (error) => {
          assert.deepStrictEqual(error.detail[0]?.loc, ["body", "webhook_url"], url)
          return Effect.succeed(error.detail[0]!.msg)
        })
      )

    it.effect(
      "W6: only http(s) URLs without credentials whose every resolved address is public; checked on the resolver's answer",
      () =>
        withWebhooks(
          (webhooks, org) =>
            Effect.gen(function* () {
              const outcomes: Record<string, string> = {}
              for (const url of [
                "https://hooks.example.com/parley",
                "http://93.184.215.14:8080/x",
                "ftp://93.184.215.14/x",
                "not a url",
                "https://user:pw@hooks.example.com/x",
                "http://127.0.0.1/x",
                "http://[::1]/x",
                "http://10.1.2.3/x",
                "http://mixed.example.com/x",
                "http://metadata.example.com/latest",
                "http://v6.example.com/x",
                "http://nowhere.example.com/x"
              ]) {
                outcomes[url] = yield* attempt(webhooks, org, url)
              }
              assert.deepStrictEqual(outcomes, {
                "https://hooks.example.com/parley": "created",
                "http://93.184.215.14:8080/x": "created",
                "ftp://93.184.215.14/x": "URL must be an absolute http or https URL",
                "not a url": "URL must be an absolute http or https URL",
                "https://user:pw@hooks.example.com/x": "URL must not contain credentials",
                "http://127.0.0.1/x":
                  "Address 127.0.0.1 is not a public address (private, loopback, link-local or reserved)",
                "http://[::1]/x": "Address ::1 is not a public address (private, loopback, link-local or reserved)",
                "http://10.1.2.3/x":
                  "Address 10.1.2.3 is not a public address (private, loopback, link-local or reserved)",
                "http://mixed.example.com/x":
                  "Address 10.0.0.7 is not a public address (private, loopback, link-local or reserved)",
                "http://metadata.example.com/latest":
                  "Address 169.254.169.254 is not a public address (private, loopback, link-local or reserved)",
                "http://v6.example.com/x":
                  "Address ::ffff:127.0.0.1 is not a public address (private, loopback, link-local or reserved)",
                "http://nowhere.example.com/x": "Host nowhere.example.com could not be resolved"
              })
              // IP literals are checked as they are; only host names are resolved.
              assert.deepStrictEqual(dns.asked, [
                "hooks.example.com",
                "mixed.example.com",
                "metadata.example.com",
                "v6.example.com",
                "nowhere.example.com"
              ])
              assert.strictEqual((yield* webhooks.listApps(org)).length, 2)
            }),
          { resolveHost: dns.resolveHost }
        )
    )

    it.effect("W6: a PATCH to a refused URL is 422 and changes nothing", () =>
      withWebhooks(
        (webhooks, org) =>
          Effect.gen(function* () {
            const app = yield* webhooks.createApp(org, {
              name: "x",
              webhook_url: PUBLIC_URL,
              events: ["message.created"]
            })
            for (const url of ["http://mixed.example.com/x", "http://192.168.1.1/x", "gopher://hooks.example.com"]) {
              const error = yield* Effect.flip(webhooks.updateApp(org, app.id, { webhook_url: url, enabled: false }))
              assert.strictEqual(error._tag, "ValidationFailed", url)
            }
            assert.deepStrictEqual(yield* webhooks.getApp(org, app.id), app)
          }),
        { resolveHost: dns.resolveHost }
      )
    )

    it.effect("W6: ALLOW_PRIVATE_NETWORK_TARGETS lifts the address check, not the scheme or credentials check", () =>
      withWebhooks(
        (webhooks, org) =>
          Effect.gen(function* () {
            const asked = dns.asked.length
            assert.strictEqual(yield* attempt(webhooks, org, "http://127.0.0.1:9000/x"), "created")
            assert.strictEqual(yield* attempt(webhooks, org, "http://mixed.example.com/x"), "created")
            assert.strictEqual(yield* attempt(webhooks, org, "http://nowhere.example.com/x"), "created")
            assert.strictEqual(dns.asked.length, asked)
            assert.strictEqual(
              yield* attempt(webhooks, org, "file:///etc/passwd"),
              "URL must be an absolute http or https URL"
            )
            assert.strictEqual(
              yield* attempt(webhooks, org, "http://u:p@127.0.0.1/x"),
              "URL must not contain credentials"
            )
          }),
        { resolveHost: dns.resolveHost, allowPrivateNetworkTargets: true }
      )
    )
  })

  describe("deliveries (O6, W5)", () => {
    /**
     * An app of `org` subscribed to message.created and three deliveries of it: succeeded, failed, pending (their
     * status written as the worker would). Each event in a millisecond of its own: the fan-out's delivery ids
     * (`parley_uuid_v7()`, migrations/0002) are ordered by their millisecond only.
     */
    const withDeliveries = (webhooks: Webhooks["Service"], org: string) =>
      Effect.gen(function* () {
        const app = yield* webhooks.createApp(org, {
          name: "CRM",
          webhook_url: PUBLIC_URL,
          events: ["message.created"]
        })
        const made = []
        for (const status of ["succeeded", "failed", "pending"] as const) {
          yield* realSleep(2)
          const [delivery] = yield* publishEvent(org)
          if (status !== "pending") {
            yield* setColumn("deliveries", delivery!.id, "status", status)
            yield* setColumn("deliveries", delivery!.id, "next_attempt_at", null)
          }
          made.push(delivery!)
        }
        return { app, made }
      })

    it.effect(
      "O6: deliveries are listed newest first, filtered by status, in keyset pages of `limit` after `after_id`",
      () =>
        withWebhooks((webhooks, org) =>
          Effect.gen(function* () {
            const { app, made } = yield* withDeliveries(webhooks, org)
            const [succeeded, failed, pending] = made.map((delivery) => delivery.id) as [string, string, string]
            const ids = (listed: ReadonlyArray<Delivery>) => listed.map((delivery) => delivery.id)
            const all = yield* deliveries(webhooks, org, app.id)
            assert.deepStrictEqual(ids(all), [pending, failed, succeeded])
            assert.deepStrictEqual(Object.keys(all[0]!), [
              "id",
              "event_id",
              "event_type",
              "app_id",
              "status",
              "attempts",
              "last_status_code",
              "last_error",
              "next_attempt_at",
              "created_at",
              "updated_at",
              "attempt_log"
            ])
            assert.deepStrictEqual(ids(yield* deliveries(webhooks, org, app.id, { status: "failed" })), [failed])
            const first = yield* deliveries(webhooks, org, app.id, { limit: 2 })
            assert.deepStrictEqual(ids(first), [pending, failed])
            assert.deepStrictEqual(ids(yield* deliveries(webhooks, org, app.id, { limit: 2, after_id: failed })), [
              succeeded
            ])
            assert.deepStrictEqual(yield* deliveries(webhooks, org, app.id, { after_id: succeeded }), [])
            assert.deepStrictEqual(yield* deliveries(webhooks, org, app.id, { after_id: "not-a-uuid" }), [])
            // Another app's deliveries are not listed.
            const other = yield* webhooks.createApp(org, {
              name: "x",
              webhook_url: PUBLIC_URL,
              events: ["session.created"]
            })
            assert.deepStrictEqual(yield* deliveries(webhooks, org, other.id), [])
          })
        )
    )

    it.effect(
      "W5, O6: the admin retry makes a delivery pending and due now and wakes the workers; unknown ones are DeliveryNotFound",
      () =>
        withWebhooks((webhooks, org) =>
          Effect.gen(function* () {
            const { app, made } = yield* withDeliveries(webhooks, org)
            const other = yield* webhooks.createApp(org, {
              name: "x",
              webhook_url: PUBLIC_URL,
              events: ["message.created"]
            })
            // The workers' wakeups: notifications on the deliveries channel, counted up to a marker of the test's.
            let wakeUps = 0
            const notifications = yield* (yield* PgClient.PgClient).listen(deliveriesChannel).pipe(Effect.orDie)
            const countWakeUps = Effect.gen(function* () {
              yield* databaseNotify("marker")
              for (;;) {
                const notification = yield* Queue.take(notifications).pipe(Effect.orDie)
                if (notification.payload === "marker") return
                wakeUps++
              }
            })
            const before = yield* databaseNow
            yield* webhooks.retryDelivery(org, app.id, made[1]!.id)
            const after = yield* databaseNow
            const [retried] = yield* deliveries(webhooks, org, app.id, {
              status: "pending",
              limit: 1,
              after_id: made[2]!.id
            })
            assert.strictEqual(retried?.id, made[1]!.id)
            // Due now by the database's clock (statement_timestamp()), the moment of the retry.
            assert.strictEqual(retried?.next_attempt_at, retried?.updated_at)
            assert.isTrue(before <= retried!.next_attempt_at! && retried!.next_attempt_at! <= after)
            yield* countWakeUps
            assert.strictEqual(wakeUps, 1)
            for (const [appId, deliveryId] of [
              [app.id, newId()],
              [app.id, "not-a-uuid"],
              [other.id, made[0]!.id]
            ] as const) {
              const error = yield* Effect.flip(webhooks.retryDelivery(org, appId, deliveryId))
              assert.deepStrictEqual([error._tag, error.detail], ["DeliveryNotFound", "Delivery not found"])
            }
            assert.strictEqual((yield* deliveryOf(made[0]!.id)).status, "succeeded")
            yield* countWakeUps
            assert.strictEqual(wakeUps, 1)
          })
        )
    )
  })
})

describe("attempt rules (W4, W5)", () => {
  const schedule = [seconds(5), Duration.minutes(5), Duration.minutes(30)]

  it("W5: the delay after attempt n is the schedule's n-th plus at most 20%; none after the last", () => {
    assert.strictEqual(retryDelayMs(schedule, 1, 0), 5_000)
    assert.strictEqual(retryDelayMs(schedule, 1, 0.5), 5_500)
    assert.strictEqual(retryDelayMs(schedule, 1, 0.999999), 6_000)
    assert.strictEqual(retryDelayMs(schedule, 2, 0), 300_000)
    assert.strictEqual(retryDelayMs(schedule, 3, 0.25), 1_890_000)
    assert.isUndefined(retryDelayMs(schedule, 4, 0))
    for (let i = 0; i < 200; i++) {
      const delay = retryDelayMs(schedule, 2)!
      assert.isTrue(delay >= 300_000 && delay <= 360_000, String(delay))
    }
  })

  it("W5: a 2xx response succeeds; any other response or none is retried on the schedule, then failed", () => {
    const verdicts = [200, 201, 204, 299, 199, 300, 302, 404, 410, 500, 503].map(
      (statusCode) => attemptVerdict({ statusCode }, 1, schedule, 0).status
    )
    assert.deepStrictEqual(verdicts, [
      "succeeded",
      "succeeded",
      "succeeded",
      "succeeded",
      "pending",
      "pending",
      "pending",
      "pending",
      "pending",
      "pending",
      "pending"
    ])
    assert.deepStrictEqual(attemptVerdict({ statusCode: 204 }, 4, schedule, 0), {
      statusCode: 204,
      error: null,
      status: "succeeded",
      delayMs: 0
    })
    assert.deepStrictEqual(attemptVerdict({ statusCode: 500 }, 2, schedule, 0), {
      statusCode: 500,
      error: "HTTP status 500",
      status: "pending",
      delayMs: 300_000
    })
    assert.deepStrictEqual(attemptVerdict({ failure: "Timed out after 10000 ms" }, 3, schedule, 0), {
      statusCode: null,
      error: "Timed out after 10000 ms",
      status: "pending",
      delayMs: 1_800_000
    })
    assert.deepStrictEqual(attemptVerdict({ statusCode: 302 }, 4, schedule, 0), {
      statusCode: 302,
      error: "HTTP status 302",
      status: "failed",
      delayMs: 0
    })
    assert.deepStrictEqual(attemptVerdict({ failure: "ECONNREFUSED: connect" }, 1, [], 0).status, "failed")
  })

  const options = { timeoutMs: 1_000, schedule, allowPrivate: false }

  it.effect(
    "W3, W4: an attempt POSTs the stored body byte for byte, signed per Standard Webhooks, in the event's trace",
    () =>
      Effect.gen(function* () {
        const now = Date.now()
        yield* TestClock.setTime(now)
        const stub = stubSender(() => Effect.succeed(204))
        const delivery = claimed({ body: '{"id":"x",  "type":"message.created","data":{"object":{"t":"é"}}}' })
        const result = yield* makeAttempt(stub.send, options)(delivery)
        assert.strictEqual(stub.sent.length, 1)
        const [request] = stub.sent
        assert.strictEqual(request!.method, "POST")
        assert.strictEqual(request!.url, `${PUBLIC_URL}`)
        assert.strictEqual(request!.body, delivery.body)
        assert.strictEqual(request!.headers["content-type"], "application/json")
        assert.strictEqual(request!.headers["user-agent"], "Parley-Webhooks/1")
        assert.strictEqual(request!.headers["webhook-id"], delivery.event_id)
        assert.strictEqual(request!.headers["webhook-timestamp"], String(Math.floor(now / 1000)))
        assert.match(request!.headers["webhook-signature"]!, /^v1,[A-Za-z0-9+/]+=*$/)
        const headers = {
          "webhook-id": request!.headers["webhook-id"]!,
          "webhook-timestamp": request!.headers["webhook-timestamp"]!,
          "webhook-signature": request!.headers["webhook-signature"]!
        }
        assert.doesNotThrow(() => new Webhook(delivery.signing_secret).verify(delivery.body, headers))
        assert.throws(() => new Webhook(generateSecret()).verify(delivery.body, headers))
        assert.throws(() => new Webhook(delivery.signing_secret).verify(`${delivery.body} `, headers))
        // W4: traceparent links to the trace that produced the event.
        assert.match(request!.headers.traceparent!, /^00-0af7651916cd43dd8448eb211c80319c-[0-9a-f]{16}-01$/)
        assert.deepStrictEqual(result, {
          organizationId: delivery.organization_id,
          id: delivery.id,
          durationMs: result.durationMs,
          startedAt: new Date(now),
          statusCode: 204,
          error: null,
          status: "succeeded",
          delayMs: 0
        })
      })
  )

  it.effect("W5: no response within WEBHOOK_TIMEOUT_MS is a failed attempt, retried on the schedule", () =>
    Effect.gen(function* () {
      const stub = stubSender(() => Effect.never)
      const fiber = yield* Effect.forkChild(makeAttempt(stub.send, options)(claimed({ attempts: 1 })))
      yield* TestClock.adjust(999)
      assert.isUndefined(fiber.pollUnsafe())
      yield* TestClock.adjust(1)
      for (let turn = 0; turn < 100 && fiber.pollUnsafe() === undefined; turn++) yield* Effect.yieldNow
      assert.isDefined(fiber.pollUnsafe(), "timed out at WEBHOOK_TIMEOUT_MS")
      const result = yield* Fiber.join(fiber)
      assert.strictEqual(stub.sent.length, 1)
      assert.strictEqual(result.statusCode, null)
      assert.strictEqual(result.error, "Timed out after 1000 ms")
      assert.strictEqual(result.status, "pending")
      assert.isTrue(result.delayMs >= 300_000 && result.delayMs <= 360_000)
    })
  )

  it.effect(
    "W6: at attempt time a non-public address literal is refused and nothing is sent, unless private targets are allowed",
    () =>
      Effect.gen(function* () {
        const stub = stubSender()
        const refused = []
        for (const url of ["http://127.0.0.1:8080/hook", "http://[::ffff:a9fe:a9fe]/x", "http://10.0.0.1/x"]) {
          refused.push(yield* makeAttempt(stub.send, options)(claimed({ webhook_url: url, attempts: 3 })))
        }
        assert.strictEqual(stub.sent.length, 0)
        assert.deepStrictEqual(
          refused.map((result) => [result.statusCode, result.error, result.status]),
          [
            [
              null,
              "Refused: Address 127.0.0.1 is not a public address (private, loopback, link-local or reserved)",
              "failed"
            ],
            [
              null,
              "Refused: Address ::ffff:a9fe:a9fe is not a public address (private, loopback, link-local or reserved)",
              "failed"
            ],
            [
              null,
              "Refused: Address 10.0.0.1 is not a public address (private, loopback, link-local or reserved)",
              "failed"
            ]
          ]
        )
        const allowed = yield* makeAttempt(stub.send, { ...options, allowPrivate: true })(
          claimed({ webhook_url: "http://127.0.0.1:8080/hook" })
        )
        assert.strictEqual(allowed.status, "succeeded")
        assert.strictEqual(stub.sent[0]?.url, "http://127.0.0.1:8080/hook")
      })
  )

  it.effect("W6: a host name the connection's lookup refuses is recorded as Refused and retried like any failure", () =>
    Effect.gen(function* () {
      // What the guarded lookup makes of a name that resolves to a private address.
      const stub = stubSender(() => Effect.fail(new TargetRefused("Address 10.0.0.9 is not a public address")))
      const result = yield* makeAttempt(stub.send, options)(claimed({ webhook_url: "https://rebound.example.com/x" }))
      assert.deepStrictEqual(
        [result.statusCode, result.error, result.status],
        [null, "Refused: Address 10.0.0.9 is not a public address", "pending"]
      )
    })
  )
})

onDatabase(WebhooksServices)("the delivery worker on PostgreSQL (W3, W5, W6, O6)", (it) => {
  /** Waits, in real time and up to 15 s, until `done` holds (the worker's fibers run meanwhile). */
  const settle = <E = never, R = never>(done: Effect.Effect<boolean, E, R> | (() => boolean), what: string) =>
    Effect.gen(function* () {
      const deadline = Date.now() + 15_000
      for (;;) {
        if (Effect.isEffect(done) ? yield* done : done()) return
        if (Date.now() > deadline) return assert.fail(what)
        yield* realSleep(10)
      }
    })

  /** A new organization and an app of it subscribed to message.created at `url` (written straight into `apps`). */
  const orgWithApp = (url = PUBLIC_URL, ordering: AppOrdering = "none") =>
    Effect.gen(function* () {
      const organizationId = yield* organization()
      const app = yield* webhookApp(organizationId, { url, ordering })
      return { organizationId, app }
    })

  /**
   * Runs `test` while the worker runs on the file's database with `send`
   * (claims and writes a batch window of `batchWindowMs` apart, none by default); the
   * worker stops (O5) when it ends.
   */
  const withWorker = <A, E, R>(
    organizationId: string,
    send: SendWebhook,
    schedule: ReadonlyArray<Duration.Duration>,
    test: (worker: RunningWebhookWorker) => Effect.Effect<A, E, R>,
    batchWindowMs = 0
  ) =>
    Effect.scoped(
      Effect.gen(function* () {
        const worker = yield* startWebhookWorker({
          organizationId,
          send,
          config: { webhookRetrySchedule: [...schedule], webhookTimeout: seconds(10) },
          batchWindowMs
        })
        return yield* test(worker)
      })
    )

  it.effect(
    "W2: a delivery an event made for an app deleted meanwhile is never attempted, and the worker's sweep deletes it within a minute (migrations/0017)",
    () =>
      Effect.gen(function* () {
        const sql = yield* SqlClient.SqlClient
        const { organizationId, app } = yield* orgWithApp()
        // The app's delete took its deliveries before this event's fan-out committed.
        const [orphan] = yield* publishEvent(organizationId, {
          meanwhile: Effect.orDie(sql`DELETE FROM apps WHERE id = ${app.id}`)
        })
        const exists = deliveryExists(orphan!.id)
        assert.isTrue(yield* exists)
        const stub = stubSender(() => Effect.succeed(204))
        yield* withWorker(organizationId, stub.send, [seconds(5)], (worker) =>
          Effect.gen(function* () {
            yield* worker.advance(59_999)
            assert.isTrue(yield* exists)
            yield* worker.advance(1)
            yield* settle(
              Effect.map(exists, (found) => !found),
              "swept a minute after the worker started"
            )
            assert.strictEqual(stub.sent.length, 0)
          })
        )
      })
  )

  it.effect("W5: a failing delivery is attempted at once, after each delay of the schedule (+0-20%), then failed", () =>
    Effect.gen(function* () {
      const { organizationId } = yield* orgWithApp()
      const stub = stubSender(() => Effect.succeed(500))
      yield* withWorker(organizationId, stub.send, [seconds(5), Duration.minutes(5)], (worker) =>
        Effect.gen(function* () {
          const start = yield* Clock.currentTimeMillis
          const [made] = yield* publishEvent(organizationId)
          const delivery = deliveryOf(made!.id)
          yield* settle(
            Effect.map(delivery, (d) => d.attempts === 1),
            "the first attempt at once"
          )
          const first = yield* delivery
          assert.strictEqual(first.status, "pending")
          // Due 5-6 s after the attempt was recorded, by the database's clock.
          const dueIn = first.next_attempt_at!.getTime() - first.updated_at!.getTime()
          assert.isTrue(dueIn >= 5_000 && dueIn <= 6_000, String(dueIn))
          // 4 s, not 4.999 s: the database's clock moves on while the test runs.
          yield* worker.advance(4_000)
          yield* worker.idle
          assert.strictEqual(stub.sent.length, 1)
          yield* worker.advance(3_000)
          yield* settle(
            Effect.map(delivery, (d) => d.attempts === 2),
            "the second attempt after 5-6 s"
          )
          const secondAt = stub.sent[1]!.at - start
          assert.isTrue(secondAt >= 5_000 && secondAt <= 7_000, String(secondAt))
          yield* worker.advance(Duration.toMillis(Duration.minutes(4)))
          yield* worker.idle
          assert.strictEqual(stub.sent.length, 2)
          yield* worker.advance(Duration.toMillis(Duration.minutes(2.1)))
          yield* settle(
            Effect.map(delivery, (d) => d.status === "failed"),
            "failed after the last delay"
          )
          assert.strictEqual(stub.sent.length, 3)
          const failed = yield* delivery
          assert.isNull(failed.next_attempt_at)
          yield* worker.advance(Duration.toMillis(Duration.hours(1)))
          yield* worker.idle
          assert.strictEqual(stub.sent.length, 3)
          // W3: the same event, body and id on every attempt.
          const [event] = yield* rowsOf("events", "id", failed.event_id)
          assert.deepStrictEqual(
            stub.sent.map((request) => [request.headers["webhook-id"], request.body]),
            Array(3).fill([failed.event_id, event!.body])
          )
          assert.deepStrictEqual(
            failed.attempt_log.map((attempt) => [attempt.attempt, attempt.status_code, attempt.error]),
            [
              [1, 500, "HTTP status 500"],
              [2, 500, "HTTP status 500"],
              [3, 500, "HTTP status 500"]
            ]
          )
          assert.deepStrictEqual(
            [failed.attempts, failed.last_status_code, failed.last_error, failed.leased_by],
            [3, 500, "HTTP status 500", null]
          )
        })
      )
    })
  )

  it.effect(
    "W5, O6: a success ends the retries; the admin retry of a failed delivery attempts it once more at once",
    () =>
      Effect.gen(function* () {
        const { organizationId, app } = yield* orgWithApp()
        const statuses = [503, 200, 500, 202]
        const stub = stubSender((n) => Effect.succeed(statuses[n] ?? 500))
        yield* withWorker(organizationId, stub.send, [seconds(1)], (worker) =>
          Effect.gen(function* () {
            const [first] = yield* publishEvent(organizationId)
            yield* settle(
              Effect.map(deliveryOf(first!.id), (d) => d.attempts === 1),
              "first attempt"
            )
            // Due after 1-1.2 s; a delay of a second or more is found by the 1 s poll.
            yield* worker.advance(2_000)
            yield* settle(
              Effect.map(deliveryOf(first!.id), (d) => d.status === "succeeded"),
              "success at the second attempt"
            )
            yield* worker.advance(Duration.toMillis(Duration.minutes(10)))
            yield* worker.idle
            assert.strictEqual(stub.sent.length, 2)

            const [second] = yield* publishEvent(organizationId)
            yield* settle(
              Effect.map(deliveryOf(second!.id), (d) => d.attempts === 1),
              "attempt of the second event"
            )
            yield* setColumn("deliveries", second!.id, "status", "failed")
            yield* setColumn("deliveries", second!.id, "next_attempt_at", null)
            const webhooks = yield* Webhooks.pipe(Effect.provide(webhooksLayer()))
            yield* webhooks.retryDelivery(organizationId, app.id, second!.id)
            yield* settle(
              Effect.map(deliveryOf(second!.id), (d) => d.status === "succeeded"),
              "the admin retry's attempt, with no time passing"
            )
            assert.deepStrictEqual(
              (yield* deliveryOf(second!.id)).attempt_log.map((attempt) => attempt.status_code),
              [500, 202]
            )
            const listed: ReadonlyArray<Delivery> = JSON.parse(
              yield* webhooks.listDeliveries(organizationId, app.id, {})
            )
            assert.deepStrictEqual(
              listed.map((delivery) => [delivery.status, delivery.attempts, delivery.last_status_code]),
              [
                ["succeeded", 2, 202],
                ["succeeded", 2, 200]
              ]
            )
          })
        )
      })
  )

  it.effect("W6: at attempt time a private address is refused and recorded on every attempt, and nothing is sent", () =>
    Effect.gen(function* () {
      // An app whose URL was checked when it pointed elsewhere.
      const { organizationId } = yield* orgWithApp("http://127.0.0.1:9/hook")
      const stub = stubSender()
      yield* withWorker(organizationId, stub.send, [seconds(1)], (worker) =>
        Effect.gen(function* () {
          const [made] = yield* publishEvent(organizationId)
          const delivery = deliveryOf(made!.id)
          yield* settle(
            Effect.map(delivery, (d) => d.attempts === 1),
            "first attempt"
          )
          // Due after 1-1.2 s; a delay of a second or more is found by the 1 s poll.
          yield* worker.advance(2_000)
          yield* settle(
            Effect.map(delivery, (d) => d.status === "failed"),
            "failed after the schedule"
          )
          assert.strictEqual(stub.sent.length, 0)
          assert.deepStrictEqual(
            (yield* delivery).attempt_log.map((attempt) => [attempt.status_code, attempt.error]),
            Array(2).fill([
              null,
              "Refused: Address 127.0.0.1 is not a public address (private, loopback, link-local or reserved)"
            ])
          )
        })
      )
    })
  )

  it.effect(
    "W7: with ordering conversation a retried event is not overtaken by later events of its conversation, other conversations do not wait, and a failed one releases those behind it",
    () =>
      Effect.gen(function* () {
        const { organizationId } = yield* orgWithApp(PUBLIC_URL, "conversation")
        const [a, b] = [newId(), newId()]
        const event = (conversation: string) => ({ id: newId(), conversationId: conversation })
        const [a1, a2, a3, b1, b2] = [event(a), event(a), event(a), event(b), event(b)]
        // a1 fails on every attempt; b1's first attempt fails once.
        const failing = new Map([
          [a1.id, 99],
          [b1.id, 1]
        ])
        const stub = stubSender((n) => {
          const id = stub.sent[n]!.headers["webhook-id"]!
          const left = failing.get(id) ?? 0
          failing.set(id, left - 1)
          return Effect.succeed(left > 0 ? 503 : 200)
        })
        const order = () => stub.sent.map((request) => request.headers["webhook-id"])
        yield* withWorker(organizationId, stub.send, [seconds(1), seconds(1)], (worker) =>
          Effect.gen(function* () {
            for (const e of [a1, a2, b1, a3, b2]) yield* publishEvent(organizationId, e)
            yield* settle(() => stub.sent.length === 2, "the head of each conversation")
            assert.deepStrictEqual(order(), [a1.id, b1.id])
            // Both heads wait for their retry: nothing behind them is attempted meanwhile, not even at a wakeup.
            const heads = Effect.map(Effect.all([deliveryOfEvent(a1.id), deliveryOfEvent(b1.id)]), (ds) =>
              ds.every((d) => d.attempts === 1)
            )
            yield* settle(heads, "both heads' failures recorded")
            yield* databaseNotify("")
            yield* realSleep(50)
            yield* worker.idle
            assert.strictEqual(stub.sent.length, 2)
            yield* worker.advance(2_000)
            // b1 succeeds at its retry and b2 follows; a1 fails again.
            yield* settle(() => stub.sent.length === 5, "the retries and b2")
            assert.deepStrictEqual(order().slice(2).sort(), [a1.id, b1.id, b2.id].sort())
            assert.isTrue(order().indexOf(b2.id) > order().lastIndexOf(b1.id), "b2 after b1's success")
            assert.isFalse(order().includes(a2.id), "a2 waits while a1 is pending")
            const status = (e: { id: string }) => Effect.map(deliveryOfEvent(e.id), (d) => d.status)
            yield* settle(
              Effect.map(
                Effect.all([deliveryOfEvent(a1.id), status(b2)]),
                ([d, s]) => d.attempts === 2 && s !== "pending"
              ),
              "a1's second attempt and b2's recorded"
            )
            yield* worker.advance(2_000)
            // a1's last attempt fails: it ends failed and releases a2, then a3, in their order.
            yield* settle(() => stub.sent.length === 8, "a1's last attempt, then a2 and a3")
            assert.deepStrictEqual(order().slice(5), [a1.id, a2.id, a3.id])
            yield* settle(
              Effect.map(status(a3), (s) => s !== "pending"),
              "a3's attempt recorded"
            )
            assert.deepStrictEqual(yield* Effect.forEach([a1, a2, a3, b1, b2], status), [
              "failed",
              "succeeded",
              "succeeded",
              "succeeded",
              "succeeded"
            ])
          })
        )
      })
  )

  it.effect(
    "with a batch window of 5 ms (BATCH_WINDOW_MS live; docs/behaviour.md, Webhooks) deliveries due meanwhile share the next claim and results the next write; a quiet worker claims at once; a stop cuts the wait (O5)",
    () =>
      Effect.gen(function* () {
        const { organizationId } = yield* orgWithApp()
        const [first, second, third] = [1, 2, 3].map(() => ({ id: newId() }))
        // The second event's attempt gets its response 3 ms after it starts, the others at once.
        const stub = stubSender((n) =>
          stub.sent[n]!.headers["webhook-id"] === second!.id ? Effect.as(Effect.sleep(3), 200) : Effect.succeed(200)
        )
        const delivery = (event: { id: string }) => deliveryOfEvent(event.id)
        const succeeded = (event: { id: string }) => Effect.map(delivery(event), (d) => d.status === "succeeded")
        // The worker's fibers run, in real time, at the current test time.
        const idle = realSleep(50)
        yield* withWorker(
          organizationId,
          stub.send,
          [seconds(1)],
          () =>
            Effect.gen(function* () {
              const start = yield* Clock.currentTimeMillis
              yield* publishEvent(organizationId, first!)
              yield* settle(succeeded(first!), "a quiet worker claims and records at once")
              // Two more at 0 ms: the worker claimed at 0 ms, so the next claim waits until 5 ms.
              yield* publishEvent(organizationId, second!)
              yield* publishEvent(organizationId, third!)
              yield* idle
              yield* TestClock.adjust(4)
              yield* idle
              assert.strictEqual(stub.sent.length, 1, "no claim within 5 ms of the last")
              yield* TestClock.adjust(1)
              yield* settle(() => stub.sent.length === 3, "both in the claim at 5 ms")
              assert.deepStrictEqual(
                stub.sent.map((request) => request.at - start),
                [0, 5, 5]
              )
              // The third's result is written at 5 ms (the last write was at 0); the second's arrives at 8 ms
              // and waits for the write at 10 ms.
              yield* settle(succeeded(third!), "the third's result at 5 ms")
              yield* TestClock.adjust(3)
              yield* idle
              assert.strictEqual((yield* delivery(second!)).attempts, 0, "no write within 5 ms of the last")
              yield* TestClock.adjust(2)
              yield* settle(succeeded(second!), "the second's result at 10 ms")
              // A fourth at 10 ms is sent at once (the last claim was at 5 ms); its claim and its result then wait
              // for 15 ms, and the worker stops (O5) without those waits: the clock does not move again.
              yield* publishEvent(organizationId)
              yield* settle(() => stub.sent.length === 4, "the fourth at 10 ms")
            }),
          5
        )
      })
  )
})
