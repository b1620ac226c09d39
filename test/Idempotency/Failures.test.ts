/**
 * Idempotency-Key (DECISIONS.md D19) and a 5xx: a failure of the operation
 * after it wrote (here: the session is created, then the service dies) rolls
 * the change back with the response not stored, so the retry with the same key runs
 * the operation again, once.
 */
import { assert } from "@effect/vitest"
import { Effect, Layer } from "effect"
import { ServicesLive } from "../../src/Server.ts"
import { Sessions } from "../../src/Sessions/Sessions.ts"
import { C, TestApi, withApp } from "../support/TestApp.ts"

/** `ServicesLive` whose first session create dies after creating the session. */
const failingOnce = Layer.merge(
  ServicesLive,
  Layer.effect(
    Sessions,
    Effect.gen(function* () {
      const real = yield* Sessions
      let failures = 0
      return Sessions.of({
        ...real,
        create: (organizationId, input) =>
          Effect.flatMap(real.create(organizationId, input), (session) =>
            failures++ === 0 ? Effect.die(new Error("failed after the write")) : Effect.succeed(session)
          )
      })
    })
  ).pipe(Layer.provide(ServicesLive))
)

withApp({}, failingOnce)("Idempotency-Key and a 5xx (D19)", (it) => {
  it.effect("D19: a 500 is not stored and its change is rolled back; the retry with the key runs once", () =>
    Effect.gen(function* () {
      const api = yield* TestApi
      const org = yield* api.organization()
      const send = api.request("POST", `${C}/sessions`, {
        token: org.token,
        body: { contact_id: "five-hundred", contact_name: "F" },
        headers: { "idempotency-key": "after-500" }
      })
      const failed = yield* send
      assert.deepStrictEqual([failed.status, failed.body], [500, { detail: "Internal server error" }])
      const retried = yield* send
      assert.deepStrictEqual([retried.status, retried.headers.get("idempotent-replayed")], [201, null])
      const again = yield* send
      assert.deepStrictEqual(
        [again.status, again.text, again.headers.get("idempotent-replayed")],
        [201, retried.text, "true"]
      )
      const found = yield* org.call("POST", "/sessions/search", { contact_id: "five-hundred" })
      assert.deepStrictEqual(
        found.body.map((session: any) => session.id),
        [retried.body.id]
      )
    })
  )
})
