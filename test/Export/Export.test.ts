/**
 * Bulk export (conversations.md "Data export"; DECISIONS.md D14).
 */
import { assert } from "@effect/vitest"
import { Deferred, Effect, Fiber } from "effect"
import { SqlClient } from "effect/sql"
import { assertMessage, assertSession } from "../support/Shapes.ts"
import { TestApi, type TestOrganization, withApp } from "../support/TestApp.ts"

const text = (value: string) => ({ role: "user", content: { type: "text", text: value } })

/**
 * Retries `effect` until `check` passes (up to 10 s). An export page stops at the
 * horizon (the oldest write transaction still running on the table), so rows
 * written a moment ago by this test may wait for other tests' transactions.
 */
const eventually = <A>(effect: Effect.Effect<A>, check: (value: A) => void) =>
  Effect.gen(function* () {
    const deadline = Date.now() + 10_000
    for (;;) {
      const value = yield* effect
      try {
        check(value)
        return value
      } catch (error) {
        if (Date.now() > deadline) throw error
        yield* Effect.sleep("50 millis")
      }
    }
  })

/** Follows `after_id` from `after` until a page is empty, returning the items. */
const drain = (org: TestOrganization, path: string, params: Record<string, string>, after: string | undefined) =>
  Effect.gen(function* () {
    const items: Array<any> = []
    for (;;) {
      const query = new URLSearchParams({ ...params, ...(after ? { after_id: after } : {}) })
      const response = yield* org.call("GET", `${path}?${query}`)
      if (response.status !== 200) throw new Error(`${path}: ${response.status} ${response.text}`)
      if (response.body.length === 0) return { items, after }
      items.push(...response.body)
      after = response.body.at(-1).id
    }
  })

/** Walks an export to its end (`[]`) at `limit`, returning every item in order. */
const walk = (org: TestOrganization, path: string, params: Record<string, string>, limit: number) =>
  Effect.gen(function* () {
    const items: Array<any> = []
    let after: string | undefined
    for (let page = 0; page < 10_000; page++) {
      const query = new URLSearchParams({ ...params, limit: String(limit), ...(after ? { after_id: after } : {}) })
      const response = yield* org.call("GET", `${path}?${query}`)
      if (response.status !== 200) throw new Error(`${path}: ${response.status} ${response.text}`)
      if (response.body.length === 0) return { items, after }
      items.push(...response.body)
      after = response.body.at(-1).id
    }
    throw new Error("walk did not end")
  })

