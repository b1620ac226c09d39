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
import { Context, Effect, Layer } from "effect"
import { newId } from "../Shared/Ids.ts"
import { conversationJson, envelopeText, sessionJson } from "../Database/Json.ts"
import { isUuid } from "../Domain/Common.ts"
import type { JsonObject } from "../Domain/Common.ts"
import type { SessionStatus } from "../Domain/Session.ts"
import type { EventType } from "../Events/Events.ts"
import { currentTraceContext } from "../Telemetry/Telemetry.ts"

/** The columns of a session that its rules read, locked for update. */
export interface SessionState {
  readonly id: string
  readonly status: SessionStatus
  readonly agent_id: string | null
  readonly thread_id: string | null
}

/** An agent of the organization, as the session rules need it. */
export interface AgentRef {
  readonly id: string
  readonly type: "ai" | "human"
}

/** One event about a session: its type and, for finished/closed, the `action` (W1). */
export interface SessionEvent {
  readonly type: EventType
  readonly action?: string | null
}

/** Filters of POST /sessions/search (D2). */
export interface SessionSearch {
  readonly contactId?: string | undefined
  readonly status?: SessionStatus | undefined
  readonly metadata?: JsonObject | undefined
  readonly offset: number
  readonly limit: number
}

const SESSION_JSON = sessionJson("s", "a")
const SESSION_JSON_WITH_ACTION = sessionJson("s", "a", "e.action")

