/**
 * SQL of the messages domain. Rows come back as wire JSON text built by
 * PostgreSQL (`Database/Json.ts`); message.created and message.updated events
 * are written by the same statement as the change (W2).
 *
 * Times are `statement_timestamp()`, not `now()`: a statement that waited for a
 * row lock is stamped after the change it waited for, so timestamps follow the
 * order in which changes took effect (a session's close is later than every
 * message committed before it).
 *
 * One statement here crosses domains: POST message with an Idempotency-Key
 * (`insertMessageStoredStatement`) runs SQL owned by Idempotency
 * (`Idempotency/Repo.ts` `statementStoredParts`, the fragments it exports), since
 * it is the measured hot path of `npm run bench -- messages` ("parley key").
 */

import { PgClient } from "@effect/sql-pg"
import { Context, Effect, Layer, Schema } from "effect"
import type { SqlError } from "effect/sql"
import type { WithTransaction } from "../Database/Database.ts"
import { contentColumnText, immutableIsoTimestamp, jsonColumnText, messageJson, withMembers } from "../Database/Json.ts"
import { fixedStatement } from "../Database/Statement.ts"
import type { JsonObject } from "../Domain/Common.ts"
import { isUuid } from "../Domain/Common.ts"
import { type Content, redactedContent, toolPayloadTypes } from "../Domain/Content.ts"
import type { IdempotencyRequest } from "../Domain/Idempotency.ts"
import { type DeliveryStatus, Message, type MessageRole } from "../Domain/Message.ts"
import {
  isStoredResponseConflict,
  rewriteStoredSql,
  type StatementStoredColumns,
  statementOutcome,
  statementStoredParts
} from "../Idempotency/Repo.ts"
import {
  insertEvents,
  notifyDeliveriesIf,
  subscribedSql,
  withObject,
  wroteSubscribedFragment
} from "../Outbox/Outbox.ts"
import { redactedRunRecords } from "../Runtime/Records.ts"
import { Ids } from "../Shared/Ids.ts"
import { currentTraceContext } from "../Telemetry/Telemetry.ts"
import { notDeliveredSql } from "../Webhooks/Repo.ts"

/** A message to insert: everything but the columns with defaults. */
export interface NewMessage {
  readonly role: MessageRole
  readonly content: Content
  readonly provider_message_id: string | null
  readonly replied_provider_message_id: string | null
  /**
   * The message replied to, by Parley id (D24): must be a message of the
   * session's conversation (the insert then reports `replyFound: false`).
   * Without it, `replied_provider_message_id` is resolved within the
   * conversation.
   */
  readonly reply_to_message_id?: string | null | undefined
  readonly run_id: string | null
  readonly metadata?: JsonObject | undefined
}

/** The delivery columns of a message, as PATCH changes them (D13). */
export interface DeliveryFields {
  readonly provider_message_id?: string
  readonly replied_provider_message_id?: string
  readonly delivery_status?: DeliveryStatus
  readonly delivery_error_code?: number | null
  readonly delivery_error_message?: string | null
  /** ISO 8601 text, read by PostgreSQL to the microsecond (`DateTimeInput`'s canonical form). */
  readonly delivered_at?: string | null
  /** An edit (D24): the new content; applied only when it differs from the current one. */
  readonly content?: Content
}

/** A message another names (D24): its id and session. */
export interface ReferencedMessage {
  readonly id: string
  readonly session_id: string
}

/** A conversation, named itself or by one of its sessions (D24). */
export type ConversationScope = { readonly sessionId: string } | { readonly conversationId: string }

/** The delivery state of a locked message, with what an edit checks (D24). */
export interface DeliveryState {
  readonly id: string
  readonly delivery_status: DeliveryStatus
  readonly delivered_at: Date | null
  /** The current content's type. */
  readonly content_type: string
  readonly redacted: boolean
}

/** One text message of a session's history, as the AI runtime sends it to the model (R2). */
export interface HistoryEntry {
  readonly role: "user" | "assistant"
  readonly text: string
}

/** Filters of POST /sessions/{id}/messages/search (D3). */
export interface MessageSearch {
  readonly provider_message_id?: string | undefined
  readonly replied_provider_message_id?: string | undefined
  readonly role?: MessageRole | undefined
  readonly offset: number
  readonly limit: number
}

const MESSAGE_JSON = messageJson("m")

/** The text a redacted text message has in the AI history (D23, R2). */
export const REDACTED_HISTORY_TEXT = "[redacted]"

/**
 * SQL text of the text of the text message `alias` (a messages row) as the AI
 * history has it (R2): its text, or {@link REDACTED_HISTORY_TEXT} once redacted
 * (D23). The recorded reply of a replayed turn reads it too (A16).
 */
export const historyText = (alias: string): string =>
  `CASE WHEN ${alias}.redacted_at IS NULL THEN ${alias}.content->>'text' ELSE '${REDACTED_HISTORY_TEXT}' END`

/** How many characters of the replied message a reply's quote shows in the AI history (D24). */
const QUOTE_CHARACTERS = 200

/**
 * SQL text of a history entry's text for the text message `alias` whose
 * replied message (D24) is the messages row `quoted` (null columns when
 * none): the reply rendered as a quote of its target, `> ` before each line of
 * the target's first {@link QUOTE_CHARACTERS} characters (its history text, or
 * `[<type>]` for another content type), a blank line, then the text.
 */
export const quotedHistoryText = (alias: string, quoted: string): string => `CASE WHEN ${quoted}.id IS NULL
  THEN ${historyText(alias)}
  ELSE '> ' || replace(left(CASE WHEN coalesce(${quoted}.redacted_type, ${quoted}.content->>'type') = 'text'
      THEN ${historyText(quoted)} ELSE '[' || (${quoted}.content->>'type') || ']' END, ${QUOTE_CHARACTERS}), E'\n', E'\n> ')
    || E'\n\n' || ${historyText(alias)} END`

