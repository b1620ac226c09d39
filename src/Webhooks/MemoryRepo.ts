/**
 * The webhooks repository in memory (`WebhooksRepo.layerTest`, issue 13 item
 * 8): the same answers as the SQL of `Repo.ts` over a {@link WebhooksStore}
 * the test creates and reads, so the `Webhooks` service (O6, W1, W6) and the
 * delivery worker (`Worker.ts`: W3-W6) run with no database.
 *
 * The fan-out trigger of migrations/0002_webhooks.ts and 0017 is
 * {@link publishEvent}; its `pg_notify` and the admin retry's call the
 * {@link WebhooksStore.listeners} (what `listen` registers). Moments come from
 * the effect's `Clock` (`TestClock` in tests); answers write them as
 * PostgreSQL's `isoTimestamp` does (ISO 8601 with microseconds). Ids are
 * UUIDv7 of this process, so they increase as deliveries are made.
 */
import { Clock, Effect } from "effect"
import { isUuid, type JsonText } from "../Domain/Common.ts"
import type { EventType } from "../Domain/Event.ts"
import { makeIdGenerator } from "../Shared/Ids.ts"
import type { App, AppOrdering, Delivery, DeliveryStatus } from "./Api.ts"
import type { ClaimedDelivery, NewApp, WebhooksRepo } from "./Repo.ts"

/** An app as stored (the `apps` table). */
export interface MemoryApp {
  readonly id: string
  readonly organization_id: string
  name: string
  webhook_url: string
  events: ReadonlyArray<EventType>
  enabled: boolean
  ordering: AppOrdering
  signing_secret: string
  /** The secret before the latest rotation, and until when it signs too (epoch ms), W8. */
  previous_signing_secret: string | null
  previous_secret_expires_at: number | null
  /** Epoch ms. */
  readonly created_at: number
  /** Epoch ms, null until the first PATCH. */
  updated_at: number | null
}

/** An event as stored (the `events` table): the envelope text sent on every attempt (W3). */
export interface MemoryEvent {
  readonly id: string
  readonly organization_id: string
  readonly type: EventType
  readonly body: string
  /** The conversation the event is about (W7), or null (an event written without one). */
  readonly conversation_id?: string | null | undefined
  /** The W3C traceparent of the trace that wrote the event, or null. */
  readonly traceparent: string | null
}

/** One attempt of a delivery as stored (`deliveries.attempt_log`, W5). */
export interface MemoryAttempt {
  /** 1-based. */
  readonly attempt: number
  readonly status_code: number | null
  readonly error: string | null
  readonly duration_ms: number
  /** Epoch ms. */
  readonly started_at: number
}

/** A delivery of one event to one app as stored (`deliveries`, W2, W5); moments in epoch ms. */
export interface MemoryDelivery {
  readonly id: string
  readonly organization_id: string
  readonly app_id: string
  readonly event_id: string
  readonly event_type: EventType
  status: DeliveryStatus
  /** Attempts made. */
  attempts: number
  /** While pending: when it is due; else null. */
  next_attempt_at: number | null
  last_status_code: number | null
  last_error: string | null
  /** With an app ordered by conversation: the event's conversation (W7), else null. */
  readonly ordering_key: string | null
  /** With an ordering key: its place in the queue (the fan-out's sequence), else null. */
  readonly sequence_number: number | null
  /** The worker holding the lease, or null. */
  leased_by: string | null
  lease_until: number | null
  readonly created_at: number
  updated_at: number | null
  readonly attempt_log: Array<MemoryAttempt>
}

/** What the in-memory repository holds; tests fill and read it. */
export interface WebhooksStore {
  /** Ids of the organizations that exist (the admin domain's table). */
  readonly organizations: Set<string>
  readonly apps: Map<string, MemoryApp>
  readonly events: Map<string, MemoryEvent>
  /** By id, in insertion (= id) order. */
  readonly deliveries: Map<string, MemoryDelivery>
  /** Who listens on the deliveries channel: called at every notification. */
  readonly listeners: Set<() => void>
  /** The store's id generator: the ids its repository makes, and the `Ids` of test layers over it. */
  readonly newId: () => string
  /** The last sequence number the fan-out gave an ordered delivery (`deliveries_sequence_number_seq`, W7). */
  sequenceNumber: number
}

