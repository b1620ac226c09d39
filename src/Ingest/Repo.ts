/**
 * SQL of unified ingest (conversations.md "Unified ingest"; DECISIONS.md D8-D10,
 * W1, W2). The statements of the common paths are fixed texts, prepared once
 * per connection and shared with the benchmark's baseline
 * (bench/baseline/sql.ts), each doing as much as one statement can:
 *
 * - {@link ingestLockSql}: the per-(organization, channel_type, to, from)
 *   advisory transaction lock (D9). It is its own statement because a
 *   statement's snapshot is taken when it starts: only statements after the
 *   lock see what the previous holder committed.
 * - {@link ingestStepSql}: contact and conversation (with conversation.created),
 *   the open session, the idempotency claim (D10), and for a plain message to
 *   an open session the message itself with message.created, in one statement.
 * - {@link ingestOpenSql}: a new session with session.created, and its first
 *   message with message.created, in one statement.
 * - {@link ingestMessageSql}: a message with message.created into the session
 *   the step locked (after an agent change or metadata patch).
 *
 * Messages and their events are built as `insertMessageSql` of
 * src/Messages/Repo.ts builds them (the same `Database/Json.ts` fragments, the
 * message JSON built once and reused for the event); ingest has its own
 * statements because it chooses the message id before the message exists (the
 * receipt names it, D10). Events carry the trace context of the call
 * (`{"traceparent": ...}`, W4). Every statement filters by organization. Times
 * are `statement_timestamp()` as in the other repositories.
 */
import { PgClient } from "@effect/sql-pg"
import { Context, Effect, Layer } from "effect"
import { conversationJson, envelopeText, messageJson, sessionJson } from "../Database/Json.ts"
import type { JsonObject } from "../Domain/Common.ts"
import type { Content } from "../Domain/Content.ts"
import type { MessageRole } from "../Domain/Message.ts"

/**
 * The advisory transaction lock of one ingest pair (D9): a 64-bit hash of the
 * JSON array `[organization id, channel_type, to, from]`, an unambiguous
 * encoding of the four values (PostgreSQL text cannot hold the NUL a plain
 * separator would need). Held until the transaction ends. Parameters: $1
 * organization id, $2 channel_type, $3 to, $4 from. A hash collision only
 * serializes two pairs that needn't be.
 */
export const ingestLockSql = `SELECT 1 AS locked FROM pg_advisory_xact_lock(
  hashtextextended(json_build_array($1::text, $2::text, $3::text, $4::text)::text, 0))`

/**
 * CTEs `m`, `j`, `me` inserting a message built from the rows of `from` (filtered
 * by `where`) and its message.created event with the message JSON built once
 * (W2, W3). Arguments are SQL expressions.
 */
const insertMessageCtes = (p: {
  readonly id: string
  readonly organizationId: string
  readonly sessionId: string
  readonly conversationId: string
  readonly from: string
  readonly where: string
  readonly role: string
  readonly content: string
  readonly providerMessageId: string
  readonly eventId: string
  readonly traceContext: string
}) => `m AS (
  INSERT INTO messages (id, organization_id, session_id, conversation_id, role, content, provider_message_id,
    replied_provider_message_id, run_id, metadata, created_at)
  SELECT ${p.id}, ${p.organizationId}, ${p.sessionId}, ${p.conversationId}, ${p.role}, ${p.content},
    ${p.providerMessageId}, NULL, NULL, '{}'::jsonb, statement_timestamp()
  FROM ${p.from} WHERE ${p.where}
  RETURNING *
), j AS (
  SELECT m.id, m.organization_id, m.created_at, ${messageJson("m")} AS body FROM m
), me AS (
  INSERT INTO events (id, organization_id, type, body, trace_context, created_at)
  SELECT ev.id, j.organization_id, 'message.created',
    ${envelopeText("ev.id", "'message.created'", "j.organization_id", "j.created_at", "j.body")}, ${p.traceContext},
    j.created_at
  FROM j CROSS JOIN (SELECT ${p.eventId} AS id) ev
)`