/**
 * SQL text of the id of the first message (by `created_at`, then `id`) of
 * the conversation `conversationId` whose channel id is `providerMessageId`
 * (SQL expressions; null when that is null), within the organization: what a
 * channel's id resolves to (D24). Looked up through the conversation's
 * sessions (`sessions_conversation_idx`, `messages_provider_idx`).
 */
export const messageByProviderIdSql = (organizationId: string, conversationId: string, providerMessageId: string) =>
  `CASE WHEN ${providerMessageId} IS NULL THEN NULL ELSE (SELECT t.id FROM sessions ts
    JOIN messages t ON t.organization_id = ts.organization_id AND t.session_id = ts.id
      AND t.provider_message_id = ${providerMessageId}
    WHERE ts.conversation_id = ${conversationId} AND ts.organization_id = ${organizationId}
    ORDER BY t.created_at, t.id LIMIT 1) END`

/**
 * SQL text of a reply's `reply_to_message_id` (D24): `replyToMessageId` (a
 * uuid expression) when it names a message of the conversation, else null;
 * without it, `repliedProviderMessageId` resolved within the conversation
 * ({@link messageByProviderIdSql}), null when it names none.
 */
export const replyTargetSql = (row: {
  readonly organizationId: string
  readonly conversationId: string
  readonly replyToMessageId: string
  readonly repliedProviderMessageId: string
}) => `CASE WHEN ${row.replyToMessageId} IS NOT NULL
  THEN (SELECT t.id FROM messages t WHERE t.id = ${row.replyToMessageId} AND t.conversation_id = ${row.conversationId}
    AND t.organization_id = ${row.organizationId})
  ELSE ${messageByProviderIdSql(row.organizationId, row.conversationId, row.repliedProviderMessageId)} END`

/** A message a redaction locked: its id and whether it is redacted already (D23). */
export interface RedactionLock {
  readonly id: string
  readonly redacted: boolean
}

/**
 * The JSON texts of the members a redaction overwrites (D23), for messages
 * redacted at `redactedAt` (an SQL text expression: the ISO 8601 moment).
 */
const redactedMembers = (redactedAt: string) => ({
  content: `'${contentColumnText(redactedContent)}'`,
  edits: `'[]'`,
  redacted_at: `to_json(${redactedAt})::text`
})

/** SQL text of a boolean: whether the json `value` is a Message of the redacted rows `m`. */
const isRedactedMessage = (value: string) =>
  `(json_typeof(${value}) = 'object' AND ${value}->'content' IS NOT NULL AND ${value}->>'id' IN (SELECT m.id::text FROM m))`

/**
 * The stored Idempotency-Key responses (D19) of the organization
 * `organizationId` (uuid expression) that carried one of the redacted
 * messages rows `m`, rewritten (D23): a Message body, or a Message in an
 * array body (a search), with the redacted members ({@link redactedMembers}
 * at `redactedAt`), every other byte kept; a repeat of the request answers
 * that. Found by the message ids inside the organization's live responses
 * stored since the first of the messages was.
 */
const redactedStoredResponses = (organizationId: string, redactedAt: string) =>
  rewriteStoredSql(
    organizationId,
    `k.created_at >= (SELECT min(m.created_at) FROM m)
    AND EXISTS (SELECT 1 FROM m WHERE position(convert_to(m.id::text, 'UTF8') IN k.body) > 0)`,
    (json) => `CASE
    WHEN json_typeof(${json}) = 'object' THEN CASE WHEN ${isRedactedMessage(json)}
      THEN ${withMembers(Message, json, redactedMembers(redactedAt))} END
    WHEN json_typeof(${json}) = 'array' THEN (SELECT '[' || string_agg(CASE WHEN ${isRedactedMessage("x.v")}
        THEN ${withMembers(Message, "x.v", redactedMembers(redactedAt))} ELSE x.v::text END, ',' ORDER BY x.n) || ']'
      FROM json_array_elements(${json}) WITH ORDINALITY AS x(v, n))
  END`
  )

/**
 * The SQL text rewriting the stored event `e` that carries a message
 * redacted at `redactedAt` (D23): its envelope with `data.object`'s
 * `content`, `edits` and `redacted_at` the redacted ones ({@link
 * redactedMembers}), every other member as the event had it
 * (`Database/Json.ts` `withMembers`, `Outbox.ts` `withObject`).
 */
const redactedEventBody = (redactedAt: string) =>
  withObject("e.body", withMembers(Message, "e.body::json->'data'->'object'", redactedMembers(redactedAt)))

/**
 * The copies of redacted messages, rewritten (D23): after the redaction of
 * the messages `messageIds` of the organization at `redactedAt` (ISO 8601),
 * which wrote the message.updated events `eventIds` ({@link MessagesRepo}
 * `redact`), in its transaction:
 *
 * - the events carrying one of them (message.created, message.updated; not
 *   those `eventIds`, which carry it redacted) not yet delivered
 *   (`Webhooks/Repo.ts` `notDeliveredSql`), by {@link redactedEventBody};
 * - the stored Idempotency-Key responses that carried one
 *   ({@link redactedStoredResponses});
 * - the tool call records of their run (A15, `Runtime/Records.ts`
 *   `redactedRunRecords`): each keeps its node and tool.
 *
 * A statement of its own, of UPDATE and SELECT parts only, every table
 * reference (the subqueries' too) filtered by the organization's parameter:
 * on Citus one router statement on the organization's worker, where the
 * renderings' correlated subqueries over set-returning functions are
 * accepted, which Citus refused in the redaction's statement (its INSERT step
 * makes Citus plan every part apart, and a part joined to a step's result is
 * not a router query; O11). Returns how many events, records and responses it
 * rewrote.
 */
