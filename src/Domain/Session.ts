/**
 * The Session resource (conversations.md "Session").
 */
import { Schema } from "effect"
import { Agent } from "./Agent.ts"
import { JsonObject, Timestamp, Uuid } from "./Common.ts"

/** `open` or `closed`; a closed session is never reopened (spec "Session status"). */
export const SessionStatus = Schema.Literals(["open", "closed"])
export type SessionStatus = typeof SessionStatus.Type

/**
 * A session as every endpoint returns it: `agent` is the assigned agent or
 * null; timestamps are ISO 8601 UTC; `updated_at` is null until the first update.
 */
export const Session = Schema.Struct({
  id: Uuid.annotate({ description: "The session's id." }),
  contact_id: Schema.String.annotate({
    description: "Your id of the contact (a phone number, a user id); with ingest, the `from` of the channel (D9)."
  }),
  organization_id: Uuid.annotate({ description: "The organization the session belongs to." }),
  conversation_id: Uuid.annotate({
    description: "The conversation of the contact on the session's channel (none for POST /sessions) (D8)."
  }),
  thread_id: Schema.NullOr(Uuid).annotate({
    description: "Set when the session first gets an AI agent, and kept afterwards; null until then (D7)."
  }),
  status: SessionStatus.annotate({ description: "`open`, or `closed` for good." }),
  agent: Schema.NullOr(Agent).annotate({ description: "The agent of the session, or null." }),
  metadata: JsonObject.annotate({
    description: "Your data about the session: any JSON object of at most 16 KiB (D17)."
  }),
  ending_survey_submission_id: Schema.NullOr(Schema.String).annotate({
    description: "The `ending_survey_id` given when the session was finished."
  }),
  created_at: Timestamp.annotate({ description: "When the session was created (ISO 8601, UTC, microseconds)." }),
  updated_at: Schema.NullOr(Timestamp).annotate({ description: "When the session last changed; null until then." })
}).annotate({ identifier: "Session" })
export type Session = typeof Session.Type
