/**
 * A webhook app as integrators see it (DECISIONS.md O6, W7, W10): its admin
 * shape without the signing secret, which the `app.failing` and
 * `app.disabled` events carry as `data.object`. The admin API's `App`
 * (`Webhooks/Api.ts`) is this shape with `signing_secret`.
 */
import { Schema } from "effect"
import { Timestamp, Uuid } from "./Common.ts"
import { EventTypeSchema } from "./EventType.ts"

/**
 * How an app's deliveries are ordered (W7): `none`, every delivery
 * independent (W5); `conversation`, the deliveries of one conversation's events
 * are attempted one at a time in the order the events were committed, a
 * retried one never overtaken, a `failed` one releasing those behind it.
 */
export const AppOrdering = Schema.Literals(["none", "conversation"]).annotate({
  identifier: "AppOrdering",
  description:
    "`none` (default): every delivery independent. `conversation`: the deliveries of one conversation's events " +
    "(its conversation.created and every event of its sessions and messages) are attempted one at a time, in the " +
    "order the events were committed; one waits while an earlier one of the same conversation is pending, so a " +
    "retried event is never overtaken, and one that ends `failed` releases those behind it. Conversations never " +
    "wait for each other (W7)."
})
export type AppOrdering = typeof AppOrdering.Type

/** Why Parley disabled an app (W10): `failing`, every delivery failed for `APP_DISABLE_AFTER`. */
export const AppDisabledReason = Schema.Literal("failing")
export type AppDisabledReason = typeof AppDisabledReason.Type

/**
 * The members of an app but its secret, in wire order (O6, W7, W10):
 * `{id, name, webhook_url, events, enabled, disabled_reason, disabled_at,
 * ordering, created_at}`; moments ISO 8601 (UTC).
 */
export const appFields = {
  id: Uuid.annotate({ description: "The app's id." }),
  name: Schema.String.annotate({ description: "The app's name." }),
  webhook_url: Schema.String.annotate({ description: "Where its events are POSTed (http or https, W6)." }),
  events: Schema.Array(EventTypeSchema).annotate({ description: "The event types it receives (W1)." }),
  enabled: Schema.Boolean.annotate({
    description:
      "Whether its deliveries are sent. Disabled by a PATCH, it gets no new deliveries; disabled by Parley " +
      '(`disabled_reason: "failing"`), new events still make deliveries, held pending with those it had until it is ' +
      "enabled again (W10). Either way its pending deliveries wait."
  }),
  disabled_reason: Schema.NullOr(AppDisabledReason).annotate({
    description:
      '`"failing"` when Parley disabled it because every delivery failed (no 2xx) for the server\'s ' +
      "`APP_DISABLE_AFTER` (default 5 days), counted from its first failed attempt after its last success, creation " +
      "or re-enabling; null otherwise (enabled, or disabled by a PATCH). Cleared by a PATCH with `enabled: true` (W10)."
  }),
  disabled_at: Schema.NullOr(Timestamp).annotate({
    description: 'When Parley disabled it (with `disabled_reason: "failing"`, ISO 8601, UTC); null otherwise (W10).'
  }),
  ordering: AppOrdering,
  created_at: Timestamp.annotate({ description: "When it was created (ISO 8601, UTC)." })
} as const

/** An app without its signing secret (W10): the `data.object` of `app.failing` and `app.disabled`. */
export const AppWithoutSecret = Schema.Struct(appFields).annotate({
  identifier: "AppWithoutSecret",
  description: "An app as its admin shape (App) shows it, without `signing_secret` (W10)."
})
export type AppWithoutSecret = typeof AppWithoutSecret.Type
