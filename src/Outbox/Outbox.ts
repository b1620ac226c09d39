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
 * as of `0031_citus_triggers.ts`) inserts one delivery per subscribed app
 * (enabled, or disabled for failing: held, W10) but the one the event is about
 * ({@link EventRows} `appId`) in the same transaction (W2); the webhooks domain
 * owns deliveries. The trigger does not wake the delivery workers (on Citus it
 * runs on a worker node, where a NOTIFY reaches nobody and breaks two-phase
 * commit: O11, docs/citus-notes.md (b)): the writer of the events does, with
 * {@link notifyDeliveries} when its statement's {@link subscribedSql} column
 * says an app subscribes, one rule for every writer.
 */
import { Effect } from "effect"
import type { SqlClient, SqlError, Statement } from "effect/sql"
import { type Rendering, stableRendering } from "../Database/Json.ts"

/** The channel the delivery workers LISTEN on (`Webhooks/Repo.ts` `listen`, W5). */
export const deliveriesChannel = "parley_deliveries"

/**
 * SQL text of the W3 envelope of an event, `timestamp` in Unix seconds of
 * `at` (taken of its UTC wall time: the same number, and IMMUTABLE, where
 * `extract` of a timestamptz is STABLE), rendered by `rendering`'s objects.
 * Arguments are SQL expressions (`ev.id`, `'message.created'`, ...).
 */
const envelope = (
  id: string,
  type: string,
  organizationId: string,
  at: string,
  object: string,
  rendering: Rendering
): string =>
  `${rendering.object([
    ["id", `${id}::text`],
    ["timestamp", `floor(extract(epoch FROM (${at}) AT TIME ZONE 'UTC'))::bigint`],
    ["type", `${type}::text`],
    ["organization_id", `${organizationId}::text`],
    ["data", rendering.object([["object", object]])]
  ])}::text`

/**
 * SQL text of the envelope text `body` (a stored event's, W3) with its
 * `data.object` replaced by the JSON text `object` (SQL text expression):
 * every other member keeps its text byte for byte. The one rewrite of a
 * stored event: a redaction's (D23), of events whose deliveries have not all
 * succeeded, the one exception to W3's byte-identical attempts. A searched
 * CASE, as in `Database/Json.ts` `withMembers` (Citus, O11).
 */
