/**
 * The events outbox (DECISIONS.md W1-W3). Every change writes its events into
 * the `events` table in the same transaction (usually the same statement) as
 * the change, so an event exists if and only if its change was committed (W2).
 * The envelope (`Database/Json.ts` `envelopeText`) is serialized once, by
 * PostgreSQL, and the stored text is what every webhook attempt sends (W3).
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
