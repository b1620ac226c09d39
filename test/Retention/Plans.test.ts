/**
 * The retention sweeper's statements on grown tables (issue 40 items 1 and 5;
 * DECISIONS.md D21; migrations/0019): with thousands of rows kept in every
 * table retention deletes from (another organization's, and the swept
 * organization's own open sessions and recent events), a sweep that deletes a
 * few old closed sessions with everything of them, their conversations and
 * contacts, and old events with their deliveries, scans none of those tables
 * whole, foreign-key checks and cascades included (the statistics counters
 * count every scan of the backend, the triggers' too). Statistics are not
 * refreshed (autovacuum off for the tables), as in a table that just grew.
 * `reply_jobs` is left out: it holds only live jobs (R1), and the cascade
 * from a deleted session reads it through no index (its indexes are partial).
 * One connection, so the counters read are those of the backend that swept.
 */
import { assert, layer } from "@effect/vitest"
import { Effect, Layer } from "effect"
import { SqlClient } from "effect/sql"
import { DatabaseHealth } from "../../src/Database/Health.ts"
import { Retention } from "../../src/Retention/Retention.ts"
import { sequentialScans } from "../support/Database.ts"
import { GROWN, grow, newOrganization } from "../support/GrownTables.ts"
import { fileDatabase } from "../support/RulesDatabase.ts"

layer(Retention.layer.pipe(Layer.provideMerge(DatabaseHealth.layer), Layer.provideMerge(fileDatabase({}, 1))), {
  timeout: "120 seconds",
  excludeTestServices: true
})("the retention sweep's statements on grown tables", (it) => {
  it.effect(
    "a sweep deleting old sessions and events scans none of the grown tables whole (D21, issue 40 item 5)",
    () =>
      Effect.gen(function* () {
        const sql = yield* SqlClient.SqlClient
        const retention = yield* Retention
        for (const table of GROWN) yield* sql.unsafe(`ALTER TABLE ${table} SET (autovacuum_enabled = false)`)
        const kept = "01a21bbc-0000-7000-8000-0000000000a1"
        const swept = "01a21bbc-0000-7000-8000-0000000000a2"
        yield* newOrganization(kept, "kept", null, null)
        yield* newOrganization(swept, "swept", 30, 30)
        // Another organization's old closed sessions and events, kept forever; the swept organization's open
        // sessions (never deleted) and recent events and closed sessions; then what it lets go.
        yield* grow(kept, "k", 4_000, "closed", "400 days", "succeeded")
        yield* grow(swept, "open", 3_000, "open", "400 days", "succeeded")
        yield* grow(swept, "recent", 3_000, "closed", "1 day", "succeeded")
        yield* grow(swept, "waiting", 50, "open", "31 days", "pending")
        yield* grow(swept, "old", 40, "closed", "31 days", "succeeded")
        const before = yield* Effect.forEach(GROWN, sequentialScans)
        const deleted = yield* retention.sweep
        const after = yield* Effect.forEach(GROWN, sequentialScans)
        assert.deepStrictEqual(
          Object.fromEntries(GROWN.map((table, i) => [table, after[i]! - before[i]!])),
          Object.fromEntries(GROWN.map((table) => [table, 0])),
          "the sweep scanned a grown table sequentially"
        )
        // The 40 old sessions with 80 messages, receipts, runs and schedules, their conversations and contacts,
        // and the 40 + 3,000 old events of the open sessions' age ("400 days") with their deliveries; the 50
        // events of 31 days with a pending delivery wait.
        assert.deepStrictEqual(deleted, {
          messages: 80,
          runs: 40,
          session_schedules: 40,
          ingest_receipts: 80,
          sessions: 40,
          conversations: 40,
          contacts: 40,
          deliveries: 3_040,
          events: 3_040
        })
      })
  )
})
