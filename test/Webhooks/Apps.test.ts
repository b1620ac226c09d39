/**
 * Apps of the admin API (DECISIONS.md O6, W1, W4, W6): create with a signing
 * secret, list, get, PATCH, DELETE, 404s, validation, and the SSRF guard on
 * the webhook URL at creation/PATCH and at every attempt.
 */
import { assert } from "@effect/vitest"
import { Deferred, Duration, Effect, Fiber, Redacted } from "effect"
import { SqlClient } from "effect/sql"
import { v7 as uuidv7 } from "uuid"
import * as Database from "../../src/Database/Database.ts"
import { isPublicAddress } from "../../src/Shared/Ssrf.ts"
import { WebhooksRepo } from "../../src/Webhooks/Repo.ts"
import { TestDatabaseUrl } from "../support/Database.ts"
import { receiver } from "../support/Receiver.ts"
import { ADMIN_TOKEN, TestApi, withWorkers } from "../support/TestApp.ts"

// A public address literal: no DNS needed, accepted by the W6 guard.
const PUBLIC_URL = "https://93.184.215.14/hooks/parley"
const TIMESTAMP = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z$/

withWorkers({
  allowPrivateNetworkTargets: false,
  webhookRetrySchedule: [Duration.millis(100)],
  webhookTimeout: Duration.millis(1000)
})("apps", (it) => {
  const admin = (api: TestApi["Service"], method: string, path: string, body?: unknown) =>
    api.request(method, `/admin/v1${path}`, { token: ADMIN_TOKEN, ...(body !== undefined ? { body } : {}) })

  it.effect("create, list, get, PATCH and DELETE an app (O6, W4, W7)", () =>
    Effect.gen(function* () {
      const api = yield* TestApi
      const org = yield* api.organization()
      const created = yield* admin(api, "POST", `/organizations/${org.id}/apps`, {
        name: "CRM",
        webhook_url: PUBLIC_URL,
        events: ["message.created", "session.created", "message.created"]
      })
      assert.strictEqual(created.status, 201)
      const app = created.body
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
      assert.deepStrictEqual(app.events, ["message.created", "session.created"])
      assert.strictEqual(app.enabled, true)
      assert.strictEqual(app.ordering, "none")
      assert.match(app.signing_secret, /^whsec_[A-Za-z0-9+/]{43}=$/)
      assert.match(app.created_at, TIMESTAMP)

      const listed = yield* admin(api, "GET", `/organizations/${org.id}/apps`)
      assert.deepStrictEqual(listed.body, [app])
      const got = yield* admin(api, "GET", `/organizations/${org.id}/apps/${app.id}`)
      assert.deepStrictEqual(got.body, app)

      const patched = yield* admin(api, "PATCH", `/organizations/${org.id}/apps/${app.id}`, {
        webhook_url: "http://93.184.215.15:8443/other",
        events: ["session.finished"],
        enabled: false,
        ordering: "conversation"
      })
      assert.strictEqual(patched.status, 200)
      assert.deepStrictEqual(patched.body, {
        ...app,
        webhook_url: "http://93.184.215.15:8443/other",
        events: ["session.finished"],
        enabled: false,
        ordering: "conversation"
      })
      const orderedAtCreation = yield* admin(api, "POST", `/organizations/${org.id}/apps`, {
        name: "Ordered",
        webhook_url: PUBLIC_URL,
        events: ["message.created"],
        ordering: "conversation"
      })
      assert.strictEqual(orderedAtCreation.body.ordering, "conversation")
      const unknownOrdering = yield* admin(api, "PATCH", `/organizations/${org.id}/apps/${app.id}`, {
        ordering: "session"
      })
      assert.strictEqual(unknownOrdering.status, 422)
      assert.deepStrictEqual(
        unknownOrdering.body.detail.map((issue: any) => issue.loc),
        [["body", "ordering"]]
      )

      const deleted = yield* admin(api, "DELETE", `/organizations/${org.id}/apps/${app.id}`)
      assert.strictEqual(deleted.status, 204)
      const gone = yield* admin(api, "GET", `/organizations/${org.id}/apps/${app.id}`)
      assert.strictEqual(gone.status, 404)
      assert.deepStrictEqual(gone.body, { detail: "App not found" })
    })
  )

  it.effect(
    "W10: an app disabled for failing shows disabled_reason and disabled_at; PATCH enabled: true clears them, PATCH enabled: false leaves them null",
    () =>
      Effect.gen(function* () {
        const api = yield* TestApi
        const sql = yield* SqlClient.SqlClient
        const org = yield* api.organization()
        const app = (yield* admin(api, "POST", `/organizations/${org.id}/apps`, {
          name: "CRM",
          webhook_url: PUBLIC_URL,
          events: ["message.created", "app.failing", "app.disabled"]
        })).body
        assert.deepInclude(app, { enabled: true, disabled_reason: null, disabled_at: null })
        // As the delivery worker leaves an app whose deliveries all failed for APP_DISABLE_AFTER.
        yield* sql`UPDATE apps SET enabled = false, disabled_reason = 'failing', disabled_at = statement_timestamp(),
          failing_since = statement_timestamp() - interval '5 days', failing_warned_at = statement_timestamp()
          WHERE id = ${app.id}`
        const disabled = (yield* admin(api, "GET", `/organizations/${org.id}/apps/${app.id}`)).body
        assert.deepInclude(disabled, { enabled: false, disabled_reason: "failing" })
        assert.match(disabled.disabled_at, TIMESTAMP)
        assert.deepStrictEqual((yield* admin(api, "GET", `/organizations/${org.id}/apps`)).body, [disabled])
        const enabled = yield* admin(api, "PATCH", `/organizations/${org.id}/apps/${app.id}`, { enabled: true })
        assert.strictEqual(enabled.status, 200)
        assert.deepStrictEqual(enabled.body, app)
        const [row] = yield* sql<{ failing_since: Date | null; failing_warned_at: Date | null }>`SELECT failing_since,
          failing_warned_at FROM apps WHERE id = ${app.id}`
        assert.deepStrictEqual(row, { failing_since: null, failing_warned_at: null })
        const off = yield* admin(api, "PATCH", `/organizations/${org.id}/apps/${app.id}`, { enabled: false })
        assert.deepInclude(off.body, { enabled: false, disabled_reason: null, disabled_at: null })
        const unknownEvent = yield* admin(api, "PATCH", `/organizations/${org.id}/apps/${app.id}`, {
          events: ["app.deleted"]
        })
        assert.strictEqual(unknownEvent.status, 422)
      })
  )

  it.effect("unknown organizations, apps of other organizations and missing auth (O6)", () =>
    Effect.gen(function* () {
      const api = yield* TestApi
      const org = yield* api.organization()
      const other = yield* api.organization()
      const app = (yield* admin(api, "POST", `/organizations/${org.id}/apps`, {
        name: "CRM",
        webhook_url: PUBLIC_URL,
        events: ["message.created"]
      })).body
      const unknownOrg = yield* admin(api, "GET", `/organizations/${uuidv7()}/apps`)
      assert.strictEqual(unknownOrg.status, 404)
      assert.deepStrictEqual(unknownOrg.body, { detail: "Organization not found" })
      for (const [method, path] of [
        ["GET", `/organizations/${other.id}/apps/${app.id}`],
        ["PATCH", `/organizations/${other.id}/apps/${app.id}`],
        ["DELETE", `/organizations/${other.id}/apps/${app.id}`],
        ["GET", `/organizations/${other.id}/apps/${app.id}/deliveries`],
        ["GET", `/organizations/${org.id}/apps/not-a-uuid`]
      ] as const) {
        const response = yield* admin(api, method, path, method === "PATCH" ? { enabled: false } : undefined)
        assert.strictEqual(response.status, 404, `${method} ${path}`)
        assert.deepStrictEqual(response.body, { detail: "App not found" })
      }
      const unauthorized = yield* api.request("GET", `/admin/v1/organizations/${org.id}/apps`)
      assert.strictEqual(unauthorized.status, 401)
    })
  )

  it.effect("invalid bodies give 422 in the validation form (Errors)", () =>
    Effect.gen(function* () {
      const api = yield* TestApi
      const org = yield* api.organization()
      const bad = yield* admin(api, "POST", `/organizations/${org.id}/apps`, {
        name: "",
        webhook_url: PUBLIC_URL,
        events: ["message.deleted"]
      })
      assert.strictEqual(bad.status, 422)
      const locs = bad.body.detail.map((issue: any) => issue.loc.join("."))
      assert.include(locs, "body.name")
      assert.isTrue(locs.some((loc: string) => loc.startsWith("body.events")))
      const empty = yield* admin(api, "POST", `/organizations/${org.id}/apps`, {
        name: "x",
        webhook_url: PUBLIC_URL,
        events: []
      })
      assert.strictEqual(empty.status, 422)
      const limit = yield* admin(api, "GET", `/organizations/${org.id}/apps/${uuidv7()}/deliveries?limit=5000`)
      assert.strictEqual(limit.status, 422)
      assert.deepStrictEqual(limit.body.detail[0].loc, ["query", "limit"])
      // Not a number: one issue saying so, as every other page size in the API reports (O6).
      const word = yield* admin(api, "GET", `/organizations/${org.id}/apps/${uuidv7()}/deliveries?limit=abc`)
      assert.strictEqual(word.status, 422)
      assert.deepStrictEqual(
        word.body.detail.map((issue: any) => [issue.loc.join("."), issue.type]),
        [["query.limit", "int_parsing"]]
      )
      // Out of bounds: the bound alone, also beyond 2^53 where the integer check fails too; a fraction within
      // the bounds: the integer check.
      for (const [query, type] of [
        ["99999999999999999999", "less_than_equal"],
        ["1e300", "less_than_equal"],
        ["-5.5", "greater_than_equal"],
        ["1.5", "int_from_float"]
      ]) {
        const response = yield* admin(api, "GET", `/organizations/${org.id}/apps/${uuidv7()}/deliveries?limit=${query}`)
        assert.strictEqual(response.status, 422)
        assert.deepStrictEqual(
          response.body.detail.map((issue: any) => [issue.loc.join("."), issue.type]),
          [["query.limit", type]],
          query
        )
      }
    })
  )

  it.effect("webhook URLs must be http(s) and resolve to public addresses (W6)", () =>
    Effect.gen(function* () {
      const api = yield* TestApi
      const org = yield* api.organization()
      const refused = [
        "ftp://93.184.215.14/x",
        "not a url",
        "http://127.0.0.1:8080/hook",
        "http://localhost/hook",
        "http://10.1.2.3/hook",
        "http://172.16.0.1/hook",
        "http://192.168.1.1/hook",
        "http://100.64.0.1/hook",
        "http://169.254.169.254/latest/meta-data",
        "http://0.0.0.0/hook",
        "http://[::1]/hook",
        "http://[::ffff:127.0.0.1]/hook",
        "http://[::ffff:a9fe:a9fe]/hook",
        "http://[fd00:ec2::254]/hook",
        "http://[fe80::1]/hook",
        "http://[fc00::1]/hook",
        "http://224.0.0.1/hook",
        "https://user:pw@93.184.215.14/hook"
      ]
      for (const url of refused) {
        const response = yield* admin(api, "POST", `/organizations/${org.id}/apps`, {
          name: "x",
          webhook_url: url,
          events: ["message.created"]
        })
        assert.strictEqual(response.status, 422, url)
        assert.deepStrictEqual(response.body.detail[0].loc, ["body", "webhook_url"], url)
      }
      const app = (yield* admin(api, "POST", `/organizations/${org.id}/apps`, {
        name: "x",
        webhook_url: PUBLIC_URL,
        events: ["message.created"]
      })).body
      const patch = yield* admin(api, "PATCH", `/organizations/${org.id}/apps/${app.id}`, {
        webhook_url: "http://127.0.0.1/hook"
      })
      assert.strictEqual(patch.status, 422)
      assert.deepStrictEqual(patch.body.detail[0].loc, ["body", "webhook_url"])
    })
  )

  it("isPublicAddress accepts only public unicast addresses (W6)", () => {
    for (const address of ["93.184.215.14", "8.8.8.8", "2606:4700:4700::1111"])
      assert.isTrue(isPublicAddress(address), address)
    for (const address of [
      "127.0.0.1",
      "10.0.0.1",
      "172.31.255.255",
      "192.168.0.1",
      "100.100.100.100",
      "169.254.169.254",
      "0.0.0.0",
      "255.255.255.255",
      "::",
      "::1",
      "::ffff:10.0.0.1",
      "fd00:ec2::254",
      "fe80::1",
      "64:ff9b::a00:1",
      "2002:a00:1::",
      "not an address"
    ]) {
      assert.isFalse(isPublicAddress(address), address)
    }
  })

  it.effect(
    "an event written while an app is being deleted does not wait; what it fans out to the app is never claimed and the sweep deletes it (W2, migrations/0017)",
    () =>
      Effect.gen(function* () {
        const api = yield* TestApi
        const sql = yield* SqlClient.SqlClient
        const org = yield* api.organization()
        const subscribe = (name: string) =>
          admin(api, "POST", `/organizations/${org.id}/apps`, {
            name,
            webhook_url: PUBLIC_URL,
            events: ["session.created"]
          }).pipe(Effect.map((r) => r.body.id as string))
        const deliveriesOf = (appId: string) =>
          sql<{ id: string; event_id: string }>`SELECT id::text, event_id::text FROM deliveries
            WHERE organization_id = ${org.id} AND app_id = ${appId}`
        // The delete runs on a pool of its own: the app's pool may queue the session's statement behind it.
        const deleterPool = Database.clientLayer(Redacted.make(yield* TestDatabaseUrl), 1)
        /**
         * POST /sessions while another transaction has deleted `appId` and not yet
         * committed or rolled back: the session's insert must not wait for it (a
         * wait would hang here, since the delete ends only after the session).
         */
        const raceDelete = (appId: string, outcome: "commit" | "rollback") =>
          Effect.gen(function* () {
            const deleted = yield* Deferred.make<void>()
            const release = yield* Deferred.make<void>()
            const deleter = yield* Effect.forkChild(
              Effect.gen(function* () {
                const own = yield* SqlClient.SqlClient
                yield* own.withTransaction(
                  Effect.gen(function* () {
                    // As Parley deletes an app: by its organization too (on Citus one shard's transaction, O11).
                    yield* own`DELETE FROM apps WHERE organization_id = ${org.id} AND id = ${appId}`
                    yield* Deferred.succeed(deleted, undefined)
                    yield* Deferred.await(release)
                    if (outcome === "rollback") return yield* Effect.fail("rollback" as const)
                  })
                )
              }).pipe(
                Effect.catchIf(
                  (e) => e === "rollback",
                  () => Effect.void
                ),
                Effect.provide(deleterPool)
              )
            )
            yield* Deferred.await(deleted)
            const created = yield* org.session().pipe(
              Effect.timeoutOrElse({
                duration: "10 seconds",
                orElse: () => Effect.sync(() => assert.fail("the session's insert waited on the app being deleted"))
              })
            )
            yield* Deferred.succeed(release, undefined)
            yield* Fiber.join(deleter)
            return created
          })
        const repo = yield* WebhooksRepo.pipe(Effect.provide(WebhooksRepo.layer))

        const kept = yield* subscribe("kept")
        const gone = yield* subscribe("gone")
        yield* org.session()
        const [before] = yield* deliveriesOf(gone)
        assert.isDefined(before)
        const raced = yield* raceDelete(gone, "commit")
        assert.match(raced.id, /^[0-9a-f-]{36}$/)
        assert.strictEqual((yield* admin(api, "GET", `/organizations/${org.id}/apps/${gone}`)).status, 404)
        // The delete took the app's deliveries; the racing event's fan-out still saw the app and made one.
        const left = yield* deliveriesOf(gone)
        assert.strictEqual(left.length, 1)
        assert.notStrictEqual(left[0]!.id, before!.id)
        // Never claimed once the delete committed: every claim joins the apps. This file's worker may have
        // leased it while the delete was open (an attempt begun before the delete, as for any delivery):
        // it is made due and unleased again, so only the join keeps it out. A lease of 1 ms leaves the
        // others as they were.
        yield* sql`UPDATE deliveries SET status = 'pending', leased_by = NULL, lease_until = NULL,
          next_attempt_at = now() WHERE app_id = ${gone}`
        const claimed = yield* repo.claim(org.id, {
          workerId: uuidv7(),
          leaseMs: 1,
          limit: 1000,
          perApp: 1000,
          busyApps: [],
          busyCounts: [],
          saturated: []
        })
        assert.isFalse(claimed.some((delivery) => delivery.app_id === gone))
        assert.isAtLeast(yield* repo.sweep, 1)
        assert.strictEqual((yield* deliveriesOf(gone)).length, 0)
        assert.strictEqual((yield* deliveriesOf(kept)).length, 2)

        // A delete that rolls back leaves the app subscribed: it gets its delivery, and the sweep keeps it.
        const stays = yield* subscribe("stays")
        yield* raceDelete(stays, "rollback")
        yield* repo.sweep
        assert.strictEqual((yield* deliveriesOf(stays)).length, 1)
        assert.strictEqual((yield* deliveriesOf(kept)).length, 3)
      })
  )

  it.effect("at attempt time a private address is refused and recorded, and nothing is sent (W6)", () =>
    Effect.gen(function* () {
      const api = yield* TestApi
      const sql = yield* SqlClient.SqlClient
      const org = yield* api.organization()
      const hook = yield* receiver()
      // An app whose URL pointed elsewhere when it was checked (e.g. DNS changed since).
      const appId = uuidv7()
      yield* sql`INSERT INTO apps (id, organization_id, name, webhook_url, events, enabled, signing_secret, created_at)
        VALUES (${appId}, ${org.id}, 'rebound', ${hook.url}, ARRAY['session.created'], true,
          ${`whsec_${Buffer.alloc(32, 7).toString("base64")}`}, now())`
      yield* org.session()
      let delivery: any
      const deadline = Date.now() + 10_000
      while (delivery?.status !== "failed" && Date.now() < deadline) {
        yield* Effect.sleep(50)
        delivery = (yield* admin(api, "GET", `/organizations/${org.id}/apps/${appId}/deliveries`)).body[0]
      }
      assert.strictEqual(delivery?.status, "failed")
      assert.strictEqual(delivery.attempt_log.length, 2)
      assert.strictEqual(delivery.attempts, 2) // O6: the count
      for (const attempt of delivery.attempt_log) {
        assert.strictEqual(attempt.status_code, null)
        assert.match(attempt.error, /^Refused: Address 127\.0\.0\.1 is not a public address/)
      }
      assert.strictEqual(hook.received.length, 0)
    })
  )
})
