/**
 * The webhook delivery worker and what it delivers, for fast tests of its
 * rules on PostgreSQL (DECISIONS.md W2-W7, O5; issue 37 items 1 and 2): apps
 * written straight into `apps`, events inserted by the outbox's own statement
 * (`Outbox.ts` `insertEvents`) so that the fan-out trigger makes their
 * deliveries and notifies the workers (W2), reads of a delivery's row, and
 * the whole worker (`Worker.ts` `WebhookWorker` over `workerRepoLayer`, its
 * own pool on the file's database) with a stub `SendWebhook` and time on the
 * effect's `Clock` (`TestClock`).
 *
 * A delivery's due times are the database's (`next_attempt_at` is written
 * with `statement_timestamp()`, `Webhooks/Repo.ts`), the worker's polls and
 * waits the `Clock`'s: {@link RunningWebhookWorker.advance} moves both.
 */
import { Effect, Layer, Redacted, type Scope } from "effect"
import { SqlClient } from "effect/sql"
import type { Connection } from "effect/sql/SqlConnection"
import { TestClock } from "effect/testing"
import type { AppConfigShape } from "../../src/Config.ts"
import { applicationName, DatabaseLocation } from "../../src/Database/Database.ts"
import { DatabaseHealth } from "../../src/Database/Health.ts"
import type { AppOrdering } from "../../src/Domain/App.ts"
import type { EventType } from "../../src/Domain/EventType.ts"
import { deliveriesChannel, insertEvents, notifyDeliveriesIf, wroteSubscribedSql } from "../../src/Outbox/Outbox.ts"
import { Ids, makeIdGenerator } from "../../src/Shared/Ids.ts"
import type { DeliveryStatus } from "../../src/Webhooks/Api.ts"
import { generateSecret } from "../../src/Webhooks/Signing.ts"
import { DeliveryWakeup } from "../../src/Webhooks/Wakeup.ts"
import { type SendWebhook, WebhookSender, WebhookWorker, workerRepoLayer } from "../../src/Webhooks/Worker.ts"
import { TestDatabaseUrl } from "./Database.ts"
import { elapse } from "./RulesDatabase.ts"
import { testConfig } from "./TestApp.ts"
import { realSleep, waitFor } from "./Wait.ts"

/** Ids for the fixtures (UUIDv7, as the application makes them). */
const newId = makeIdGenerator()

/** The trace context stored with the fixtures' events (W4: attempts are children of its trace). */
export const EVENT_TRACEPARENT = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"

/** Runs `statement` on the file's database (`SqlClient` required); SQL errors are defects. */
const run = <A extends object>(statement: (sql: SqlClient.SqlClient) => Effect.Effect<ReadonlyArray<A>, unknown>) =>
  Effect.flatMap(Effect.service(SqlClient.SqlClient), (sql) => Effect.orDie(statement(sql)))

/** An app as the fixture wrote it. */
export interface AppRow {
  readonly id: string
  readonly signing_secret: string
}

/**
 * An app of the organization written straight into `apps`, as the admin API
 * would (O6) but with no W6 check of its URL (an app whose URL was checked
 * when it pointed elsewhere): subscribed to `events` (default
 * message.created), enabled, with `ordering` (W7, default none). Returns it
 * (`SqlClient` required).
 */
export const webhookApp = (
  organizationId: string,
  options: {
    readonly url: string
    readonly events?: ReadonlyArray<EventType>
    readonly ordering?: AppOrdering
  }
) =>
  Effect.gen(function* () {
    const app: AppRow = { id: newId(), signing_secret: generateSecret() }
    yield* run(
      (sql) => sql`INSERT INTO apps (id, organization_id, name, webhook_url, events, enabled, ordering, signing_secret,
          created_at)
        VALUES (${app.id}, ${organizationId}, 'CRM', ${options.url}, ${[...(options.events ?? ["message.created"])]}::text[],
          true, ${options.ordering ?? "none"}, ${app.signing_secret}, statement_timestamp())`
    )
    return app
  })

/**
 * The outbox's insert of one event (`Outbox.ts` `insertEvents`, W2, W3) with
 * positional parameters: $1 id, $2 type, $3 organization, $4 conversation, $5
 * trace context (jsonb); `data.object` is `{}`, the moment the statement's.
 * Returns whether it fanned out (`subscribed`, `Outbox.ts` `wroteSubscribedSql`).
 */
const EVENT_INSERT = `WITH w AS (${insertEvents({
  id: "$1::uuid",
  type: "$2::text",
  organizationId: "$3::uuid",
  conversationId: "$4::uuid",
  at: "statement_timestamp()",
  object: "'{}'::json",
  traceContext: "$5::jsonb",
  from: "(SELECT 1) AS one"
})})
SELECT ${wroteSubscribedSql(["w"], "$3::uuid")} AS subscribed`

/** The outbox's wakeup of the delivery workers (`Outbox.ts` `notifyDeliveries`, O11). */
const NOTIFY = `SELECT pg_notify('${deliveriesChannel}', '')`

