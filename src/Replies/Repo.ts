/**
 * SQL of the replies domain: durable reply jobs (R1) and session schedules
 * (D15). Both are claimed by workers with `FOR UPDATE SKIP LOCKED` under a
 * lease, so processes sharing a database never run the same job, and a crashed
 * process's jobs become due again when their lease expires.
 *
 * Due times are compared with the application's clock (passed as `now`), not
 * the database's, so tests can drive debounce windows with `TestClock`; with
 * several processes, their clocks are assumed synchronized (NTP).
 */
import { PgClient } from "@effect/sql-pg"
import { Context, Effect, Layer } from "effect"
import type { Statement } from "effect/sql"
import { membersOf, objectJson, sessionJson } from "../Database/Json.ts"
import { isUuid, type JsonObject } from "../Domain/Common.ts"
import { Ids } from "../Shared/Ids.ts"
import { SessionSchedule } from "./Api.ts"
import { type ReplyState, replyAcceptedSql } from "./Rules.ts"

/** The channel workers LISTEN on; a trigger or a new schedule notifies it at commit. */
export const repliesChannel = "parley_replies"

/** A claimed reply job. */
export interface ClaimedJob {
  readonly id: string
  readonly organization_id: string
  readonly session_id: string
  readonly starting_node_id: string | null
  readonly metadata: JsonObject
  readonly triggers: number
  readonly traceparent: string | null
  readonly due_at: Date
  /** Earlier attempts that died of a defect (issue 12 "Poison jobs"). */
  readonly attempts: number
}

/** A claimed schedule. */
export interface ClaimedSchedule {
  readonly id: string
  readonly organization_id: string
  readonly session_id: string
  readonly config:
    | { readonly type: "message"; readonly message: JsonObject }
    | { readonly type: "node"; readonly node_id: string }
  readonly traceparent: string | null
  readonly scheduled_for: Date
  /** Earlier attempts that died of a defect. */
  readonly attempts: number
}

/** The SessionSchedule JSON of the session_schedules row `alias` (D15), its members derived from the schema. */
const scheduleJson = (alias: string) => objectJson(membersOf(SessionSchedule, alias))

/** A reply trigger (R1), as `Rules.replyDue` and the trigger give it. */
export interface NewJob {
  readonly organizationId: string
  readonly sessionId: string
  /** When the job is due: the trigger's moment plus its debounce (R1 trailing debounce). */
  readonly dueAt: Date
  /** R2: the node the run starts from; null keeps a pending job's. */
  readonly startingNodeId: string | null
  /** Merged into a pending job's metadata, then into the reply message's. */
  readonly metadata: JsonObject
  /** The trigger's trace context, JSON text (`Telemetry.currentTraceContext`), or null. */
  readonly traceContext: string | null
  /** Whether to NOTIFY the workers at commit: for jobs due soon (`Rules.replyDue`). */
  readonly notify: boolean
}

/**
 * What a discovery of organizations with due work reads (O11): organizations
 * after `after` (a uuid, the rotation's cursor) first, due at `now`, among the
 * `limit` oldest due rows, at most `organizations` ids.
 */
interface Discovery {
  readonly after: string
  readonly now: Date
  readonly limit: number
  readonly organizations: number
}