const makeRepo = Effect.gen(function* () {
  const sql = yield* PgClient.PgClient
  const sessionJsonFragment = sql.literal(SESSION_JSON)
  const eventBody = sql.literal(
    envelopeText(
      "e.id",
      "e.type",
      "s.organization_id",
      "statement_timestamp()",
      `CASE WHEN e.type IN ('session.finished', 'session.closed') THEN ${SESSION_JSON_WITH_ACTION} ELSE ${SESSION_JSON} END`
    )
  )
  const conversationEventBody = sql.literal(
    envelopeText("e.id", "'conversation.created'", "c.organization_id", "statement_timestamp()", conversationJson("c"))
  )

  /** The agent `agentId` of the organization, if any (D6). */
  const findAgent = (organizationId: string, agentId: string) =>
    isUuid(agentId)
      ? sql<AgentRef>`SELECT id, type FROM agents WHERE id = ${agentId} AND organization_id = ${organizationId}`.pipe(
          Effect.map((rows) => rows[0])
        )
      : Effect.succeed(undefined)

  /** Creates the contact or updates its name and phone when given (D8). */
  const upsertContact = (organizationId: string, contactId: string, name: string | null, phone: string | null) =>
    sql`INSERT INTO contacts (organization_id, contact_id, name, phone, created_at)
        VALUES (${organizationId}, ${contactId}, ${name}, ${phone}, statement_timestamp())
        ON CONFLICT (organization_id, contact_id) DO UPDATE
          SET name = coalesce(EXCLUDED.name, contacts.name), phone = coalesce(EXCLUDED.phone, contacts.phone),
              updated_at = CASE WHEN (EXCLUDED.name IS NOT NULL AND EXCLUDED.name IS DISTINCT FROM contacts.name)
                                  OR (EXCLUDED.phone IS NOT NULL AND EXCLUDED.phone IS DISTINCT FROM contacts.phone)
                                THEN statement_timestamp() ELSE contacts.updated_at END`.pipe(Effect.asVoid)

  /**
   * The conversation of (organization, contact, channel), created with its
   * conversation.created event when missing (D8, W1). The channel is
   * (`channelType`, `channelTo`); `""` for both is "no channel" (POST /sessions).
   */
  const ensureConversation = Effect.fnUntraced(function* (
    organizationId: string,
    contactId: string,
    channelType: string,
    channelTo: string
  ) {
    const id = newId()
    const inserted = yield* sql<{ id: string }>`
      INSERT INTO conversations (id, organization_id, contact_id, channel_type, channel_to, created_at)
      VALUES (${id}, ${organizationId}, ${contactId}, ${channelType}, ${channelTo}, statement_timestamp())
      ON CONFLICT (organization_id, contact_id, channel_type, channel_to) DO NOTHING
      RETURNING id`
    if (inserted.length > 0) {
      const traceContext = yield* currentTraceContext
      yield* sql`INSERT INTO events (id, organization_id, type, body, trace_context, created_at)
        SELECT e.id, c.organization_id, 'conversation.created', ${conversationEventBody}, ${traceContext}::jsonb,
          statement_timestamp()
        FROM conversations c CROSS JOIN (SELECT ${newId()}::uuid AS id) e WHERE c.id = ${id}`
      return { id, created: true }
    }
    const existing = yield* sql<{ id: string }>`
      SELECT id FROM conversations WHERE organization_id = ${organizationId} AND contact_id = ${contactId}
        AND channel_type = ${channelType} AND channel_to = ${channelTo}`
    return { id: existing[0]!.id, created: false }
  })

  /** Inserts a session row. */
  const insertSession = (row: {
    readonly id: string
    readonly organizationId: string
    readonly conversationId: string
    readonly contactId: string
    readonly contactName: string | null
    readonly threadId: string | null
    readonly status: SessionStatus
    readonly agentId: string | null
    readonly metadata: JsonObject
  }) =>
    sql`INSERT INTO sessions (id, organization_id, conversation_id, contact_id, contact_name, thread_id, status,
          agent_id, metadata, created_at)
        VALUES (${row.id}, ${row.organizationId}, ${row.conversationId}, ${row.contactId}, ${row.contactName},
          ${row.threadId}, ${row.status}, ${row.agentId}, ${sql.json(row.metadata)}, statement_timestamp())`.pipe(
      Effect.asVoid
    )

  /** The session's wire JSON, if it exists in the organization (D1). */
  const getJson = (organizationId: string, sessionId: string) =>
    isUuid(sessionId)
      ? sql<{ body: string }>`SELECT ${sessionJsonFragment}::text AS body
          FROM sessions s LEFT JOIN agents a ON a.id = s.agent_id
          WHERE s.id = ${sessionId} AND s.organization_id = ${organizationId}`.pipe(Effect.map((rows) => rows[0]?.body))
      : Effect.succeed(undefined)

  /** Locks the session row for update (inside a transaction) and reads its state. */
  const lock = (organizationId: string, sessionId: string) =>
    isUuid(sessionId)
      ? sql<SessionState>`SELECT id, status, agent_id, thread_id FROM sessions
          WHERE id = ${sessionId} AND organization_id = ${organizationId} FOR UPDATE`.pipe(
          Effect.map((rows) => rows[0])
        )
      : Effect.succeed(undefined)

  /** Applies changed columns to a session and stamps `updated_at`. */
  const update = (
    sessionId: string,
    fields: {
      readonly status?: SessionStatus
      readonly agentId?: string | null
      readonly threadId?: string | null
      readonly metadata?: JsonObject
      readonly endingSurveySubmissionId?: string | null
    }
  ) => {
    const set: Record<string, unknown> = {}
    if (fields.status !== undefined) set.status = fields.status
    if (fields.agentId !== undefined) set.agent_id = fields.agentId
    if (fields.threadId !== undefined) set.thread_id = fields.threadId
    if (fields.metadata !== undefined) set.metadata = sql.json(fields.metadata)
    if (fields.endingSurveySubmissionId !== undefined) set.ending_survey_submission_id = fields.endingSurveySubmissionId
    return sql`UPDATE sessions SET ${sql.update(set)}, updated_at = statement_timestamp() WHERE id = ${sessionId}`.pipe(
      Effect.asVoid
    )
  }

  /**
   * Writes the session's events, each with the session as it is now in the
   * transaction (W2), and returns the session's wire JSON.
   */
  const writeEvents = Effect.fnUntraced(function* (sessionId: string, events: ReadonlyArray<SessionEvent>) {
    if (events.length > 0) {
      const ids = events.map(() => newId())
      const traceContext = yield* currentTraceContext
      yield* sql`INSERT INTO events (id, organization_id, type, body, trace_context, created_at)
        SELECT e.id, s.organization_id, e.type, ${eventBody}, ${traceContext}::jsonb, statement_timestamp()
        FROM sessions s LEFT JOIN agents a ON a.id = s.agent_id
        CROSS JOIN LATERAL (SELECT u.*, nullif(u.action_text, '') AS action FROM unnest(${ids}::uuid[], ${events.map((event) => event.type)}::text[],
          ${events.map((event) => event.action ?? "")}::text[]) WITH ORDINALITY AS u(id, type, action_text, ordinal)) e
        WHERE s.id = ${sessionId}
        ORDER BY e.ordinal`
    }
  })

  /** Sessions matching `search`, newest first (D2), as a JSON array text. */
  const search = (organizationId: string, search: SessionSearch) => {
    const conditions = [sql`s.organization_id = ${organizationId}`]
    if (search.contactId !== undefined) conditions.push(sql`s.contact_id = ${search.contactId}`)
    if (search.status !== undefined) conditions.push(sql`s.status = ${search.status}`)
    if (search.metadata !== undefined) conditions.push(sql`s.metadata @> ${sql.json(search.metadata)}`)
    return sql<{ body: string }>`SELECT ${sessionJsonFragment}::text AS body
      FROM sessions s LEFT JOIN agents a ON a.id = s.agent_id
      WHERE ${sql.and(conditions)}
      ORDER BY s.created_at DESC, s.id DESC
      LIMIT ${search.limit} OFFSET ${search.offset}`.pipe(
      Effect.map((rows) => `[${rows.map((row) => row.body).join(",")}]`)
    )
  }

  /**
   * Open sessions idle past their organization's `session_idle_timeout_seconds`
   * (D16): no message and no creation within the timeout. At most `limit`.
   */
  const idleSessions = (limit: number) =>
    sql<{ id: string; organization_id: string }>`
      SELECT s.id, s.organization_id FROM organization_settings os
      JOIN sessions s ON s.organization_id = os.organization_id AND s.status = 'open'
        AND s.created_at < statement_timestamp() - make_interval(secs => os.session_idle_timeout_seconds)
      WHERE os.session_idle_timeout_seconds IS NOT NULL
        AND NOT EXISTS (SELECT 1 FROM messages m WHERE m.session_id = s.id
          AND m.created_at >= statement_timestamp() - make_interval(secs => os.session_idle_timeout_seconds))
      LIMIT ${limit}`

  /** Whether the (locked) session is still idle past its organization's timeout (D16). */
  const isIdle = (sessionId: string) =>
    sql<{ idle: boolean }>`
      SELECT coalesce(os.session_idle_timeout_seconds IS NOT NULL
        AND s.created_at < statement_timestamp() - make_interval(secs => os.session_idle_timeout_seconds)
        AND NOT EXISTS (SELECT 1 FROM messages m WHERE m.session_id = s.id
          AND m.created_at >= statement_timestamp() - make_interval(secs => os.session_idle_timeout_seconds)), false) AS idle
      FROM sessions s LEFT JOIN organization_settings os ON os.organization_id = s.organization_id
      WHERE s.id = ${sessionId}`.pipe(Effect.map((rows) => rows[0]?.idle === true))

  return {
    findAgent,
    upsertContact,
    ensureConversation,
    insertSession,
    getJson,
    lock,
    update,
    writeEvents,
    search,
    idleSessions,
    isIdle
  }
})

/** The sessions repository (SQL only; see module docs). Requires `PgClient`. */
export class SessionsRepo extends Context.Service<SessionsRepo, Effect.Success<typeof makeRepo>>()(
  "parley/Sessions/SessionsRepo"
) {
  static readonly layer = Layer.effect(SessionsRepo, makeRepo)
}
