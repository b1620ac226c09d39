/**
 * The Conversation resource (conversations.md "What the service does" 2;
 * DECISIONS.md D8): the sessions of one contact over time, on one channel.
 * Integrators see it in the `conversation.created` event (W1).
 */
import { Schema } from "effect"
import { Timestamp } from "./Common.ts"

/**
 * A conversation: the contact's, on the channel (`channel_type`, `channel_to`)
 * of ingest, or on none (both null) for sessions created with POST /sessions
 * (D8). `created_at` ISO 8601.
 */
export const Conversation = Schema.Struct({
  id: Schema.String,
  organization_id: Schema.String,
  contact_id: Schema.String,
  channel_type: Schema.NullOr(Schema.String),
  channel_to: Schema.NullOr(Schema.String),
  created_at: Timestamp
}).annotate({ identifier: "Conversation" })
export type Conversation = typeof Conversation.Type
