/**
 * SQL of unified ingest (conversations.md "Unified ingest"; DECISIONS.md D8-D10,
 * W1, W2). The statements of the common paths are fixed texts, prepared once
 * per connection and shared with the benchmark's baseline
 * (bench/baseline/sql.ts), each doing as much as one statement can:
 *
 * - {@link ingestLockStatement}: the per-(organization, channel_type, to, from)
 *   advisory transaction lock (D9). It is its own statement because a
 *   statement's snapshot is taken when it starts: only statements after the
 *   lock see what the previous holder committed.
 * - {@link ingestStepStatement}: contact and conversation (with conversation.created),
 *   the open session, the idempotency claim (D10), and for a plain message to
 *   an open session the message itself with message.created, in one statement.
 * - {@link ingestOpenStatement}: a new session with session.created, and its first
 *   message with message.created, in one statement.
 * - {@link ingestMessageStatement}: a message with message.created into the session
 *   the step locked (after an agent change or metadata patch).
 *
 * Ingest owns none of the tables it writes besides `ingest_receipts`: its
 * statements cross domains on purpose, as the measured hot path of
 * `npm run bench -- ingest` (one call, one round trip after the lock; the
 * other such statement is POST message's with an Idempotency-Key,
 * `Messages/Repo.ts`). They compose the pieces the owners export (the
 * sessions domain's contact, conversation and session CTEs, the messages
 * domain's message CTEs, the outbox's events), so each write's SQL has one
 * owner. Parameters are named (`Database/Statement.ts`). Events carry the
 * trace context of the call (`{"traceparent": ...}`, W4). Every statement
 * filters by organization. Times are `statement_timestamp()` as in the other
 * repositories.
 */
import { PgClient } from "@effect/sql-pg"
import { Context, Effect, Layer } from "effect"
import type { SqlError } from "effect/sql"
import type { WithTransaction } from "../Database/Database.ts"
import { contentColumnText, jsonColumnText } from "../Database/Json.ts"
import { fixedStatement } from "../Database/Statement.ts"
import type { JsonObject } from "../Domain/Common.ts"
import type { Content } from "../Domain/Content.ts"
import type { MessageRole } from "../Domain/Message.ts"
import { insertMessageCtes, type MessageRow, replyTargetSql } from "../Messages/Repo.ts"
import { notifyDeliveriesIf, wroteSubscribedSql } from "../Outbox/Outbox.ts"
import { conversationCtes, openSessionCtes, upsertContactSql } from "../Sessions/Repo.ts"

/**
 * The advisory transaction lock of one ingest pair (D9): a 64-bit hash of the
 * JSON array `[organization id, channel_type, to, from]`, an unambiguous
 * encoding of the four values (PostgreSQL text cannot hold the NUL a plain
 * separator would need). Held until the transaction ends. A hash collision
 * only serializes two pairs that needn't be.
 */
export const ingestLockStatement = fixedStatement(
  { organizationId: "text", channelType: "text", channelTo: "text", contactId: "text" },
  (p) => `SELECT 1 AS locked FROM pg_advisory_xact_lock(
  hashtextextended(json_build_array(${p.organizationId}, ${p.channelType}, ${p.channelTo}, ${p.contactId})::text, 0))`
)

/** Parameters of the ingest step (see {@link stepStatement}). */
const stepParameters = {
  organizationId: "uuid",
  contactId: "text",
  channelType: "text",
  channelTo: "text",
  conversationId: "uuid",
  conversationEventId: "uuid",
  contactName: "text?",
  contactPhone: "text?",
  providerMessageId: "text?",
  repliedProviderMessageId: "text?",
  messageId: "uuid?",
  newSessionId: "uuid",
  reuseOpen: "boolean",
  role: "text?",
  content: "json?",
  append: "boolean",
  messageEventId: "uuid",
  requestedAgentId: "uuid?",
  traceContext: "jsonb?"
} as const

/**
 * The ingest step, run right after {@link ingestLockStatement}:
 *
 * 1. finds the conversation of (organization, from, channel_type, to), or
 *    creates it with its conversation.created event (D8, W1; the sessions
 *    domain's `conversationCtes`);
 * 2. finds the conversation's open session and locks it (`FOR SHARE` when the
 *    call may append, else `FOR UPDATE`, as the caller will change it);
 * 3. with a `providerMessageId`, claims the (conversation, provider_message_id)
 *    receipt for the message id and its target session (the open session when
 *    it is reused, else the id the new session will get); when the pair was
 *    already claimed, returns the first call's ids and changes nothing else (D10);
 * 4. creates the contact, or updates its name and phone when given and
 *    different (D8; the sessions domain's `upsertContactSql`);
 * 5. when `append` is set and an open session exists, inserts the message and
 *    its message.created event (W2, W3; the messages domain's
 *    `insertMessageCtes`);
 * 6. returns one row ({@link IngestState}): the conversation, the open
 *    session with its agent, the inserted or duplicate message, and what a new
 *    session needs (the organization's default agent and reply debounce, the
 *    requested agent).
 */
