/**
 * The wire JSON of sessions, agents, messages and conversations, built by
 * PostgreSQL, with the members DERIVED FROM THE DOMAIN SCHEMAS ({@link membersOf})
 * (`Domain/Session.ts`, `Domain/Message.ts`, `Domain/Agent.ts`,
 * `Domain/Conversation.ts`): each schema field is the column of the same name,
 * in the schema's order, a timestamp field (annotated `format: "date-time"`)
 * formatted as ISO 8601; only the few members that are not a plain column are
 * spelled out here. Adding a field is one schema edit and a migration adding
 * its column.
 *
 * Where benchmarks showed it pays (POST message, ingest, export, outbox events:
 * `npm run bench`), statements build this JSON in PostgreSQL (or select the
 * members as columns for `JSON.stringify`), so the service never decodes and
 * re-encodes rows there; elsewhere rows are decoded with the same schemas.
 *
 * Timestamps are ISO 8601 in UTC with microseconds: `2026-11-22T08:02:07.123456Z`.
 */
import { Schema, SchemaAST } from "effect"
import { AiAgent, HumanAgent } from "../Domain/Agent.ts"
import type { JsonObject } from "../Domain/Common.ts"
import { Content } from "../Domain/Content.ts"
import { Conversation } from "../Domain/Conversation.ts"
import { Message } from "../Domain/Message.ts"
import { Session } from "../Domain/Session.ts"

/**
 * The text a `json` column stores for a JSON object (a session's or a
 * message's `metadata`): compact, members in the order given, which is the
 * order the client sent them (migration `0018_json_as_sent.ts`). PostgreSQL
 * embeds it as it is in the JSON it builds, and the service reads it back with
 * `JSON.parse`, so every response and webhook renders it alike (issue 39 item 8).
 */
export const jsonColumnText = (value: JsonObject): string => JSON.stringify(value)

const encodeContent = Schema.encodeSync(Content)

/**
 * The text the `json` column `messages.content` stores: the content as every
 * response renders it (`Content` encoded: `type` first, the other members in
 * the order given), compact. Issue 39 item 8: POST, GET, search, export and
 * the webhooks render `{"type":"text","text":"Hello!"}` alike.
 */
export const contentColumnText = (content: Content): string => JSON.stringify(encodeContent(content))

/** SQL text formatting a timestamptz expression as ISO 8601 UTC (null stays null). */
export const isoTimestamp = (expression: string): string =>
  `to_char(${expression} AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')`

/**
 * SQL text of the same ISO 8601 text as {@link isoTimestamp}, through the
 * IMMUTABLE function `parley_iso` (migration `0030_immutable_json`): the form
 * a RETURNING list needs, since Citus refuses non-IMMUTABLE functions there
 * (O11, issue 43 item 3), and the form of column lists shared by RETURNING
 * and SELECT. {@link isoTimestamp}'s `to_char` is inlined by the planner,
 * about 0.3 µs per value less, which bulk reads (export, search) keep.
 * `test/Database/Json.test.ts` asserts the two render alike.
 */
export const immutableIsoTimestamp = (expression: string): string => `parley_iso(${expression})`

/** Members of a wire object: name and SQL expression, in wire order. */
export type Members = ReadonlyArray<readonly [string, string]>

/** `expression AS "name", ...`: the members as a select list. */
export const columnsOf = (members: Members): string =>
  members.map(([name, expression]) => `${expression} AS "${name}"`).join(", ")

/** `{name: expression, ...}` as compact JSON (`row_to_json` keeps the order and adds no spaces). */
export const objectJson = (members: Members): string => `(SELECT row_to_json(j) FROM (SELECT ${columnsOf(members)}) j)`

/**
 * {@link objectJson} through the IMMUTABLE `parley_row_json` (migration
 * `0030_immutable_json`), for a RETURNING list on Citus (O11): the members
 * must themselves be immutable (timestamps by {@link immutableIsoTimestamp}).
 */
export const immutableObjectJson = (members: Members): string =>
  `(SELECT parley_row_json(j) FROM (SELECT ${columnsOf(members)}) j)`

/**
 * How SQL renders wire JSON: with {@link objectJson} and {@link isoTimestamp}
 * (STABLE functions the planner inlines: the default), or with their
 * IMMUTABLE forms ({@link immutableRendering}).
 */
export interface Rendering {
  readonly object: (members: Members) => string
  readonly timestamp: (expression: string) => string
}

/** The default {@link Rendering}: `row_to_json` and `to_char`, inlined. */
export const stableRendering: Rendering = { object: objectJson, timestamp: isoTimestamp }

/**
 * The {@link Rendering} by IMMUTABLE functions only (`parley_row_json`,
 * `parley_iso`; migration `0030_immutable_json`), the same text: for a
 * RETURNING list, and for an `INSERT ... SELECT` with RETURNING that Citus
 * pushes down whole to the organization's worker (its rows read from the
 * organization's tables), where one non-IMMUTABLE function makes Citus
 * rebuild the shard's statement without the target table's alias and the
 * worker fail with "missing FROM-clause entry" (Citus 13.2; O11).
 */
export const immutableRendering: Rendering = { object: immutableObjectJson, timestamp: immutableIsoTimestamp }

/** Whether a schema field is a wire timestamp (`Timestamp`, possibly nullable). */
const isTimestamp = (field: Schema.Top): boolean =>
  (SchemaAST.isUnion(field.ast) ? field.ast.types : [field.ast]).some(
    (member) => (member.annotations as { readonly format?: unknown } | undefined)?.format === "date-time"
  )

