/**
 * Outbox events as integrators receive them (DECISIONS.md W1, W3): the event
 * types. The events are written by the outbox (`src/Outbox/Outbox.ts`).
 */

/** Event types (W1). */
export const eventTypes = [
  "message.created",
  "message.updated",
  "session.created",
  "session.transferred",
  "session.finished",
  "session.closed",
  "conversation.created"
] as const

/** An event type (W1). */
export type EventType = (typeof eventTypes)[number]
