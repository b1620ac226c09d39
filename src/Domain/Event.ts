/**
 * Outbox events as integrators receive them (DECISIONS.md W1, W3): the event
 * types and the schema of each event. The events are written by the outbox
 * (`src/Outbox/Outbox.ts`).
 */
import { Schema } from "effect"
import { AppWithoutSecret } from "./App.ts"
import { Uuid } from "./Common.ts"
import { Conversation } from "./Conversation.ts"
import { ContactErased } from "./Erasure.ts"
import { Evaluation } from "./Evaluation.ts"
import type { EventType } from "./EventType.ts"
import { Message } from "./Message.ts"
import { Session } from "./Session.ts"

/** What `action` a session.finished or session.closed event carries (W1). */
const CloseAction = {
  "session.finished": Schema.NullOr(Schema.Literal("expired")).annotate({
    description: "null for finish and PATCH, `expired` for automatic closing (D16) (W1)."
  }),
  "session.closed": Schema.NullOr(Schema.Literals(["expired", "ingest"])).annotate({
    description:
      "null for finish and PATCH, `expired` for automatic closing (D16), `ingest` for ingest's `new` and `close` (W1)."
  })
} as const

/** What each event type means (W1), for the OpenAPI document's webhooks and the event schemas. */
export const eventDescriptions: { readonly [T in EventType]: string } = {
  "message.created":
    "A message was stored: by POST message, ingest, a schedule or an AI reply. Until it is delivered, a redaction of the message rewrites its `content` and `redacted_at` (D23: the one exception to W3).",
  "message.updated":
    "A delivery member of a message changed (PATCH message, D13), or the message was redacted (D23). Until it is delivered, a redaction of the message rewrites its `content` and `redacted_at` (D23: the one exception to W3).",
  "session.created":
    "A session was created; it carries the agent the session was created with (that is not a transfer).",
  "session.transferred": "A session's agent changed after its creation: transfer, PATCH or ingest.",
  "session.finished": 'A session was finished: finish, PATCH to closed, or automatic closing (`action: "expired"`).',
  "session.closed": 'A session closed, by any path (ingest\'s included: `action: "ingest"`).',
  "conversation.created": "A conversation was created: a contact's first session on a channel (D8).",
  "contact.erased":
    "Everything Parley held of a contact was deleted (D22): erase your copies too. Carries only the contact's id and the erasure's.",
  "app.failing":
    "An app of the organization has failed every delivery (no 2xx) for a fifth of the server's `APP_DISABLE_AFTER` (default 5 days), counted from its first failed attempt after its last success, creation or re-enabling: it will be disabled if that goes on. Sent once per such period, to the organization's other apps that subscribe to it; carries the app without its secret (W10).",
  "app.disabled":
    "An app of the organization was disabled (`enabled: false`, `disabled_reason: \"failing\"`) after failing every delivery for the server's `APP_DISABLE_AFTER`; its deliveries are held until it is enabled again. Sent to the organization's other apps that subscribe to it; carries the app without its secret (W10).",
  "evaluation.completed":
    "An evaluation of an assistant completed (A16): it carries the evaluation with its summary, so a CI job or a dashboard can act on the changed rate without polling."
}

/** The schema identifier of an event type's schema: `message.created` -> `MessageCreatedEvent`. */
export const eventSchemaIdentifier = (type: EventType): string =>
  `${type.replace(/(^|[._])(\w)/g, (_, _separator: string, letter: string) => letter.toUpperCase())}Event`

/**
 * The W3 envelope of an event of `type` about `object`: exactly `{id,
 * timestamp, type, organization_id, data: {object}}`.
 */
const envelope = <const T extends EventType, O extends Schema.Top>(type: T, object: O) =>
  Schema.Struct({
    id: Uuid.annotate({
      description:
        "The event's id, also the `webhook-id` header: the same on every attempt, so receivers deduplicate by it (W2, W4)."
    }),
    timestamp: Schema.Int.annotate({ description: "When the change was committed, in Unix seconds (W3)." }),
    type: Schema.Literal(type).annotate({ description: "The event type (W1)." }),
    organization_id: Uuid.annotate({ description: "The organization of the change." }),
    data: Schema.Struct({ object }).annotate({ description: "`object`: the resource as it is after the change." })
  }).annotate({ identifier: eventSchemaIdentifier(type), description: eventDescriptions[type] })

/** A session with the `action` of the close event `type` (W1). */
const closedSession = (type: keyof typeof CloseAction) =>
  Schema.Struct({ ...Session.fields, action: CloseAction[type] })

/**
 * The events an app receives, one schema per type of W1, each in the W3
 * envelope: the `webhooks` of the OpenAPI document and the type a receiver
 * decodes a request body into.
 */
export const eventSchemas = {
  "message.created": envelope("message.created", Message),
  "message.updated": envelope("message.updated", Message),
  "session.created": envelope("session.created", Session),
  "session.transferred": envelope("session.transferred", Session),
  "session.finished": envelope("session.finished", closedSession("session.finished")),
  "session.closed": envelope("session.closed", closedSession("session.closed")),
  "conversation.created": envelope("conversation.created", Conversation),
  "contact.erased": envelope("contact.erased", ContactErased),
  "app.failing": envelope("app.failing", AppWithoutSecret),
  "app.disabled": envelope("app.disabled", AppWithoutSecret),
  "evaluation.completed": envelope("evaluation.completed", Evaluation)
} as const satisfies { readonly [T in EventType]: Schema.Top }

/** Any event (W1, W3), told apart by `type`. */
export const WebhookEvent = Schema.Union(Object.values(eventSchemas)).annotate({ identifier: "WebhookEvent" })
export type WebhookEvent = typeof WebhookEvent.Type