/**
 * The ingest step, run right after {@link ingestLockSql}:
 *
 * 1. finds the conversation of (organization, from, channel_type, to), or
 *    creates it with its conversation.created event (D8, W1);
 * 2. finds the conversation's open session and locks it (`FOR SHARE` when the
 *    call may append, else `FOR UPDATE`, as the caller will change it);
 * 3. with a `provider_message_id`, claims the (conversation, provider_message_id)
 *    receipt for the message id and its target session (the open session when
 *    it is reused, else the id the new session will get); when the pair was
 *    already claimed, answers the first call's ids and changes nothing else (D10);
 * 4. creates the contact, or updates its name and phone when given and
 *    different (D8; an unchanged contact is not written);
 * 5. when `append` is set and an open session exists, inserts the message and
 *    its message.created event (W2, W3), the JSON built once as in
 *    `insertMessageSql`;
 * 6. answers one row ({@link IngestState}): the conversation, the open
 *    session with its agent, the inserted or duplicate message, and what a new
 *    session needs (the organization's default agent and reply debounce, the
 *    requested agent).
 *
 * Parameters: $1 organization id, $2 from (contact id), $3 channel_type, $4 to,
 * $5 id of the conversation if created, $6 id of its event, $7 contact name,
 * $8 contact phone, $9 provider_message_id (null: no claim), $10 message id,
 * $11 id of the session if one is created, $12 whether an open session is
 * reused (not `new`), $13 role, $14 content (JSON text), $15 append,
 * $16 message.created event id, $17 requested agent id (null: none), $18 trace
 * context of the events (JSON text or null).
 */
const stepSql = (lock: "SHARE" | "UPDATE") => `WITH c0 AS (
  SELECT id FROM conversations
  WHERE organization_id = $1::uuid AND contact_id = $2::text AND channel_type = $3::text AND channel_to = $4::text
), c1 AS (
  INSERT INTO conversations (id, organization_id, contact_id, channel_type, channel_to, created_at)
  SELECT $5::uuid, $1, $2, $3, $4, statement_timestamp() WHERE NOT EXISTS (SELECT 1 FROM c0)
  RETURNING *
), ce AS (
  INSERT INTO events (id, organization_id, type, body, trace_context, created_at)
  SELECT ev.id, c.organization_id, 'conversation.created',
    ${envelopeText("ev.id", "'conversation.created'", "c.organization_id", "c.created_at", conversationJson("c"))},
    $18::jsonb, c.created_at
  FROM c1 c CROSS JOIN (SELECT $6::uuid AS id) ev
), c AS (
  SELECT id, false AS created FROM c0 UNION ALL SELECT id, true FROM c1
), s AS (
  SELECT id, agent_id, thread_id, metadata FROM sessions
  WHERE conversation_id = (SELECT id FROM c0) AND organization_id = $1 AND status = 'open'
  ORDER BY created_at DESC, id DESC LIMIT 1
  FOR ${lock}
), r AS (
  INSERT INTO ingest_receipts (organization_id, conversation_id, provider_message_id, message_id, session_id, created_at)
  SELECT $1, c.id, $9::text, $10::uuid,
    CASE WHEN $12::boolean THEN coalesce((SELECT id FROM s), $11::uuid) ELSE $11::uuid END, statement_timestamp()
  FROM c WHERE $9 IS NOT NULL
  ON CONFLICT (conversation_id, provider_message_id) DO NOTHING
  RETURNING message_id
), d AS (
  SELECT message_id, session_id FROM ingest_receipts
  WHERE conversation_id = (SELECT id FROM c0) AND provider_message_id = $9 AND NOT EXISTS (SELECT 1 FROM r)
), ct AS (
  INSERT INTO contacts (organization_id, contact_id, name, phone, created_at)
  SELECT $1, $2, $7::text, $8::text, statement_timestamp()
  WHERE NOT EXISTS (SELECT 1 FROM d) AND NOT EXISTS (
    SELECT 1 FROM contacts WHERE organization_id = $1 AND contact_id = $2
      AND ($7::text IS NULL OR name = $7) AND ($8::text IS NULL OR phone = $8))
  ON CONFLICT (organization_id, contact_id) DO UPDATE
    SET name = coalesce(EXCLUDED.name, contacts.name), phone = coalesce(EXCLUDED.phone, contacts.phone),
      updated_at = statement_timestamp()
    WHERE (EXCLUDED.name IS NOT NULL AND EXCLUDED.name IS DISTINCT FROM contacts.name)
      OR (EXCLUDED.phone IS NOT NULL AND EXCLUDED.phone IS DISTINCT FROM contacts.phone)
), ${insertMessageCtes({
  id: "$10",
  organizationId: "$1",
  sessionId: "s.id",
  conversationId: "(SELECT id FROM c0)",
  from: "s",
  where: "$15::boolean AND NOT EXISTS (SELECT 1 FROM d)",
  role: "$13::text",
  content: "$14::jsonb",
  providerMessageId: "$9",
  eventId: "$16::uuid",
  traceContext: "$18::jsonb"
})}
SELECT c.id AS conversation_id, c.created AS conversation_created,
  s.id AS session_id, s.agent_id, s.thread_id, sa.type AS agent_type,
  CASE WHEN $15 THEN NULL ELSE s.metadata::text END AS metadata,
  (SELECT id FROM j) AS message_id,
  d.message_id AS duplicate_message_id, d.session_id AS duplicate_session_id,
  da.id AS default_agent_id, da.type AS default_agent_type,
  coalesce(os.reply_debounce_seconds, 3) AS reply_debounce_seconds,
  ra.id AS requested_agent_id, ra.type AS requested_agent_type
FROM c
LEFT JOIN s ON true
LEFT JOIN agents sa ON sa.id = s.agent_id
LEFT JOIN d ON true
LEFT JOIN organization_settings os ON os.organization_id = $1
LEFT JOIN agents da ON da.id = os.default_agent_id
LEFT JOIN agents ra ON ra.id = $17::uuid AND ra.organization_id = $1`

