/**
 * The Session resource (conversations.md "Session").
 */
import { Schema } from "effect"
import { Agent } from "./Agent.ts"
import { JsonObject, Timestamp } from "./Common.ts"

/** `open` or `closed`; a closed session is never reopened (spec "Session status"). */
export const SessionStatus = Schema.Literals(["open", "closed"])
export type SessionStatus = typeof SessionStatus.Type

/**
 * A session as every endpoint returns it: `agent` is the assigned agent or
 * null; timestamps are ISO 8601 UTC; `updated_at` is null until the first update.
 */
export const Session = Schema.Struct({
  id: Schema.String,
  contact_id: Schema.String,
  organization_id: Schema.String,
  conversation_id: Schema.String,
  thread_id: Schema.NullOr(Schema.String),
  status: SessionStatus,
  agent: Schema.NullOr(Agent),
  metadata: JsonObject,
  ending_survey_submission_id: Schema.NullOr(Schema.String),
  created_at: Timestamp,
  updated_at: Schema.NullOr(Timestamp)
}).annotate({ identifier: "Session" })
export type Session = typeof Session.Type