const redactedCopiesStatement = fixedStatement(
  { organizationId: "uuid", messageIds: "uuid[]", eventIds: "uuid[]", redactedAt: "text" },
  (p) => `WITH m AS (
  SELECT organization_id, id, conversation_id, session_id, run_id, created_at FROM messages
  WHERE organization_id = ${p.organizationId} AND id = ANY(${p.messageIds})
), rewritten AS (
  UPDATE events u SET body = r.body
  FROM (SELECT e.id, ${redactedEventBody(p.redactedAt)} AS body FROM events e JOIN m
    ON e.organization_id = m.organization_id AND e.conversation_id = m.conversation_id
    WHERE e.organization_id = ${p.organizationId}
      AND e.created_at >= m.created_at AND e.type IN ('message.created', 'message.updated')
      AND e.body::json #>> '{data,object,id}' = m.id::text AND NOT (e.id = ANY(${p.eventIds}))
      AND ${notDeliveredSql(p.organizationId, "e.id")}) r
  WHERE u.organization_id = ${p.organizationId} AND u.id = r.id
  RETURNING u.id
), records AS (
  UPDATE runs u SET tool_calls = r.tool_calls
  FROM (SELECT r.id, ${redactedRunRecords("r.tool_calls")} AS tool_calls FROM runs r JOIN m
    ON r.organization_id = m.organization_id AND r.session_id = m.session_id AND r.id::text = m.run_id
    WHERE r.organization_id = ${p.organizationId} AND m.run_id IS NOT NULL AND r.tool_calls <> '[]'::jsonb) r
  WHERE u.organization_id = ${p.organizationId} AND u.id = r.id
  RETURNING u.id
), stored AS (${redactedStoredResponses(p.organizationId, p.redactedAt)})
SELECT (SELECT count(*)::int FROM rewritten) AS events, (SELECT count(*)::int FROM records) AS records,
  (SELECT count(*)::int FROM stored) AS stored`
)

/** SQL expressions of a message to insert from a row source (see {@link insertMessageCtes}). */
export interface MessageRow {
  readonly id: string
  readonly organizationId: string
  readonly sessionId: string
  readonly conversationId: string
  readonly role: string
  /** jsonb. */
  readonly content: string
  readonly providerMessageId: string
  readonly repliedProviderMessageId: string
  /** The replied message (uuid, D24), e.g. {@link replyTargetSql}. */
  readonly replyToMessageId: string
  readonly runId: string
  /** jsonb. */
  readonly metadata: string
  /** The message.created event's id. */
  readonly eventId: string
  /** The event's trace context (jsonb or null, W4). */
  readonly traceContext: string
  /** The row source (`s`, a CTE of the session) and its condition. */
  readonly from: string
  readonly where: string
}

/**
 * The insert of `message.updated` events (W1) for the changed messages rows
 * `m`, each with the id and trace context of `ev`, over `from` (which joins
 * them), where `where` holds, in `orderBy`'s order: the one owner of that
 * event's columns for a delivery update (D13) and a redaction (D23).
 */
const messageUpdatedSql = (rows: { readonly from: string; readonly where?: string; readonly orderBy?: string }) =>
  insertEvents({
    id: "ev.id",
    type: "'message.updated'",
    organizationId: "m.organization_id",
    conversationId: "m.conversation_id",
    at: "statement_timestamp()",
    object: MESSAGE_JSON,
    traceContext: "ev.trace_context",
    ...rows
  })

/**
 * CTEs `m` (the message inserted, delivery `pending`, stamped
 * `statement_timestamp()`), `j` (its id, organization, time and wire JSON,
 * built once) and `me` (its message.created event with that JSON: W2, W3),
 * for statements that insert a message: POST message and ingest. The one
 * owner of how a message row and its event are written.
 */
export const insertMessageCtes = (row: MessageRow): string => `m AS (
  INSERT INTO messages (id, organization_id, session_id, conversation_id, role, content, provider_message_id,
    replied_provider_message_id, reply_to_message_id, run_id, metadata, created_at)
  SELECT ${row.id}, ${row.organizationId}, ${row.sessionId}, ${row.conversationId}, ${row.role}, ${row.content},
    ${row.providerMessageId}, ${row.repliedProviderMessageId}, ${row.replyToMessageId}, ${row.runId}, ${row.metadata},
    statement_timestamp()
  FROM ${row.from} WHERE ${row.where}
  RETURNING *
), j AS (
  SELECT m.id, m.organization_id, m.conversation_id, m.created_at, ${MESSAGE_JSON} AS body FROM m
), me AS (
  ${insertEvents({
    id: "ev.id",
    type: "'message.created'",
    organizationId: "j.organization_id",
    conversationId: "j.conversation_id",
    at: "j.created_at",
    object: "j.body",
    traceContext: row.traceContext,
    from: `j CROSS JOIN (SELECT ${row.eventId} AS id) ev`
  })}
)`

/** Parameters of POST message's statement ({@link insertMessageStatement}). */
const insertMessageParameters = {
  sessionId: "uuid",
  organizationId: "uuid",
  messageId: "uuid",
  role: "text",
  content: "json",
  providerMessageId: "text?",
  repliedProviderMessageId: "text?",
  replyToMessageId: "uuid?",
  runId: "text?",
  metadata: "json",
  eventId: "uuid",
  traceContext: "jsonb?"
} as const

