/**
 * SQL of the sessions domain: contacts, conversations, sessions and their
 * outbox events. Rows come back as wire JSON text built by PostgreSQL
 * (`Database/Json.ts`). Every query filters by organization.
 *
 * Times are `statement_timestamp()`, not `now()`: a statement that waited for a
 * row lock is stamped after the change it waited for, so timestamps follow the
 * order in which changes took effect (a session's close is later than every
 * message committed before it).
 */
import { PgClient } from "@effect/sql-pg"
import { Context, Effect, Layer, Option, Schema } from "effect"
import { type SqlError, SqlSchema } from "effect/sql"
import type { WithTransaction } from "../Database/Database.ts"
import {
  columnsOf,
  conversationJson,
  immutableRendering,
  jsonColumnText,
  sessionJson,
  sessionMembers
} from "../Database/Json.ts"
import { fixedStatement } from "../Database/Statement.ts"
import type { AgentRef } from "../Domain/Agent.ts"
import type { JsonObject } from "../Domain/Common.ts"
import { isUuid } from "../Domain/Common.ts"
import type { EventType } from "../Domain/EventType.ts"
import { Session, type SessionStatus } from "../Domain/Session.ts"
import { insertEvents, notifyDeliveriesIf, wroteSubscribedSql } from "../Outbox/Outbox.ts"
import { Ids } from "../Shared/Ids.ts"
import { currentTraceContext } from "../Telemetry/Telemetry.ts"

/** The columns of a session that its rules read, locked for update. */
export interface SessionState {
  readonly organization_id: string
  readonly id: string
  readonly status: SessionStatus
  readonly agent_id: string | null
  readonly thread_id: string | null
}

/** One event about a session: its type and, for finished/closed, the `action` (W1). */
export interface SessionEvent {
  readonly type: EventType
  readonly action?: string | null
}

/** What an AI run needs of its session (R2). */
export interface RunState {
  readonly id: string
  readonly status: SessionStatus
  readonly agent_type: "ai" | "human" | null
  readonly assistant_id: string | null
  readonly current_node_id: string | null
}

/** Filters of POST /sessions/search (D2). */
export interface SessionSearch {
  readonly contactId?: string | undefined
  readonly status?: SessionStatus | undefined
  readonly metadata?: JsonObject | undefined
  readonly offset: number
  readonly limit: number
}

/**
 * The contact write of D8, as SQL text over expressions: creates the contact,
 * or sets the name and phone given (null keeps) when they differ; an unchanged
 * contact is not written at all. `when` adds a condition (ingest's D10
 * duplicate). Used by POST /sessions and by ingest's statement. An update's
 * `updated_at` is the proposed row's `created_at` (this statement's moment):
 * Citus refuses non-IMMUTABLE functions in DO UPDATE SET (O11).
 */
export const upsertContactSql = (p: {
  readonly organizationId: string
  readonly contactId: string
  readonly name: string
  readonly phone: string
  readonly when?: string | undefined
}) => `INSERT INTO contacts (organization_id, contact_id, name, phone, created_at)
  SELECT ${p.organizationId}, ${p.contactId}, ${p.name}, ${p.phone}, statement_timestamp()
  WHERE ${p.when ?? "true"} AND NOT EXISTS (
    SELECT 1 FROM contacts WHERE organization_id = ${p.organizationId} AND contact_id = ${p.contactId}
      AND (${p.name} IS NULL OR name = ${p.name}) AND (${p.phone} IS NULL OR phone = ${p.phone}))
  ON CONFLICT (organization_id, contact_id) DO UPDATE
    SET name = coalesce(EXCLUDED.name, contacts.name), phone = coalesce(EXCLUDED.phone, contacts.phone),
      updated_at = EXCLUDED.created_at
    WHERE (EXCLUDED.name IS NOT NULL AND EXCLUDED.name IS DISTINCT FROM contacts.name)
      OR (EXCLUDED.phone IS NOT NULL AND EXCLUDED.phone IS DISTINCT FROM contacts.phone)`