/** An empty store. */
export const makeMemoryStore = (): WebhooksStore => ({
  organizations: new Set(),
  apps: new Map(),
  events: new Map(),
  deliveries: new Map(),
  listeners: new Set(),
  newId: makeIdGenerator(),
  sequenceNumber: 0
})

/** A moment as PostgreSQL answers it through `isoTimestamp` (microseconds). */
const timestamp = (millis: number) => new Date(millis).toISOString().replace("Z", "000Z")
const timestampOrNull = (millis: number | null) => (millis === null ? null : timestamp(millis))

/** `pg_notify` on the deliveries channel. */
const notify = (store: WebhooksStore) => {
  for (const listener of store.listeners) listener()
}

/** A delivery made pending and due `now` (W5 admin retry, W9 recovery; `Repo.ts` `requeue`). */
const requeue = (delivery: MemoryDelivery, now: number) => {
  delivery.status = "pending"
  delivery.next_attempt_at = now
  delivery.updated_at = now
}

/** The App JSON of a stored app, members in wire order (O6). */
const toApp = (app: MemoryApp): App => ({
  id: app.id,
  name: app.name,
  webhook_url: app.webhook_url,
  events: [...app.events],
  enabled: app.enabled,
  ordering: app.ordering,
  signing_secret: app.signing_secret,
  created_at: timestamp(app.created_at)
})

/** The Delivery JSON of a stored delivery, members in wire order (O6). */
const toDelivery = (delivery: MemoryDelivery): Delivery => ({
  id: delivery.id,
  event_id: delivery.event_id,
  event_type: delivery.event_type,
  app_id: delivery.app_id,
  status: delivery.status,
  attempts: delivery.attempts,
  last_status_code: delivery.last_status_code,
  last_error: delivery.last_error,
  next_attempt_at: timestampOrNull(delivery.next_attempt_at),
  created_at: timestamp(delivery.created_at),
  updated_at: timestampOrNull(delivery.updated_at),
  attempt_log: delivery.attempt_log.map((attempt) => ({
    attempt: attempt.attempt,
    status_code: attempt.status_code,
    error: attempt.error,
    duration_ms: attempt.duration_ms,
    started_at: timestamp(attempt.started_at)
  }))
})

/**
 * Writes an event and fans it out as the trigger of migrations/0002, 0013
 * and 0017 does (W1, W2, W7): one pending delivery, due now, per enabled app
 * of the event's organization subscribed to its type, with the event's
 * conversation as ordering key and the next sequence number when the app
 * orders by conversation; the listeners are notified when there is one.
 * Answers the new deliveries.
 */
export const publishEvent = (store: WebhooksStore, event: MemoryEvent) =>
  Effect.map(Clock.currentTimeMillis, (now): ReadonlyArray<MemoryDelivery> => {
    store.events.set(event.id, event)
    const made: Array<MemoryDelivery> = []
    for (const app of store.apps.values()) {
      if (app.organization_id !== event.organization_id || !app.enabled || !app.events.includes(event.type)) continue
      const orderingKey = app.ordering === "conversation" ? (event.conversation_id ?? null) : null
      const delivery: MemoryDelivery = {
        id: store.newId(),
        organization_id: event.organization_id,
        app_id: app.id,
        event_id: event.id,
        event_type: event.type,
        status: "pending",
        attempts: 0,
        next_attempt_at: now,
        last_status_code: null,
        last_error: null,
        ordering_key: orderingKey,
        sequence_number: orderingKey === null ? null : ++store.sequenceNumber,
        leased_by: null,
        lease_until: null,
        created_at: now,
        updated_at: null,
        attempt_log: []
      }
      store.deliveries.set(delivery.id, delivery)
      made.push(delivery)
    }
    if (made.length > 0) notify(store)
    return made
  })

/**
 * The heads of the ordered queues (W7, `claimStatement`'s `heads`): per (app,
 * ordering key) with pending deliveries, the lowest-numbered one already
 * started (leased or attempted), else the lowest-numbered one. Answers their ids.
 */
