/**
 * The apps (webhooks) endpoints of the admin API (DECISIONS.md O6, W1-W6):
 * apps of an organization with their signing secret, their deliveries with
 * every attempt, and the manual retry of a delivery. Authenticated with
 * `ADMIN_TOKEN`.
 */
import { Schema } from "effect"
import { HttpApiEndpoint, HttpApiGroup, HttpApiSchema, OpenApi } from "effect/http-api"
import { OrganizationNotFound } from "../Admin/Errors.ts"
import { AppOrdering, appFields } from "../Domain/App.ts"
import { adminBasePath } from "../Domain/BasePaths.ts"
import { DateTimeInput, Identifier, Limit, Timestamp, Uuid } from "../Domain/Common.ts"
import { ValidationFailed } from "../Domain/Errors.ts"
import { EventTypeSchema } from "../Domain/EventType.ts"
import { AdminAuthorization } from "../Domain/Security.ts"
import { AppNotFound, DeliveryNotFound } from "./Errors.ts"

/** Subscribed event types: at least one of the W1 types (duplicates are stored once). */
export const EventTypeList = Schema.Array(EventTypeSchema).pipe(Schema.check(Schema.isMinLength(1)))

/** A webhook URL as sent: 1-2048 characters; http(s) and the W6 address rules are checked by the service (422). */
export const WebhookUrl = Schema.String.pipe(Schema.check(Schema.isBetweenLength(1, 2048)))

const NonEmptyName = Schema.String.pipe(Schema.check(Schema.isBetweenLength(1, 255)))

/**
 * An app (O6, W7, W10): `{id, name, webhook_url, events, enabled,
 * disabled_reason, disabled_at, ordering, signing_secret, created_at}`;
 * `signing_secret` is `whsec_<base64>` (W4); moments ISO 8601.
 */
export const App = Schema.Struct({
  id: appFields.id,
  name: appFields.name,
  webhook_url: appFields.webhook_url,
  events: appFields.events,
  enabled: appFields.enabled,
  disabled_reason: appFields.disabled_reason,
  disabled_at: appFields.disabled_at,
  ordering: appFields.ordering,
  signing_secret: Schema.String.annotate({
    description: "`whsec_<base64>`: the key of the Standard Webhooks signatures of its requests (W4)."
  }),
  created_at: appFields.created_at
}).annotate({ identifier: "App" })
export type App = typeof App.Type

/** The response of a secret rotation (W8). */
export const SecretRotation = Schema.Struct({
  signing_secret: Schema.String.annotate({
    description: "The app's new `whsec_<base64>` secret: every request is signed with it from now on."
  }),
  previous_secret_expires_at: Timestamp.annotate({
    description:
      "Until when requests also carry a signature with the previous secret (24 hours from the rotation, ISO 8601, UTC)."
  })
}).annotate({ identifier: "SecretRotation" })
export type SecretRotation = typeof SecretRotation.Type

/** One attempt of a delivery (W5): its number (1-based), HTTP status (null without a response), error, duration in ms, start (ISO 8601). */
export const DeliveryAttempt = Schema.Struct({
  attempt: Schema.Int.annotate({ description: "Its number, from 1." }),
  status_code: Schema.NullOr(Schema.Int).annotate({ description: "The app's HTTP status; null without a response." }),
  error: Schema.NullOr(Schema.String).annotate({
    description: "Why it failed (timeout, refused address, connection error, non-2xx); null on success."
  }),
  duration_ms: Schema.Int.annotate({ description: "How long it took, in milliseconds." }),
  started_at: Timestamp.annotate({ description: "When it started (ISO 8601, UTC)." })
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
  id: Uuid.annotate({ description: "The delivery's id." }),
  event_id: Uuid.annotate({ description: "The event delivered (its `webhook-id`)." }),
  event_type: Schema.String.annotate({ description: "The event's type (W1)." }),
  app_id: Uuid.annotate({ description: "The app it goes to." }),
  status: DeliveryStatus.annotate({
    description: "`pending` (waiting or in flight), `succeeded`, or `failed` after the last retry (W5)."
  }),
  attempts: Schema.Int.annotate({ description: "How many attempts were made." }),
  last_status_code: Schema.NullOr(Schema.Int).annotate({ description: "The status of the latest attempt." }),
  last_error: Schema.NullOr(Schema.String).annotate({ description: "The error of the latest attempt." }),
  next_attempt_at: Schema.NullOr(Timestamp).annotate({
    description:
      "When the next attempt is due; null unless pending, and null for a delivery made while its app was disabled for failing (held until the app is enabled again, W10)."
  }),
  created_at: Timestamp.annotate({ description: "When the event was fanned out to the app (ISO 8601, UTC)." }),
  updated_at: Schema.NullOr(Timestamp).annotate({ description: "When the delivery last changed." }),
  attempt_log: Schema.Array(DeliveryAttempt).annotate({ description: "Every attempt, oldest first." })
}).annotate({ identifier: "Delivery" })
export type Delivery = typeof Delivery.Type