/**
 * The text of POST message's statement; with `stored`, it also claims an
 * Idempotency-Key and stores its response. Its `subscribed` column tells whether
 * an app subscribes to message.created (`Outbox.ts` `subscribedSql`): the
 * caller that did not notify wakes its worker only then.
 */
const insertMessageText = (
  p: { readonly [K in keyof typeof insertMessageParameters]: string },
  stored?: ReturnType<typeof statementStoredParts>,
  subscribed = subscribedSql(p.organizationId, "'message.created'")
) => `WITH ${stored === undefined ? "" : `${stored.ctes}, `}s AS (
  SELECT id, conversation_id, status FROM sessions WHERE id = ${p.sessionId} AND organization_id = ${p.organizationId} AND erasure_id IS NULL${stored === undefined ? "" : ` AND ${stored.locked}`} FOR SHARE
), rt AS (
  SELECT ${replyTargetSql({
    organizationId: p.organizationId,
    conversationId: "s.conversation_id",
    replyToMessageId: p.replyToMessageId,
    repliedProviderMessageId: p.repliedProviderMessageId
  })} AS id FROM s
), ${insertMessageCtes({
  id: p.messageId,
  organizationId: p.organizationId,
  sessionId: "s.id",
  conversationId: "s.conversation_id",
  role: p.role,
  content: p.content,
  providerMessageId: p.providerMessageId,
  repliedProviderMessageId: p.repliedProviderMessageId,
  replyToMessageId: "rt.id",
  runId: p.runId,
  metadata: p.metadata,
  eventId: p.eventId,
  traceContext: p.traceContext,
  from: "s CROSS JOIN rt",
  where: `s.status = 'open' AND (${p.replyToMessageId} IS NULL OR rt.id IS NOT NULL)${stored === undefined ? "" : ` AND ${stored.noneStored}`}`
})}${
  stored === undefined
    ? `
SELECT s.status, (SELECT j.body::text FROM j) AS body, ${subscribed} AS subscribed,
  ${p.replyToMessageId} IS NULL OR rt.id IS NOT NULL AS reply_found FROM s CROSS JOIN rt`
    : `, ${stored.store(201, "j.body::text", "j")}
SELECT s.status, (SELECT j.body::text FROM j) AS body, ${subscribed} AS subscribed,
  ${p.replyToMessageId} IS NULL OR rt.id IS NOT NULL AS reply_found, ${stored.columns}
FROM (SELECT 1) AS one LEFT JOIN s ON true LEFT JOIN rt ON true`
}`

/**
 * POST message in one statement (the hot path: `npm run bench`, messages;
 * fixed text prepared once): lock the session for share, insert the message if
 * the session is open, with its message.created event ({@link
 * insertMessageCtes}), return the session's status (no row: no such session)
 * and the message's wire JSON (null: the session is not open). The benchmark's
 * baseline executes this same text.
 */
export const insertMessageStatement = fixedStatement(insertMessageParameters, (p) => insertMessageText(p))

/**
 * POST message with an Idempotency-Key (D19) in the same single statement:
 * {@link insertMessageStatement} that also tries the key's lock, inserts only
 * when it is taken and no live response is stored, stores the 201 response
 * with the message and returns what it found ({@link statementStoredParts}).
 * Measured by `npm run bench` (the "parley key" rows): a transaction around
 * the plain statement (claim, operation, store: the path of every other
 * operation) gave 0.42 of plain POST message's throughput.
 */
export const insertMessageStoredStatement = fixedStatement(
  { ...insertMessageParameters, key: "text", fingerprint: "bytea" },
  (p) =>
    insertMessageText(
      p,
      statementStoredParts({ organizationId: p.organizationId, key: p.key, fingerprint: p.fingerprint })
    )
)

const decodeMessage = Schema.decodeUnknownEffect(Message)
const decodeMessages = Schema.decodeUnknownEffect(Schema.Array(Message))

