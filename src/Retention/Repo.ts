/**
 * SQL of retention (DECISIONS.md D21, issue 40 item 1; migrations/0019): the
 * one place that deletes rows by age. Each method is one short transaction of
 * a batch: the rows it takes are locked `FOR UPDATE SKIP LOCKED`, so several
 * sweepers (one per worker process) take different batches and never wait for
 * each other, and no statement deletes more than {@link ROWS_PER_BATCH} rows
 * (or {@link EVENTS_PER_BATCH} events with their deliveries). Every statement filters by
 * organization (O11), is planned on every call (run unprepared, as
 * `Database/Statement.ts` `plannedPerCall` explains: a generic plan made while
 * the tables were small would scan them whole once they grew), and runs under
 * the delivery worker's planner settings (`WORKER_PLANNER_SETTINGS`, set for
 * the batch's transaction only): without statistics of a table that just grew,
 * PostgreSQL took `session_id = ANY(...)` of 40 sessions for a fifth of
 * `runs` and read it whole, and checked old events for pending deliveries
 * with a hash join over all of `deliveries`. test/Retention/Plans.test.ts
 * asserts that no batch scans a grown table whole.
 *
 * Deleting writes no event (D21). The rows of the owners' tables (sessions,
 * messages, runs, schedules, reply jobs, assignments, receipts,
 * conversations, contacts, events, deliveries) are deleted here rather than
 * by each owner, because one batch must take a session's rows of every table
 * in one transaction under the session's lock.
 */
import { Context, Effect, Layer } from "effect"
import { SqlClient, type SqlError } from "effect/sql"
import { WORKER_PLANNER_SETTINGS } from "../Webhooks/Repo.ts"

/**
 * Rows of one table a batch deletes at most (each of a session's children, one
 * statement each). 10,000 rather than 1,000: `npm run bench -- lifecycle`
 * (issue 40 item 5) deleted 12,596 messages/s beside the neighbour's load with
 * 1,000, the batch's dozen round trips costing more than its rows; a statement
 * of 10,000 rows takes about 40 ms on the benchmark's machine.
 */
export const ROWS_PER_BATCH = 10_000

/** Closed sessions a batch takes at most. */
export const SESSIONS_PER_BATCH = 100

/** Events a batch takes at most (with their deliveries, one per subscribed app). */
export const EVENTS_PER_BATCH = 500

/** The tables retention deletes from, the `table` attribute of `parley.retention.deleted`. */
export const RETENTION_TABLES = [
  "messages",
  "runs",
  "session_schedules",
  "reply_jobs",
  "session_assignments",
  "ingest_receipts",
  "sessions",
  "conversations",
  "contacts",
  "deliveries",
  "events"
] as const

/** One of {@link RETENTION_TABLES}. */
export type RetentionTable = (typeof RETENTION_TABLES)[number]

/** Rows deleted per table (absent: none). */
export type DeletedRows = Partial<Record<RetentionTable, number>>

/** An organization with a retention in effect, in whole days (null: kept forever). */
export interface RetentionPolicy {
  readonly organization_id: string
  readonly message_retention_days: number | null
  readonly event_retention_days: number | null
}

/** What one batch of closed sessions did: how many sessions it took, and whether all of them went. */
export interface SessionBatch {
  readonly taken: number
  readonly finished: boolean
  readonly deleted: DeletedRows
}

/** What one batch of events did: how many events it took, and the rows deleted. */
export interface EventBatch {
  readonly taken: number
  readonly deleted: DeletedRows
}

/**
 * The children of a session, deleted before it in this order, at most
 * {@link ROWS_PER_BATCH} rows of each per batch; each carries `organization_id`
 * (O11), which every delete filters by.
 */
const SESSION_CHILDREN: ReadonlyArray<RetentionTable> = [
  "messages",
  "runs",
  "session_schedules",
  // Only pending and running jobs exist (R1); the closing trigger dropped a closed session's pending one.
  "reply_jobs",
  "session_assignments",
  "ingest_receipts"
]