const stepStatement = (lock: "SHARE" | "UPDATE") =>
  fixedStatement(
    stepParameters,
    (p) => `WITH ${conversationCtes({
      id: p.conversationId,
      organizationId: p.organizationId,
      contactId: p.contactId,
      channelType: p.channelType,
      channelTo: p.channelTo,
      eventId: p.conversationEventId,
      traceContext: p.traceContext
    })}, s AS (
  SELECT id, agent_id, thread_id, metadata FROM sessions
  WHERE conversation_id = (SELECT id FROM c0) AND organization_id = ${p.organizationId} AND status = 'open'
  ORDER BY created_at DESC, id DESC LIMIT 1
  FOR ${lock}
), r AS (
  INSERT INTO ingest_receipts (organization_id, conversation_id, provider_message_id, message_id, session_id, created_at)
  SELECT ${p.organizationId}, c.id, ${p.providerMessageId}, ${p.messageId},
    CASE WHEN ${p.reuseOpen} THEN coalesce((SELECT id FROM s), ${p.newSessionId}) ELSE ${p.newSessionId} END,
    statement_timestamp()
  FROM c WHERE ${p.providerMessageId} IS NOT NULL
  ON CONFLICT (organization_id, conversation_id, provider_message_id) DO NOTHING
  RETURNING message_id
), d AS (
  SELECT message_id, session_id FROM ingest_receipts
  WHERE organization_id = ${p.organizationId} AND conversation_id = (SELECT id FROM c0) AND provider_message_id = ${p.providerMessageId}
    AND NOT EXISTS (SELECT 1 FROM r)
), ct AS (
  ${upsertContactSql({
    organizationId: p.organizationId,
    contactId: p.contactId,
    name: p.contactName,
    phone: p.contactPhone,
    when: "NOT EXISTS (SELECT 1 FROM d)"
  })}
), ${ingestMessageCtes({
      id: p.messageId,
      organizationId: p.organizationId,
      conversationId: "(SELECT id FROM c0)",
      role: p.role,
      content: p.content,
      providerMessageId: p.providerMessageId,
      repliedProviderMessageId: p.repliedProviderMessageId,
      eventId: p.messageEventId,
      traceContext: p.traceContext,
      where: `${p.append} AND NOT EXISTS (SELECT 1 FROM d)`
    })}
SELECT c.id AS conversation_id, c.created AS conversation_created,
  s.id AS session_id, s.agent_id, s.thread_id, sa.type AS agent_type,
  CASE WHEN ${p.append} THEN NULL ELSE s.metadata::text END AS metadata,
  (SELECT id FROM j) AS message_id,
  d.message_id AS duplicate_message_id, d.session_id AS duplicate_session_id,
  da.id AS default_agent_id, da.type AS default_agent_type,
  coalesce(os.reply_debounce_seconds, 3) AS reply_debounce_seconds,
  ra.id AS requested_agent_id, ra.type AS requested_agent_type,
  ${wroteSubscribedSql(["ce", "me"], p.organizationId)} AS subscribed
FROM c
LEFT JOIN s ON true
LEFT JOIN agents sa ON sa.organization_id = ${p.organizationId} AND sa.id = s.agent_id
LEFT JOIN d ON true
LEFT JOIN organization_settings os ON os.organization_id = ${p.organizationId}
LEFT JOIN agents da ON da.organization_id = os.organization_id AND da.id = os.default_agent_id
  AND da.deleted_at IS NULL
-- The requested agent as a subquery of its own, its filters inside: on Citus, filters in a LEFT JOIN's ON
-- do not prune, and the agents of every organization were read (O11).
LEFT JOIN (SELECT id, type FROM agents WHERE organization_id = ${p.organizationId} AND id = ${p.requestedAgentId}
  AND deleted_at IS NULL) ra ON true`
  )