/** {@link stepSql} for calls that may append a message to the open session (locks it `FOR SHARE`). */
export const ingestStepSql = stepSql("SHARE")

/** {@link stepSql} for calls that change the open session (locks it `FOR UPDATE`). */
export const ingestControlSql = stepSql("UPDATE")

/**
 * A new open session with its session.created event carrying its agent (W1),
 * and, when a message id is given, its first message with message.created, in
 * one statement. `contact_name` is the given name, else the contact's.
 * Parameters: $1 session id, $2 organization id, $3 conversation id, $4 contact
 * id, $5 contact name, $6 thread id, $7 agent id, $8 metadata (JSON text),
 * $9 session.created event id, $10 message id (null: no message), $11 role,
 * $12 content (JSON text), $13 provider_message_id, $14 message.created event id,
 * $15 trace context of the events (JSON text or null).
 */
export const ingestOpenSql = `WITH s AS (
  INSERT INTO sessions (id, organization_id, conversation_id, contact_id, contact_name, thread_id, status, agent_id,
    metadata, created_at)
  SELECT $1::uuid, $2::uuid, $3::uuid, $4::text,
    coalesce($5::text, (SELECT name FROM contacts WHERE organization_id = $2 AND contact_id = $4)),
    $6::uuid, 'open', $7::uuid, $8::jsonb, statement_timestamp()
  RETURNING *
), se AS (
  INSERT INTO events (id, organization_id, type, body, trace_context, created_at)
  SELECT ev.id, s.organization_id, 'session.created',
    ${envelopeText("ev.id", "'session.created'", "s.organization_id", "s.created_at", sessionJson("s", "a"))},
    $15::jsonb, s.created_at
  FROM s LEFT JOIN agents a ON a.id = s.agent_id CROSS JOIN (SELECT $9::uuid AS id) ev
), ${insertMessageCtes({
  id: "$10::uuid",
  organizationId: "s.organization_id",
  sessionId: "s.id",
  conversationId: "s.conversation_id",
  from: "s",
  where: "$10 IS NOT NULL",
  role: "$11::text",
  content: "$12::jsonb",
  providerMessageId: "$13::text",
  eventId: "$14::uuid",
  traceContext: "$15::jsonb"
})}
SELECT (SELECT id FROM s) AS session_id, (SELECT id FROM j) AS message_id`

