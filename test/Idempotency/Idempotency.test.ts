/**
 * Idempotency-Key (DECISIONS.md D19, issue 15 item 1), sentence by sentence,
 * over HTTP on one server: the header's values, the stored response replayed
 * byte for byte with `Idempotent-Replayed: true`, canonical JSON comparison,
 * 422 for another request, 409 while the first still runs, the responses that
 * are not stored, keys per organization, the assistants API, expiry and the
 * sweep.
 * Two processes, kill -9, and 409 on POST message (its statement waits on a
 * row lock; on one process that would hold up the pool connection the repeat
 * is multiplexed onto): test/Process/Idempotency.test.ts.
 */
import { assert } from "@effect/vitest"
import { Effect, Fiber } from "effect"
import { SqlClient } from "effect/sql"
import postgres from "postgres"
import { Idempotency } from "../../src/Idempotency/Idempotency.ts"
import { lockWaits, TestDatabaseUrl } from "../support/Database.ts"
import { C, TestApi, type TestOrganization, type TestResponse, withApp } from "../support/TestApp.ts"

const A = "/assistants/api/v2"

/** A request of `org` with an `Idempotency-Key` (none when `key` is undefined). */
const send = (
  org: TestOrganization,
  method: string,
  path: string,
  body: unknown,
  key: string | undefined,
  token = org.token
): Effect.Effect<TestResponse, never, TestApi> =>
  Effect.flatMap(Effect.service(TestApi), (api) =>
    api.request(method, path, {
      token,
      body,
      ...(key === undefined ? {} : { headers: { "idempotency-key": key } })
    })
  )

/** The organization's sessions of `contactId`. */
const sessionsOf = (org: TestOrganization, contactId: string) =>
  Effect.map(
    org.call("POST", "/sessions/search", { contact_id: contactId, limit: 100 }),
    (found) => found.body as Array<any>
  )

const replayed = (response: TestResponse) => response.headers.get("idempotent-replayed")

/**
 * Sends `first` while the session's row is locked FOR UPDATE on a connection of
 * the test's own (the app's pool multiplexes its statements onto connections,
 * one of which a transaction of the test would pin), waits until the request
 * waits on a lock, then sends `second`; unlocks and returns both responses.
 */
const whileFirstWaits = (
  organizationId: string,
  sessionId: string,
  first: Effect.Effect<TestResponse, never, TestApi>,
  second: Effect.Effect<TestResponse, never, TestApi>
) =>
  Effect.gen(function* () {
    const db = postgres(yield* TestDatabaseUrl, { max: 1 })
    const locker = yield* Effect.promise(() => db.reserve())
    yield* Effect.promise(async () => {
      await locker`BEGIN`
      await locker`SELECT 1 FROM sessions WHERE organization_id = ${organizationId} AND id = ${sessionId} FOR UPDATE`
    })
    const running = yield* Effect.forkChild(first)
    for (let waited = 0; ; waited++) {
      if ((yield* Effect.promise(() => lockWaits(locker))) > 0) break
      if (waited > 200) assert.fail("the first request never waited on the session's lock")
      yield* Effect.sleep("25 millis")
    }
    const during = yield* second
    yield* Effect.promise(async () => {
      await locker`COMMIT`
      locker.release()
      await db.end()
    })
    return [yield* Fiber.join(running), during] as const
  })