/** The retention repository (D21). */
export class RetentionRepo extends Context.Service<
  RetentionRepo,
  {
    /**
     * The organizations with a retention of sessions or events in effect:
     * those whose settings name one, and those without stored settings
     * (events: `defaultEventRetentionDays`, D21's default).
     */
    readonly policies: (
      defaultEventRetentionDays: number | null
    ) => Effect.Effect<ReadonlyArray<RetentionPolicy>, SqlError.SqlError>
    /**
     * One batch (one transaction) of the organization's sessions closed before
     * `closedBefore` (ISO 8601): takes at most {@link SESSIONS_PER_BATCH}, oldest
     * first, skipping those another sweeper holds and those with a reply job or
     * schedule running; deletes at most {@link ROWS_PER_BATCH} rows of each of
     * their child tables; when none is left, the sessions, then their conversations and
     * contacts that have no session left. `finished` is false when a child
     * table had more rows (the next batch takes the same sessions).
     */
    readonly deleteClosedSessions: (
      organizationId: string,
      closedBefore: string
    ) => Effect.Effect<SessionBatch, SqlError.SqlError>
    /**
     * One batch (one transaction) of the organization's events written before
     * `createdBefore` (ISO 8601): takes at most {@link EVENTS_PER_BATCH}, oldest
     * first, none with a delivery still `pending`, skipping those another
     * sweeper holds; deletes their deliveries (with the attempt logs inside),
     * then the events. An event whose delivery became pending meanwhile (an
     * admin retry) stays, with that delivery.
     */
    readonly deleteEvents: (
      organizationId: string,
      createdBefore: string
    ) => Effect.Effect<EventBatch, SqlError.SqlError>
    /** Whether the server runs autovacuum (`autovacuum` on): without it the space retention frees is never reused. */
    readonly autovacuum: Effect.Effect<boolean, SqlError.SqlError>
  }