/** POST /organizations/{id}/apps body (O6, W7); `enabled` defaults to true, `ordering` to `none`. */
export const CreateAppPayload = Schema.Struct({
  name: NonEmptyName,
  webhook_url: WebhookUrl,
  events: EventTypeList,
  enabled: Schema.optionalKey(Schema.Boolean),
  ordering: Schema.optionalKey(AppOrdering)
}).annotate({
  examples: [
    { name: "CRM sync", webhook_url: "https://crm.example.com/parley", events: ["message.created", "session.closed"] }
  ]
})

/** PATCH /organizations/{id}/apps/{app_id} body: members present are changed. */
export const UpdateAppPayload = Schema.Struct({
  name: Schema.optionalKey(NonEmptyName),
  webhook_url: Schema.optionalKey(WebhookUrl),
  events: Schema.optionalKey(EventTypeList),
  enabled: Schema.optionalKey(Schema.Boolean),
  ordering: Schema.optionalKey(AppOrdering)
})

/** The deliveries of a page when the query gives no `limit` (O6; docs/webhooks.md). */
export const DEFAULT_DELIVERIES_LIMIT = 100

/** GET .../deliveries query: `status`, `limit` (1-1000, default {@link DEFAULT_DELIVERIES_LIMIT}), `after_id` (keyset: the last id of the previous page). */
export const DeliveriesQuery = Schema.Struct({
  status: Schema.optionalKey(DeliveryStatus),
  limit: Schema.optionalKey(
    Limit(1000).annotate({ description: `Most deliveries on the page, 1-1000 (default ${DEFAULT_DELIVERIES_LIMIT}).` })
  ),
  after_id: Schema.optionalKey(Identifier)
})

/** POST .../recover body (W9): the creation range of the failed deliveries to send again; `until` open when absent. */
export const RecoverPayload = Schema.Struct({
  since: DateTimeInput.annotate({ description: "Failed deliveries created at or after this moment (ISO 8601)." }),
  until: Schema.optionalKey(
    DateTimeInput.annotate({ description: "... and before this moment (ISO 8601); absent: up to now." })
  )
}).annotate({ examples: [{ since: "2026-11-22T00:00:00Z" }] })
export type RecoverRange = typeof RecoverPayload.Type

/** The response of a recovery (W9): how many deliveries became pending. */
export const Recovered = Schema.Struct({
  deliveries: Schema.Int.annotate({ description: "How many failed deliveries became pending and due now." })
}).annotate({ identifier: "Recovered" })
export type Recovered = typeof Recovered.Type

const appPath = { org_id: Identifier, app_id: Identifier }

