/**
 * The webhooks service (DECISIONS.md O6, W1, W4-W6): apps of an organization
 * (create, list, get, PATCH, DELETE), their deliveries and the admin retry,
 * and their health as the CLI shows it (W10: the delivery worker disables a
 * failing app, `Repo.ts` `completeStatement`; PATCH `enabled: true` re-enables it).
 * Deliveries themselves are made by the fan-out trigger (W2) and sent by the
 * delivery workers (`Worker.ts`).
 *
 * Unknown organizations fail with OrganizationNotFound `Organization not found`, unknown
 * or foreign apps with `App not found`, unknown deliveries with
 * `Delivery not found` (404). A webhook URL that is not http(s) or whose host
 * resolves to a non-public address (W6, unless `ALLOW_PRIVATE_NETWORK_TARGETS`)
 * fails with ValidationFailed at `["body", "webhook_url"]` (422); host names
 * are resolved by the `HostResolver` in context (the system's by default).
 */
import { Context, Effect, Layer } from "effect"
import { OrganizationNotFound } from "../Admin/Errors.ts"
import { AppConfig } from "../Config.ts"
import type { JsonText } from "../Domain/Common.ts"
import { ValidationFailed } from "../Domain/Errors.ts"
import { Ids } from "../Shared/Ids.ts"
import { checkTargetUrl, HostResolver } from "../Shared/Ssrf.ts"
import {
  type App,
  type CreateAppPayload,
  DEFAULT_DELIVERIES_LIMIT,
  type DeliveriesQuery,
  type Delivery,
  type Recovered,
  type RecoverRange,
  type SecretRotation,
  type UpdateAppPayload
} from "./Api.ts"
import { AppNotFound, DeliveryNotFound } from "./Errors.ts"
import { type AppChanges, type FailingApp, WebhooksRepo } from "./Repo.ts"
import { generateSecret, PREVIOUS_SECRET_HOURS } from "./Signing.ts"

/** Body of POST /organizations/{id}/apps (O6, W4), as its schema decodes it (`Api.ts`). */
export type CreateApp = typeof CreateAppPayload.Type

/** Body of PATCH /organizations/{id}/apps/{app_id}: members present are changed (O6). */
export type UpdateApp = typeof UpdateAppPayload.Type

/** Query of GET .../deliveries (O6): `status`, `limit` (default {@link DEFAULT_DELIVERIES_LIMIT}), `after_id` (keyset cursor). */
export type ListDeliveries = typeof DeliveriesQuery.Type

const organizationNotFound = (organizationId: string) => new OrganizationNotFound({ organization_id: organizationId })
const appNotFound = (appId: string) => new AppNotFound({ app_id: appId })
const unique = <A>(values: ReadonlyArray<A>): ReadonlyArray<A> => [...new Set(values)]

/** The webhooks service (O6). */
export class Webhooks extends Context.Service<
  Webhooks,
  {
    /** A new app with a new `whsec_` signing secret (W4). */
    createApp(organizationId: string, input: CreateApp): Effect.Effect<App, OrganizationNotFound | ValidationFailed>
    /** The organization's apps, oldest first. */
    listApps(organizationId: string): Effect.Effect<ReadonlyArray<App>, OrganizationNotFound>
    /**
     * The organization's apps in a failing period (W10), with when it began:
     * every delivery attempted since failed. What `parley app list` shows.
     */
    listFailing(organizationId: string): Effect.Effect<ReadonlyArray<FailingApp>, OrganizationNotFound>
    getApp(organizationId: string, appId: string): Effect.Effect<App, OrganizationNotFound | AppNotFound>
    /**
     * Changes URL (W6-checked), events, name, enabled, ordering (W7); later
     * events follow the new subscription, and a new ordering applies to the
     * deliveries of events written after the change. `enabled: true` clears
     * the app's health (W10: `disabled_reason`, `disabled_at`, its failing
     * period) and, on a disabled app, sends its held pending deliveries now.
     */
    updateApp(
      organizationId: string,
      appId: string,
      input: UpdateApp
    ): Effect.Effect<App, OrganizationNotFound | AppNotFound | ValidationFailed>
    /** Deletes the app with its deliveries. */
    deleteApp(organizationId: string, appId: string): Effect.Effect<void, OrganizationNotFound | AppNotFound>
    /** The app's deliveries, newest first, with every attempt (O6), as JSON text. */
    listDeliveries(
      organizationId: string,
      appId: string,
      query: ListDeliveries
    ): Effect.Effect<JsonText<ReadonlyArray<Delivery>>, OrganizationNotFound | AppNotFound>
    /**
     * A new signing secret for the app (W8); the previous one signs too for
     * {@link PREVIOUS_SECRET_HOURS} hours. Returns the secret and that moment.
     */
    rotateSecret(
      organizationId: string,
      appId: string
    ): Effect.Effect<SecretRotation, OrganizationNotFound | AppNotFound>
    /**
     * Recovery (W9): the app's `failed` deliveries created in [`since`,
     * `until`) become pending and due now. Returns how many.
     */
    recover(
      organizationId: string,
      appId: string,
      range: RecoverRange
    ): Effect.Effect<Recovered, OrganizationNotFound | AppNotFound>
    /** Re-queues a delivery for one more attempt now (W5); 404 `Delivery not found`. */
    retryDelivery(
      organizationId: string,
      appId: string,
      deliveryId: string
    ): Effect.Effect<void, OrganizationNotFound | AppNotFound | DeliveryNotFound>
  }
