/**
 * Tables grown for the plans tests of retention and erasure (issue 40 item 5,
 * test/Retention/Plans.test.ts, test/Erasures/Plans.test.ts): rows of every
 * table those jobs delete from, for several organizations, written in a few
 * statements.
 */
import { Effect } from "effect"
import { SqlClient } from "effect/sql"

/**
 * The grown tables: every table retention and erasure delete from or check,
 * but `reply_jobs` and `session_assignments` (they hold only live rows).
 */
export const GROWN = [
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
 * session, and `n` events of that age, one per conversation, with a delivery
 * `deliveryStatus` each.
 */
export const grow = (
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
      FROM messages m JOIN sessions s ON s.organization_id = m.organization_id AND s.id = m.session_id
      WHERE s.organization_id = ${organizationId} AND s.contact_id LIKE ${`${prefix}%`}`
    yield* sql`INSERT INTO runs (id, organization_id, session_id, trigger, status, started_at, finished_at, duration_ms)
      SELECT gen_random_uuid(), s.organization_id, s.id, 'reply', 'succeeded', ${at}, ${at}, 10
      FROM sessions s WHERE s.organization_id = ${organizationId} AND s.contact_id LIKE ${`${prefix}%`}`
    yield* sql`INSERT INTO session_schedules (id, organization_id, session_id, scheduled_for, config, status, created_at)
      SELECT gen_random_uuid(), s.organization_id, s.id, ${at}, '{}', 'done', ${at}
      FROM sessions s WHERE s.organization_id = ${organizationId} AND s.contact_id LIKE ${`${prefix}%`}`
    yield* sql`WITH e AS (
        INSERT INTO events (id, organization_id, type, body, created_at, conversation_id)
        SELECT gen_random_uuid(), ${organizationId}, 'message.created', '{}', ${at}, c.id
        FROM conversations c WHERE c.organization_id = ${organizationId} AND c.contact_id LIKE ${`${prefix}%`}
        RETURNING id, organization_id)
      INSERT INTO deliveries (id, organization_id, app_id, event_id, event_type, status, next_attempt_at, created_at)
      SELECT gen_random_uuid(), e.organization_id, gen_random_uuid(), e.id, 'message.created', ${deliveryStatus},
        CASE WHEN ${deliveryStatus} = 'pending' THEN now() END, ${at}
      FROM e`
  }).pipe(Effect.orDie)

/** Inserts an organization with its retention settings (D21). `SqlClient` required. */
export const newOrganization = (id: string, name: string, messageDays: number | null, eventDays: number | null) =>
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    yield* sql`INSERT INTO organizations (id, name, created_at) VALUES (${id}, ${name}, now())`
    yield* sql`INSERT INTO organization_settings (organization_id, message_retention_days, event_retention_days)
      VALUES (${id}, ${messageDays}, ${eventDays})`
  }).pipe(Effect.orDie)
