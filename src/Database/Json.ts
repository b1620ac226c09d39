/**
 * The wire JSON of sessions, agents, messages and event envelopes, built by
 * PostgreSQL (`json_build_object`, key order kept) so that API responses,
 * outbox events and exports share one definition and the service never decodes
 * and re-encodes rows on its hot paths. Each function returns SQL text over
 * table aliases; the shapes are those of `Domain/Session.ts`, `Domain/Agent.ts`
 * and `Domain/Message.ts` (tests decode every response with those schemas).
 *
 * Timestamps are ISO 8601 in UTC with microseconds: `2026-11-22T08:02:07.123456Z`.
 */

/** SQL text formatting a timestamptz expression as ISO 8601 UTC (null stays null). */
export const isoTimestamp = (expression: string): string =>
  `to_char(${expression} AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')`

/** Members of a wire object: name and SQL expression, in wire order. */
type Members = ReadonlyArray<readonly [string, string]>

/** `expression AS "name", ...`: the members as a select list. */
const columns = (members: Members): string => members.map(([name, expression]) => `${expression} AS "${name}"`).join(", ")

/** `{name: expression, ...}` as compact JSON (`row_to_json` keeps the order and adds no spaces). */
const object = (members: Members): string => `(SELECT row_to_json(j) FROM (SELECT ${columns(members)}) j)`

/** The Agent JSON of the agents row `a`, or null when `a.id` is null (spec "Agent"). */
export const agentJson = (a: string): string => `CASE
  WHEN ${a}.id IS NULL THEN NULL
  WHEN ${a}.type = 'ai' THEN ${object([
    ["id", `${a}.id`],
    ["name", `${a}.name`],
    ["type", `${a}.type`],
    ["assistant_id", `${a}.assistant_id`],
    ["organization_id", `${a}.organization_id`],
    ["created_at", isoTimestamp(`${a}.created_at`)]
  ])}
  ELSE ${object([
    ["id", `${a}.id`],
    ["name", `${a}.name`],
    ["type", `${a}.type`],
    ["profile_id", `${a}.profile_id`],
    ["organization_id", `${a}.organization_id`],
    ["created_at", isoTimestamp(`${a}.created_at`)]
  ])}
END`

/**
 * The Session JSON of the sessions row `s` with its agents row `a` (spec
 * "Session"). With `action`, the object also carries `action` (W1: session.finished
 * and session.closed).
 */
export const sessionJson = (s: string, a: string, action?: string): string => object(sessionMembers(s, a, action))

/**
 * The Session members as a select list (wire order; `agent` as json, timestamps
 * as ISO text): a row of it serializes with `JSON.stringify` to the Session JSON.
 */
export const sessionColumns = (s: string, a: string): string => columns(sessionMembers(s, a))

const sessionMembers = (s: string, a: string, action?: string): Members => [
    ["id", `${s}.id`],
    ["contact_id", `${s}.contact_id`],
    ["organization_id", `${s}.organization_id`],
    ["conversation_id", `${s}.conversation_id`],
    ["thread_id", `${s}.thread_id`],
    ["status", `${s}.status`],
    ["agent", agentJson(a)],
    ["metadata", `${s}.metadata`],
    ["ending_survey_submission_id", `${s}.ending_survey_submission_id`],
    ["created_at", isoTimestamp(`${s}.created_at`)],
    ["updated_at", isoTimestamp(`${s}.updated_at`)],
    ...(action === undefined ? [] : [["action", action] as const])
  ]

/** The Message JSON of the messages row `m` (spec "Message"). */
export const messageJson = (m: string): string => object(messageMembers(m))

/**
 * The Message members as a select list (wire order, timestamps as ISO text): a
 * row of it serializes with `JSON.stringify` to the Message JSON.
 */
export const messageColumns = (m: string): string => columns(messageMembers(m))

const messageMembers = (m: string): Members => [
    ["id", `${m}.id`],
    ["session_id", `${m}.session_id`],
    ["conversation_id", `${m}.conversation_id`],
    ["organization_id", `${m}.organization_id`],
    ["role", `${m}.role`],
    ["content", `${m}.content`],
    ["provider_message_id", `${m}.provider_message_id`],
    ["replied_provider_message_id", `${m}.replied_provider_message_id`],
    ["run_id", `${m}.run_id`],
    ["delivery_status", `${m}.delivery_status`],
    ["delivery_error_code", `${m}.delivery_error_code`],
    ["delivery_error_message", `${m}.delivery_error_message`],
    ["delivered_at", isoTimestamp(`${m}.delivered_at`)],
    ["metadata", `${m}.metadata`],
    ["created_at", isoTimestamp(`${m}.created_at`)],
    ["updated_at", isoTimestamp(`${m}.updated_at`)]
  ]

/**
 * The W3 envelope `{id, timestamp, type, organization_id, data: {object}}` as
 * text, `timestamp` in Unix seconds of `at`. Arguments are SQL expressions.
 */
export const envelopeText = (id: string, type: string, organizationId: string, at: string, objectJson: string): string =>
  `${object([
    ["id", `${id}::text`],
    ["timestamp", `floor(extract(epoch FROM ${at}))::bigint`],
    ["type", `${type}::text`],
    ["organization_id", `${organizationId}::text`],
    ["data", object([["object", objectJson]])]
  ])}::text`

/**
 * The Conversation JSON of the conversations row `c`, as conversation.created
 * carries it: `{id, organization_id, contact_id, channel_type, channel_to,
 * created_at}`; the channel members are null for conversations of POST /sessions (D8).
 */
export const conversationJson = (c: string): string =>
  object([
    ["id", `${c}.id`],
    ["organization_id", `${c}.organization_id`],
    ["contact_id", `${c}.contact_id`],
    ["channel_type", `nullif(${c}.channel_type, '')`],
    ["channel_to", `nullif(${c}.channel_to, '')`],
    ["created_at", isoTimestamp(`${c}.created_at`)]
  ])