/**
 * The CTEs writing the message of an ingest call and its message.created
 * event ({@link insertMessageCtes}) into the session row `s`: a channel
 * message replies to what its `replied_provider_message_id` names in the
 * conversation, if anything (D24, `replyTargetSql`), and has no run and empty
 * metadata (the call's `metadata` patches the session, D17).
 */
const ingestMessageCtes = (
  row: Omit<MessageRow, "sessionId" | "replyToMessageId" | "runId" | "metadata" | "from">
): string =>
  insertMessageCtes({
    ...row,
    sessionId: "s.id",
    replyToMessageId: replyTargetSql({
      organizationId: row.organizationId,
      conversationId: row.conversationId,
      replyToMessageId: "NULL::uuid",
      repliedProviderMessageId: row.repliedProviderMessageId
    }),
    runId: "NULL",
    metadata: "'{}'::json",
    from: "s"
  })

/** The step for calls that may append a message to the open session (locks it `FOR SHARE`; the hot path). */
export const ingestStepStatement = stepStatement("SHARE")

/** The step for calls that change the open session (locks it `FOR UPDATE`). */
const ingestControlStatement = stepStatement("UPDATE")

/**
 * A new open session with its session.created event carrying its agent (W1;
 * the sessions domain's `openSessionCtes`), and, when a message id is given,
 * its first message with message.created, in one statement. `contactName` is
 * the given name, else the contact's.
 */
export const ingestOpenStatement = fixedStatement(
  {
    sessionId: "uuid",
    organizationId: "uuid",
    conversationId: "uuid",
    contactId: "text",
    contactName: "text?",
    threadId: "uuid?",
    agentId: "uuid?",
    metadata: "json",
    sessionEventId: "uuid",
    messageId: "uuid?",
    role: "text?",
    content: "json?",
    providerMessageId: "text?",
    repliedProviderMessageId: "text?",
    messageEventId: "uuid",
    traceContext: "jsonb?"
  },
  (p) => `WITH ${openSessionCtes({
    id: p.sessionId,
    organizationId: p.organizationId,
    conversationId: p.conversationId,
    contactId: p.contactId,
    contactName: p.contactName,
    threadId: p.threadId,
    status: "'open'",
    agentId: p.agentId,
    metadata: p.metadata,
    eventId: p.sessionEventId,
    traceContext: p.traceContext
  })}, ${ingestMessageCtes({
    id: p.messageId,
    // The parameters `s` was made with, not its columns: on Citus the INSERT CTE `s` is an
    // intermediate result, which a correlated subquery (the reply target's) cannot read (O11).
    organizationId: p.organizationId,
    conversationId: p.conversationId,
    role: p.role,
    content: p.content,
    providerMessageId: p.providerMessageId,
    repliedProviderMessageId: p.repliedProviderMessageId,
    eventId: p.messageEventId,
    traceContext: p.traceContext,
    where: `${p.messageId} IS NOT NULL`
  })}
SELECT (SELECT id FROM s) AS session_id, (SELECT id FROM j) AS message_id,
  ${wroteSubscribedSql(["se", "me"], p.organizationId)} AS subscribed`
)

/**
 * A message with a chosen id and its message.created event, into the open
 * session the step locked (after an agent change or metadata patch).
 */
export const ingestMessageStatement = fixedStatement(
  {
    sessionId: "uuid",
    organizationId: "uuid",
    messageId: "uuid",
    role: "text",
    content: "json",
    providerMessageId: "text?",
    repliedProviderMessageId: "text?",
    messageEventId: "uuid",
    traceContext: "jsonb?"
  },
  (p) => `WITH s AS (
  SELECT id, conversation_id FROM sessions
  WHERE id = ${p.sessionId} AND organization_id = ${p.organizationId} AND status = 'open'
), ${ingestMessageCtes({
    id: p.messageId,
    organizationId: p.organizationId,
    conversationId: "s.conversation_id",
    role: p.role,
    content: p.content,
    providerMessageId: p.providerMessageId,
    repliedProviderMessageId: p.repliedProviderMessageId,
    eventId: p.messageEventId,
    traceContext: p.traceContext,
    where: "true"
  })}
SELECT (SELECT id FROM j) AS message_id, ${wroteSubscribedSql(["me"], p.organizationId)} AS subscribed`
)

/** The agent kinds (spec "Agent"). */
type AgentType = "ai" | "human"