/** The apps group of the admin API (O6). */
export class AppsApi extends HttpApiGroup.make("apps")
  .add(
    HttpApiEndpoint.post("createApp", "/organizations/:org_id/apps", {
      params: { org_id: Identifier },
      payload: CreateAppPayload,
      success: App.pipe(HttpApiSchema.status(201)),
      error: [OrganizationNotFound.Wire, ValidationFailed.Wire]
    }).annotateMerge(
      OpenApi.annotations({
        summary: "Create a webhook app",
        description:
          "An app receives the organization's events of the types in `events` at `webhook_url` (http or https; loopback, private, link-local and metadata addresses are refused unless the server allows them, W6), signed per Standard Webhooks with its `signing_secret` (W4). Delivery is at least once, retried on the server's schedule (W2, W5)."
      })
    ),
    HttpApiEndpoint.get("listApps", "/organizations/:org_id/apps", {
      params: { org_id: Identifier },
      success: Schema.Array(App),
      error: OrganizationNotFound.Wire
    }).annotateMerge(
      OpenApi.annotations({
        summary: "List webhook apps",
        description: "The organization's apps with their signing secrets (O6)."
      })
    ),
    HttpApiEndpoint.get("getApp", "/organizations/:org_id/apps/:app_id", {
      params: appPath,
      success: App,
      error: [OrganizationNotFound.Wire, AppNotFound.Wire]
    }).annotateMerge(
      OpenApi.annotations({ summary: "Get a webhook app", description: "The app, or 404 `App not found` (O6)." })
    ),
    HttpApiEndpoint.patch("updateApp", "/organizations/:org_id/apps/:app_id", {
      params: appPath,
      payload: UpdateAppPayload,
      success: App,
      error: [OrganizationNotFound.Wire, AppNotFound.Wire, ValidationFailed.Wire]
    }).annotateMerge(
      OpenApi.annotations({
        summary: "Update a webhook app",
        description:
          "Changes the members present. An app disabled by a PATCH gets no new deliveries; an app's `events` decide which later events it receives (W1). `enabled: true` on a disabled app clears `disabled_reason` and `disabled_at` and starts a new health period, and its held pending deliveries are due at once, in order under `ordering: conversation` (W7, W10); `failed` ones stay failed (recover them, W9)."
      })
    ),
    HttpApiEndpoint.delete("deleteApp", "/organizations/:org_id/apps/:app_id", {
      params: appPath,
      success: HttpApiSchema.NoContent,
      error: [OrganizationNotFound.Wire, AppNotFound.Wire]
    }).annotateMerge(
      OpenApi.annotations({
        summary: "Delete a webhook app",
        description: "Deletes the app with its deliveries; nothing more is sent to it (O6)."
      })
    ),
    HttpApiEndpoint.get("listDeliveries", "/organizations/:org_id/apps/:app_id/deliveries", {
      params: appPath,
      query: DeliveriesQuery,
      success: Schema.Array(Delivery),
      error: [OrganizationNotFound.Wire, AppNotFound.Wire]
    }).annotateMerge(
      OpenApi.annotations({
        summary: "List an app's deliveries",
        description: `Deliveries of events to the app, newest first, each with every attempt (status code, error, duration), filtered by \`status\`; \`limit\` 1-1000 (default ${DEFAULT_DELIVERIES_LIMIT}), next page with \`after_id\` = the last id of the previous page (O6, W5).`
      })
    ),
    HttpApiEndpoint.post("rotateSecret", "/organizations/:org_id/apps/:app_id/rotate-secret", {
      params: appPath,
      success: SecretRotation,
      error: [OrganizationNotFound.Wire, AppNotFound.Wire]
    }).annotateMerge(
      OpenApi.annotations({
        summary: "Rotate an app's signing secret",
        description:
          "Gives the app a new signing secret and returns it. For 24 hours every request carries two signatures, the new secret's first (`webhook-signature: v1,<new> v1,<old>`), so a receiver can switch secrets at any moment of that day without losing a delivery; then only the new one (W8)."
      })
    ),
    HttpApiEndpoint.post("recover", "/organizations/:org_id/apps/:app_id/recover", {
      params: appPath,
      payload: RecoverPayload,
      success: Recovered.pipe(HttpApiSchema.status(202)),
      error: [OrganizationNotFound.Wire, AppNotFound.Wire]
    }).annotateMerge(
      OpenApi.annotations({
        summary: "Recover an app's failed deliveries",
        description:
          "After an outage of the app's endpoint: every `failed` delivery of the app created at or after `since` (and before `until`, when given) becomes pending and due now, and is sent again, each body byte for byte as before, one attempt each (W9, W5). Responds 202 with how many."
      })
    ),
    HttpApiEndpoint.post("retryDelivery", "/organizations/:org_id/apps/:app_id/deliveries/:delivery_id/retry", {
      params: { ...appPath, delivery_id: Identifier },
      success: HttpApiSchema.Empty(202),
      error: [OrganizationNotFound.Wire, AppNotFound.Wire, DeliveryNotFound.Wire]
    }).annotateMerge(
      OpenApi.annotations({
        summary: "Retry a delivery",
        description:
          "Makes the delivery pending and due now; the same body is sent again, byte for byte (W3, W5). Responds 202."
      })
    )
  )
  .middleware(AdminAuthorization)
  .prefix(adminBasePath)
  .annotateMerge(
    OpenApi.annotations({
      title: "Apps (webhooks)",
      description:
        "Apps receive the organization's events by signed webhooks (Standard Webhooks), at least once, with retries; their deliveries and every attempt can be read and retried (W1-W6). An app whose deliveries all fail for the server's `APP_DISABLE_AFTER` (default 5 days) is disabled with `disabled_reason: \"failing\"`, its deliveries held until it is enabled again; `app.failing` warns at a fifth of that time and `app.disabled` follows, both to the organization's other apps (W10). Requests use the server's `ADMIN_TOKEN`. The events are listed under Webhooks."
    })
  ) {}
