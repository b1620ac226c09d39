/**
 * The Conversation resource (conversations.md "What the service does" 2;
 * DECISIONS.md D8): the sessions of one contact over time, on one channel.
 * Integrators see it in the `conversation.created` event (W1).
 */
import { Schema } from "effect"
import { Timestamp, Uuid } from "./Common.ts"

/**
 * A conversation: the contact's, on the channel (`channel_type`, `channel_to`)
 * of ingest, or on none (both null) for sessions created with POST /sessions
 * (D8). `created_at` ISO 8601.
 */
export const Conversation = Schema.Struct({
  id: Uuid.annotate({ description: "The conversation's id." }),
  organization_id: Uuid.annotate({ description: "The organization the conversation belongs to." }),
  contact_id: Schema.String.annotate({ description: "Your id of the contact (D8)." }),
  channel_type: Schema.NullOr(Schema.String).annotate({
    description: "The channel of ingest (`whatsapp` by default, D9), or null for sessions made with POST /sessions."
  }),
  channel_to: Schema.NullOr(Schema.String).annotate({
    description: "The `to` of ingest (your number or account on the channel), or null."
  }),
  created_at: Timestamp.annotate({ description: "When the conversation was created (ISO 8601, UTC, microseconds)." })
}).annotate({ identifier: "Conversation" })
export type Conversation = typeof Conversation.Type
