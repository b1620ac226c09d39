/**
 * Erasure with the workers of the worker role running (DECISIONS.md D22, W1,
 * W5, O1): from the 202 on no delivery of the contact's events is attempted,
 * even one pending for a retry, while the other contacts' go out; the erasure
 * worker completes the erasure and `contact.erased` is delivered once.
 */
import { assert } from "@effect/vitest"
import { Duration, Effect } from "effect"
import { eventually, receiver } from "../support/Receiver.ts"
import { TestApi, withWorkers } from "../support/TestApp.ts"
import { realSleep, waitFor } from "../support/Wait.ts"
import { createApp } from "../support/Webhooks.ts"

withWorkers({
  allowPrivateNetworkTargets: true,
  webhookRetrySchedule: Array.from({ length: 50 }, () => Duration.millis(200))
})("erasure with the workers (D22)", (it) => {
  it.effect("pending deliveries of the contact's events are never sent; contact.erased is, once", () =>
    Effect.gen(function* () {
      const api = yield* TestApi
      const org = yield* api.organization()
      // The receiver fails until told otherwise: the deliveries stay pending, retried every 200 ms (W5).
      let failing = true
      const hook = yield* receiver(() => ({ status: failing ? 500 : 204 }))
      yield* createApp(api, org, {
        webhook_url: hook.url,
        events: ["session.created", "message.created", "contact.erased"]
      })
      const erased = yield* org.session({ contact_id: "+15550150" })
      yield* org.call("POST", `/sessions/${erased.id}/messages`, {
        role: "user",
        content: { type: "text", text: "secret" }
      })
      const kept = yield* org.session({ contact_id: "+15550151" })
      yield* eventually(() => hook.received.length >= 3, 15_000, "a first attempt of each delivery")

      const response = yield* org.call("DELETE", "/contacts/%2B15550150")
      const accepted = Date.now()
      assert.strictEqual(response.status, 202)
      failing = false

      // The other contact's held delivery goes out, and contact.erased once the erasure is done.
      yield* eventually(
        () => hook.received.some((request) => JSON.parse(request.body).type === "contact.erased"),
        15_000,
        "contact.erased"
      )
      yield* eventually(
        () => hook.received.some((request) => JSON.parse(request.body).data.object.id === kept.id),
        15_000,
        "the other contact's session.created"
      )
      const done = yield* waitFor(
        org.call("GET", `/erasures/${response.body.id}`),
        (read) => read.body.status === "completed"
      )
      assert.strictEqual(done.body.counts.sessions, 1)
      assert.strictEqual(done.body.counts.messages, 1)
      assert.strictEqual(done.body.counts.deliveries, 2, "the two held deliveries, deleted unsent")

      // Before the 202 they were retried every 200 ms; after it (an attempt in flight at the 202 may still
      // end: 300 ms to spare) none is, for a second, while the other contact's delivery goes out.
      yield* realSleep(1_000)
      const late = hook.received.filter((request) => request.at > accepted + 300)
      for (const request of late) {
        const body = JSON.parse(request.body)
        assert.notStrictEqual(body.data.object.session_id, erased.id, `${body.type} of the erased contact sent`)
        assert.notStrictEqual(body.data.object.id, erased.id, `${body.type} of the erased contact sent`)
      }
      assert.isTrue(
        hook.received.some((request) => request.at > accepted && JSON.parse(request.body).data.object.id === kept.id),
        "the other contact's delivery went on after the 202"
      )
      const bodies = hook.received.map((request) => JSON.parse(request.body))
      const notices = bodies.filter((body) => body.type === "contact.erased")
      assert.strictEqual(notices.length, 1)
      assert.deepStrictEqual(notices[0].data.object, { contact_id: "+15550150", erasure_id: response.body.id })
    })
  )
})