>()("parley/Webhooks") {
  /** The service, its repository left open; requires `WebhooksRepo`, `AppConfig` and `Ids`. */
  static readonly layerNoDeps = Layer.effect(
    Webhooks,
    Effect.gen(function* () {
      const repo = yield* WebhooksRepo
      const config = yield* AppConfig
      const { newId } = yield* Ids
      const resolveHost = yield* HostResolver

      const requireOrganization = Effect.fnUntraced(function* (organizationId: string) {
        if (!(yield* repo.organizationExists(organizationId))) return yield* organizationNotFound(organizationId)
      })

      const requireApp = Effect.fnUntraced(function* (organizationId: string, appId: string) {
        yield* requireOrganization(organizationId)
        const app = yield* repo.findApp(organizationId, appId)
        if (app === undefined) return yield* appNotFound(appId)
        return app
      })

      /** W6 at creation/PATCH: scheme and resolved addresses. */
      const checkUrl = (url: string) =>
        Effect.tryPromise({
          try: () => checkTargetUrl(url, config.allowPrivateNetworkTargets, resolveHost),
          catch: (error) =>
            ValidationFailed.one(["body", "webhook_url"], error instanceof Error ? error.message : String(error))
        })

      const createApp = Effect.fn("Webhooks.createApp")(
        function* (organizationId: string, input: CreateApp) {
          yield* requireOrganization(organizationId)
          yield* checkUrl(input.webhook_url)
          return yield* repo.insertApp({
            id: newId(),
            organizationId,
            name: input.name,
            webhookUrl: input.webhook_url,
            events: unique(input.events),
            enabled: input.enabled ?? true,
            ordering: input.ordering ?? "none",
            signingSecret: generateSecret()
          })
        },
        Effect.catchTag("SqlError", Effect.die)
      )

      const listApps = Effect.fn("Webhooks.listApps")(
        function* (organizationId: string) {
          yield* requireOrganization(organizationId)
          return yield* repo.listApps(organizationId)
        },
        Effect.catchTag("SqlError", Effect.die)
      )

      const listFailing = Effect.fn("Webhooks.listFailing")(
        function* (organizationId: string) {
          yield* requireOrganization(organizationId)
          return yield* repo.listFailing(organizationId)
        },
        Effect.catchTag("SqlError", Effect.die)
      )

      const getApp = Effect.fn("Webhooks.getApp")(requireApp, Effect.catchTag("SqlError", Effect.die))

      const updateApp = Effect.fn("Webhooks.updateApp")(
        function* (organizationId: string, appId: string, input: UpdateApp) {
          yield* requireApp(organizationId, appId)
          if (input.webhook_url !== undefined) yield* checkUrl(input.webhook_url)
          const changes: AppChanges = input.events === undefined ? input : { ...input, events: unique(input.events) }
          const app = yield* repo.updateApp(organizationId, appId, changes)
          if (app === undefined) return yield* appNotFound(appId)
          return app
        },
        Effect.catchTag("SqlError", Effect.die)
      )

      const deleteApp = Effect.fn("Webhooks.deleteApp")(
        function* (organizationId: string, appId: string) {
          yield* requireOrganization(organizationId)
          if (!(yield* repo.deleteApp(organizationId, appId))) return yield* appNotFound(appId)
        },
        Effect.catchTag("SqlError", Effect.die)
      )

      const listDeliveries = Effect.fn("Webhooks.listDeliveries")(
        function* (organizationId: string, appId: string, query: ListDeliveries) {
          yield* requireApp(organizationId, appId)
          return yield* repo.listDeliveries(organizationId, appId, {
            status: query.status,
            limit: query.limit ?? DEFAULT_DELIVERIES_LIMIT,
            afterId: query.after_id
          })
        },
        Effect.catchTag("SqlError", Effect.die)
      )

      const retryDelivery = Effect.fn("Webhooks.retryDelivery")(
        function* (organizationId: string, appId: string, deliveryId: string) {
          yield* requireApp(organizationId, appId)
          if (!(yield* repo.retryDelivery(organizationId, appId, deliveryId))) {
            return yield* new DeliveryNotFound({ delivery_id: deliveryId })
          }
        },
        Effect.catchTag("SqlError", Effect.die)
      )

      const rotateSecret = Effect.fn("Webhooks.rotateSecret")(
        function* (organizationId: string, appId: string) {
          yield* requireOrganization(organizationId)
          const rotation = yield* repo.rotateSecret(organizationId, appId, generateSecret(), PREVIOUS_SECRET_HOURS)
          if (rotation === undefined) return yield* appNotFound(appId)
          return rotation
        },
        Effect.catchTag("SqlError", Effect.die)
      )

      const recover = Effect.fn("Webhooks.recover")(
        function* (organizationId: string, appId: string, range: RecoverRange) {
          yield* requireApp(organizationId, appId)
          return { deliveries: yield* repo.recover(organizationId, appId, range.since, range.until ?? null) }
        },
        Effect.catchTag("SqlError", Effect.die)
      )

      return Webhooks.of({
        recover,
        createApp,
        listApps,
        listFailing,
        getApp,
        updateApp,
        deleteApp,
        listDeliveries,
        retryDelivery,
        rotateSecret
      })
    })
  )

  /** The service over its PostgreSQL repository (`WebhooksRepo.layer`); the rest of what `layerNoDeps` requires stays open. */
  static readonly layer = Webhooks.layerNoDeps.pipe(Layer.provide(WebhooksRepo.layer))
}
