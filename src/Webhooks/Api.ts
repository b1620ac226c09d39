/**
 * The apps (webhooks) endpoints of the admin API (DECISIONS.md O6, W1-W6):
 * apps of an organization with their signing secret, their deliveries with
 * every attempt, and the manual retry of a delivery. Authenticated with
 * `ADMIN_TOKEN`.
 */
import { Schema } from "effect"
import { HttpApiEndpoint, HttpApiGroup, HttpApiSchema, OpenApi } from "effect/http-api"
import { adminBasePath } from "../Domain/BasePaths.ts"
import { Identifier, Timestamp } from "../Domain/Common.ts"
import { AppNotFound, DeliveryNotFound, OrganizationNotFound, ValidationFailed } from "../Domain/Errors.ts"
import { eventTypes } from "../Domain/Event.ts"
import { AdminAuthorization } from "../Domain/Security.ts"

/** An event type (W1). */
export const EventTypeSchema = Schema.Literals(eventTypes)

/** Subscribed event types: 1 to 7 of the W1 types (duplicates are stored once). */
export const EventTypeList = Schema.Array(EventTypeSchema).pipe(Schema.check(Schema.isMinLength(1)))

/** A webhook URL as sent: 1-2048 characters; http(s) and the W6 address rules are checked by the service (422). */
export const WebhookUrl = Schema.String.pipe(Schema.check(Schema.isBetweenLength(1, 2048)))

const NonEmptyName = Schema.String.pipe(Schema.check(Schema.isBetweenLength(1, 255)))

/**
 * An app (O6): `{id, name, webhook_url, events, enabled, signing_secret,
 * created_at}`; `signing_secret` is `whsec_<base64>` (W4); `created_at` ISO 8601.
 */
export const App = Schema.Struct({
  id: Schema.String,
  name: Schema.String,
  webhook_url: Schema.String,
  events: Schema.Array(EventTypeSchema),
  enabled: Schema.Boolean,
  signing_secret: Schema.String,
  created_at: Timestamp
}).annotate({ identifier: "App" })
export type App = typeof App.Type

/** One attempt of a delivery (W5): its number (1-based), HTTP status (null without an answer), error, duration in ms, start (ISO 8601). */
export const DeliveryAttempt = Schema.Struct({
  attempt: Schema.Int,
  status_code: Schema.NullOr(Schema.Int),
  error: Schema.NullOr(Schema.String),
  duration_ms: Schema.Int,
  started_at: Timestamp
}).annotate({ identifier: "DeliveryAttempt" })
export type DeliveryAttempt = typeof DeliveryAttempt.Type

/** Delivery status (O6): `pending` (waiting or in flight), `succeeded`, `failed` (after the last retry, W5). */
export const DeliveryStatus = Schema.Literals(["pending", "succeeded", "failed"])
export type DeliveryStatus = typeof DeliveryStatus.Type

/**
 * A delivery of one event to one app (O6, W5): `attempts` is how many attempts
 * were made, `attempt_log` lists them, oldest first; `next_attempt_at` is set
 * while pending (ISO 8601), null otherwise.
 */
export const Delivery = Schema.Struct({
  id: Schema.String,
  event_id: Schema.String,
  event_type: Schema.String,
  app_id: Schema.String,
  status: DeliveryStatus,
  attempts: Schema.Int,
  last_status_code: Schema.NullOr(Schema.Int),
  last_error: Schema.NullOr(Schema.String),
  next_attempt_at: Schema.NullOr(Timestamp),
  created_at: Timestamp,
  updated_at: Schema.NullOr(Timestamp),
  attempt_log: Schema.Array(DeliveryAttempt)
}).annotate({ identifier: "Delivery" })
export type Delivery = typeof Delivery.Type

/** POST /organizations/{id}/apps body (O6); `enabled` defaults to true. */
export const CreateAppPayload = Schema.Struct({
  name: NonEmptyName,
  webhook_url: WebhookUrl,
  events: EventTypeList,
  enabled: Schema.optionalKey(Schema.Boolean)
})

/** PATCH /organizations/{id}/apps/{app_id} body: members present are changed. */
export const UpdateAppPayload = Schema.Struct({
  name: Schema.optionalKey(NonEmptyName),
  webhook_url: Schema.optionalKey(WebhookUrl),
  events: Schema.optionalKey(EventTypeList),
  enabled: Schema.optionalKey(Schema.Boolean)
})

/** GET .../deliveries query: `status`, `limit` (1-1000, default 100), `after_id` (keyset: the last id of the previous page). */
export const DeliveriesQuery = Schema.Struct({
  status: Schema.optionalKey(DeliveryStatus),
  limit: Schema.optionalKey(
    Schema.NumberFromString.pipe(
      Schema.check(Schema.isInt(), Schema.isGreaterThanOrEqualTo(1), Schema.isLessThanOrEqualTo(1000))
    )
  ),
  after_id: Schema.optionalKey(Identifier)
})

const appPath = { org_id: Identifier, app_id: Identifier }

/** The apps group of the admin API (O6). */
export class AppsApi extends HttpApiGroup.make("apps")
  .add(
    HttpApiEndpoint.post("createApp", "/organizations/:org_id/apps", {
      params: { org_id: Identifier },
      payload: CreateAppPayload,
      success: App.pipe(HttpApiSchema.status(201)),
      error: [OrganizationNotFound.Wire, ValidationFailed.Wire]
    }),
    HttpApiEndpoint.get("listApps", "/organizations/:org_id/apps", {
      params: { org_id: Identifier },
      success: Schema.Array(App),
      error: OrganizationNotFound.Wire
    }),
    HttpApiEndpoint.get("getApp", "/organizations/:org_id/apps/:app_id", {
      params: appPath,
      success: App,
      error: [OrganizationNotFound.Wire, AppNotFound.Wire]
    }),
    HttpApiEndpoint.patch("updateApp", "/organizations/:org_id/apps/:app_id", {
      params: appPath,
      payload: UpdateAppPayload,
      success: App,
      error: [OrganizationNotFound.Wire, AppNotFound.Wire, ValidationFailed.Wire]
    }),
    HttpApiEndpoint.delete("deleteApp", "/organizations/:org_id/apps/:app_id", {
      params: appPath,
      success: HttpApiSchema.NoContent,
      error: [OrganizationNotFound.Wire, AppNotFound.Wire]
    }),
    HttpApiEndpoint.get("listDeliveries", "/organizations/:org_id/apps/:app_id/deliveries", {
      params: appPath,
      query: DeliveriesQuery,
      success: Schema.Array(Delivery),
      error: [OrganizationNotFound.Wire, AppNotFound.Wire]
    }),
    HttpApiEndpoint.post("retryDelivery", "/organizations/:org_id/apps/:app_id/deliveries/:delivery_id/retry", {
      params: { org_id: Identifier, app_id: Identifier, delivery_id: Identifier },
      success: HttpApiSchema.Empty(202),
      error: [OrganizationNotFound.Wire, AppNotFound.Wire, DeliveryNotFound.Wire]
    })
  )
  .middleware(AdminAuthorization)
  .prefix(adminBasePath)
  .annotateMerge(OpenApi.annotations({ title: "Apps (webhooks)" })) {}