/**
 * CTEs finding or creating the conversation of (organization, contact,
 * channel) (D8) with its conversation.created event (W1): `c0` the existing
 * one, `c1` the one created (with id `p.id`), `ce` its event, `c` the
 * conversation with `created`. The channel `("", "")` is "no channel" (POST
 * /sessions). Used by POST /sessions and by ingest's statement.
 */
export const conversationCtes = (p: {
  readonly id: string
  readonly organizationId: string
  readonly contactId: string
  readonly channelType: string
  readonly channelTo: string
  readonly eventId: string
  readonly traceContext: string
}) => `c0 AS (
  SELECT id FROM conversations
  WHERE organization_id = ${p.organizationId} AND contact_id = ${p.contactId} AND channel_type = ${p.channelType}
    AND channel_to = ${p.channelTo}
), c1 AS (
  -- A concurrent call that created it first (POST /sessions takes no lock): its row is returned, not created.
  INSERT INTO conversations (id, organization_id, contact_id, channel_type, channel_to, created_at)
  SELECT ${p.id}, ${p.organizationId}, ${p.contactId}, ${p.channelType}, ${p.channelTo}, statement_timestamp()
  WHERE NOT EXISTS (SELECT 1 FROM c0)
  ON CONFLICT (organization_id, contact_id, channel_type, channel_to) DO UPDATE SET contact_id = EXCLUDED.contact_id
  RETURNING *, (xmax = 0) AS inserted
), ce AS (
  ${insertEvents({
    id: "ev.id",
    type: "'conversation.created'",
    organizationId: "cn.organization_id",
    conversationId: "cn.id",
    at: "cn.created_at",
    object: conversationJson("cn"),
    traceContext: p.traceContext,
    from: `c1 cn CROSS JOIN (SELECT ${p.eventId} AS id) ev`,
    where: "cn.inserted"
  })}
), c AS (
  SELECT id, false AS created FROM c0 UNION ALL SELECT id, inserted FROM c1
)`

/** SQL expressions of a new session (see {@link openSessionCtes}). */
export interface SessionRow {
  readonly id: string
  readonly organizationId: string
  readonly conversationId: string
  readonly contactId: string
  /** The name given, else (null) the contact's. */
  readonly contactName: string
  readonly threadId: string
  readonly status: string
  readonly agentId: string
  /** jsonb. */
  readonly metadata: string
  readonly eventId: string
  readonly traceContext: string
}

/**
 * CTEs `s` (the new session, stamped `statement_timestamp()`) and `se` (its
 * session.created event carrying its agent: W1), for POST /sessions and
 * ingest's statement. The one owner of how a session row is created.
 */
export const openSessionCtes = (row: SessionRow) => `s AS (
  INSERT INTO sessions (id, organization_id, conversation_id, contact_id, contact_name, thread_id, status, agent_id,
    metadata, created_at)
  SELECT ${row.id}, ${row.organizationId}, ${row.conversationId}, ${row.contactId},
    coalesce(${row.contactName}, (SELECT name FROM contacts WHERE organization_id = ${row.organizationId}
      AND contact_id = ${row.contactId})),
    ${row.threadId}, ${row.status}, ${row.agentId}, ${row.metadata}, statement_timestamp()
  RETURNING *
), se AS (
  ${insertEvents({
    id: "ev.id",
    type: "'session.created'",
    organizationId: "s.organization_id",
    conversationId: "s.conversation_id",
    at: "s.created_at",
    object: sessionJson("s", "a"),
    traceContext: row.traceContext,
    // The organization's agents as a subquery filtered by the parameter: on Citus `s` (an INSERT CTE)
    // is an intermediate result, and a join on its column read every organization's agents (O11).
    from: `s LEFT JOIN (SELECT * FROM agents WHERE organization_id = ${row.organizationId}) a ON a.id = s.agent_id
      CROSS JOIN (SELECT ${row.eventId} AS id) ev`
  })}
)`

/**
 * POST /sessions (D8, W1): the contact, the contact's channel-less
 * conversation (with conversation.created when new) and the session with
 * session.created, in one statement.
 */