/** The row {@link ingestStepStatement} returns. Ids are UUID text. */
export interface IngestState {
  readonly conversation_id: string
  readonly conversation_created: boolean
  /** The open session, locked; null when the conversation has none. */
  readonly session_id: string | null
  readonly agent_id: string | null
  readonly thread_id: string | null
  readonly agent_type: AgentType | null
  /** The open session's metadata as JSON text; null when appending. */
  readonly metadata: string | null
  /** The message inserted by the step (append), else null. */
  readonly message_id: string | null
  /** The first call's ids when the receipt was already claimed (D10), else null. */
  readonly duplicate_message_id: string | null
  readonly duplicate_session_id: string | null
  readonly default_agent_id: string | null
  readonly default_agent_type: AgentType | null
  /** Whole seconds (organization settings, default 3). */
  readonly reply_debounce_seconds: number
  /** The requested agent when it is an agent of the organization (D6), else null. */
  readonly requested_agent_id: string | null
  readonly requested_agent_type: AgentType | null
  /** Whether the step's events fanned out (`Outbox.ts` `wroteSubscribedSql`): the step then woke the delivery workers. */
  readonly subscribed: boolean
}

/** A message an ingest call stores. */
export interface IngestMessage {
  readonly id: string
  readonly role: MessageRole
  readonly content: Content
  readonly providerMessageId: string | null
  /** The channel's id of the message it replies to (D24), resolved within the conversation. */
  readonly repliedProviderMessageId: string | null
}

/** Inputs of {@link ingestStepStatement}. */
export interface IngestStep {
  readonly organizationId: string
  readonly contactId: string
  readonly channelType: string
  readonly channelTo: string
  readonly contactName: string | null
  readonly contactPhone: string | null
  /** The message of the call; its `providerMessageId` is claimed (D10). */
  readonly message: IngestMessage | undefined
  /** Insert the message into the open session when there is one. */
  readonly append: boolean
  /** Whether an open session is reused (`continue`, `close`) rather than replaced (`new`). */
  readonly reuseOpen: boolean
  /** The id a session created by this call will get. */
  readonly newSessionId: string
  /** A UUID of an agent to look up (D6), or null. */
  readonly requestedAgentId: string | null
  /** `{"traceparent": ...}` as JSON text for the events (W4), or null. */
  readonly traceContext: string | null
  readonly newId: () => string
}

/** Inputs of {@link ingestOpenStatement}. */
export interface IngestOpen {
  readonly id: string
  readonly organizationId: string
  readonly conversationId: string
  readonly contactId: string
  readonly contactName: string | null
  readonly threadId: string | null
  readonly agentId: string | null
  readonly metadata: JsonObject
  readonly message: IngestMessage | undefined
  readonly traceContext: string | null
  readonly newId: () => string
}

