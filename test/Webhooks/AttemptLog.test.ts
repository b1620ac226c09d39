/**
 * The attempt log moved into `deliveries` (migrations/0016_delivery_writes.ts;
 * DECISIONS.md W2, W5, O6). A database as the release before left it (every
 * migration through 0015), with deliveries attempted and recorded in
 * `delivery_attempts`, is migrated: the listing shows every attempt made
 * before, oldest first, with the members and values it had, and the fan-out
 * and the worker's statements go on without the table and without the key
 * from deliveries to events.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Layer, Redacted } from "effect"
import { SqlClient } from "effect/sql"
import * as Database from "../../src/Database/Database.ts"
import { WebhooksRepo } from "../../src/Webhooks/Repo.ts"
import { emptyDatabase, insertApp } from "../support/Database.ts"
import { deliverDue } from "../support/Deliveries.ts"

/** A message.created event of `organizationId` (the fan-out makes its deliveries). */
const insertEvent = (organizationId: string) =>
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const rows = yield* sql<{ id: string }>`INSERT INTO events (id, organization_id, type, body, created_at)
      VALUES (gen_random_uuid(), ${organizationId}, 'message.created', '{}', now()) RETURNING id::text`
    return rows[0]!.id
  })

describe("attempt log in deliveries (migration 0016)", () => {
  it.live(
    "attempts recorded before the migration are listed after it, oldest first, members unchanged (W5, O6)",
    () =>
      Effect.gen(function* () {
        const database = yield* Effect.acquireRelease(
          Effect.promise(() => emptyDatabase("attempt_log")),
          (owned) => Effect.promise(owned.drop)
        )
        yield* Effect.gen(function* () {
          const sql = yield* SqlClient.SqlClient
          const applied = yield* Database.migrateThrough(15)
          assert.strictEqual(applied.at(-1)?.[0], 15)
          const organizationId = crypto.randomUUID()
          yield* sql`INSERT INTO organizations (id, name, created_at) VALUES (${organizationId}, 'before 0016', now())`
          yield* insertApp(organizationId, "receiver")
          const retried = yield* insertEvent(organizationId)
          const untried = yield* insertEvent(organizationId)
          // What the worker of the release before wrote for two failed attempts, a 503 and a 500
          // (inserted second first); the delivery is due again.
          yield* sql`INSERT INTO delivery_attempts (delivery_id, attempt, organization_id, status_code, error, duration_ms,
              started_at)
            SELECT d.id, a.attempt, d.organization_id, a.status_code, a.error, a.duration_ms, a.started_at::timestamptz
            FROM deliveries d, (VALUES (2, 500, 'HTTP status 500', 8, '2026-11-27T10:00:05.250Z'),
              (1, 503, 'HTTP status 503', 31, '2026-11-27T10:00:00.125Z')) AS a(attempt, status_code, error, duration_ms, started_at)
            WHERE d.event_id = ${retried}`
          yield* sql`UPDATE deliveries SET attempts = 2, last_status_code = 500, last_error = 'HTTP status 500',
              next_attempt_at = now() WHERE event_id = ${retried}`

          const rest = yield* Database.migrate
          assert.deepStrictEqual(rest.map(([id]) => id).slice(0, 1), [16])
          const [gone] = yield* sql<{ table: string | null }>`SELECT to_regclass('delivery_attempts')::text AS table`
          assert.strictEqual(gone!.table, null)

          const repo = yield* WebhooksRepo
          const [app] = yield* repo.listApps(organizationId)
          const listed = JSON.parse(yield* repo.listDeliveries(organizationId, app!.id, { limit: 10 }))
          const byEvent = new Map(listed.map((delivery: { event_id: string }) => [delivery.event_id, delivery]))
          const before = byEvent.get(retried) as { attempts: number; attempt_log: Array<Record<string, unknown>> }
          assert.strictEqual(before.attempts, 2)
          assert.deepStrictEqual(before.attempt_log, [
            {
              attempt: 1,
              status_code: 503,
              error: "HTTP status 503",
              duration_ms: 31,
              started_at: "2026-11-27T10:00:00.125000Z"
            },
            {
              attempt: 2,
              status_code: 500,
              error: "HTTP status 500",
              duration_ms: 8,
              started_at: "2026-11-27T10:00:05.250000Z"
            }
          ])
          for (const attempt of before.attempt_log) {
            assert.deepStrictEqual(Object.keys(attempt), [
              "attempt",
              "status_code",
              "error",
              "duration_ms",
              "started_at"
            ])
          }
          assert.deepStrictEqual((byEvent.get(untried) as { attempt_log: Array<unknown> }).attempt_log, [])

          // After the migration: the fan-out still makes a delivery per event, and a claim and a
          // completion append each attempt to its delivery's log: the third of the retried one,
          // the first of the others.
          const after = yield* insertEvent(organizationId)
          const claimed = yield* deliverDue({
            statusCode: 204,
            durationMs: 4,
            startedAt: new Date("2026-11-27T11:00:00.000Z")
          })
          assert.sameMembers(
            claimed.map((delivery) => delivery.event_id),
            [retried, untried, after]
          )
          const relisted = JSON.parse(yield* repo.listDeliveries(organizationId, app!.id, { limit: 10 }))
          assert.strictEqual(relisted.length, 3)
          const success = { status_code: 204, error: null, duration_ms: 4, started_at: "2026-11-27T11:00:00.000000Z" }
          for (const delivery of relisted) {
            const expected =
              delivery.event_id === retried
                ? [...before.attempt_log, { attempt: 3, ...success }]
                : [{ attempt: 1, ...success }]
            assert.deepStrictEqual(delivery.attempt_log, expected)
            assert.strictEqual(delivery.attempts, expected.length)
          }
        }).pipe(
          Effect.provide(
            WebhooksRepo.layer.pipe(Layer.provideMerge(Database.clientLayer(Redacted.make(database.url), 1)))
          )
        )
      }).pipe(Effect.scoped),
    120_000
  )
})
