/**
 * The replies worker's recovery of expired schedule leases as
 * `session_schedules` grows (D15, O5; migrations/0029): with thousands of
 * finished schedules and autovacuum off (no fresh statistics), giving back
 * the expired leases and this worker's own leases reads the running ones by
 * `session_schedules_running_idx`, never the whole table, and gives back
 * exactly those leases. One connection, so the statistics counters are those
 * of the backend that ran the statements.
 */
import { assert, layer } from "@effect/vitest"
import { Effect, Layer } from "effect"
import { SqlClient } from "effect/sql"
import { RepliesRepo } from "../../src/Replies/Repo.ts"
import { Ids, makeIdGenerator } from "../../src/Shared/Ids.ts"
import { FileDatabase, fileDatabaseClient, growingTable, sequentialScans } from "../support/Database.ts"

const newId = makeIdGenerator()

layer(
  RepliesRepo.layer.pipe(
    Layer.provide(Ids.layer),
    Layer.provideMerge(fileDatabaseClient(1)),
    Layer.provide(FileDatabase)
  ),
  {
    timeout: "120 seconds",
    excludeTestServices: true
  }
)("replies worker statements as session_schedules grows", (it) => {
  it.effect("expired and own schedule leases are given back without a sequential scan (D15, O5)", () =>
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      const repo = yield* RepliesRepo
      const organizationId = newId()
      const conversationId = newId()
      const sessionId = newId()
      const worker = newId()
      yield* growingTable("session_schedules", organizationId, "schedules")
      yield* sql`INSERT INTO conversations (id, organization_id, contact_id, created_at)
        VALUES (${conversationId}, ${organizationId}, '+1555', now())`
      yield* sql`INSERT INTO sessions (id, organization_id, conversation_id, contact_id, status, created_at)
        VALUES (${sessionId}, ${organizationId}, ${conversationId}, '+1555', 'open', now())`
      const schedules = (n: number, status: string, leaseUntil: string | null, leasedBy: string | null) =>
        sql`INSERT INTO session_schedules (id, organization_id, session_id, scheduled_for, config, status, leased_by,
            lease_until, created_at)
          SELECT gen_random_uuid(), ${organizationId}, ${sessionId}, now(), '{}', ${status}, ${leasedBy},
            ${leaseUntil}::timestamptz, now()
          FROM generate_series(1, ${n})`
      // Five calls while the table is small (a prepared statement may settle on a plan), then it grows.
      for (let i = 0; i < 6; i++) yield* repo.releaseSchedules({ expiredBefore: new Date() })
      yield* schedules(8_000, "done", null, null)
      yield* schedules(3, "running", "2000-01-01T00:00:00Z", newId())
      yield* schedules(2, "running", "2999-01-01T00:00:00Z", worker)
      const before = yield* sequentialScans("session_schedules")
      for (let i = 0; i < 3; i++) yield* repo.releaseSchedules({ expiredBefore: new Date() })
      yield* repo.releaseSchedules({ workerId: worker })
      assert.strictEqual((yield* sequentialScans("session_schedules")) - before, 0)
      const running = yield* sql<{ n: number }>`SELECT count(*)::int AS n FROM session_schedules
        WHERE organization_id = ${organizationId} AND status = 'running'`
      assert.strictEqual(running[0]!.n, 0)
    })
  )
})