const makeRepo: Effect.Effect<MessagesRepo["Service"], never, PgClient.PgClient | Ids> = Effect.gen(function* () {
  const sql = yield* PgClient.PgClient
  const { newId } = yield* Ids
  const messageJsonFragment = sql.literal(MESSAGE_JSON)
  /** message.updated when a delivery field changed (W1): `m` the row after the change, `before` the row before. */
  const updatedEvents = sql.literal(
    messageUpdatedSql({
      from: "m CROSS JOIN before b CROSS JOIN ev",
      where: `(m.delivery_status, m.delivery_error_code, m.delivery_error_message, m.delivered_at,
          m.provider_message_id, m.replied_provider_message_id, m.edited_at)
        IS DISTINCT FROM (b.delivery_status, b.delivery_error_code, b.delivery_error_message, b.delivered_at,
          b.provider_message_id, b.replied_provider_message_id, b.edited_at)`
    })
  )

  /**
   * Inserts a message into an open session of the organization and writes its
   * message.created event, in one statement ({@link insertMessageStatement}). Returns
   * the session's status (undefined when the session does not exist) and, when
   * inserted, the message's wire JSON. With `idempotency` (D19), the statement
   * is {@link insertMessageStoredStatement}: when it did not run the operation it
   * sets `idempotency.outcome` (the key in progress, the live response, or a
   * conflict) and returns no session.
   */
  const insert = (
    organizationId: string,
    sessionId: string,
    message: NewMessage,
    { idempotency, notify = true }: InsertOptions = {}
  ): Effect.Effect<InsertResult, SqlError.SqlError> => {
    if (!isUuid(sessionId)) return Effect.succeed(noSession)
    return Effect.flatMap(currentTraceContext, (traceContext) => {
      const input = {
        sessionId,
        organizationId,
        messageId: newId(),
        role: message.role,
        content: contentColumnText(message.content),
        providerMessageId: message.provider_message_id,
        repliedProviderMessageId: message.replied_provider_message_id,
        replyToMessageId: message.reply_to_message_id ?? null,
        runId: message.run_id,
        metadata: jsonColumnText(message.metadata ?? {}),
        eventId: newId(),
        traceContext
      }
      /** The wakeup of every process's delivery worker (W5, O11) when the message's event fanned out. */
      const notified = <E>(self: Effect.Effect<InsertResult, E>) =>
        Effect.tap(self, (result) => notifyDeliveriesIf(sql, notify && result.subscribed, organizationId))
      if (idempotency === undefined) {
        return insertMessageStatement.run<InsertedRow>(sql, input).pipe(
          Effect.map(([row]) => (row === undefined ? noSession : insertResultOf(row))),
          notified
        )
      }
      return insertMessageStoredStatement
        .run<InsertedRow & StatementStoredColumns>(sql, {
          ...input,
          key: idempotency.key,
          fingerprint: idempotency.fingerprint
        })
        .pipe(
          Effect.map(([row]): InsertResult => {
            const outcome = statementOutcome(row!)
            if (outcome === undefined) return insertResultOf(row!)
            idempotency.outcome = outcome
            return noSession
          }),
          Effect.catchIf(isStoredResponseConflict, () =>
            Effect.sync((): InsertResult => {
              idempotency.outcome = "conflict"
              return noSession
            })
          ),
          notified
        )
    })
  }

  /**
   * Looks a message up for the session path (D1): whether the session is in the
   * organization, and the message (decoded) when it exists, in any organization
   * (the caller responds 403 for another's).
   */
  const find = (
    organizationId: string,
    sessionId: string,
    messageId: string
  ): Effect.Effect<
    { readonly sessionFound: boolean; readonly message: Message | undefined },
    SqlError.SqlError | Schema.SchemaError
  > => {
    if (!isUuid(sessionId)) return Effect.succeed({ sessionFound: false, message: undefined })
    const id = isUuid(messageId) ? messageId : null
    // D1: a message of another organization (403), looked for only when the organization has none by
    // that id: by `messages_id_idx`, on Citus in every shard (O11), so a statement of its own, its row
    // rendered over the subquery's result (Citus refuses the rendering's correlated subqueries in a
    // statement over every shard).
    const elsewhere =
      id === null
        ? Effect.succeed([])
        : sql<{ message: unknown }>`SELECT ${messageJsonFragment} AS message
            FROM (SELECT * FROM messages WHERE id = ${id}::uuid AND organization_id <> ${organizationId} LIMIT 1) m`
    return sql<{ session_found: boolean; message: unknown }>`
      SELECT EXISTS (SELECT 1 FROM sessions WHERE id = ${sessionId} AND organization_id = ${organizationId}
        AND erasure_id IS NULL) AS session_found,
        CASE WHEN m.id IS NULL THEN NULL ELSE ${messageJsonFragment} END AS message
      FROM (SELECT 1) AS one
      LEFT JOIN LATERAL (SELECT * FROM messages WHERE organization_id = ${organizationId} AND id = ${id}::uuid) m ON true`.pipe(
      Effect.flatMap(([row]) =>
        Effect.flatMap(
          row!.message === null
            ? Effect.map(elsewhere, (rows) => rows[0]?.message ?? null)
            : Effect.succeed(row!.message),
          (found) =>
            Effect.map(found === null ? Effect.succeed(undefined) : decodeMessage(found), (message) => ({
              sessionFound: row!.session_found,
              message
            }))
        )
      )
    )
  }

  /** Locks a message (inside a transaction) and reads its delivery state. */
  const lockDelivery = (organizationId: string, messageId: string) =>
    sql<DeliveryState>`SELECT id, delivery_status, delivered_at, content->>'type' AS content_type,
        redacted_at IS NOT NULL AS redacted FROM messages
      WHERE organization_id = ${organizationId} AND id = ${messageId} FOR UPDATE`.pipe(Effect.map((rows) => rows[0]!))

  /**
   * Updates delivery columns, stamps `updated_at`, writes message.updated
   * (W1) when a delivery field changed, and returns the message (decoded).
   */
  const updateDelivery = Effect.fnUntraced(function* (
    organizationId: string,
    messageId: string,
    fields: DeliveryFields
  ) {
    const { content, ...set } = fields
    const eventId = newId()
    const traceContext = yield* currentTraceContext
    // D24: an edit to other content keeps the former one in `edits` and stamps `edited_at`.
    const text = content === undefined ? undefined : contentColumnText(content)
    const changed = sql`x.content::jsonb IS DISTINCT FROM ${text}::jsonb`
    const edit =
      text === undefined
        ? sql``
        : sql`content = CASE WHEN ${changed} THEN ${text}::json ELSE x.content END,
            edits = CASE WHEN ${changed} THEN ${editsAppended} ELSE x.edits END,
            edited_at = CASE WHEN ${changed} THEN n.at ELSE x.edited_at END,`
    // `before` MATERIALIZED: on Citus a statement with an INSERT CTE (the event's) runs its CTEs as
    // steps in order, and an inlined `before` would read the row after `m` changed it (O11).
    return yield* sql<{ message: unknown; subscribed: boolean }>`
      WITH before AS MATERIALIZED (
        SELECT * FROM messages WHERE organization_id = ${organizationId} AND id = ${messageId}
      ), m AS (
        UPDATE messages x SET ${Object.keys(set).length > 0 ? sql`${sql.update(set)},` : sql``} ${edit} updated_at = n.at
        FROM (SELECT statement_timestamp() AS at) n
        WHERE x.organization_id = ${organizationId} AND x.id = ${messageId} RETURNING x.*
      ), ev AS (
        SELECT ${eventId}::uuid AS id, ${traceContext}::jsonb AS trace_context
      ), e AS (${updatedEvents})
      SELECT ${messageJsonFragment} AS message, ${updatedSubscribed(organizationId)} AS subscribed FROM m`.pipe(
      Effect.tap((rows) => notifyDeliveriesIf(sql, rows[0]!.subscribed, organizationId)),
      Effect.flatMap((rows) => decodeMessage(rows[0]!.message))
    )
  })

  /** Whether the statement's message.updated events `e` fanned out (`Outbox.ts` `wroteSubscribedSql`, O11). */
  const updatedSubscribed = (organizationId: string) => wroteSubscribedFragment(sql, ["e"], organizationId)

  /**
   * The `edits` of the messages row `x` with its current content appended,
   * replaced at `n.at` (D24). Only IMMUTABLE functions, the moment a column of
   * `n`: Citus refuses a STABLE function over a column, or any in a CASE, in
   * an UPDATE's SET (O11).
   */
  const editsAppended = sql.literal(`(CASE WHEN x.edits::text = '[]' THEN '[' ELSE left(x.edits::text, -1) || ',' END
    || (SELECT parley_row_json(r)::text FROM (SELECT x.content AS content, ${immutableIsoTimestamp("n.at")} AS edited_at) r)
    || ']')::json`)

  /** The message of the conversation of `rs` whose channel id is `rs.target` (D24). */
  const providerTarget = sql.literal(messageByProviderIdSql("rs.organization_id", "rs.conversation_id", "rs.target"))
  /** message.updated of the reacted message `m` (W1, D24). */
  const reactionEvents = sql.literal(messageUpdatedSql({ from: "m CROSS JOIN ev" }))

  /** message.updated of each redacted row `m` (W1, D23), its id and trace context from `ev`. */
  const redactedEvents = sql.literal(
    messageUpdatedSql({
      from: "m JOIN ev ON ev.message_id = m.id",
      orderBy: "ev.id"
    })
  )

  /** Messages of a session matching `search`, oldest first (D3), decoded. */
  const search = (organizationId: string, sessionId: string, search: MessageSearch) => {
    const conditions = [sql`m.organization_id = ${organizationId}`, sql`m.session_id = ${sessionId}`]
    if (search.provider_message_id !== undefined)
      conditions.push(sql`m.provider_message_id = ${search.provider_message_id}`)
    if (search.replied_provider_message_id !== undefined)
      conditions.push(sql`m.replied_provider_message_id = ${search.replied_provider_message_id}`)
    if (search.role !== undefined) conditions.push(sql`m.role = ${search.role}`)
    return sql<{ message: unknown }>`SELECT ${messageJsonFragment} AS message FROM messages m
      WHERE ${sql.and(conditions)}
      ORDER BY m.created_at, m.id
      LIMIT ${search.limit} OFFSET ${search.offset}`.pipe(
      Effect.flatMap((rows) => decodeMessages(rows.map((row) => row.message)))
    )
  }

  /** Whether the session exists in the organization (D1). */
  const sessionExists = (organizationId: string, sessionId: string) =>
    isUuid(sessionId)
      ? sql<{ found: boolean }>`SELECT EXISTS (SELECT 1 FROM sessions WHERE id = ${sessionId}
          AND organization_id = ${organizationId} AND erasure_id IS NULL) AS found`.pipe(
          Effect.map((rows) => rows[0]!.found)
        )
      : Effect.succeed(false)

  /**
   * The latest `limit` text messages of the session (created before
   * `before` when given: the history a replay answers, A16), oldest first
   * (R2); a redacted one with {@link historyText}.
   */
  const history = (organizationId: string, sessionId: string, limit: number, before?: Date) =>
    sql<HistoryEntry>`SELECT role, text FROM (
        SELECT m.role, ${sql.literal(quotedHistoryText("m", "q"))} AS text, m.created_at, m.id FROM messages m
        LEFT JOIN messages q ON q.organization_id = m.organization_id AND q.id = m.reply_to_message_id
          AND q.conversation_id = m.conversation_id
        WHERE m.organization_id = ${organizationId} AND m.session_id = ${sessionId} AND coalesce(m.redacted_type, m.content->>'type') = 'text'
          ${before === undefined ? sql`` : sql`AND m.created_at < ${before}`}
        ORDER BY m.created_at DESC, m.id DESC LIMIT ${limit}
      ) h ORDER BY h.created_at, h.id`

  /**
   * The message `target` names within a conversation (D24), locked (inside a
   * transaction): the conversation `scope.conversationId`, or that of the
   * session `scope.sessionId` (of the organization); `target` as the id of
   * one of its messages, else, with `byProviderId` (ingest), as the channel's
   * id of one ({@link messageByProviderIdSql}). Undefined when none.
   */
  const lockReferenced = (organizationId: string, scope: ConversationScope, target: string, byProviderId: boolean) => {
    const id = "sessionId" in scope ? scope.sessionId : scope.conversationId
    if (!isUuid(id)) return Effect.succeed(undefined)
    const rs =
      "sessionId" in scope
        ? sql`SELECT conversation_id, organization_id, ${target}::text AS target FROM sessions
            WHERE id = ${id} AND organization_id = ${organizationId}`
        : sql`SELECT ${id}::uuid AS conversation_id, ${organizationId}::uuid AS organization_id, ${target}::text AS target`
    return sql<ReferencedMessage>`WITH rs AS (${rs})
      SELECT x.id::text AS id, x.session_id::text AS session_id FROM messages x
      WHERE x.organization_id = ${organizationId} AND x.id = (SELECT coalesce(
        (SELECT y.id FROM messages y WHERE y.id = ${isUuid(target) ? target : null}::uuid
          AND y.conversation_id = rs.conversation_id AND y.organization_id = rs.organization_id),
        CASE WHEN ${byProviderId} THEN ${providerTarget} END) FROM rs)
      FOR UPDATE`.pipe(Effect.map((rows) => rows[0]))
  }

  /**
   * Applies a reaction (D24) of `role` to the locked message `targetId`:
   * `emoji` replaces the role's reaction, "" removes it; when that changed
   * the target's `reactions` summary (rendered from `reacted`), `updated_at`
   * stamped and message.updated written (W1).
   */
  const react = Effect.fnUntraced(function* (
    organizationId: string,
    targetId: string,
    role: MessageRole,
    emoji: string
  ) {
    const traceContext = yield* currentTraceContext
    yield* sql<{ subscribed: boolean }>`WITH n AS (
        SELECT x.id, CASE WHEN ${emoji} = '' THEN x.reacted - ${role}::text
          ELSE x.reacted || jsonb_build_object(${role}::text, ${emoji}::text) END AS reacted
        FROM messages x WHERE x.organization_id = ${organizationId} AND x.id = ${targetId}
      ), m AS (
        UPDATE messages x SET reacted = n.reacted, updated_at = statement_timestamp()
        FROM n WHERE x.organization_id = ${organizationId} AND x.id = n.id AND x.reacted IS DISTINCT FROM n.reacted
        RETURNING x.*
      ), ev AS (
        SELECT ${newId()}::uuid AS id, ${traceContext}::jsonb AS trace_context
      ), e AS (${reactionEvents})
      SELECT ${updatedSubscribed(organizationId)} AS subscribed`.pipe(
      Effect.flatMap((rows) => notifyDeliveriesIf(sql, rows[0]!.subscribed, organizationId))
    )
  })

  /**
   * Locks (inside a transaction), in id order, the message and the payloads
   * of its run (D23): the `function_call` and `function_result` messages of
   * the same session with the same non-null `run_id`, what the AI runtime
   * stored of the tool calls of the turn that wrote it (R2). Payloads are
   * looked for only while the message is not redacted yet.
   */
  const lockRedaction = (organizationId: string, messageId: string) =>
    sql<RedactionLock>`SELECT m.id::text AS id, m.redacted_at IS NOT NULL AS redacted FROM messages m
      WHERE m.organization_id = ${organizationId} AND (m.id = ${messageId} OR m.id IN (
        SELECT p.id FROM messages t
        JOIN messages p ON p.organization_id = t.organization_id AND p.session_id = t.session_id
          AND p.run_id = t.run_id
        WHERE t.organization_id = ${organizationId} AND t.id = ${messageId} AND t.redacted_at IS NULL AND p.content->>'type' IN ${sql.in(toolPayloadTypes)}))
      ORDER BY m.id FOR UPDATE`

  /**
   * Redacts the locked messages `messageIds` still unredacted (D23): one
   * statement sets content `{"type":"redacted"}` (the type it had kept in
   * `redacted_type`), `edits` `[]`, `redacted_at` and `updated_at` (columns
   * of constants, the moment `statement_timestamp()`, named by the
   * organization: on Citus a SET may not call a STABLE function over a
   * column, and an UPDATE is one shard's only when filtered by the
   * organization, O11) and writes one message.updated per message redacted
   * (W1); a second rewrites their copies ({@link redactedCopiesStatement}).
   * Returns the message `messageId` (decoded).
   */
  const redact = Effect.fnUntraced(function* (
    organizationId: string,
    messageId: string,
    messageIds: ReadonlyArray<string>
  ) {
    const traceContext = yield* currentTraceContext
    const eventIds = messageIds.map(() => newId())
    const [row] = yield* sql<{ message: unknown; redacted_at: string; subscribed: boolean }>`
      WITH m AS (
        UPDATE messages x SET content = ${contentColumnText(redactedContent)}::json,
          redacted_type = x.content->>'type', edits = '[]', redacted_at = statement_timestamp(),
          updated_at = statement_timestamp()
        WHERE x.organization_id = ${organizationId} AND x.id = ANY(${messageIds}::uuid[]) AND x.redacted_at IS NULL
        RETURNING x.*
      ), ev AS (
        SELECT x.message_id, x.id, ${traceContext}::jsonb AS trace_context
        FROM unnest(${messageIds}::uuid[], ${eventIds}::uuid[]) AS x(message_id, id)
      ), e AS (${redactedEvents})
      SELECT ${messageJsonFragment} AS message, ${sql.literal(immutableIsoTimestamp("m.redacted_at"))} AS redacted_at,
        ${updatedSubscribed(organizationId)} AS subscribed
      FROM m WHERE m.id = ${messageId}`
    yield* redactedCopiesStatement.run(sql, { organizationId, messageIds, eventIds, redactedAt: row!.redacted_at })
    yield* notifyDeliveriesIf(sql, row!.subscribed, organizationId)
    return yield* decodeMessage(row!.message)
  })

  return MessagesRepo.of({
    withTransaction: (self) => sql.withTransaction(self),
    insert,
    find,
    lockDelivery,
    updateDelivery,
    search,
    sessionExists,
    history,
    lockRedaction,
    redact,
    lockReferenced,
    react
  })
})

