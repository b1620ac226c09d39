/**
 * A message and its event do not lock their organization's row, and an
 * operator's delete of an organization still takes its messages and events
 * (migrations/0018; W2: the event is the message's outbox row).
 */
import { assert } from "@effect/vitest"
import { Deferred, Effect, Fiber, Redacted } from "effect"
import { SqlClient } from "effect/sql"
import * as Database from "../../src/Database/Database.ts"
import { TestDatabaseUrl } from "../support/Database.ts"
import { TestApi, withApp } from "../support/TestApp.ts"

const text = (value: string) => ({ role: "user", content: { type: "text", text: value } })

withApp()("the organization's row", (it) => {
  it.effect("POST message and its event do not wait for a lock of the organization's row (migrations/0018)", () =>
    Effect.gen(function* () {
      const api = yield* TestApi
      const org = yield* api.organization()
      const session = yield* org.session()
      // The lock is held on a pool of its own, so the application's pool stays free for the message.
      const lockerPool = Database.clientLayer(Redacted.make(yield* TestDatabaseUrl), 1)
      const locked = yield* Deferred.make<void>()
      const release = yield* Deferred.make<void>()
      const locker = yield* Effect.forkChild(
        Effect.gen(function* () {
          const own = yield* SqlClient.SqlClient
          yield* own.withTransaction(
            Effect.gen(function* () {
              // FOR UPDATE conflicts with the FOR KEY SHARE a foreign key's check takes.
              yield* own`SELECT id FROM organizations WHERE id = ${org.id} FOR UPDATE`
              yield* Deferred.succeed(locked, undefined)
              yield* Deferred.await(release)
            })
          )
        }).pipe(Effect.provide(lockerPool))
      )
      yield* Deferred.await(locked)
      const created = yield* org.call("POST", `/sessions/${session.id}/messages`, text("while locked")).pipe(
        Effect.timeoutOrElse({
          duration: "10 seconds",
          orElse: () => Effect.sync(() => assert.fail("POST message waited on its organization's row"))
        })
      )
      yield* Deferred.succeed(release, undefined)
      yield* Fiber.join(locker)
      assert.strictEqual(created.status, 201)
      const events = yield* api.events(org.id)
      assert.isTrue(
        events.some((event) => event.type === "message.created" && event.data.object.id === created.body.id)
      )
    })
  )

  it.effect("deleting an organization in SQL still takes its sessions, messages and events (migrations/0018)", () =>
    Effect.gen(function* () {
      const api = yield* TestApi
      const sql = yield* SqlClient.SqlClient
      const org = yield* api.organization()
      const other = yield* api.organization()
      for (const owner of [org, other]) {
        const session = yield* owner.session()
        assert.strictEqual((yield* owner.call("POST", `/sessions/${session.id}/messages`, text("hi"))).status, 201)
      }
      const counts = (organizationId: string) =>
        sql<{ sessions: number; messages: number; events: number }>`SELECT
          (SELECT count(*)::int FROM sessions WHERE organization_id = ${organizationId}) AS sessions,
          (SELECT count(*)::int FROM messages WHERE organization_id = ${organizationId}) AS messages,
          (SELECT count(*)::int FROM events WHERE organization_id = ${organizationId}) AS events`.pipe(
          Effect.map((rows) => rows[0]!)
        )
      const before = yield* counts(org.id)
      assert.strictEqual(before.messages, 1)
      assert.isAtLeast(before.events, 2)
      const otherBefore = yield* counts(other.id)

      yield* sql`DELETE FROM organizations WHERE id = ${org.id}`
      assert.deepStrictEqual(yield* counts(org.id), { sessions: 0, messages: 0, events: 0 })
      assert.deepStrictEqual(yield* counts(other.id), otherBefore)
    })
  )
})