const makeRepo: Effect.Effect<IngestRepo["Service"], never, PgClient.PgClient> = Effect.gen(function* () {
  const sql = yield* PgClient.PgClient

  /** Takes the pair's advisory transaction lock (D9); inside a transaction only. */
  const lock = (organizationId: string, channelType: string, channelTo: string, contactId: string) =>
    ingestLockStatement.run(sql, { organizationId, channelType, channelTo, contactId }).pipe(Effect.asVoid)

  /** Runs the step ({@link ingestStepStatement}, or its `FOR UPDATE` form when not appending); returns its row. */
  const step = (input: IngestStep) => {
    const message = input.message
    return (input.append ? ingestStepStatement : ingestControlStatement)
      .run<IngestState>(sql, {
        organizationId: input.organizationId,
        contactId: input.contactId,
        channelType: input.channelType,
        channelTo: input.channelTo,
        conversationId: input.newId(),
        conversationEventId: input.newId(),
        contactName: input.contactName,
        contactPhone: input.contactPhone,
        providerMessageId: message?.providerMessageId ?? null,
        repliedProviderMessageId: message?.repliedProviderMessageId ?? null,
        messageId: message?.id ?? null,
        newSessionId: input.newSessionId,
        reuseOpen: input.reuseOpen,
        role: message?.role ?? null,
        content: message === undefined ? null : contentColumnText(message.content),
        append: input.append && message !== undefined,
        messageEventId: input.newId(),
        requestedAgentId: input.requestedAgentId,
        traceContext: input.traceContext
      })
      .pipe(Effect.flatMap(([row]) => Effect.as(notifyDeliveriesIf(sql, row!.subscribed, input.organizationId), row!)))
  }

  /** Runs {@link ingestOpenStatement}; returns the message id when one was inserted. */
  const open = (input: IngestOpen) => {
    const message = input.message
    return ingestOpenStatement
      .run<{ session_id: string; message_id: string | null; subscribed: boolean }>(sql, {
        sessionId: input.id,
        organizationId: input.organizationId,
        conversationId: input.conversationId,
        contactId: input.contactId,
        contactName: input.contactName,
        threadId: input.threadId,
        agentId: input.agentId,
        metadata: jsonColumnText(input.metadata),
        sessionEventId: input.newId(),
        messageId: message?.id ?? null,
        role: message?.role ?? null,
        content: message === undefined ? null : contentColumnText(message.content),
        providerMessageId: message?.providerMessageId ?? null,
        repliedProviderMessageId: message?.repliedProviderMessageId ?? null,
        messageEventId: input.newId(),
        traceContext: input.traceContext
      })
      .pipe(
        Effect.flatMap(([row]) =>
          Effect.as(notifyDeliveriesIf(sql, row!.subscribed, input.organizationId), row!.message_id)
        )
      )
  }

  /**
   * Runs {@link ingestMessageStatement}: the message with its id into the open
   * session. Returns whether it was inserted (false when the session is not open).
   */
  const insertMessage = (
    organizationId: string,
    sessionId: string,
    message: IngestMessage,
    eventId: string,
    traceContext: string | null
  ) =>
    ingestMessageStatement
      .run<{ message_id: string | null; subscribed: boolean }>(sql, {
        sessionId,
        organizationId,
        messageId: message.id,
        role: message.role,
        content: contentColumnText(message.content),
        providerMessageId: message.providerMessageId,
        repliedProviderMessageId: message.repliedProviderMessageId,
        messageEventId: eventId,
        traceContext
      })
      .pipe(
        Effect.flatMap(([row]) =>
          Effect.as(notifyDeliveriesIf(sql, row?.subscribed === true, organizationId), row?.message_id != null)
        )
      )

  /** Points the receipt of (conversation, provider id) at the message an edit changed (D10, D24). */
  const retargetReceipt = (
    organizationId: string,
    conversationId: string,
    providerMessageId: string,
    messageId: string,
    sessionId: string
  ) =>
    sql`UPDATE ingest_receipts SET message_id = ${messageId}, session_id = ${sessionId}
      WHERE organization_id = ${organizationId} AND conversation_id = ${conversationId}
        AND provider_message_id = ${providerMessageId}`.pipe(Effect.asVoid)

  return IngestRepo.of({
    withTransaction: (self) => sql.withTransaction(self),
    lock,
    step,
    open,
    insertMessage,
    retargetReceipt
  })
})

/**
 * The ingest repository (SQL only; see module docs). Every method may fail
 * with `SqlError`.
 */
export class IngestRepo extends Context.Service<
  IngestRepo,
  {
    /** Runs `self` in one transaction, which the statements join (nested: a savepoint). */
    readonly withTransaction: WithTransaction
    /** Takes the pair's advisory transaction lock (D9, {@link ingestLockStatement}); inside a transaction only. */
    readonly lock: (
      organizationId: string,
      channelType: string,
      channelTo: string,
      contactId: string
    ) => Effect.Effect<void, SqlError.SqlError>
    /** Runs the step ({@link ingestStepStatement}, or its `FOR UPDATE` form when not appending); returns its row. */
    readonly step: (input: IngestStep) => Effect.Effect<IngestState, SqlError.SqlError>
    /** Runs {@link ingestOpenStatement}; returns the message id when one was inserted, else null. */
    readonly open: (input: IngestOpen) => Effect.Effect<string | null, SqlError.SqlError>
    /**
     * Runs {@link ingestMessageStatement}: the message with its id, and its
     * message.created event with id `eventId`, into the open session. Returns
     * whether it was inserted (false when the session is not open).
     */
    readonly insertMessage: (
      organizationId: string,
      sessionId: string,
      message: IngestMessage,
      eventId: string,
      traceContext: string | null
    ) => Effect.Effect<boolean, SqlError.SqlError>
    /**
     * Points the receipt of (conversation, `providerMessageId`) at the
     * message an edit changed and its session (D24), so a repeat of the call
     * answers those ids (D10).
     */
    readonly retargetReceipt: (
      organizationId: string,
      conversationId: string,
      providerMessageId: string,
      messageId: string,
      sessionId: string
    ) => Effect.Effect<void, SqlError.SqlError>
  }
>()("parley/Ingest/IngestRepo") {
  /** Over PostgreSQL. Requires `PgClient`. */
  static readonly layer = Layer.effect(IngestRepo, makeRepo)
}