const makeRepo = Effect.gen(function* () {
  const sql = yield* PgClient.PgClient
  const { newId } = yield* Ids
  const scheduleJsonFragment = sql.literal(scheduleJson("ss"))
  const sessionJsonFragment = sql.literal(sessionJson("s2", "a2"))
  const acceptedFragment = sql.literal(replyAcceptedSql("s"))

  /**
   * The upsert of a trigger for the session selected by `session` (R1
   * trailing debounce). An update's `updated_at` is the proposed row's
   * `created_at` (this statement's moment): Citus refuses non-IMMUTABLE
   * functions in DO UPDATE SET (O11).
   */
  const upsertJob = (job: NewJob, session: Statement.Fragment) =>
    sql`INSERT INTO reply_jobs (id, organization_id, session_id, status, due_at, starting_node_id, metadata,
          trace_context, created_at)
        SELECT ${newId()}, ${job.organizationId}, t.id, 'pending', ${job.dueAt}, ${job.startingNodeId},
          ${sql.json(job.metadata)}, ${job.traceContext}::jsonb,
          statement_timestamp()
        FROM (${session}) t
        ON CONFLICT (organization_id, session_id) WHERE status = 'pending' DO UPDATE SET
          due_at = EXCLUDED.due_at,
          starting_node_id = coalesce(EXCLUDED.starting_node_id, reply_jobs.starting_node_id),
          metadata = reply_jobs.metadata || EXCLUDED.metadata,
          triggers = reply_jobs.triggers + 1,
          trace_context = coalesce(EXCLUDED.trace_context, reply_jobs.trace_context),
          updated_at = EXCLUDED.created_at`

  /**
   * Wakes the reply workers at commit when the job is due soon (`job.notify`)
   * and the statement wrote it (`queued`): `SELECT pg_notify(...)`, a statement
   * of its own that reads no table, so on Citus it runs on the coordinator,
   * where the workers LISTEN (O11, docs/citus-notes.md (b)).
   */
  const notifyQueued = (job: NewJob, queued: boolean) =>
    job.notify && queued ? sql`SELECT pg_notify(${repliesChannel}, 'job')`.pipe(Effect.asVoid) : Effect.void

  /**
   * Triggers a reply (R1): creates the session's pending job due at `dueAt`, or
   * moves the pending job's due time to `dueAt` (trailing debounce), merging
   * `metadata` and keeping the latest `startingNodeId` given. Workers are
   * notified at commit when `job.notify` (a job due soon; later jobs are found
   * by their 1 s poll; NOTIFY serializes commits, so it is spared when not
   * needed). Joins the caller's transaction.
   */
  const enqueue = (job: NewJob) =>
    sql<{ queued: boolean }>`WITH j AS (${upsertJob(job, sql`SELECT ${job.sessionId}::uuid AS id`)} RETURNING 1)
      SELECT EXISTS (SELECT 1 FROM j) AS queued`.pipe(Effect.flatMap(([row]) => notifyQueued(job, row!.queued)))

  /**
   * POST /reply in one statement (R1, D7; measured by `npm run bench --
   * replies`): locks the session for share, reads what D7 checks, triggers the
   * job only when `Rules.replyAcceptedSql` holds (the SQL form of
   * `Rules.replyRefusal`, written from the same checks: open, an AI agent, a
   * thread), and returns the checked state with the session's wire JSON
   * (`body`); undefined when the session is not in the organization.
   */
  const reply = (job: NewJob) =>
    isUuid(job.sessionId)
      ? sql<ReplyState & { readonly body: string; readonly queued: boolean }>`
          WITH s AS (
            SELECT s.id, s.status, s.agent_id, a.type AS agent_type, s.thread_id FROM sessions s
            LEFT JOIN agents a ON a.organization_id = s.organization_id AND a.id = s.agent_id
            WHERE s.id = ${job.sessionId} AND s.organization_id = ${job.organizationId} AND s.erasure_id IS NULL
            FOR SHARE OF s
          ), j AS (
            ${upsertJob(job, sql`SELECT s.id FROM s WHERE ${acceptedFragment}`)}
            RETURNING 1
          )
          SELECT s.status, s.agent_id, s.agent_type, s.thread_id, EXISTS (SELECT 1 FROM j) AS queued,
            ${sessionJsonFragment}::text AS body
          FROM s JOIN sessions s2 ON s2.organization_id = ${job.organizationId} AND s2.id = s.id
          LEFT JOIN agents a2 ON a2.organization_id = s2.organization_id AND a2.id = s2.agent_id`.pipe(
          Effect.flatMap(([row]) => {
            if (row === undefined) return Effect.succeed(undefined)
            const { queued, ...state } = row
            return Effect.as(notifyQueued(job, queued), state)
          })
        )
      : Effect.succeed(undefined)

  /**
   * Up to `organizations` ids of organizations with reply jobs to claim (R1,
   * O11), those after `after` first in id order, then the others (a
   * rotation, `Database/Workers.ts` `makeOrganizationRotation`): the
   * organizations of the `limit` pending jobs due first at `now` whose
   * session has no running job (the jobs {@link claimJobs} takes), so an
   * organization is found at the latest when its oldest due job is among the
   * `limit` oldest of all. No row locks: on Citus one multi-shard SELECT.
   */
  const discoverJobs = (options: Discovery) =>
    sql<{ organization_id: string }>`SELECT w.organization_id::text AS organization_id FROM (
        SELECT j.organization_id FROM reply_jobs j
        WHERE j.status = 'pending' AND j.due_at <= ${options.now}
          AND NOT EXISTS (SELECT 1 FROM reply_jobs r WHERE r.organization_id = j.organization_id
            AND r.session_id = j.session_id AND r.status = 'running')
        ORDER BY j.due_at
        LIMIT ${options.limit}
      ) w
      GROUP BY w.organization_id
      ORDER BY w.organization_id <= ${options.after}::uuid, w.organization_id
      LIMIT ${options.organizations}`.pipe(Effect.map((rows) => rows.map((row) => row.organization_id)))

  /**
   * Claims up to `limit` due pending jobs (R1) of the organization
   * `organizationId` under a lease until `now + leaseMs`, oldest due first,
   * skipping rows other workers hold (`FOR UPDATE SKIP LOCKED`) and sessions
   * whose previous job still runs (turns of one session never overlap). One
   * organization per statement (O11): on Citus a router statement, where
   * row locks work; a job and its session's jobs are rows of one
   * organization, so R1's once-only run holds as on one server. The
   * organizations come from {@link discoverJobs}.
   */
  const claimJobs = (options: {
    readonly organizationId: string
    readonly workerId: string
    readonly now: Date
    readonly leaseMs: number
    readonly limit: number
  }) =>
    sql<ClaimedJob>`
      WITH due AS (
        SELECT j.organization_id, j.id FROM reply_jobs j
        WHERE j.organization_id = ${options.organizationId} AND j.status = 'pending' AND j.due_at <= ${options.now}
          AND NOT EXISTS (SELECT 1 FROM reply_jobs r WHERE r.organization_id = ${options.organizationId}
            AND r.session_id = j.session_id AND r.status = 'running')
        ORDER BY j.due_at
        LIMIT ${options.limit}
        FOR UPDATE OF j SKIP LOCKED
      )
      UPDATE reply_jobs j SET status = 'running', leased_by = ${options.workerId},
        lease_until = ${new Date(options.now.getTime() + options.leaseMs)}
      FROM due WHERE j.organization_id = ${options.organizationId} AND j.id = due.id
      RETURNING j.id, j.organization_id, j.session_id, j.starting_node_id, j.metadata, j.triggers,
        j.trace_context->>'traceparent' AS traceparent, j.due_at, j.attempts`

  /**
   * The distinct organizations of the reply jobs `held` selects (a condition
   * over `reply_jobs`), without row locks: on Citus one multi-shard SELECT,
   * before the per-organization statements that lock (O11).
   */
  const organizationsOfJobs = (held: Statement.Fragment) =>
    sql<{ organization_id: string }>`SELECT DISTINCT organization_id::text AS organization_id FROM reply_jobs
      WHERE ${held}`.pipe(Effect.map((rows) => rows.map((row) => row.organization_id)))

  /**
   * Makes running jobs whose lease expired (a crashed or stuck process) due
   * again: back to pending, or dropped when the session already has a pending
   * job (which will answer the same history). Organization by organization
   * (O11): the organizations with expired jobs are read without locks, then
   * each one's jobs are locked (`FOR UPDATE SKIP LOCKED`, a router statement
   * on Citus) and given back; all of them, as expired leases are few.
   */
  const recoverJobs = (now: Date) =>
    Effect.flatMap(organizationsOfJobs(sql`status = 'running' AND lease_until < ${now}`), (organizations) =>
      Effect.forEach(
        organizations,
        (organizationId) =>
          sql`WITH expired AS (
          SELECT j.organization_id, j.id, j.session_id FROM reply_jobs j
          WHERE j.organization_id = ${organizationId} AND j.status = 'running' AND j.lease_until < ${now}
          FOR UPDATE SKIP LOCKED
        ), dropped AS (
          DELETE FROM reply_jobs j USING expired e
          WHERE j.organization_id = ${organizationId} AND j.id = e.id AND EXISTS (SELECT 1 FROM reply_jobs p
            WHERE p.organization_id = ${organizationId} AND p.session_id = e.session_id AND p.status = 'pending')
          RETURNING j.id
        )
        UPDATE reply_jobs j SET status = 'pending', leased_by = NULL, lease_until = NULL, due_at = ${now}
        FROM expired e WHERE j.organization_id = ${organizationId} AND j.id = e.id AND j.id NOT IN (SELECT id FROM dropped)`,
        { discard: true }
      )
    )

  /**
   * Completes a claimed job: deletes it if this worker still holds it. Run in
   * the transaction that writes the reply, so a reply is written only by the
   * job's holder (exactly once, R1). Returns whether the job was held.
   */
  const completeJob = (organizationId: string, jobId: string, workerId: string) =>
    sql<{ id: string }>`DELETE FROM reply_jobs
      WHERE organization_id = ${organizationId} AND id = ${jobId} AND leased_by = ${workerId} AND status = 'running'
      RETURNING id`.pipe(Effect.map((rows) => rows.length > 0))

  /**
   * Gives a claimed job back for another attempt at `dueAt` after its run
   * died (issue 12 "Poison jobs"), if this worker still holds it: back to
   * pending, its attempts counted when `counted` (a database outage is not the
   * job's fault), the defect kept in `last_error`; dropped instead when the
   * session already has a newer pending job, which will answer the same
   * history. Returns whether the job was held.
   */
  const retryJob = (options: {
    readonly organizationId: string
    readonly jobId: string
    readonly workerId: string
    readonly dueAt: Date
    readonly error: string
    readonly counted: boolean
  }) =>
    sql<{ id: string }>`WITH mine AS (
          SELECT organization_id, id, session_id FROM reply_jobs
          WHERE organization_id = ${options.organizationId} AND id = ${options.jobId} AND leased_by = ${options.workerId} AND status = 'running' FOR UPDATE
        ), dropped AS (
          DELETE FROM reply_jobs j USING mine m
          WHERE j.organization_id = m.organization_id AND j.id = m.id AND EXISTS (SELECT 1 FROM reply_jobs p
            WHERE p.organization_id = m.organization_id AND p.session_id = m.session_id AND p.status = 'pending')
          RETURNING j.id
        ), retried AS (
          UPDATE reply_jobs j SET status = 'pending', leased_by = NULL, lease_until = NULL, due_at = ${options.dueAt},
            attempts = j.attempts + ${options.counted ? 1 : 0}, last_error = ${options.error},
            updated_at = statement_timestamp()
          FROM mine m WHERE j.organization_id = m.organization_id AND j.id = m.id AND j.id NOT IN (SELECT id FROM dropped)
          RETURNING j.id
        )
        SELECT id FROM dropped UNION ALL SELECT id FROM retried`.pipe(Effect.map((rows) => rows.length > 0))

  /**
   * O5: gives back this worker's running jobs, due now (or dropped when a newer
   * pending job exists for the session). Organization by organization (O11),
   * as {@link recoverJobs}.
   */
  const releaseJobs = (workerId: string, now: Date) =>
    Effect.flatMap(organizationsOfJobs(sql`leased_by = ${workerId} AND status = 'running'`), (organizations) =>
      Effect.forEach(
        organizations,
        (organizationId) =>
          sql`WITH mine AS (
          SELECT organization_id, id, session_id FROM reply_jobs
          WHERE organization_id = ${organizationId} AND leased_by = ${workerId} AND status = 'running' FOR UPDATE
        ), dropped AS (
          DELETE FROM reply_jobs j USING mine m
          WHERE j.organization_id = ${organizationId} AND j.id = m.id AND EXISTS (SELECT 1 FROM reply_jobs p
            WHERE p.organization_id = ${organizationId} AND p.session_id = m.session_id AND p.status = 'pending')
          RETURNING j.id
        )
        UPDATE reply_jobs j SET status = 'pending', leased_by = NULL, lease_until = NULL, due_at = ${now}
        FROM mine m WHERE j.organization_id = ${organizationId} AND j.id = m.id AND j.id NOT IN (SELECT id FROM dropped)`,
        { discard: true }
      )
    )

  /** The earliest due time of pending jobs and schedules (in scope), if any. */
  const nextDue = sql<{ due: Date | null }>`SELECT least(
        (SELECT min(due_at) FROM reply_jobs WHERE status = 'pending'),
        (SELECT min(coalesce(retry_at, scheduled_for)) FROM session_schedules WHERE status = 'pending')
      ) AS due`.pipe(Effect.map((rows) => rows[0]?.due ?? null))

  /** Inserts a pending schedule (D15) and notifies workers; returns its wire JSON. */
  const insertSchedule = (schedule: {
    readonly organizationId: string
    readonly sessionId: string
    /** ISO 8601 text: PostgreSQL reads it to the microsecond. */
    readonly scheduledFor: string
    readonly config: JsonObject
    readonly traceContext: string | null
  }) =>
    sql<{ body: string }>`WITH ss AS (
        INSERT INTO session_schedules (id, organization_id, session_id, scheduled_for, config, status, trace_context,
          created_at)
        VALUES (${newId()}, ${schedule.organizationId}, ${schedule.sessionId}, ${schedule.scheduledFor},
          ${sql.json(schedule.config)}, 'pending',
          ${schedule.traceContext}::jsonb, statement_timestamp())
        RETURNING *
      )
      SELECT ${scheduleJsonFragment}::text AS body FROM ss`.pipe(
      Effect.tap(() => sql`SELECT pg_notify(${repliesChannel}, 'schedule')`),
      Effect.map((rows) => rows[0]!.body)
    )

  /** Every schedule of the session, oldest first, as a JSON array text (D15). */
  const listSchedules = (organizationId: string, sessionId: string) =>
    sql<{ body: string }>`SELECT ${scheduleJsonFragment}::text AS body FROM session_schedules ss
      WHERE ss.organization_id = ${organizationId} AND ss.session_id = ${sessionId} ORDER BY ss.created_at, ss.id`.pipe(
      Effect.map((rows) => `[${rows.map((row) => row.body).join(",")}]`)
    )

  /** The status of a schedule of the session, if it exists. */
  const scheduleStatus = (organizationId: string, sessionId: string, scheduleId: string) =>
    sql<{ status: string }>`SELECT status FROM session_schedules
      WHERE organization_id = ${organizationId} AND id = ${scheduleId} AND session_id = ${sessionId}`.pipe(
      Effect.map((rows) => rows[0]?.status)
    )

  /** Cancels a pending schedule; returns whether it was pending (D15). */
  const cancelSchedule = (organizationId: string, sessionId: string, scheduleId: string) =>
    sql<{ id: string }>`UPDATE session_schedules SET status = 'canceled'
      WHERE organization_id = ${organizationId} AND id = ${scheduleId} AND session_id = ${sessionId} AND status = 'pending' RETURNING id`.pipe(
      Effect.map((rows) => rows.length > 0)
    )

  /**
   * Up to `organizations` ids of organizations with schedules due at `now`
   * (D15, O11), like {@link discoverJobs}: the organizations of the `limit`
   * pending schedules due first, those after `after` first. No row locks.
   */
  const discoverSchedules = (options: Discovery) =>
    sql<{ organization_id: string }>`SELECT w.organization_id::text AS organization_id FROM (
        SELECT organization_id FROM session_schedules
        WHERE status = 'pending' AND coalesce(retry_at, scheduled_for) <= ${options.now}
        ORDER BY coalesce(retry_at, scheduled_for)
        LIMIT ${options.limit}
      ) w
      GROUP BY w.organization_id
      ORDER BY w.organization_id <= ${options.after}::uuid, w.organization_id
      LIMIT ${options.organizations}`.pipe(Effect.map((rows) => rows.map((row) => row.organization_id)))

  /**
   * Claims up to `limit` due pending schedules of the organization under a
   * lease (D15), like {@link claimJobs}: one organization per statement
   * (O11), organizations from {@link discoverSchedules}.
   */
  const claimSchedules = (options: {
    readonly organizationId: string
    readonly workerId: string
    readonly now: Date
    readonly leaseMs: number
    readonly limit: number
  }) =>
    sql<ClaimedSchedule>`
      WITH due AS (
        SELECT organization_id, id FROM session_schedules
        WHERE organization_id = ${options.organizationId} AND status = 'pending'
          AND coalesce(retry_at, scheduled_for) <= ${options.now}
        ORDER BY coalesce(retry_at, scheduled_for)
        LIMIT ${options.limit}
        FOR UPDATE SKIP LOCKED
      )
      UPDATE session_schedules ss SET status = 'running', leased_by = ${options.workerId},
        lease_until = ${new Date(options.now.getTime() + options.leaseMs)}
      FROM due WHERE ss.organization_id = ${options.organizationId} AND ss.id = due.id
      RETURNING ss.id, ss.organization_id, ss.session_id, ss.config, ss.trace_context->>'traceparent' AS traceparent,
        ss.scheduled_for, ss.attempts`

  /**
   * Records a claimed schedule's outcome if this worker still holds it;
   * returns whether it did. Joins the caller's transaction.
   */
  const finishSchedule = (
    organizationId: string,
    scheduleId: string,
    workerId: string,
    status: "done" | "failed" | "canceled",
    error: string | null
  ) =>
    sql<{ id: string }>`UPDATE session_schedules SET status = ${status}, error = ${error},
        executed_at = statement_timestamp(), leased_by = NULL, lease_until = NULL
      WHERE organization_id = ${organizationId} AND id = ${scheduleId} AND leased_by = ${workerId}
        AND status = 'running' RETURNING id`.pipe(Effect.map((rows) => rows.length > 0))

  /**
   * Gives a claimed schedule back for another attempt at `retryAt` after its
   * run died (issue 12 "Poison jobs"), if this worker still holds it;
   * `scheduled_for` keeps the moment the client asked for. Returns whether it
   * was held.
   */
  const retrySchedule = (options: {
    readonly organizationId: string
    readonly scheduleId: string
    readonly workerId: string
    readonly retryAt: Date
    readonly error: string
    readonly counted: boolean
  }) =>
    sql<{ id: string }>`UPDATE session_schedules SET status = 'pending', leased_by = NULL, lease_until = NULL,
        retry_at = ${options.retryAt}, attempts = attempts + ${options.counted ? 1 : 0}, error = ${options.error}
      WHERE organization_id = ${options.organizationId} AND id = ${options.scheduleId} AND leased_by = ${options.workerId} AND status = 'running'
      RETURNING id`.pipe(Effect.map((rows) => rows.length > 0))

  /** Makes running schedules whose lease expired, or this worker's on shutdown (O5), pending again. */
  const releaseSchedules = (options: { readonly workerId?: string; readonly expiredBefore?: Date }) =>
    sql`UPDATE session_schedules SET status = 'pending', leased_by = NULL, lease_until = NULL
      WHERE status = 'running' AND ${
        options.workerId !== undefined
          ? sql`leased_by = ${options.workerId}`
          : sql`lease_until < ${options.expiredBefore!}`
      }`.pipe(Effect.asVoid)

  /**
   * The id and status of a session of the organization (D1, D5), locked for
   * share inside a transaction so it cannot close before the caller's insert
   * (schedules, D15); undefined when it is not in the organization.
   */
  const sessionState = (organizationId: string, sessionId: string) =>
    isUuid(sessionId)
      ? sql<{ readonly id: string; readonly status: string }>`
          SELECT s.id, s.status FROM sessions s
          WHERE s.id = ${sessionId} AND s.organization_id = ${organizationId} AND s.erasure_id IS NULL
          FOR SHARE OF s`.pipe(Effect.map((rows) => rows[0]))
      : Effect.succeed(undefined)

  return {
    /** Runs `effect` in one transaction, which the statements above join; fails with its SqlError too. */
    withTransaction: <A, E, R>(effect: Effect.Effect<A, E, R>) => sql.withTransaction(effect),
    sessionState,
    enqueue,
    reply,
    discoverJobs,
    claimJobs,
    recoverJobs,
    completeJob,
    retryJob,
    releaseJobs,
    nextDue,
    insertSchedule,
    listSchedules,
    scheduleStatus,
    cancelSchedule,
    discoverSchedules,
    claimSchedules,
    finishSchedule,
    retrySchedule,
    releaseSchedules
  }
})

/** The replies repository (SQL only; see module docs). */
export class RepliesRepo extends Context.Service<RepliesRepo, Effect.Success<typeof makeRepo>>()(
  "parley/Replies/RepliesRepo"
) {
  /** Over PostgreSQL. Requires `PgClient` and `Ids`. */
  static readonly layer = Layer.effect(RepliesRepo, makeRepo)
}