/**
 * What {@link MessagesRepo} `insert` returns: the session's status (undefined
 * when the session is not in the organization) and, when the message was
 * inserted, its wire JSON (undefined when the session is not open).
 */
export interface InsertResult {
  readonly status: string | undefined
  readonly body: string | undefined
  /** False when `reply_to_message_id` named no message of the conversation (nothing inserted, D24). */
  readonly replyFound: boolean
  /** Whether an app subscribes to message.created (W2): the fan-out made a delivery of the event. */
  readonly subscribed: boolean
}

/** The insert's result when no session was found (or the Idempotency-Key decided, D19). */
const noSession: InsertResult = { status: undefined, body: undefined, subscribed: false, replyFound: true }

/** A row of POST message's statement. */
interface InsertedRow {
  readonly status: string | null
  readonly body: string | null
  readonly subscribed: boolean
  readonly reply_found: boolean | null
}

const insertResultOf = (row: InsertedRow): InsertResult => ({
  status: row.status ?? undefined,
  body: row.body ?? undefined,
  subscribed: row.body !== null && row.subscribed,
  replyFound: row.reply_found !== false
})

/** Options of {@link MessagesRepo} `insert`. */
export interface InsertOptions {
  /** D19: claim this Idempotency-Key and store the response in the same statement. */
  readonly idempotency?: IdempotencyRequest["Service"] | undefined
  /**
   * Whether to wake every process's delivery worker (`Outbox.ts`
   * `notifyDeliveries`, a statement of its own right after, O11) when the
   * event fanned out (default true); false when the caller wakes this
   * process's worker itself once the statement returned (`Webhooks/Wakeup.ts`).
   */
  readonly notify?: boolean | undefined
}

