/**
 * The events outbox (DECISIONS.md W1-W3): the one owner of the `events` table,
 * its envelope and the statement that writes it.
 *
 * Every change writes its events into `events` in the same transaction, and
 * where a benchmark asked for it in the same statement, as the change, so an
 * event exists if and only if its change was committed (W2). The envelope
 * `{id, timestamp, type, organization_id, data: {object}}` (W3) is serialized
 * once, by PostgreSQL, and the stored text is what every webhook attempt sends
 * byte for byte.
 *
 * Side effect named here (STYLE "Ownership"): the `AFTER INSERT` trigger
 * `events_fan_out` (migration `0002_webhooks.ts`; its function `parley_fan_out`
 * as of `0025_app_health.ts`) inserts one delivery per subscribed app (enabled,
 * or disabled for failing: held, W10) but the one the event is about
 * ({@link EventRows} `appId`) in the same transaction and notifies the delivery
 * workers at commit (W2, W5) unless the statement said not to ({@link
 * EventRows} `notify`); the webhooks domain owns deliveries.
 */
import { objectJson } from "../Database/Json.ts"

/**
 * SQL text of the W3 envelope of an event, `timestamp` in Unix seconds of
 * `at`. Arguments are SQL expressions (`ev.id`, `'message.created'`, ...).
 */
const envelope = (id: string, type: string, organizationId: string, at: string, object: string): string =>
  `${objectJson([
    ["id", `${id}::text`],
    ["timestamp", `floor(extract(epoch FROM ${at}))::bigint`],
    ["type", `${type}::text`],
    ["organization_id", `${organizationId}::text`],
    ["data", objectJson([["object", object]])]
  ])}::text`

/**
 * SQL text of the envelope text `body` (a stored event's, W3) with its
 * `data.object` replaced by the JSON text `object` (SQL text expression):
 * every other member keeps its text byte for byte. The one rewrite of a
 * stored event: a redaction's (D23), of events whose deliveries have not all
 * succeeded, the one exception to W3's byte-identical attempts.
 */
export const withObject = (body: string, object: string): string =>
  `(SELECT '{' || string_agg(to_json(k.key)::text || ':' || CASE k.key WHEN 'data' THEN '{"object":' || ${object} || '}'
    ELSE k.value::text END, ',' ORDER BY k.n) || '}'
  FROM json_each((${body})::json) WITH ORDINALITY AS k(key, value, n))`

/** SQL expressions of the events one statement writes: one event per row of `from`. */
export interface EventRows {
  /** The event id (uuid): a column of `from`, never a volatile call (it is read twice: the row and its envelope, W3). */
  readonly id: string
  /** The event type (text, one of W1's). */
  readonly type: string
  readonly organizationId: string
  /** The conversation the event is about (uuid): the ordering key of W7's ordered deliveries. */
  readonly conversationId: string
  /**
   * The app the event is about (uuid; W10's `app.failing` and `app.disabled`):
   * the fan-out makes no delivery of it to that app. Absent: none.
   */
  readonly appId?: string | undefined
  /** The event's moment (timestamptz): `created_at` and the envelope's `timestamp`. */
  readonly at: string
  /** `data.object` (json): the resource as the event carries it. */
  readonly object: string
  /** The trace context (jsonb `{"traceparent": ...}` or null) of the change (W4). */
  readonly traceContext: string
  /** The row source: a `FROM` list with its joins. */
  readonly from: string
  readonly where?: string | undefined
  /** The order events of one statement take (their ids order them for consumers and the fan-out). */
  readonly orderBy?: string | undefined
  /**
   * Whether the fan-out notifies the delivery workers at commit: a boolean
   * SQL expression; without it, it does. False only where the writing process
   * wakes its own worker once the statement committed (`Webhooks/Wakeup.ts`),
   * and only in a statement that is its own transaction (the setting lasts
   * until the transaction ends).
   */
  readonly notify?: string | undefined
}

/**
 * SQL text of a boolean: whether an event of `type` of the organization fans
 * out to at least one app now (the subscription rule of the fan-out,
 * `parley_app_subscribed`, migrations/0014_local_wakeup.ts). Arguments are SQL
 * expressions. What POST message reads to know whether to wake its process's
 * delivery worker (`Webhooks/Wakeup.ts`); an app created while the statement
 * runs may be missed, and its delivery is then found by the workers' poll.
 */
export const subscribedSql = (organizationId: string, type: string): string =>
  `EXISTS (SELECT 1 FROM apps a WHERE parley_app_subscribed(a, ${organizationId}, ${type}))`

/** The setting the fan-out trigger reads (`migrations/0014_local_wakeup.ts`): 'off' = do not notify. */
const FAN_OUT_NOTIFY = "parley.fan_out_notify"

/**
 * The `INSERT INTO events ... SELECT ...` writing the events of `rows` (W2,
 * W3), as SQL text to run alone or as a CTE of the change's own statement.
 */
export const insertEvents = (rows: EventRows): string =>
  `INSERT INTO events (id, organization_id, type, body, trace_context, created_at, conversation_id${
    rows.appId === undefined ? "" : ", app_id"
  })
  SELECT ${rows.id}, ${rows.organizationId}, ${rows.type},
    ${envelope(rows.id, rows.type, rows.organizationId, rows.at, rows.object)}, ${rows.traceContext}, ${rows.at},
    ${rows.conversationId}${rows.appId === undefined ? "" : `, ${rows.appId}`}
  FROM ${rows.from}${
    rows.notify === undefined
      ? ""
      : ` CROSS JOIN (SELECT set_config('${FAN_OUT_NOTIFY}', CASE WHEN ${rows.notify} THEN 'on' ELSE 'off' END, true)) fan_out`
  }${rows.where === undefined ? "" : ` WHERE ${rows.where}`}${
    rows.orderBy === undefined ? "" : ` ORDER BY ${rows.orderBy}`
  }`