const createStatement = fixedStatement(
  {
    organizationId: "uuid",
    contactId: "text",
    contactName: "text",
    conversationId: "uuid",
    conversationEventId: "uuid",
    sessionId: "uuid",
    threadId: "uuid?",
    status: "text",
    agentId: "uuid?",
    metadata: "json",
    sessionEventId: "uuid",
    traceContext: "jsonb?"
  },
  (p) => `WITH ct AS (
  ${upsertContactSql({ organizationId: p.organizationId, contactId: p.contactId, name: p.contactName, phone: "NULL::text" })}
), ${conversationCtes({
    id: p.conversationId,
    organizationId: p.organizationId,
    contactId: p.contactId,
    channelType: "''",
    channelTo: "''",
    eventId: p.conversationEventId,
    traceContext: p.traceContext
  })}, ${openSessionCtes({
    id: p.sessionId,
    organizationId: p.organizationId,
    conversationId: "(SELECT id FROM c)",
    contactId: p.contactId,
    contactName: p.contactName,
    threadId: p.threadId,
    status: p.status,
    agentId: p.agentId,
    metadata: p.metadata,
    eventId: p.sessionEventId,
    traceContext: p.traceContext
  })}
SELECT (SELECT id FROM s) AS id, ${wroteSubscribedSql(["ce", "se"], p.organizationId)} AS subscribed`
)

/**
 * The events of one change of a session (W1), each with the session as it is
 * now in the transaction, at the moment the change stamped (`updated_at`, set
 * by `update` just before). On Citus this `INSERT ... SELECT` from the
 * organization's tables is pushed down whole to its worker, where one
 * non-IMMUTABLE function made the shard's statement fail ("missing
 * FROM-clause entry for table events", Citus 13.2; O11): so the moment is a
 * column, not `statement_timestamp()`, and the session and the envelope are
 * rendered by IMMUTABLE functions (`Database/Json.ts` `immutableRendering`).
 */
const sessionEventsStatement = fixedStatement(
  {
    organizationId: "uuid",
    sessionId: "uuid",
    ids: "uuid[]",
    types: "text[]",
    actions: "text[]",
    traceContext: "jsonb?"
  },
  (p) => `WITH w AS (
  ${insertEvents({
    id: "e.id",
    type: "e.type",
    organizationId: "s.organization_id",
    conversationId: "s.conversation_id",
    at: "s.updated_at",
    object: `CASE WHEN e.type IN ('session.finished', 'session.closed')
      THEN ${sessionJson("s", "a", "e.action", immutableRendering)}
      ELSE ${sessionJson("s", "a", undefined, immutableRendering)} END`,
    rendering: immutableRendering,
    traceContext: p.traceContext,
    from: `sessions s LEFT JOIN agents a ON a.organization_id = s.organization_id AND a.id = s.agent_id
      CROSS JOIN LATERAL (SELECT u.id, u.type, nullif(u.action_text, '') AS action, u.ordinal
        FROM unnest(${p.ids}, ${p.types}, ${p.actions}) WITH ORDINALITY AS u(id, type, action_text, ordinal)) e`,
    where: `s.organization_id = ${p.organizationId} AND s.id = ${p.sessionId}`,
    orderBy: "e.ordinal"
  })}
)
SELECT ${wroteSubscribedSql(["w"], p.organizationId)} AS subscribed`
)

const decodeSessions = Schema.decodeUnknownEffect(Schema.Array(Session))