/**
 * A message with a chosen id and its message.created event, into the open
 * session the step locked. Parameters: $1 session id, $2 organization id,
 * $3 message id, $4 role, $5 content (JSON text), $6 provider_message_id,
 * $7 message.created event id, $8 trace context (JSON text or null).
 */
export const ingestMessageSql = `WITH s AS (
  SELECT id, conversation_id FROM sessions WHERE id = $1::uuid AND organization_id = $2::uuid AND status = 'open'
), ${insertMessageCtes({
  id: "$3::uuid",
  organizationId: "$2",
  sessionId: "s.id",
  conversationId: "s.conversation_id",
  from: "s",
  where: "true",
  role: "$4::text",
  content: "$5::jsonb",
  providerMessageId: "$6::text",
  eventId: "$7::uuid",
  traceContext: "$8::jsonb"
})}
SELECT (SELECT id FROM j) AS message_id`

/** The agent kinds (spec "Agent"). */
type AgentType = "ai" | "human"

/** The row {@link ingestStepSql} answers. Ids are UUID text. */
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
}

/** A message an ingest call stores. */
export interface IngestMessage {
  readonly id: string
  readonly role: MessageRole
  readonly content: Content
  readonly providerMessageId: string | null
}

/** Inputs of {@link ingestStepSql}. */
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

/** Inputs of {@link ingestOpenSql}. */
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

const makeRepo = Effect.gen(function* () {
  const sql = yield* PgClient.PgClient

  /** Takes the pair's advisory transaction lock (D9); inside a transaction only. */
  const lock = (organizationId: string, channelType: string, channelTo: string, contactId: string) =>
    sql.unsafe(ingestLockSql, [organizationId, channelType, channelTo, contactId]).pipe(Effect.asVoid)

  /** Runs {@link ingestStepSql} (or its `FOR UPDATE` form when not appending); answers its row. */
  const step = (input: IngestStep) => {
    const message = input.message
    return sql
      .unsafe<IngestState>(input.append ? ingestStepSql : ingestControlSql, [
        input.organizationId,
        input.contactId,
        input.channelType,
        input.channelTo,
        input.newId(),
        input.newId(),
        input.contactName,
        input.contactPhone,
        message?.providerMessageId ?? null,
        message?.id ?? null,
        input.newSessionId,
        input.reuseOpen,
        message?.role ?? null,
        message === undefined ? null : JSON.stringify(message.content),
        input.append && message !== undefined,
        input.newId(),
        input.requestedAgentId,
        input.traceContext
      ])
      .pipe(Effect.map((rows) => rows[0]!))
  }

  /** Runs {@link ingestOpenSql}; answers the message id when one was inserted. */
  const open = (input: IngestOpen) => {
    const message = input.message
    return sql
      .unsafe<{ session_id: string; message_id: string | null }>(ingestOpenSql, [
        input.id,
        input.organizationId,
        input.conversationId,
        input.contactId,
        input.contactName,
        input.threadId,
        input.agentId,
        JSON.stringify(input.metadata),
        input.newId(),
        message?.id ?? null,
        message?.role ?? null,
        message === undefined ? null : JSON.stringify(message.content),
        message?.providerMessageId ?? null,
        input.newId(),
        input.traceContext
      ])
      .pipe(Effect.map((rows) => rows[0]!.message_id))
  }

  /**
   * Runs {@link ingestMessageSql}: the message with its id into the open
   * session. Answers whether it was inserted (false when the session is not open).
   */
  const insertMessage = (
    organizationId: string,
    sessionId: string,
    message: IngestMessage,
    eventId: string,
    traceContext: string | null
  ) =>
    sql
      .unsafe<{ message_id: string | null }>(ingestMessageSql, [
        sessionId,
        organizationId,
        message.id,
        message.role,
        JSON.stringify(message.content),
        message.providerMessageId,
        eventId,
        traceContext
      ])
      .pipe(Effect.map((rows) => rows[0]?.message_id != null))

  return { lock, step, open, insertMessage }
})

/** The ingest repository (SQL only; see module docs). Requires `PgClient`. */
export class IngestRepo extends Context.Service<IngestRepo, Effect.Success<typeof makeRepo>>()(
  "parley/Ingest/IngestRepo"
) {
  static readonly layer = Layer.effect(IngestRepo, makeRepo)
}