/**
 * The messages repository (SQL only). Every method may fail with `SqlError`;
 * the decoding ones with `SchemaError` too.
 */
export class MessagesRepo extends Context.Service<
  MessagesRepo,
  {
    /** Runs `self` in one transaction, which the statements join (nested: a savepoint). */
    readonly withTransaction: WithTransaction
    /**
     * Inserts a message (delivery `pending`) into an open session of the
     * organization with its message.created event (W1, W2), in one statement
     * ({@link insertMessageStatement}), then, when the event fanned out and
     * `options.notify` (default true), wakes the delivery workers with a
     * second statement (`Outbox.ts` `notifyDeliveries`, O11).
     */
    readonly insert: (
      organizationId: string,
      sessionId: string,
      message: NewMessage,
      options?: InsertOptions
    ) => Effect.Effect<InsertResult, SqlError.SqlError>
    /**
     * Looks a message up for the session path (D1): whether the session is in
     * the organization, and the message (decoded) when it exists, in any
     * organization (the caller responds 403 for another's).
     */
    readonly find: (
      organizationId: string,
      sessionId: string,
      messageId: string
    ) => Effect.Effect<
      { readonly sessionFound: boolean; readonly message: Message | undefined },
      SqlError.SqlError | Schema.SchemaError
    >
    /** Locks an existing message (inside a transaction) and reads its delivery state (D13). */
    readonly lockDelivery: (
      organizationId: string,
      messageId: string
    ) => Effect.Effect<DeliveryState, SqlError.SqlError>
    /**
     * Updates delivery columns, stamps `updated_at`, writes message.updated
     * (W1) when a delivery field changed, and returns the message (decoded).
     */
    readonly updateDelivery: (
      organizationId: string,
      messageId: string,
      fields: DeliveryFields
    ) => Effect.Effect<Message, SqlError.SqlError | Schema.SchemaError>
    /** Messages of a session matching `search`, oldest first (D3), decoded. */
    readonly search: (
      organizationId: string,
      sessionId: string,
      search: MessageSearch
    ) => Effect.Effect<ReadonlyArray<Message>, SqlError.SqlError | Schema.SchemaError>
    /** Whether the session exists in the organization (D1). */
    readonly sessionExists: (organizationId: string, sessionId: string) => Effect.Effect<boolean, SqlError.SqlError>
    /**
     * The latest `limit` text messages of the session (created before
     * `before` when given, A16), oldest first (R2); a redacted text message
     * has the text {@link REDACTED_HISTORY_TEXT} (D23).
     */
    readonly history: (
      organizationId: string,
      sessionId: string,
      limit: number,
      before?: Date
    ) => Effect.Effect<ReadonlyArray<HistoryEntry>, SqlError.SqlError>
    /**
     * Locks (inside a transaction), in id order, an existing message and, while
     * it is not redacted, the `function_call`/`function_result` messages of
     * its run (same session and `run_id`): what a redaction overwrites (D23).
     */
    readonly lockRedaction: (
      organizationId: string,
      messageId: string
    ) => Effect.Effect<ReadonlyArray<RedactionLock>, SqlError.SqlError>
    /**
     * Redacts the locked `messageIds` not redacted yet (D23): their content,
     * the copies inside their events not yet delivered, a message.updated
     * each (W1). Returns `messageId`, which must be one of them and not
     * redacted yet (decoded).
     */
    readonly redact: (
      organizationId: string,
      messageId: string,
      messageIds: ReadonlyArray<string>
    ) => Effect.Effect<Message, SqlError.SqlError | Schema.SchemaError>
    /**
     * The message `target` names in a conversation (D24), locked (inside a
     * transaction): by id, else with `byProviderId` by the channel's id.
     * Undefined when none.
     */
    readonly lockReferenced: (
      organizationId: string,
      scope: ConversationScope,
      target: string,
      byProviderId: boolean
    ) => Effect.Effect<ReferencedMessage | undefined, SqlError.SqlError>
    /**
     * Applies `role`'s reaction `emoji` ("" removes it) to the locked
     * message (D24): its summary, and message.updated when it changed (W1).
     */
    readonly react: (
      organizationId: string,
      targetId: string,
      role: MessageRole,
      emoji: string
    ) => Effect.Effect<void, SqlError.SqlError>
  }
>()("parley/Messages/MessagesRepo") {
  /** Over PostgreSQL. Requires `PgClient` and `Ids`. */
  static readonly layer = Layer.effect(MessagesRepo, makeRepo)
}