const makeRepo: Effect.Effect<SessionsRepo["Service"], never, PgClient.PgClient | Ids> = Effect.gen(function* () {
  const sql = yield* PgClient.PgClient
  const { newId } = yield* Ids
  const sessionColumns = sql.literal(columnsOf(sessionMembers("s", "a")))

  /** The agent `agentId` of the organization, if any and not deleted (D6; issue 39 item 6). */
  const findAgent = (organizationId: string, agentId: string) =>
    isUuid(agentId)
      ? sql<AgentRef>`SELECT id, type FROM agents
          WHERE id = ${agentId} AND organization_id = ${organizationId} AND deleted_at IS NULL`.pipe(
          Effect.map((rows) => rows[0])
        )
      : Effect.succeed(undefined)

  /**
   * POST /sessions in one statement ({@link createStatement}): contact,
   * conversation and session with their events. Returns nothing; the caller
   * reads the session.
   */
  const create = (row: NewSession) =>
    Effect.flatMap(currentTraceContext, (traceContext) =>
      createStatement.run<{ subscribed: boolean }>(sql, {
        organizationId: row.organizationId,
        contactId: row.contactId,
        contactName: row.contactName,
        conversationId: newId(),
        conversationEventId: newId(),
        sessionId: row.id,
        threadId: row.threadId,
        status: row.status,
        agentId: row.agentId,
        metadata: jsonColumnText(row.metadata),
        sessionEventId: newId(),
        traceContext
      })
    ).pipe(Effect.flatMap(([written]) => notifyDeliveriesIf(sql, written?.subscribed === true, row.organizationId)))

  /** The session, decoded, if it exists in the organization (D1). */
  const find = (organizationId: string, sessionId: string) =>
    isUuid(sessionId)
      ? findSession({ organizationId, sessionId }).pipe(Effect.map(Option.getOrUndefined))
      : Effect.succeed(undefined)
  const findSession = SqlSchema.findOneOption({
    Request: Schema.Struct({ organizationId: Schema.String, sessionId: Schema.String }),
    Result: Session,
    execute: ({ organizationId, sessionId }) => sql`SELECT ${sessionColumns}
      FROM sessions s LEFT JOIN agents a ON a.organization_id = s.organization_id AND a.id = s.agent_id
      WHERE s.id = ${sessionId} AND s.organization_id = ${organizationId} AND s.erasure_id IS NULL`
  })

  /** Locks the session row for update (inside a transaction) and reads its state. */
  const lock = (organizationId: string, sessionId: string) =>
    isUuid(sessionId)
      ? sql<SessionState>`SELECT organization_id, id, status, agent_id, thread_id FROM sessions
          WHERE id = ${sessionId} AND organization_id = ${organizationId} AND erasure_id IS NULL FOR UPDATE`.pipe(
          Effect.map((rows) => rows[0])
        )
      : Effect.succeed(undefined)

  /** Applies changed columns to a session and stamps `updated_at`. */
  const update = (organizationId: string, sessionId: string, fields: SessionUpdate) => {
    const set: Record<string, unknown> = {}
    if (fields.status !== undefined) set.status = fields.status
    if (fields.agentId !== undefined) set.agent_id = fields.agentId
    if (fields.threadId !== undefined) set.thread_id = fields.threadId
    if (fields.metadata !== undefined) set.metadata = jsonColumnText(fields.metadata)
    if (fields.endingSurveySubmissionId !== undefined) set.ending_survey_submission_id = fields.endingSurveySubmissionId
    return sql`UPDATE sessions SET ${sql.update(set)}, updated_at = statement_timestamp()
      WHERE organization_id = ${organizationId} AND id = ${sessionId}`.pipe(Effect.asVoid)
  }

  /** Writes the session's events (W1, W2; see {@link sessionEventsStatement}). */
  const writeEvents = Effect.fnUntraced(function* (
    organizationId: string,
    sessionId: string,
    events: ReadonlyArray<SessionEvent>
  ) {
    if (events.length === 0) return
    const traceContext = yield* currentTraceContext
    const [row] = yield* sessionEventsStatement.run<{ subscribed: boolean }>(sql, {
      organizationId,
      sessionId,
      ids: events.map(() => newId()),
      types: events.map((event) => event.type),
      actions: events.map((event) => event.action ?? ""),
      traceContext
    })
    yield* notifyDeliveriesIf(sql, row?.subscribed === true, organizationId)
  })

  /** Sessions matching `search`, newest first (D2), decoded. */
  const search = (organizationId: string, search: SessionSearch) => {
    // D22: the sessions of a contact being erased are not readable.
    const conditions = [sql`s.organization_id = ${organizationId}`, sql`s.erasure_id IS NULL`]
    if (search.contactId !== undefined) conditions.push(sql`s.contact_id = ${search.contactId}`)
    if (search.status !== undefined) conditions.push(sql`s.status = ${search.status}`)
    if (search.metadata !== undefined)
      // The GIN index is on metadata::jsonb (migration 0018).
      conditions.push(sql`s.metadata::jsonb @> ${sql.json(search.metadata)}`)
    return sql`SELECT ${sessionColumns}
      FROM sessions s LEFT JOIN agents a ON a.organization_id = s.organization_id AND a.id = s.agent_id
      WHERE ${sql.and(conditions)}
      ORDER BY s.created_at DESC, s.id DESC
      LIMIT ${search.limit} OFFSET ${search.offset}`.pipe(Effect.flatMap(decodeSessions))
  }

  /**
   * Open sessions idle past their organization's `session_idle_timeout_seconds`
   * (D16): no message and no creation within the timeout. At most `limit`.
   */
  const idleSessions = (limit: number) =>
    sql<{ id: string; organization_id: string }>`
      SELECT s.id, s.organization_id FROM organization_settings os
      JOIN sessions s ON s.organization_id = os.organization_id AND s.status = 'open' AND s.erasure_id IS NULL
        AND s.created_at < statement_timestamp() - make_interval(secs => os.session_idle_timeout_seconds)
      WHERE os.session_idle_timeout_seconds IS NOT NULL
        AND NOT EXISTS (SELECT 1 FROM messages m WHERE m.organization_id = s.organization_id AND m.session_id = s.id
          AND m.created_at >= statement_timestamp() - make_interval(secs => os.session_idle_timeout_seconds))
      LIMIT ${limit}`

  /** Whether the (locked) session is still idle past its organization's timeout (D16). */
  const isIdle = (organizationId: string, sessionId: string) =>
    sql<{ idle: boolean }>`
      SELECT coalesce(os.session_idle_timeout_seconds IS NOT NULL
        AND s.created_at < statement_timestamp() - make_interval(secs => os.session_idle_timeout_seconds)
        AND NOT EXISTS (SELECT 1 FROM messages m WHERE m.organization_id = s.organization_id AND m.session_id = s.id
          AND m.created_at >= statement_timestamp() - make_interval(secs => os.session_idle_timeout_seconds)), false) AS idle
      FROM sessions s LEFT JOIN organization_settings os ON os.organization_id = s.organization_id
      WHERE s.organization_id = ${organizationId} AND s.id = ${sessionId}`.pipe(
      Effect.map((rows) => rows[0]?.idle === true)
    )

  /** What a run needs of its session (R2): status, its agent's type and assistant, the current node. */
  const runState = (organizationId: string, sessionId: string) =>
    sql<RunState>`SELECT s.id, s.status, a.type AS agent_type, a.assistant_id, s.current_node_id
      FROM sessions s LEFT JOIN agents a ON a.organization_id = s.organization_id AND a.id = s.agent_id
      WHERE s.id = ${sessionId} AND s.organization_id = ${organizationId} AND s.erasure_id IS NULL`.pipe(
      Effect.map((rows) => rows[0])
    )

  /** Sets the node the session's next turn starts from (R2 `next_node`). */
  const setCurrentNode = (organizationId: string, sessionId: string, nodeId: string | null) =>
    sql`UPDATE sessions SET current_node_id = ${nodeId} WHERE organization_id = ${organizationId} AND id = ${sessionId}`.pipe(
      Effect.asVoid
    )

  return SessionsRepo.of({
    withTransaction: (self) => sql.withTransaction(self),
    runState,
    setCurrentNode,
    findAgent,
    create,
    find,
    lock,
    update,
    writeEvents,
    search,
    idleSessions,
    isIdle
  })
})

