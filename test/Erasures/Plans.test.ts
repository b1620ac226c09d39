/**
 * The erasure job's statements on grown tables (issue 40 item 5; DECISIONS.md
 * D22; migrations/0020): with thousands of rows of every table an erasure
 * deletes from, another organization's and the same organization's other
 * contacts', erasing one contact (its request, the claim and every batch of
 * its job to `completed`) scans none of those tables whole, foreign-key
 * checks and cascades included. Statistics are not refreshed (autovacuum off
 * for the tables), as in a table that just grew. One connection, so the
 * counters read are those of the backend that erased.
 */
import { assert, layer } from "@effect/vitest"
import { Effect, Layer } from "effect"
import { SqlClient } from "effect/sql"
import { Erasures } from "../../src/Erasures/Erasures.ts"
import { Ids } from "../../src/Shared/Ids.ts"
import { sequentialScans } from "../support/Database.ts"
import { GROWN, grow, newOrganization } from "../support/GrownTables.ts"
import { fileDatabase } from "../support/RulesDatabase.ts"

const WORKER = "01a22bbc-0000-7000-8000-00000000000f"

layer(Erasures.layer.pipe(Layer.provide(Ids.layer), Layer.provideMerge(fileDatabase({}, 1))), {
  timeout: "120 seconds",
  excludeTestServices: true
})("the erasure job's statements on grown tables", (it) => {
  it.effect("erasing a contact scans none of the grown tables whole (D22, issue 40 item 5)", () =>
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      const erasures = yield* Erasures
      for (const table of GROWN) yield* sql.unsafe(`ALTER TABLE ${table} SET (autovacuum_enabled = false)`)
      const other = "01a22bbc-0000-7000-8000-0000000000a1"
      const own = "01a22bbc-0000-7000-8000-0000000000a2"
      yield* newOrganization(other, "other", null, null)
      yield* newOrganization(own, "own", null, null)
      // Another organization's contacts, one of them of the erased contact's id; the organization's other
      // contacts, open and closed; then the contact to erase with everything of it.
      yield* grow(other, "victim", 1, "closed", "1 day", "succeeded")
      yield* grow(other, "k", 4_000, "closed", "1 day", "succeeded")
      yield* grow(own, "open", 3_000, "open", "1 day", "succeeded")
      yield* grow(own, "closed", 3_000, "closed", "1 day", "pending")
      yield* grow(own, "victim", 1, "closed", "1 day", "pending")
      const before = yield* Effect.forEach(GROWN, sequentialScans)
      const erasure = yield* erasures.erase(own, "victim1")
      const claimed = yield* erasures.claim(WORKER, 60_000)
      assert.strictEqual(claimed?.id, erasure.id)
      let step = yield* erasures.advance(claimed!, WORKER, 60_000)
      for (let batches = 1; step._tag === "more" && batches < 100; batches++)
        step = yield* erasures.advance(claimed!, WORKER, 60_000)
      const after = yield* Effect.forEach(GROWN, sequentialScans)
      assert.deepStrictEqual(
        Object.fromEntries(GROWN.map((table, i) => [table, after[i]! - before[i]!])),
        Object.fromEntries(GROWN.map((table) => [table, 0])),
        "the erasure scanned a grown table sequentially"
      )
      assert.strictEqual(step._tag, "completed")
      if (step._tag !== "completed") return
      // The contact's session with two messages, receipts, a run and a schedule, its conversation and its one
      // event with its pending delivery (never sent); the other organization's victim1 is untouched.
      assert.deepInclude(step.counts, {
        contacts: 1,
        conversations: 1,
        sessions: 1,
        messages: 2,
        runs: 1,
        schedules: 1,
        ingest_receipts: 2,
        events: 1,
        deliveries: 1
      })
      const kept = yield* sql<{
        n: number
      }>`SELECT count(*)::int AS n FROM messages m JOIN sessions s ON s.organization_id = m.organization_id AND s.id = m.session_id
        WHERE s.organization_id = ${other} AND s.contact_id = 'victim1'`
      assert.strictEqual(kept[0]!.n, 2)
    })
  )
})