/**
 * The members of `schema` over the row `alias`: each field the column of the
 * same name (timestamps as ISO text by `timestamp`, {@link isoTimestamp}
 * unless a RETURNING list needs {@link immutableIsoTimestamp}), unless
 * `special` gives its expression.
 * The one derivation of wire JSON from a schema: every domain's JSON built by
 * PostgreSQL uses it (here for the shared shapes, in the owner's repository
 * for its own: schedules, deliveries).
 */
export const membersOf = (
  schema: { readonly fields: Readonly<Record<string, Schema.Top>> },
  alias: string,
  special: Readonly<Record<string, string>> = {},
  timestamp: (expression: string) => string = isoTimestamp
): Members =>
  Object.entries(schema.fields).map(([name, field]) => [
    name,
    special[name] ?? (isTimestamp(field) ? timestamp(`${alias}.${name}`) : `${alias}.${name}`)
  ])

/**
 * SQL text of the JSON object text `object` (a json expression, such as a
 * message inside a stored event) with the members of `replaced` set to the
 * given JSON texts (SQL text expressions), the members in `schema`'s order:
 * every other member keeps its text byte for byte (a `json` value keeps the
 * text it was given), a member `object` lacks stays absent unless replaced,
 * and a member outside the schema is dropped. Compact, as {@link objectJson}
 * writes. What a redaction rewrites a pending event's message with (D23).
 * Searched CASEs only: Citus 13.2 turns the `WHEN` of a simple CASE
 * (`CASE n.name WHEN ...`) into `NULL::boolean` when it evaluates a
 * statement's parameters and STABLE functions on the coordinator (O11).
 */
export const withMembers = (
  schema: { readonly fields: Readonly<Record<string, Schema.Top>> },
  object: string,
  replaced: Readonly<Record<string, string>>
): string => {
  const names = Object.keys(schema.fields)
  const cases = Object.entries(replaced)
    .map(([name, text]) => `WHEN n.name = '${name}' THEN ${text}`)
    .join(" ")
  return `(SELECT '{' || string_agg(to_json(n.name)::text || ':' || CASE ${cases} ELSE (o.v->n.name)::text END, ',' ORDER BY n.i) || '}'
  FROM (SELECT (${object})::json AS v) o, unnest(ARRAY[${names.map((name) => `'${name}'`).join(", ")}]) WITH ORDINALITY AS n(name, i)
  WHERE n.name IN (${Object.keys(replaced)
    .map((name) => `'${name}'`)
    .join(", ")}) OR o.v->n.name IS NOT NULL)`
}

/** The Agent JSON of the agents row `a`, or null when `a.id` is null (spec "Agent"), rendered by `rendering`. */
const agentJson = (a: string, rendering: Rendering): string => `CASE
  WHEN ${a}.id IS NULL THEN NULL
  WHEN ${a}.type = 'ai' THEN ${rendering.object(membersOf(AiAgent, a, {}, rendering.timestamp))}
  ELSE ${rendering.object(membersOf(HumanAgent, a, {}, rendering.timestamp))}
END`

/**
 * The Session members over the sessions row `s` and its agents row `a`
 * (spec "Session"); with `action`, also `action` (W1: session.finished and
 * session.closed carry it in their `data.object`). Rendered by `rendering`
 * (default {@link stableRendering}).
 */
export const sessionMembers = (
  s: string,
  a: string,
  action?: string,
  rendering: Rendering = stableRendering
): Members => [
  ...membersOf(Session, s, { agent: agentJson(a, rendering) }, rendering.timestamp),
  ...(action === undefined ? [] : [["action", action] as const])
]

/** The Session JSON of the sessions row `s` with its agents row `a` (see {@link sessionMembers}). */
export const sessionJson = (s: string, a: string, action?: string, rendering: Rendering = stableRendering): string =>
  rendering.object(sessionMembers(s, a, action, rendering))

/**
 * SQL text of the `reactions` summary (D24) of the messages row `m`, rendered
 * from its `reacted` (`{role: emoji}`, each role's latest reaction, the one
 * stored form): `[{emoji, count}]`, most first, then by emoji; `[]` for none
 * without aggregating.
 */
const reactionsJson = (m: string): string => `CASE WHEN ${m}.reacted = '{}'::jsonb THEN '[]'::json
  ELSE (SELECT ('[' || string_agg(row_to_json(r)::text, ',' ORDER BY r.count DESC, r.emoji) || ']')::json
    FROM (SELECT value AS emoji, count(*)::int AS count FROM jsonb_each_text(${m}.reacted) GROUP BY value) r) END`

/** The Message members over the messages row `m` (spec "Message"; `reactions` derived, D24). */
export const messageMembers = (m: string): Members => membersOf(Message, m, { reactions: reactionsJson(m) })

/** The Message JSON of the messages row `m`. */
export const messageJson = (m: string): string => objectJson(messageMembers(m))

/**
 * The Conversation JSON of the conversations row `c`, as conversation.created
 * carries it; the channel members are null for conversations of POST /sessions
 * (stored as `""`, D8).
 */
export const conversationJson = (c: string): string =>
  objectJson(
    membersOf(Conversation, c, {
      channel_type: `nullif(${c}.channel_type, '')`,
      channel_to: `nullif(${c}.channel_to, '')`
    })
  )