export const withObject = (body: string, object: string): string =>
  `(SELECT '{' || string_agg(to_json(k.key)::text || ':' || CASE WHEN k.key = 'data' THEN '{"object":' || ${object} || '}'
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
   * How the envelope is rendered (default `stableRendering`):
   * `immutableRendering` where `from` reads the organization's tables
   * rather than an earlier step's rows, so that on Citus the insert is
   * pushed down whole to the worker, and every other expression (`object`,
   * `at`: a column, not `statement_timestamp()`) is IMMUTABLE too
   * (`Database/Json.ts` `immutableRendering`; O11).
   */
  readonly rendering?: Rendering | undefined
}

/** SQL text of the subscription rule (W10) of the apps row `a` for the event type `type` (an SQL expression). */
const subscribes = (type: string) => `parley_app_subscribes(a.enabled, a.disabled_reason, a.events, ${type})`

/**
 * SQL text of a boolean: whether an event of `type` of the organization fans
 * out to at least one app now: the rule of the fan-out trigger (an app
 * subscribed by `parley_app_subscribes`, migrations/0031_citus_triggers.ts, other
 * than `appId`, the app the event is about, W10). Arguments are SQL
 * expressions; `type` may be a text array (`ANY`) when `anyType`. What every
 * writer of events returns from its statement to know whether to send
 * {@link notifyDeliveries}, and what POST message reads to wake its process's
 * delivery worker instead (`Webhooks/Wakeup.ts`). An app created while the
 * statement runs may be missed: its delivery is then found by the workers'
 * 1 s poll.
 */
export const subscribedSql = (
  organizationId: string,
  type: string,
  options: { readonly appId?: string | undefined; readonly anyType?: boolean } = {}
): string =>
  `EXISTS (SELECT 1 FROM apps a WHERE a.organization_id = ${organizationId} AND ${
    options.anyType === true ? `EXISTS (SELECT 1 FROM unnest(${type}) t WHERE ${subscribes("t")})` : subscribes(type)
  }${options.appId === undefined ? "" : ` AND a.id IS DISTINCT FROM ${options.appId}`})`

/**
 * SQL text of a boolean: whether the events the statement's CTEs `ctes` wrote
 * (each an {@link insertEvents}, which returns their `organization_id`,
 * `type` and `app_id`) fan out to at least one app of the organization
 * `organizationId` ({@link subscribedSql}): the fan-out made a delivery.
 * `organizationId` is an SQL expression, the organization of every event
 * (a parameter: on Citus the apps of one organization are one shard's);
 * events without an `appId`. False when no event was written.
 */
export const wroteSubscribedSql = (ctes: ReadonlyArray<string>, organizationId: string): string =>
  subscribedSql(organizationId, `ARRAY(${ctes.map((cte) => `SELECT type FROM ${cte}`).join(" UNION ALL ")})`, {
    anyType: true
  })

/**
 * {@link wroteSubscribedSql} for one events CTE `cte` whose events may be of
 * several organizations and about an app (`appId`, W10): each event's own
 * organization's apps but the one it is about. For rare events (a multi-
 * organization statement's), where the organization is no parameter.
 */
export const wroteSubscribedAnySql = (cte: string): string =>
  `EXISTS (SELECT 1 FROM ${cte} w JOIN apps a ON a.organization_id = w.organization_id
    AND ${subscribes("w.type")} AND a.id IS DISTINCT FROM w.app_id)`

/** Stands for the organization in {@link wroteSubscribedFragment}'s text. */
const ORGANIZATION = "\u0000organization\u0000"

/**
 * {@link wroteSubscribedSql} as a fragment of a `sql` template, with the
 * organization `organizationId` (uuid) a bound parameter: for statements
 * built with the template rather than as fixed text.
 */
export const wroteSubscribedFragment = (
  sql: SqlClient.SqlClient,
  ctes: ReadonlyArray<string>,
  organizationId: string
): Statement.Fragment =>
  wroteSubscribedSql(ctes, ORGANIZATION)
    .split(ORGANIZATION)
    .map((part) => sql.literal(part))
    .reduce((fragment, part) => sql`${fragment}${organizationId}::uuid${part}`)

/**
 * Wakes every process's delivery worker at commit (W2, W5; O11): `SELECT
 * pg_notify('parley_deliveries', organizationId)`, a statement of its own that
 * reads no table, so on Citus it runs on the coordinator, where the workers
 * LISTEN, and never inside a worker's prepared transaction
 * (docs/citus-notes.md (b)). The payload names the organization whose
 * deliveries were written, so a worker claims that organization at once
 * (`Database/Workers.ts` `makeOrganizationRotation`); `undefined` (events of
 * several organizations) sends an empty payload, which makes the workers look
 * for due work in every organization. Run in the writing transaction, after
 * the statement that wrote the events, and only when that statement's
 * {@link subscribedSql} was true (PostgreSQL serializes the commits of
 * notifying transactions). A statement that was its own transaction is
 * followed by it at once: the listeners then wake after the rows are
 * committed, as at commit. Fails with `SqlError`.
 */
export const notifyDeliveries = (
  sql: SqlClient.SqlClient,
  organizationId: string | undefined
): Effect.Effect<void, SqlError.SqlError> =>
  sql`SELECT pg_notify(${deliveriesChannel}, ${organizationId ?? ""})`.pipe(Effect.asVoid)

/** {@link notifyDeliveries} when `subscribed` (a writer's {@link subscribedSql} column), else nothing. */
export const notifyDeliveriesIf = (
  sql: SqlClient.SqlClient,
  subscribed: boolean,
  organizationId: string | undefined
): Effect.Effect<void, SqlError.SqlError> => (subscribed ? notifyDeliveries(sql, organizationId) : Effect.void)

/**
 * The `INSERT INTO events ... SELECT ...` writing the events of `rows` (W2,
 * W3), as SQL text to run alone or as a CTE of the change's own statement.
 */
export const insertEvents = (rows: EventRows): string =>
  `INSERT INTO events (id, organization_id, type, body, trace_context, created_at, conversation_id${
    rows.appId === undefined ? "" : ", app_id"
  })
  SELECT ${rows.id}, ${rows.organizationId}, ${rows.type},
    ${envelope(rows.id, rows.type, rows.organizationId, rows.at, rows.object, rows.rendering ?? stableRendering)}, ${rows.traceContext}, ${rows.at},
    ${rows.conversationId}${rows.appId === undefined ? "" : `, ${rows.appId}`}
  FROM ${rows.from}${rows.where === undefined ? "" : ` WHERE ${rows.where}`}${
    rows.orderBy === undefined ? "" : ` ORDER BY ${rows.orderBy}`
  }
  RETURNING organization_id, type, app_id`
