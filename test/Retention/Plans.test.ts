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
import { fileDatabase } from "../support/RulesDatabase.ts"

/** The grown tables: every table retention deletes from or checks, but `reply_jobs` and `session_assignments`. */
const GROWN = [
  "contacts",
  "conversations",
  "sessions",
  "messages",
  "runs",
  "session_schedules",
  "ingest_receipts",
  "events",
  "deliveries"
] as const

/**
 * Writes `n` rows of each grown table for the organization (`SqlClient`
 * required): `n` contacts, each with a conversation and a session of `status`
 * last changed `age` ago, two messages with receipts, a run and a schedule per
 * session, and `n` events of that age with a delivery `deliveryStatus` each.
 */
const grow = (
  organizationId: string,
  prefix: string,
  n: number,
  status: "open" | "closed",
  age: string,
  deliveryStatus: "succeeded" | "pending"
) =>
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const at = sql.literal(`(now() - interval '${age}')`)
    yield* sql`INSERT INTO contacts (organization_id, contact_id, created_at)
      SELECT ${organizationId}, ${prefix} || g, ${at} FROM generate_series(1, ${n}) g`
    yield* sql`INSERT INTO conversations (id, organization_id, contact_id, created_at)
      SELECT gen_random_uuid(), ${organizationId}, ${prefix} || g, ${at} FROM generate_series(1, ${n}) g`
    yield* sql`INSERT INTO sessions (id, organization_id, conversation_id, contact_id, status, created_at, updated_at)
      SELECT gen_random_uuid(), c.organization_id, c.id, c.contact_id, ${status}, ${at}, ${at}
      FROM conversations c WHERE c.organization_id = ${organizationId} AND c.contact_id LIKE ${`${prefix}%`}`
    yield* sql`INSERT INTO messages (id, organization_id, session_id, conversation_id, role, content, created_at)
      SELECT gen_random_uuid(), s.organization_id, s.id, s.conversation_id, 'user', '{"type":"text","text":"x"}', ${at}
      FROM sessions s CROSS JOIN generate_series(1, 2)
      WHERE s.organization_id = ${organizationId} AND s.contact_id LIKE ${`${prefix}%`}`
    yield* sql`INSERT INTO ingest_receipts (organization_id, conversation_id, provider_message_id, message_id, session_id,
        created_at)
      SELECT m.organization_id, m.conversation_id, m.id::text, m.id, m.session_id, ${at}
      FROM messages m JOIN sessions s ON s.id = m.session_id
      WHERE s.organization_id = ${organizationId} AND s.contact_id LIKE ${`${prefix}%`}`
    yield* sql`INSERT INTO runs (id, organization_id, session_id, trigger, status, started_at, finished_at, duration_ms)
      SELECT gen_random_uuid(), s.organization_id, s.id, 'reply', 'succeeded', ${at}, ${at}, 10
      FROM sessions s WHERE s.organization_id = ${organizationId} AND s.contact_id LIKE ${`${prefix}%`}`
    yield* sql`INSERT INTO session_schedules (id, organization_id, session_id, scheduled_for, config, status, created_at)
      SELECT gen_random_uuid(), s.organization_id, s.id, ${at}, '{}', 'done', ${at}
      FROM sessions s WHERE s.organization_id = ${organizationId} AND s.contact_id LIKE ${`${prefix}%`}`
    yield* sql`WITH e AS (
        INSERT INTO events (id, organization_id, type, body, created_at)
        SELECT gen_random_uuid(), ${organizationId}, 'message.created', '{}', ${at} FROM generate_series(1, ${n})
        RETURNING id, organization_id)
      INSERT INTO deliveries (id, organization_id, app_id, event_id, event_type, status, next_attempt_at, created_at)
      SELECT gen_random_uuid(), e.organization_id, gen_random_uuid(), e.id, 'message.created', ${deliveryStatus},
        CASE WHEN ${deliveryStatus} = 'pending' THEN now() END, ${at}
      FROM e`
  }).pipe(Effect.orDie)

const newOrganization = (id: string, name: string, messageDays: number | null, eventDays: number | null) =>
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    yield* sql`INSERT INTO organizations (id, name, created_at) VALUES (${id}, ${name}, now())`
    yield* sql`INSERT INTO organization_settings (organization_id, message_retention_days, event_retention_days)
      VALUES (${id}, ${messageDays}, ${eventDays})`
  }).pipe(Effect.orDie)

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
