/**
 * Secret rotation (DECISIONS.md W8, issue 16 item 2): the endpoint returns the
 * new secret and until when the previous one still signs; for those 24 hours
 * every request carries two signatures, the new secret's first, each
 * verifiable with the `standardwebhooks` library; then only the new one.
 * `parley/webhooks` accepts either of two secrets.
 */
import { assert } from "@effect/vitest"
import { Duration, Effect } from "effect"
import { SqlClient } from "effect/sql"
import { Webhook } from "standardwebhooks"
import { verifyWebhook, WebhookVerificationError } from "../../src/Webhooks/Receiver.ts"
import { eventually, receiver } from "../support/Receiver.ts"
import { ADMIN_TOKEN, TestApi, withWorkers } from "../support/TestApp.ts"
import { createApp } from "../support/Webhooks.ts"

withWorkers({ allowPrivateNetworkTargets: true, webhookRetrySchedule: [Duration.millis(100)] })(
  "secret rotation (W8)",
  (test) => {
    test.effect(
      "W8: rotate-secret returns the new secret; for 24 hours requests carry both signatures, new first; then only the new one",
      () =>
        Effect.gen(function* () {
          const api = yield* TestApi
          const sql = yield* SqlClient.SqlClient
          const org = yield* api.organization()
          const hook = yield* receiver()
          const apps = `/admin/v1/organizations/${org.id}/apps`
          const app = yield* createApp(api, org, {
            name: "receiver",
            webhook_url: hook.url,
            events: ["session.created"]
          })
          const before = Date.now()
          const rotated = yield* api.request("POST", `${apps}/${app.id}/rotate-secret`, { token: ADMIN_TOKEN })
          assert.strictEqual(rotated.status, 200)
          const { signing_secret: secret, previous_secret_expires_at: until } = rotated.body
          assert.match(secret, /^whsec_[A-Za-z0-9+/]{43}=$/)
          assert.notStrictEqual(secret, app.signing_secret)
          const hours = (Date.parse(until) - before) / 3_600_000
          assert.isTrue(hours > 23.99 && hours < 24.01, until)
          assert.strictEqual(
            (yield* api.request("GET", `${apps}/${app.id}`, { token: ADMIN_TOKEN })).body.signing_secret,
            secret
          )

          yield* org.session()
          yield* eventually(() => hook.received.length >= 1, 10_000, "a delivery after the rotation")
          const during = hook.received[0]!
          const signatures = String(during.headers["webhook-signature"]).split(" ")
          assert.strictEqual(signatures.length, 2)
          const headers = during.headers as Record<string, string>
          // The new secret's signature first, then the previous one's; each verifies with the library.
          const sign = (key: string) =>
            new Webhook(key).sign(
              headers["webhook-id"]!,
              new Date(Number(headers["webhook-timestamp"]) * 1000),
              during.body
            )
          assert.deepStrictEqual(signatures, [sign(secret), sign(app.signing_secret)])
          for (const key of [secret, app.signing_secret]) new Webhook(key).verify(during.body, headers)
          assert.strictEqual(verifyWebhook(app.signing_secret, headers, during.body).type, "session.created")
          assert.strictEqual(verifyWebhook([secret, app.signing_secret], headers, during.body).type, "session.created")

          // After the 24 hours (moved to the past here): the new secret's signature only.
          yield* sql`UPDATE apps SET previous_secret_expires_at = now() - interval '1 second' WHERE id = ${app.id}`
          yield* org.session()
          yield* eventually(() => hook.received.length >= 2, 10_000, "a delivery after the previous secret expired")
          const after = hook.received[1]!
          const afterHeaders = after.headers as Record<string, string>
          assert.strictEqual(afterHeaders["webhook-signature"]!.split(" ").length, 1)
          new Webhook(secret).verify(after.body, afterHeaders)
          assert.throws(() => new Webhook(app.signing_secret).verify(after.body, afterHeaders))
          assert.throws(() => verifyWebhook(app.signing_secret, afterHeaders, after.body), WebhookVerificationError)
          // A receiver still holding both secrets accepts it.
          assert.strictEqual(
            verifyWebhook([app.signing_secret, secret], afterHeaders, after.body).type,
            "session.created"
          )

          const missing = yield* api.request("POST", `${apps}/00000000-0000-7000-8000-000000000000/rotate-secret`, {
            token: ADMIN_TOKEN
          })
          assert.deepStrictEqual([missing.status, missing.body], [404, { detail: "App not found" }])
        })
    )
  }
)