/** A new session row (POST /sessions): its contact, agent, D7 thread, status and metadata. */
export interface NewSession {
  readonly id: string
  readonly organizationId: string
  readonly contactId: string
  readonly contactName: string
  readonly threadId: string | null
  readonly status: SessionStatus
  readonly agentId: string | null
  readonly metadata: JsonObject
}

/** The columns of a session `update` changes (undefined keeps); it always stamps `updated_at`. */
export interface SessionUpdate {
  readonly status?: SessionStatus
  readonly agentId?: string | null
  readonly threadId?: string | null
  readonly metadata?: JsonObject
  readonly endingSurveySubmissionId?: string | null
}

/**
 * The sessions repository (SQL only; see module docs). Every method may fail
 * with `SqlError`; the decoding ones with `SchemaError` too.
 */
export class SessionsRepo extends Context.Service<
  SessionsRepo,
  {
    /** Runs `self` in one transaction, which the statements join (nested: a savepoint). */
    readonly withTransaction: WithTransaction
    /** What a run needs of its session (R2); undefined when it is not in the organization. */
    readonly runState: (
      organizationId: string,
      sessionId: string
    ) => Effect.Effect<RunState | undefined, SqlError.SqlError>
    /** Sets the node the session's next turn starts from (R2 `next_node`). */
    readonly setCurrentNode: (
      organizationId: string,
      sessionId: string,
      nodeId: string | null
    ) => Effect.Effect<void, SqlError.SqlError>
    /** The agent `agentId` of the organization, if any and not deleted (D6); an id that is no UUID finds none. */
    readonly findAgent: (
      organizationId: string,
      agentId: string
    ) => Effect.Effect<AgentRef | undefined, SqlError.SqlError>
    /**
     * POST /sessions: the contact (D8), the contact's channel-less conversation
     * (conversation.created when new) and the session with session.created
     * (W1), in one statement. Returns nothing; the caller reads the session.
     */
    readonly create: (row: NewSession) => Effect.Effect<void, SqlError.SqlError>
    /** The session, decoded, if it exists in the organization (D1). */
    readonly find: (
      organizationId: string,
      sessionId: string
    ) => Effect.Effect<Session | undefined, SqlError.SqlError | Schema.SchemaError>
    /** Locks the session row for update (inside a transaction) and reads its state; undefined when not found (D1). */
    readonly lock: (
      organizationId: string,
      sessionId: string
    ) => Effect.Effect<SessionState | undefined, SqlError.SqlError>
    /**
     * Applies changed columns and stamps `updated_at`. A change of status from
     * open to closed fires the trigger `sessions_closed` (see `Sessions.ts`).
     */
    readonly update: (
      organizationId: string,
      sessionId: string,
      fields: SessionUpdate
    ) => Effect.Effect<void, SqlError.SqlError>
    /**
     * Writes the events (W1, W2) of the change `update` just applied to the
     * session in this transaction, each with the session as it is now and
     * stamped with that change's moment (its `updated_at`; O11).
     */
    readonly writeEvents: (
      organizationId: string,
      sessionId: string,
      events: ReadonlyArray<SessionEvent>
    ) => Effect.Effect<void, SqlError.SqlError>
    /** Sessions matching `search`, newest first (D2), decoded. */
    readonly search: (
      organizationId: string,
      search: SessionSearch
    ) => Effect.Effect<ReadonlyArray<Session>, SqlError.SqlError | Schema.SchemaError>
    /** At most `limit` open sessions idle past their organization's `session_idle_timeout_seconds` (D16). */
    readonly idleSessions: (
      limit: number
    ) => Effect.Effect<ReadonlyArray<{ readonly id: string; readonly organization_id: string }>, SqlError.SqlError>
    /** Whether the (locked) session is still idle past its organization's timeout (D16). */
    readonly isIdle: (organizationId: string, sessionId: string) => Effect.Effect<boolean, SqlError.SqlError>
  }
>()("parley/Sessions/SessionsRepo") {
  /** Over PostgreSQL. Requires `PgClient` and `Ids`. */
  static readonly layer = Layer.effect(SessionsRepo, makeRepo)
}