withApp()("export", (it) => {
  it.effect(
    "sessions and messages pages equal the other endpoints' shapes, in (created_at, id) order, [] at the end",
    () =>
      Effect.gen(function* () {
        const api = yield* TestApi
        const org = yield* api.organization()
        const other = yield* api.organization()
        yield* other.session()
        const sessions: Array<any> = []
        for (let i = 0; i < 5; i++) sessions.push(yield* org.session({ contact_id: `c${i}` }))
        const messages: Array<any> = []
        for (let i = 0; i < 7; i++) {
          messages.push((yield* org.call("POST", `/sessions/${sessions[i % 2]!.id}/messages`, text(`m${i}`))).body)
        }
        const exported = yield* eventually(walk(org, "/data/sessions", {}, 2), (walked) =>
          assert.deepStrictEqual(walked.items, sessions)
        )
        exported.items.forEach(assertSession)
        const exportedMessages = yield* eventually(walk(org, "/data/messages", {}, 3), (walked) =>
          assert.deepStrictEqual(walked.items, messages)
        )
        exportedMessages.items.forEach(assertMessage)
        yield* eventually(org.call("GET", "/data/sessions"), (page) => assert.strictEqual(page.body.length, 5))
        yield* eventually(walk(org, "/data/messages", { session_id: sessions[1]!.id }, 2), (bySession) =>
          assert.deepStrictEqual(
            bySession.items.map((m: any) => m.id),
            messages.filter((_, i) => i % 2 === 1).map((m) => m.id)
          )
        )
      })
  )

  it.effect("a page of several reads (over 500 rows) has the rows and bytes of small pages, for both sort keys", () =>
    Effect.gen(function* () {
      const api = yield* TestApi
      const sql = yield* SqlClient.SqlClient
      const org = yield* api.organization()
      const session = yield* org.session()
      // 1,500 rows: pages of 1000 end with a read of 500 and an empty one; a third updated out of order.
      yield* sql`INSERT INTO messages (id, organization_id, session_id, conversation_id, role, content, metadata, created_at, updated_at)
        SELECT gen_random_uuid(), ${org.id}, ${session.id}, ${session.conversation_id}, 'user',
          jsonb_build_object('type', 'text', 'text', 'bulk ' || i || ' é "q"'), jsonb_build_object('i', i),
          now() - interval '1 hour' + i * interval '1 millisecond',
          CASE WHEN i % 3 = 0 THEN now() - interval '30 minutes' - i * interval '1 millisecond' END
        FROM generate_series(1, 1500) AS i`
      for (const sort_by of ["created_at", "updated_at"]) {
        const small = yield* eventually(walk(org, "/data/messages", { sort_by }, 100), (walked) =>
          assert.strictEqual(walked.items.length, 1500)
        )
        for (const limit of [500, 1000, 3000]) {
          assert.deepStrictEqual((yield* walk(org, "/data/messages", { sort_by }, limit)).items, small.items)
        }
        const whole = yield* org.call("GET", `/data/messages?${new URLSearchParams({ sort_by, limit: "3000" })}`)
        assert.strictEqual(whole.text, JSON.stringify(small.items))
      }
    })
  )

  it.effect("no loss and no duplicate for created_at while messages are inserted during the walk", () =>
    Effect.gen(function* () {
      const api = yield* TestApi
      const org = yield* api.organization()
      const session = yield* org.session()
      const initial = []
      for (let i = 0; i < 30; i++)
        initial.push((yield* org.call("POST", `/sessions/${session.id}/messages`, text(`a${i}`))).body.id)
      const writer = yield* Effect.forkChild(
        Effect.forEach(
          Array.from({ length: 60 }, (_, i) => i),
          (i) =>
            org
              .call("POST", `/sessions/${session.id}/messages`, text(`b${i}`))
              .pipe(Effect.map((r) => r.body.id as string)),
          { concurrency: 4 }
        )
      )
      const during = yield* walk(org, "/data/messages", {}, 3)
      const written = yield* Fiber.join(writer)
      // Continue from the last cursor once the writers are done, until every row has appeared.
      const seen = [...during.items]
      let after = during.after
      yield* eventually(
        Effect.gen(function* () {
          const page = yield* drain(org, "/data/messages", { limit: "3" }, after)
          seen.push(...page.items)
          after = page.after
          return seen.length
        }),
        (count) => assert.strictEqual(count, initial.length + written.length)
      )
      const ids = seen.map((m: any) => m.id)
      assert.strictEqual(new Set(ids).size, ids.length, "no duplicate")
      assert.deepStrictEqual(new Set(ids), new Set([...initial, ...written]), "no loss")
      // Still in order of the sort key.
      const keys = seen.map((m: any) => `${m.created_at} ${m.id}`)
      assert.deepStrictEqual(keys, [...keys].sort())
    })
  )

  it.effect(
    "a page stops at the start of the oldest running write transaction (the horizon), so a slow commit is not skipped",
    () =>
      Effect.gen(function* () {
        const api = yield* TestApi
        const sql = yield* SqlClient.SqlClient
        const org = yield* api.organization()
        const session = yield* org.session()
        const first = (yield* org.call("POST", `/sessions/${session.id}/messages`, text("first"))).body
        const inserted = yield* Deferred.make<void>()
        const release = yield* Deferred.make<void>()
        const slowId = "01a20254-e46f-73c4-a817-000000000001"
        const slow = yield* Effect.forkChild(
          sql.withTransaction(
            Effect.gen(function* () {
              yield* sql`INSERT INTO messages (id, organization_id, session_id, conversation_id, role, content, created_at)
              VALUES (${slowId}, ${org.id}, ${session.id}, ${session.conversation_id}, 'user',
                ${JSON.stringify({ type: "text", text: "slow" })}::jsonb, statement_timestamp())`
              yield* Deferred.succeed(inserted, undefined)
              yield* Deferred.await(release)
            })
          )
        )
        yield* Deferred.await(inserted)
        const later = (yield* org.call("POST", `/sessions/${session.id}/messages`, text("later"))).body
        // While the slow transaction runs, the page ends before its start: `later` is held back too.
        const during = yield* org.call("GET", "/data/messages")
        const duringIds = during.body.map((m: any) => m.id)
        assert.isFalse(duringIds.includes(later.id))
        assert.isFalse(duringIds.includes(slowId))
        yield* Deferred.succeed(release, undefined)
        yield* Fiber.join(slow)
        yield* eventually(org.call("GET", "/data/messages"), (after) =>
          assert.deepStrictEqual(
            after.body.map((m: any) => m.id),
            [first.id, slowId, later.id]
          )
        )
      })
  )

  it.effect(
    "sort_by=updated_at: records updated after being exported reappear later; never-updated records are included",
    () =>
      Effect.gen(function* () {
        const api = yield* TestApi
        const org = yield* api.organization()
        const session = yield* org.session()
        const ids: Array<string> = []
        for (let i = 0; i < 6; i++)
          ids.push((yield* org.call("POST", `/sessions/${session.id}/messages`, text(`m${i}`))).body.id)
        const first = yield* eventually(org.call("GET", "/data/messages?sort_by=updated_at&limit=3"), (page) =>
          assert.deepStrictEqual(
            page.body.map((m: any) => m.id),
            ids.slice(0, 3)
          )
        )
        // The last item of the page and an earlier one are updated after the page was served.
        for (const id of [ids[2], ids[0]]) {
          yield* org.call("PATCH", `/sessions/${session.id}/messages/${id}`, { delivery_status: "sent" })
        }
        const rest: Array<any> = []
        let after: string | undefined = first.body.at(-1).id
        yield* eventually(
          Effect.gen(function* () {
            const page = yield* drain(org, "/data/messages", { sort_by: "updated_at", limit: "2" }, after)
            rest.push(...page.items)
            after = page.after
            return rest.length
          }),
          (count) => assert.strictEqual(count, 5)
        )
        assert.deepStrictEqual(
          rest.map((m: any) => m.id),
          [ids[3], ids[4], ids[5], ids[2], ids[0]]
        )
        assert.strictEqual(rest.at(-1).delivery_status, "sent")
        yield* eventually(
          org.call("GET", `/data/messages?sort_by=updated_at&updated_after=${encodeURIComponent(rest[2].created_at)}`),
          (since) =>
            assert.deepStrictEqual(
              since.body.map((m: any) => m.id),
              [ids[2], ids[0]]
            )
        )
      })
  )

  it.effect("filters on created and updated moments; bounds and errors (D14)", () =>
    Effect.gen(function* () {
      const api = yield* TestApi
      const org = yield* api.organization()
      const other = yield* api.organization()
      const sessions: Array<any> = []
      for (let i = 0; i < 4; i++) sessions.push(yield* org.session({ contact_id: `c${i}` }))
      yield* eventually(
        org.call(
          "GET",
          `/data/sessions?created_after=${encodeURIComponent(sessions[0]!.created_at)}&created_before=${encodeURIComponent(sessions[3]!.created_at)}`
        ),
        (between) =>
          assert.deepStrictEqual(
            between.body.map((s: any) => s.id),
            [sessions[1]!.id, sessions[2]!.id]
          )
      )
      yield* org.call("POST", `/sessions/${sessions[1]!.id}/finish`, {})
      yield* eventually(
        org.call(
          "GET",
          `/data/sessions?sort_by=updated_at&updated_after=${encodeURIComponent(sessions[3]!.created_at)}`
        ),
        (updated) =>
          assert.deepStrictEqual(
            updated.body.map((s: any) => s.id),
            [sessions[1]!.id]
          )
      )
      yield* eventually(
        org.call("GET", `/data/sessions?updated_before=${encodeURIComponent(sessions[2]!.created_at)}`),
        (updatedBefore) =>
          assert.deepStrictEqual(
            updatedBefore.body.map((s: any) => s.id),
            [sessions[0]!.id]
          )
      )
      for (const query of ["limit=3001", "limit=0", "sort_by=name", "created_after=yesterday"]) {
        const response = yield* org.call("GET", `/data/sessions?${query}`)
        assert.strictEqual(response.status, 422, query)
        assert.strictEqual(response.body.detail[0].loc[0], "query")
      }
      assert.strictEqual((yield* org.call("GET", "/data/messages?limit=3000")).status, 200)
      const foreign = yield* other.session()
      for (const after of ["01a20254-e46f-73c4-a817-d7a14c37efe6", "garbage", foreign.id]) {
        for (const path of ["/data/sessions", "/data/messages"]) {
          const response = yield* org.call("GET", `${path}?after_id=${after}`)
          assert.strictEqual(response.status, 400, `${path} ${after}`)
          assert.deepStrictEqual(response.body, { detail: "Invalid cursor" })
        }
      }
      // A session id is not a message cursor.
      const wrongKind = yield* org.call("GET", `/data/messages?after_id=${sessions[0]!.id}`)
      assert.strictEqual(wrongKind.status, 400)
    })
  )

  it.effect(
    "batch: requested order, duplicates once at the first position, unknown and foreign omitted, at most 1000",
    () =>
      Effect.gen(function* () {
        const api = yield* TestApi
        const org = yield* api.organization()
        const other = yield* api.organization()
        const [a, b, c] = [yield* org.session(), yield* org.session(), yield* org.session()]
        const foreign = yield* other.session()
        const ids = [c.id, a.id, foreign.id, "nope", c.id, "01a20254-e46f-73c4-a817-d7a14c37efe6", b.id]
        const response = yield* org.call(
          "GET",
          `/data/sessions/batch?${ids.map((id) => `session_ids=${id}`).join("&")}`
        )
        assert.strictEqual(response.status, 200)
        assert.deepStrictEqual(
          response.body.map((s: any) => s.id),
          [c.id, a.id, b.id]
        )
        assert.deepStrictEqual(response.body[0], c)
        const single = yield* org.call("GET", `/data/sessions/batch?session_ids=${a.id}`)
        assert.deepStrictEqual(single.body, [a])
        const tooMany = yield* org.call(
          "GET",
          `/data/sessions/batch?${Array.from({ length: 1001 }, () => `session_ids=${a.id}`).join("&")}`
        )
        assert.strictEqual(tooMany.status, 422)
        const none = yield* org.call("GET", "/data/sessions/batch")
        assert.strictEqual(none.status, 422)
      })
  )
})