/** The deliveries of event $1, oldest first. */
const DELIVERIES_OF_EVENT =
  "SELECT id::text, app_id::text, event_id::text FROM deliveries WHERE event_id = $1 ORDER BY id"

/** A delivery as the fan-out made it. */
export interface MadeDelivery {
  readonly id: string
  readonly app_id: string
  readonly event_id: string
}

/** An event {@link publishEvent} writes. */
export interface EventFixture {
  /** Default: a new id. */
  readonly id?: string
  /** Default message.created. */
  readonly type?: EventType
  /** The conversation it is about (the ordering key of W7); default: a new one. */
  readonly conversationId?: string
  /**
   * Runs on another connection after the event's insert and before its
   * commit: what another transaction does while the fan-out is not yet
   * committed (W2, migrations/0017).
   */
  readonly meanwhile?: Effect.Effect<void, never, SqlClient.SqlClient>
}

/**
 * Writes an event of the organization as the outbox does, in a transaction of
 * its own, so the fan-out trigger makes one pending delivery, due now, per
 * enabled app subscribed to its type, and notifies the workers at commit by a
 * statement of its own when it did (W2, W7, O11). Returns the deliveries made (`SqlClient` required).
 */
export const publishEvent = (organizationId: string, event: EventFixture = {}) =>
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const id = event.id ?? newId()
    const params = [
      id,
      event.type ?? "message.created",
      organizationId,
      event.conversationId ?? newId(),
      JSON.stringify({ traceparent: EVENT_TRACEPARENT })
    ]
    if (event.meanwhile === undefined) {
      return yield* sql.withTransaction(
        Effect.gen(function* () {
          const [written] = yield* sql.unsafe<{ subscribed: boolean }>(EVENT_INSERT, params)
          yield* notifyDeliveriesIf(sql, written!.subscribed, organizationId)
          return yield* sql.unsafe<MadeDelivery>(DELIVERIES_OF_EVENT, [id])
        })
      )
    }
    const meanwhile = event.meanwhile
    return yield* Effect.scoped(
      Effect.gen(function* () {
        const connection: Connection = yield* sql.reserve
        yield* connection.execute("BEGIN", [], undefined)
        const [written]: ReadonlyArray<{ subscribed: boolean }> = yield* connection.execute(
          EVENT_INSERT,
          params,
          undefined
        )
        if (written!.subscribed) yield* connection.execute(NOTIFY, [], undefined)
        const made: ReadonlyArray<MadeDelivery> = yield* connection.execute(DELIVERIES_OF_EVENT, [id], undefined)
        yield* meanwhile
        yield* connection.execute("COMMIT", [], undefined)
        return made
      })
    )
  }).pipe(Effect.orDie)

/** One attempt of a delivery as recorded (W5). */
export interface RecordedAttempt {
  readonly attempt: number
  readonly status_code: number | null
  readonly error: string | null
}

/** A delivery's row as it is now. */
export interface DeliveryRow {
  readonly id: string
  readonly event_id: string
  readonly status: DeliveryStatus
  readonly attempts: number
  /** The database's moments. */
  readonly next_attempt_at: Date | null
  readonly updated_at: Date | null
  readonly last_status_code: number | null
  readonly last_error: string | null
  readonly leased_by: string | null
  /** Oldest first. */
  readonly attempt_log: ReadonlyArray<RecordedAttempt>
}

/** The delivery of `column` = `value` (`id` or `event_id`); dies when there is none (`SqlClient` required). */
const deliveryWhere = (column: "id" | "event_id", value: string) =>
  Effect.gen(function* () {
    const rows = yield* run(
      (sql) => sql<Omit<DeliveryRow, "attempt_log"> & { readonly attempt_log: string }>`SELECT d.id::text,
          d.event_id::text, d.status, d.attempts, d.next_attempt_at, d.updated_at, d.last_status_code, d.last_error,
          d.leased_by::text,
          coalesce((SELECT json_agg(json_build_object('attempt', x.attempt, 'status_code', x.status_code,
            'error', x.error) ORDER BY x.attempt) FROM unnest(d.attempt_log) x), '[]')::text AS attempt_log
        FROM deliveries d WHERE ${sql(column)} = ${value}`
    )
    if (rows.length !== 1) return yield* Effect.die(new Error(`${rows.length} deliveries of ${column} ${value}`))
    const row = rows[0]!
    return { ...row, attempt_log: JSON.parse(row.attempt_log) } as DeliveryRow
  })

/** Whether the delivery `id` exists (`SqlClient` required). */
export const deliveryExists = (id: string) =>
  Effect.map(
    run((sql) => sql`SELECT 1 FROM deliveries WHERE id = ${id}`),
    (rows) => rows.length > 0
  )

/** The delivery `id` as it is now (`SqlClient` required). */
export const deliveryOf = (id: string) => deliveryWhere("id", id)

/** The one delivery of the event `eventId` as it is now (`SqlClient` required). */
export const deliveryOfEvent = (eventId: string) => deliveryWhere("event_id", eventId)