const queueHeads = (store: WebhooksStore): ReadonlySet<string> => {
  const heads = new Map<string, MemoryDelivery>()
  const started = (delivery: MemoryDelivery) => delivery.attempts > 0 || delivery.lease_until !== null
  for (const delivery of store.deliveries.values()) {
    if (delivery.status !== "pending" || delivery.ordering_key === null) continue
    const queue = `${delivery.app_id}/${delivery.ordering_key}`
    const head = heads.get(queue)
    const before =
      head === undefined ||
      (started(delivery) && !started(head)) ||
      (started(delivery) === started(head) && delivery.sequence_number! < head.sequence_number!)
    if (before) heads.set(queue, delivery)
  }
  return new Set([...heads.values()].map((delivery) => delivery.id))
}

/** The repository over `store` (see module docs). */
export const makeMemoryRepo = (store: WebhooksStore): WebhooksRepo["Service"] => {
  const appOf = (organizationId: string, appId: string) => {
    const app = store.apps.get(appId)
    return app?.organization_id === organizationId ? app : undefined
  }

  return {
    organizationExists: (organizationId) => Effect.sync(() => store.organizations.has(organizationId)),

    insertApp: (row: NewApp) =>
      Effect.map(Clock.currentTimeMillis, (now) => {
        const app: MemoryApp = {
          id: row.id,
          organization_id: row.organizationId,
          name: row.name,
          webhook_url: row.webhookUrl,
          events: [...row.events],
          enabled: row.enabled,
          ordering: row.ordering,
          signing_secret: row.signingSecret,
          previous_signing_secret: null,
          previous_secret_expires_at: null,
          created_at: now,
          updated_at: null
        }
        store.apps.set(app.id, app)
        return toApp(app)
      }),

    listApps: (organizationId) =>
      Effect.sync(() =>
        [...store.apps.values()]
          .filter((app) => app.organization_id === organizationId)
          .sort((a, b) => a.created_at - b.created_at || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0))
          .map(toApp)
      ),

    findApp: (organizationId, appId) =>
      Effect.sync(() => {
        const app = appOf(organizationId, appId)
        return app === undefined ? undefined : toApp(app)
      }),

    updateApp: (organizationId, appId, changes) =>
      Effect.map(Clock.currentTimeMillis, (now) => {
        const app = appOf(organizationId, appId)
        if (app === undefined) return undefined
        if (changes.name !== undefined) app.name = changes.name
        if (changes.webhook_url !== undefined) app.webhook_url = changes.webhook_url
        if (changes.events !== undefined) app.events = [...changes.events]
        if (changes.enabled !== undefined) app.enabled = changes.enabled
        if (changes.ordering !== undefined) app.ordering = changes.ordering
        app.updated_at = now
        return toApp(app)
      }),

    rotateSecret: (organizationId, appId, secret, previousHours) =>
      Effect.map(Clock.currentTimeMillis, (now) => {
        const app = appOf(organizationId, appId)
        if (app === undefined) return undefined
        app.previous_signing_secret = app.signing_secret
        app.previous_secret_expires_at = now + previousHours * 3_600_000
        app.signing_secret = secret
        app.updated_at = now
        return {
          signing_secret: secret,
          previous_secret_expires_at: new Date(app.previous_secret_expires_at).toISOString()
        }
      }),

    deleteApp: (organizationId, appId) =>
      Effect.sync(() => {
        if (appOf(organizationId, appId) === undefined) return false
        store.apps.delete(appId)
        for (const delivery of store.deliveries.values()) {
          if (delivery.app_id === appId) store.deliveries.delete(delivery.id)
        }
        return true
      }),

    listDeliveries: (organizationId, appId, filter) =>
      Effect.sync(() => {
        const listed = [...store.deliveries.values()]
          .filter(
            (delivery) =>
              delivery.app_id === appId &&
              delivery.organization_id === organizationId &&
              (filter.status === undefined || delivery.status === filter.status) &&
              (filter.afterId === undefined || (isUuid(filter.afterId) && delivery.id < filter.afterId))
          )
          .sort((a, b) => (a.id < b.id ? 1 : a.id > b.id ? -1 : 0))
          .slice(0, filter.limit)
          .map(toDelivery)
        return JSON.stringify(listed) as JsonText<ReadonlyArray<Delivery>>
      }),

    retryDelivery: (organizationId, appId, deliveryId) =>
      Effect.map(Clock.currentTimeMillis, (now) => {
        const delivery = store.deliveries.get(deliveryId)
        if (delivery?.app_id !== appId || delivery.organization_id !== organizationId) return false
        requeue(delivery, now)
        notify(store)
        return true
      }),

    recover: (organizationId, appId, since, until) =>
      Effect.map(Clock.currentTimeMillis, (now) => {
        const [from, to] = [Date.parse(since), until === null ? Number.POSITIVE_INFINITY : Date.parse(until)]
        let count = 0
        for (const delivery of store.deliveries.values()) {
          if (delivery.app_id !== appId || delivery.organization_id !== organizationId) continue
          if (delivery.status !== "failed" || delivery.created_at < from || delivery.created_at >= to) continue
          requeue(delivery, now)
          count++
        }
        if (count > 0) notify(store)
        return count
      }),

    claim: (options) =>
      Effect.map(Clock.currentTimeMillis, (now) => {
        const busy = new Map(options.busyApps.map((app, i) => [app, options.busyCounts[i] ?? 0]))
        const heads = queueHeads(store)
        const scan = [...store.deliveries.values()]
          .filter((delivery) => {
            const app = store.apps.get(delivery.app_id)
            return (
              delivery.status === "pending" &&
              (delivery.ordering_key === null || heads.has(delivery.id)) &&
              delivery.next_attempt_at !== null &&
              delivery.next_attempt_at <= now &&
              (delivery.lease_until === null || delivery.lease_until < now) &&
              app?.enabled === true &&
              !options.saturated.includes(delivery.app_id)
            )
          })
          .sort((a, b) => a.next_attempt_at! - b.next_attempt_at! || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0))
          .slice(0, options.limit * 4)
        const taken = new Map<string, number>()
        const picked = scan
          .filter((delivery) => {
            const rank = (taken.get(delivery.app_id) ?? 0) + 1
            taken.set(delivery.app_id, rank)
            return rank <= options.perApp - (busy.get(delivery.app_id) ?? 0)
          })
          .slice(0, options.limit)
        return picked.map((delivery): ClaimedDelivery => {
          delivery.leased_by = options.workerId
          delivery.lease_until = now + options.leaseMs
          const app = store.apps.get(delivery.app_id)!
          const event = store.events.get(delivery.event_id)!
          return {
            id: delivery.id,
            app_id: delivery.app_id,
            event_id: delivery.event_id,
            attempts: delivery.attempts,
            webhook_url: app.webhook_url,
            signing_secret: app.signing_secret,
            previous_signing_secret:
              app.previous_secret_expires_at !== null && app.previous_secret_expires_at > now
                ? app.previous_signing_secret
                : null,
            body: event.body,
            traceparent: event.traceparent
          }
        })
      }),

    complete: (workerId, results) =>
      Effect.map(Clock.currentTimeMillis, (now) => {
        for (const result of results) {
          const delivery = store.deliveries.get(result.id)
          if (delivery?.leased_by !== workerId) continue
          delivery.attempts += 1
          delivery.status = result.status
          delivery.next_attempt_at = result.status === "pending" ? now + result.delayMs : null
          delivery.last_status_code = result.statusCode
          delivery.last_error = result.error
          delivery.leased_by = null
          delivery.lease_until = null
          delivery.updated_at = now
          delivery.attempt_log.push({
            attempt: delivery.attempts,
            status_code: result.statusCode,
            error: result.error,
            duration_ms: result.durationMs,
            started_at: result.startedAt.getTime()
          })
        }
      }),

    release: (workerId) =>
      Effect.sync(() => {
        for (const delivery of store.deliveries.values()) {
          if (delivery.leased_by === workerId && delivery.status === "pending") {
            delivery.leased_by = null
            delivery.lease_until = null
          }
        }
      }),

    sweep: Effect.sync(() => {
      let n = 0
      for (const delivery of store.deliveries.values()) {
        if (!store.apps.has(delivery.app_id)) {
          store.deliveries.delete(delivery.id)
          n++
        }
      }
      return n
    }),

    listen: (onNotification) =>
      Effect.scoped(
        Effect.acquireRelease(
          Effect.sync(() => {
            store.listeners.add(onNotification)
            onNotification()
          }),
          () => Effect.sync(() => store.listeners.delete(onNotification))
        ).pipe(Effect.andThen(Effect.never))
      )
  }
}