withApp()("Idempotency-Key (D19)", (it) => {
  it.effect(
    "D19: a repeat gets the stored status and body byte for byte, with Idempotent-Replayed, and changes nothing",
    () =>
      Effect.gen(function* () {
        const org = yield* (yield* TestApi).organization()
        const body = { contact_id: "replay", contact_name: "Ada", metadata: { a: 1, b: [1, 2] } }
        const first = yield* send(org, "POST", `${C}/sessions`, body, "key-1")
        assert.strictEqual(first.status, 201)
        assert.isNull(replayed(first))
        const again = yield* send(org, "POST", `${C}/sessions`, body, "key-1")
        assert.strictEqual(again.status, 201)
        assert.strictEqual(again.text, first.text)
        assert.strictEqual(replayed(again), "true")
        assert.strictEqual(again.headers.get("content-type"), first.headers.get("content-type"))
        // D19: the body is compared as canonical JSON: member order and spacing do not matter.
        const reordered = yield* send(
          org,
          "POST",
          `${C}/sessions`,
          JSON.stringify({ metadata: { b: [1, 2], a: 1.0 }, contact_name: "Ada", contact_id: "replay" }, null, 2),
          "key-1"
        )
        assert.strictEqual(reordered.text, first.text)
        assert.strictEqual(replayed(reordered), "true")
        assert.strictEqual((yield* sessionsOf(org, "replay")).length, 1)
        // Without the header, requests behave as before: each POST creates.
        yield* send(org, "POST", `${C}/sessions`, body, undefined)
        yield* send(org, "POST", `${C}/sessions`, body, undefined)
        assert.strictEqual((yield* sessionsOf(org, "replay")).length, 3)
      })
  )

  it.effect("D19: the same key with another body, path or method gets 422 and changes nothing", () =>
    Effect.gen(function* () {
      const org = yield* (yield* TestApi).organization()
      const session = yield* org.session({ contact_id: "other" })
      const path = `${C}/sessions/${session.id}/messages`
      const message = { role: "user", content: { type: "text", text: "one" } }
      assert.strictEqual((yield* send(org, "POST", path, message, "k")).status, 201)
      const mismatch = { detail: "Idempotency-Key was used with a different request" }
      const otherBody = yield* send(org, "POST", path, { ...message, content: { type: "text", text: "two" } }, "k")
      assert.strictEqual(otherBody.status, 422)
      assert.deepStrictEqual(otherBody.body, mismatch)
      const otherPath = yield* send(org, "POST", `${C}/sessions`, message, "k")
      assert.deepStrictEqual([otherPath.status, otherPath.body], [422, mismatch])
      const otherMethod = yield* send(
        org,
        "PATCH",
        `${C}/sessions/${session.id}`,
        { fields: { metadata: { x: 1 } } },
        "k"
      )
      assert.deepStrictEqual([otherMethod.status, otherMethod.body], [422, mismatch])
      const messages = yield* org.call("POST", `/sessions/${session.id}/messages/search`, { session_id: session.id })
      assert.deepStrictEqual(
        messages.body.map((m: any) => m.content.text),
        ["one"]
      )
      assert.deepStrictEqual((yield* org.call("GET", `/sessions/${session.id}`)).body.metadata, {})
    })
  )

  it.effect("D19: a key is 1-255 visible ASCII characters; another value is 422 at [header, idempotency-key]", () =>
    Effect.gen(function* () {
      const org = yield* (yield* TestApi).organization()
      const body = { contact_id: "keys", contact_name: "K" }
      for (const key of ["", "a b", "é", "x".repeat(256), "tab\there"]) {
        const refused = yield* send(org, "POST", `${C}/sessions`, body, key)
        assert.strictEqual(refused.status, 422, JSON.stringify(key))
        assert.deepStrictEqual(refused.body.detail[0].loc, ["header", "idempotency-key"])
      }
      assert.strictEqual((yield* sessionsOf(org, "keys")).length, 0)
      const longest = "~".repeat(255)
      assert.strictEqual((yield* send(org, "POST", `${C}/sessions`, body, longest)).status, 201)
      assert.strictEqual(replayed(yield* send(org, "POST", `${C}/sessions`, body, longest)), "true")
      assert.strictEqual((yield* sessionsOf(org, "keys")).length, 1)
    })
  )

  it.effect("D19: 401 and 422 validation responses are not stored; a 404 is stored and replayed", () =>
    Effect.gen(function* () {
      const org = yield* (yield* TestApi).organization()
      const body = { contact_id: "not-stored", contact_name: "U" }
      const unauthorized = yield* send(org, "POST", `${C}/sessions`, body, "u-1", "prl_wrong")
      assert.strictEqual(unauthorized.status, 401)
      const afterUnauthorized = yield* send(org, "POST", `${C}/sessions`, body, "u-1")
      assert.deepStrictEqual([afterUnauthorized.status, replayed(afterUnauthorized)], [201, null])
      const invalid = yield* send(org, "POST", `${C}/sessions`, { contact_id: "not-stored" }, "u-2")
      assert.strictEqual(invalid.status, 422)
      const afterInvalid = yield* send(org, "POST", `${C}/sessions`, body, "u-2")
      assert.deepStrictEqual([afterInvalid.status, replayed(afterInvalid)], [201, null])
      assert.strictEqual((yield* sessionsOf(org, "not-stored")).length, 2)
      const missing = `${C}/sessions/00000000-0000-7000-8000-000000000000/messages`
      const message = { role: "user", content: { type: "text", text: "hi" } }
      const notFound = yield* send(org, "POST", missing, message, "u-3")
      assert.strictEqual(notFound.status, 404)
      const notFoundAgain = yield* send(org, "POST", missing, message, "u-3")
      assert.deepStrictEqual(
        [notFoundAgain.status, notFoundAgain.text, replayed(notFoundAgain)],
        [404, notFound.text, "true"]
      )
    })
  )

  it.effect("D19: responses are stored per organization, and for the assistants API too", () =>
    Effect.gen(function* () {
      const api = yield* TestApi
      const [one, two] = [yield* api.organization(), yield* api.organization()]
      const body = { contact_id: "per-org", contact_name: "P" }
      const first = yield* send(one, "POST", `${C}/sessions`, body, "shared")
      const second = yield* send(two, "POST", `${C}/sessions`, body, "shared")
      assert.deepStrictEqual([first.status, second.status, replayed(second)], [201, 201, null])
      assert.notStrictEqual(first.body.id, second.body.id)
      const assistant = yield* api.request("POST", `/admin/v1/organizations/${one.id}/assistants`, {
        token: "test-admin-token",
        body: { name: "Helper" }
      })
      assert.strictEqual(assistant.status, 201)
      const branch = `${A}/assistants/${assistant.body.id}/branches`
      const created = yield* send(one, "POST", branch, { name: "idem", source_branch_name: "main" }, "branch-1")
      assert.strictEqual(created.status, 201, created.text)
      const again = yield* send(one, "POST", branch, { name: "idem", source_branch_name: "main" }, "branch-1")
      assert.deepStrictEqual([again.status, again.text, replayed(again)], [201, created.text, "true"])
      const plain = yield* send(one, "POST", branch, { name: "idem", source_branch_name: "main" }, undefined)
      assert.strictEqual(plain.status, 409)
    })
  )

  it.effect("D19: a repeat while the first request still runs gets 409, then the stored response", () =>
    Effect.gen(function* () {
      const _sql = yield* SqlClient.SqlClient
      const org = yield* (yield* TestApi).organization()
      const session = yield* org.session({ contact_id: "running" })
      const patch = { fields: { metadata: { step: 1 } } }
      const path = `${C}/sessions/${session.id}`
      // The session row locked: the first PATCH waits inside its transaction, holding the key.
      const [first, during] = yield* whileFirstWaits(
        org.id,
        session.id,
        send(org, "PATCH", path, patch, "slow"),
        send(org, "PATCH", path, patch, "slow")
      )
      assert.deepStrictEqual(
        [during.status, during.body],
        [409, { detail: "A request with this Idempotency-Key is in progress" }]
      )
      // Issue 38 item 6: the 409 says when to repeat the request.
      assert.strictEqual(during.headers.get("retry-after"), "1")
      assert.strictEqual(first.status, 200)
      const after = yield* send(org, "PATCH", path, patch, "slow")
      assert.deepStrictEqual([after.status, after.text, replayed(after)], [200, first.text, "true"])
    })
  )

  it.effect("D19: ten parallel requests with one key run the operation once", () =>
    Effect.gen(function* () {
      const org = yield* (yield* TestApi).organization()
      const body = { contact_id: "parallel", contact_name: "P" }
      const responses = yield* Effect.all(
        Array.from({ length: 10 }, () => send(org, "POST", `${C}/sessions`, body, "parallel")),
        { concurrency: "unbounded" }
      )
      const created = responses.filter((response) => response.status === 201)
      assert.isAtLeast(created.length, 1)
      for (const response of responses) assert.include([201, 409], response.status, response.text)
      assert.strictEqual(new Set(created.map((response) => response.body.id)).size, 1)
      assert.strictEqual(created.filter((response) => replayed(response) === null).length, 1)
      assert.strictEqual((yield* sessionsOf(org, "parallel")).length, 1)
    })
  )

  it.effect("D19: a response expires after 24 hours: then the key runs again, and the sweep deletes it", () =>
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      const org = yield* (yield* TestApi).organization()
      const body = { contact_id: "expiry", contact_name: "E" }
      const first = yield* send(org, "POST", `${C}/sessions`, body, "old")
      const [stored] = yield* sql<{
        hours: number
      }>`SELECT round(extract(epoch FROM expires_at - created_at) / 3600)::int AS hours
        FROM idempotency_keys WHERE organization_id = ${org.id} AND key = 'old'`
      assert.strictEqual(stored!.hours, 24)
      yield* sql`UPDATE idempotency_keys SET expires_at = now() - interval '1 second'
        WHERE organization_id = ${org.id} AND key = 'old'`
      const later = yield* send(org, "POST", `${C}/sessions`, body, "old")
      assert.deepStrictEqual([later.status, replayed(later)], [201, null])
      assert.notStrictEqual(later.body.id, first.body.id)
      assert.strictEqual(replayed(yield* send(org, "POST", `${C}/sessions`, body, "old")), "true")
      yield* sql`UPDATE idempotency_keys SET expires_at = now() - interval '1 second' WHERE organization_id = ${org.id}`
      const idempotency = yield* Idempotency
      assert.isAtLeast(yield* idempotency.sweep(1_000), 1)
      const [left] = yield* sql<{
        n: number
      }>`SELECT count(*)::int AS n FROM idempotency_keys WHERE organization_id = ${org.id}`
      assert.strictEqual(left!.n, 0)
    })
  )

  it.effect(
    "D19 on POST message (its own statement claims the key and stores the response): replay, 422, 409, parallel, expired",
    () =>
      Effect.gen(function* () {
        const sql = yield* SqlClient.SqlClient
        const org = yield* (yield* TestApi).organization()
        const session = yield* org.session({ contact_id: "hot-path" })
        const path = `${C}/sessions/${session.id}/messages`
        const message = (text: string) => ({ role: "user", content: { type: "text", text } })
        const texts = Effect.map(
          org.call("POST", `/sessions/${session.id}/messages/search`, { session_id: session.id, limit: 100 }),
          (found) => (found.body as Array<any>).map((m) => m.content.text)
        )
        const first = yield* send(org, "POST", path, message("one"), "m-1")
        assert.deepStrictEqual([first.status, replayed(first)], [201, null])
        const again = yield* send(org, "POST", path, message("one"), "m-1")
        assert.deepStrictEqual([again.status, again.text, replayed(again)], [201, first.text, "true"])
        assert.strictEqual(again.headers.get("content-type"), first.headers.get("content-type"))
        const other = yield* send(org, "POST", path, message("two"), "m-1")
        assert.deepStrictEqual(
          [other.status, other.body],
          [422, { detail: "Idempotency-Key was used with a different request" }]
        )
        assert.deepStrictEqual(yield* texts, ["one"])

        // Ten at once with one key: one message.
        const responses = yield* Effect.all(
          Array.from({ length: 10 }, () => send(org, "POST", path, message("ten"), "m-ten")),
          { concurrency: "unbounded" }
        )
        for (const response of responses) assert.include([201, 409], response.status, response.text)
        const created = responses.filter((response) => response.status === 201)
        assert.strictEqual(created.filter((response) => replayed(response) === null).length, 1)
        assert.strictEqual(new Set(created.map((response) => response.body.id)).size, 1)
        assert.deepStrictEqual(yield* texts, ["one", "ten"])

        // While the first request holds the key (waiting on the session's row lock): 409.
        // Expired but not swept yet: the key runs again (the expired response is replaced).
        yield* sql`UPDATE idempotency_keys SET expires_at = now() - interval '1 second'
        WHERE organization_id = ${org.id} AND key = 'm-1'`
        const rerun = yield* send(org, "POST", path, message("one"), "m-1")
        assert.deepStrictEqual([rerun.status, replayed(rerun)], [201, null])
        assert.notStrictEqual(rerun.body.id, first.body.id)
        assert.strictEqual(replayed(yield* send(org, "POST", path, message("one"), "m-1")), "true")
        assert.deepStrictEqual(yield* texts, ["one", "ten", "one"])
      })
  )

  it.effect(
    "D19 and D18: a refused request with a key and a 5,000-level JSON body gets 422, as without the key (found by the fuzz test)",
    () =>
      Effect.gen(function* () {
        const api = yield* TestApi
        const org = yield* api.organization()
        let deep = "1"
        for (let i = 0; i < 5_000; i++) deep = `[{"a":${deep}}]`
        const body = `{"scheduled_for":"x","config":{},"instructions":["\\udc00"],"mime_type":${deep}}`
        const path = `${C}/sessions/C.qf%ED%BF%BF%7C0I7rr/schedule`
        const without = yield* api.request("POST", path, { token: org.token, body })
        const withKey = yield* api.request("POST", path, {
          token: org.token,
          body,
          headers: { "idempotency-key": "deep" }
        })
        assert.strictEqual(without.status, 422)
        assert.deepStrictEqual([withKey.status, withKey.body], [422, without.body])
      })
  )
})