/** A delivery worker started by {@link startWebhookWorker}. */
export interface RunningWebhookWorker {
  /** Whether its claim loop waits to be woken: a wakeup, or its next poll on the `Clock`. */
  readonly waiting: () => boolean
  /** Waits (real time, up to 15 s) until its claim loop waits to be woken: every claim it started has ended. */
  readonly idle: Effect.Effect<void>
  /**
   * Lets `ms` go by for the worker and the organization's rows: once the
   * worker is {@link idle}, the database's clock moves on by `ms` for the
   * organization's rows (`RulesDatabase.ts` `elapse`: a retry due in `ms`
   * is due now), then `TestClock` by `ms` (the worker's polls and timers).
   */
  readonly advance: (ms: number) => Effect.Effect<void, never, SqlClient.SqlClient>
}

/** The delivery worker's connections listening on the file's database, by process id (`SqlClient` required). */
const workerListeners = run(
  (sql) => sql<{ pid: number }>`SELECT pid FROM pg_stat_activity
    WHERE datname = current_database() AND application_name = ${applicationName("webhooks")}
      AND state = 'idle' AND query ILIKE 'LISTEN %'`
)

/**
 * The whole delivery worker (`Worker.ts` `WebhookWorker`, O1) on the file's
 * database for the current scope: its repository on a pool of its own
 * (`workerRepoLayer`, the production one), requests sent with `send`, the
 * test configuration with `config` (`webhookRetrySchedule`, `webhookTimeout`,
 * `allowPrivateNetworkTargets`), claims and writes a batch window of `batchWindowMs` apart
 * (default 0: each at once, so a test need not move the clock for them; the
 * live worker's is 5), time on the effect's `Clock`, its wakeups (the real
 * `DeliveryWakeup`) watched so that a test can tell when its claim loop
 * waits ({@link RunningWebhookWorker.idle}). Returns once the worker
 * listens for notifications (on `TestClock` its polls never fire unless the
 * clock moves, so a notification sent before it listens would be lost). When
 * the scope closes the worker stops (O5) and the organization's apps are
 * disabled, so that no later worker of the file claims what the test left.
 * Requires `SqlClient` and `TestDatabaseUrl`.
 */
export const startWebhookWorker = (options: {
  readonly organizationId: string
  readonly send: SendWebhook
  readonly config?: Partial<AppConfigShape>
  readonly batchWindowMs?: number
}): Effect.Effect<RunningWebhookWorker, never, Scope.Scope | SqlClient.SqlClient | TestDatabaseUrl> =>
  Effect.gen(function* () {
    /** How many fibers wait for a wakeup: the claim loop only. */
    let waiters = 0
    const waiting = () => waiters > 0
    const watchedWakeup = Layer.effect(
      DeliveryWakeup,
      Effect.map(Effect.service(DeliveryWakeup), (wakeup) =>
        DeliveryWakeup.of({
          ...wakeup,
          woken: Effect.acquireUseRelease(
            Effect.sync(() => waiters++),
            () => wakeup.woken,
            () => Effect.sync(() => waiters--)
          )
        })
      )
    ).pipe(Layer.provide(DeliveryWakeup.layer))
    const location = Layer.effect(
      DatabaseLocation,
      Effect.map(Effect.service(TestDatabaseUrl), (url) => DatabaseLocation.external(Redacted.make(url)))
    )
    const worker = WebhookWorker(options.batchWindowMs ?? 0).pipe(
      Layer.provide(workerRepoLayer),
      Layer.provide(location),
      Layer.provide(Layer.succeed(WebhookSender, WebhookSender.of({ send: options.send }))),
      Layer.provide(watchedWakeup),
      Layer.provide(DatabaseHealth.layer),
      Layer.provide(Ids.layer),
      Layer.provide(testConfig(options.config))
    )

    // Released after the worker's stop (finalizers run in reverse order).
    yield* Effect.addFinalizer(() =>
      run((sql) => sql`UPDATE apps SET enabled = false WHERE organization_id = ${options.organizationId} RETURNING id`)
    )
    const before = new Set((yield* workerListeners).map((row) => row.pid))
    yield* Layer.build(worker).pipe(Effect.orDie)
    yield* waitFor(workerListeners, (rows) => rows.some((row) => !before.has(row.pid)))

    const idle = Effect.gen(function* () {
      const deadline = Date.now() + 15_000
      // Twice in a row: the attempts a claim started run before the loop waits again.
      for (let seen = 0; seen < 2; seen = waiting() ? seen + 1 : 0) {
        if (Date.now() > deadline) {
          return yield* Effect.die(new Error("The worker's claim loop did not wait for a wakeup within 15 s"))
        }
        yield* realSleep(10)
      }
    })

    const advance = (ms: number) =>
      Effect.gen(function* () {
        yield* idle
        yield* elapse(ms / 1000, options.organizationId)
        yield* TestClock.adjust(ms)
      })

    return { waiting, idle, advance }
  })