>()("parley/Retention/RetentionRepo") {
  /** The repository on PostgreSQL. Requires `SqlClient`. */
  static readonly layer = Layer.effect(
    RetentionRepo,
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient

      const plannerNames = Object.keys(WORKER_PLANNER_SETTINGS)
      const plannerValues = Object.values(WORKER_PLANNER_SETTINGS)
      /** Sets the planner settings for the rest of the transaction. */
      const indexProbes = sql`SELECT set_config(k, v, true)
        FROM unnest(${plannerNames}::text[], ${plannerValues}::text[]) AS s(k, v)`.unprepared

      const policies = (defaultEventRetentionDays: number | null) =>
        sql<RetentionPolicy>`SELECT o.id::text AS organization_id, s.message_retention_days,
            CASE WHEN s.organization_id IS NULL THEN ${defaultEventRetentionDays}::int4
              ELSE s.event_retention_days END AS event_retention_days
          FROM organizations o LEFT JOIN organization_settings s ON s.organization_id = o.id
          WHERE s.organization_id IS NULL OR s.message_retention_days IS NOT NULL
            OR s.event_retention_days IS NOT NULL
          ORDER BY o.id`.unprepared

      /**
       * Deletes at most `limit` rows of a child table of the sessions; returns
       * how many. The rows are named by their `ctid` (a TID scan), not by their
       * key: `npm run bench -- lifecycle` (issue 40 item 5) measured 35 ms for
       * 10,000 messages this way against 95 ms through a key lookup per row. A
       * row updated while the statement runs (a newer version, another ctid) is
       * left for a later batch; `deleteClosedSessions` deletes no session that
       * still has a message.
       */
      const deleteChildren = (
        child: RetentionTable,
        organizationId: string,
        sessions: ReadonlyArray<string>,
        limit: number
      ) => {
        const table = sql(child)
        return Effect.map(
          sql<{ n: number }>`WITH gone AS (
              DELETE FROM ${table} WHERE organization_id = ${organizationId}::uuid AND ctid = ANY(ARRAY(
                SELECT ctid FROM ${table}
                WHERE organization_id = ${organizationId}::uuid AND session_id = ANY(${sessions}::uuid[])
                LIMIT ${limit}))
              RETURNING 1)
            SELECT count(*)::int AS n FROM gone`.unprepared,
          (rows) => rows[0]?.n ?? 0
        )
      }

      const deleteClosedSessions = (organizationId: string, closedBefore: string) =>
        sql.withTransaction(
          Effect.gen(function* () {
            yield* indexProbes
            const taken = yield* sql<{ id: string; contact_id: string }>`SELECT s.id::text AS id, s.contact_id
              FROM sessions s
              WHERE s.organization_id = ${organizationId}::uuid AND s.status = 'closed'
                AND coalesce(s.updated_at, s.created_at) < ${closedBefore}::timestamptz
                -- D22: a session being erased is its erasure's to delete (the erasure keeps its conversation
                -- until the end: the delivery claim and the erasure's job find the contact's events by it).
                AND s.erasure_id IS NULL
                AND NOT EXISTS (SELECT 1 FROM reply_jobs j WHERE j.organization_id = s.organization_id
                  AND j.session_id = s.id AND j.status = 'running')
                AND NOT EXISTS (SELECT 1 FROM session_schedules x WHERE x.organization_id = s.organization_id
                  AND x.session_id = s.id AND x.status = 'running')
              ORDER BY coalesce(s.updated_at, s.created_at), s.id
              LIMIT ${SESSIONS_PER_BATCH}
              FOR UPDATE OF s SKIP LOCKED`.unprepared
            const deleted: Record<string, number> = {}
            if (taken.length === 0) return { taken: 0, finished: true, deleted }
            const ids = taken.map((row) => row.id)
            let more = false
            for (const child of SESSION_CHILDREN) {
              const n = yield* deleteChildren(child, organizationId, ids, ROWS_PER_BATCH)
              if (n > 0) deleted[child] = n
              // Rows of this table may be left: the next batch takes these sessions again.
              if (n === ROWS_PER_BATCH) more = true
            }
            if (more) return { taken: taken.length, finished: false, deleted }
            const contacts = [...new Set(taken.map((row) => row.contact_id))].sort()
            // The contacts' rows first, in one order (contacts before conversations, as POST /sessions and
            // ingest write them): two sweepers deleting the last sessions of one contact then decide one after
            // the other, and the later sees what the earlier deleted (a conversation is never left without
            // sessions).
            yield* sql`SELECT 1 FROM contacts WHERE organization_id = ${organizationId}::uuid
              AND contact_id = ANY(${contacts}::text[]) ORDER BY contact_id FOR UPDATE`.unprepared
            // A session keeping a message updated while it was deleted (see `deleteChildren`) waits for a later batch.
            const sessions = yield* sql<{ conversation_id: string }>`DELETE FROM sessions s
              WHERE s.organization_id = ${organizationId}::uuid AND s.id = ANY(${ids}::uuid[])
                AND NOT EXISTS (SELECT 1 FROM messages m
                  WHERE m.organization_id = s.organization_id AND m.session_id = s.id)
              RETURNING s.conversation_id::text AS conversation_id`.unprepared
            if (sessions.length > 0) deleted.sessions = sessions.length
            const conversations = [...new Set(sessions.map((row) => row.conversation_id))].sort()
            const goneConversations = yield* sql`DELETE FROM conversations c
              WHERE c.organization_id = ${organizationId}::uuid AND c.id = ANY(${conversations}::uuid[])
                AND NOT EXISTS (SELECT 1 FROM sessions s
                  WHERE s.organization_id = c.organization_id AND s.conversation_id = c.id)
              RETURNING 1`.unprepared
            if (goneConversations.length > 0) deleted.conversations = goneConversations.length
            const goneContacts = yield* sql`DELETE FROM contacts ct
              WHERE ct.organization_id = ${organizationId}::uuid AND ct.contact_id = ANY(${contacts}::text[])
                AND NOT EXISTS (SELECT 1 FROM sessions s
                  WHERE s.organization_id = ct.organization_id AND s.contact_id = ct.contact_id)
              RETURNING 1`.unprepared
            if (goneContacts.length > 0) deleted.contacts = goneContacts.length
            return { taken: taken.length, finished: true, deleted }
          })
        )

      const deleteEvents = (organizationId: string, createdBefore: string) =>
        sql.withTransaction(
          Effect.gen(function* () {
            yield* indexProbes
            const taken = yield* sql<{ id: string }>`SELECT e.id::text AS id FROM events e
              WHERE e.organization_id = ${organizationId}::uuid AND e.created_at < ${createdBefore}::timestamptz
                AND NOT EXISTS (SELECT 1 FROM deliveries d
                  WHERE d.organization_id = e.organization_id AND d.event_id = e.id AND d.status = 'pending')
              ORDER BY e.created_at, e.id
              LIMIT ${EVENTS_PER_BATCH}
              FOR UPDATE OF e SKIP LOCKED`.unprepared
            const deleted: Record<string, number> = {}
            if (taken.length === 0) return { taken: 0, deleted }
            const ids = taken.map((row) => row.id)
            // A delivery made pending since (an admin retry, W5) is not deleted, and keeps its event.
            const deliveries = yield* sql`DELETE FROM deliveries
              WHERE organization_id = ${organizationId}::uuid AND event_id = ANY(${ids}::uuid[]) AND status <> 'pending'
              RETURNING 1`.unprepared
            if (deliveries.length > 0) deleted.deliveries = deliveries.length
            const events = yield* sql`DELETE FROM events e
              WHERE e.organization_id = ${organizationId}::uuid AND e.id = ANY(${ids}::uuid[])
                AND NOT EXISTS (SELECT 1 FROM deliveries d WHERE d.organization_id = e.organization_id AND d.event_id = e.id)
              RETURNING 1`.unprepared
            if (events.length > 0) deleted.events = events.length
            return { taken: taken.length, deleted }
          })
        )

      const autovacuum = Effect.map(
        sql<{ on: boolean }>`SELECT current_setting('autovacuum') = 'on' AS on`,
        (rows) => rows[0]?.on === true
      )

      return RetentionRepo.of({ policies, deleteClosedSessions, deleteEvents, autovacuum })
    })
  )
}
