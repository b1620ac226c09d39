/**
 * The event types of the outbox (DECISIONS.md W1), apart from the events'
 * schemas (`Event.ts`) so that the resources events carry (the app of
 * `app.failing` and `app.disabled`, `App.ts`) can name them too.
 */
import { Schema } from "effect"

/** Event types (W1; `contact.erased` D22, `app.failing` and `app.disabled` W10, `evaluation.completed` A16). */
export const eventTypes = [
  "message.created",
  "message.updated",
  "session.created",
  "session.transferred",
  "session.finished",
  "session.closed",
  "conversation.created",
  "contact.erased",
  "app.failing",
  "app.disabled",
  "evaluation.completed"
] as const

/** An event type (W1). */
export type EventType = (typeof eventTypes)[number]

/** An event type as a schema (W1). */
export const EventTypeSchema = Schema.Literals(eventTypes)
