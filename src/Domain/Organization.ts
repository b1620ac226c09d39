/**
 * Organizations, API keys and organization settings, managed by the admin API
 * and the CLI (DECISIONS.md O6).
 */
import { Context, Schema } from "effect"
import { Timestamp, Uuid } from "./Common.ts"

/** `{id, name, created_at}` (O6). */
export const Organization = Schema.Struct({
  id: Uuid.annotate({ description: "The organization's id." }),
  name: Schema.String.annotate({ description: "The organization's name." }),
  created_at: Timestamp.annotate({ description: "When it was created (ISO 8601, UTC)." })
}).annotate({ identifier: "Organization" })
export type Organization = typeof Organization.Type

/** A new API key: the token is shown only in this response (O6). */
export const ApiKeyCreated = Schema.Struct({
  id: Uuid.annotate({ description: "The key's id, to revoke it." }),
  name: Schema.NullOr(Schema.String).annotate({ description: "The key's name, if given." }),
  token: Schema.String.annotate({
    description:
      "The key itself (`prl_` and 43 base64url characters): shown in this response only, Parley keeps its SHA-256."
  }),
  created_at: Timestamp.annotate({ description: "When the key was created (ISO 8601, UTC)." }),
  expires_at: Schema.NullOr(Timestamp).annotate({ description: "When the key stops working; null: never." })
}).annotate({ identifier: "ApiKeyCreated" })
export type ApiKeyCreated = typeof ApiKeyCreated.Type

/**
 * An API key as the key list shows it (issue 39 item 6): never the token, only
 * its last 4 characters, to tell keys apart; null for keys made before Parley
 * kept them (migration 0022).
 */
export const ApiKey = Schema.Struct({
  id: Uuid.annotate({ description: "The key's id, to revoke it." }),
  name: Schema.NullOr(Schema.String).annotate({ description: "The key's name, if given." }),
  token_last4: Schema.NullOr(Schema.String).annotate({
    description:
      "The last 4 characters of the key's token, to recognize it; null for keys created before Parley kept them. The token itself is never shown again."
  }),
  created_at: Timestamp.annotate({ description: "When the key was created (ISO 8601, UTC)." }),
  expires_at: Schema.NullOr(Timestamp).annotate({ description: "When the key stops working; null: never." }),
  revoked_at: Schema.NullOr(Timestamp).annotate({ description: "When the key was revoked; null: it was not." })
}).annotate({ identifier: "ApiKey" })
export type ApiKey = typeof ApiKey.Type

/**
 * Organization settings (O6): reply debounce in seconds (0-60, default 3),
 * idle timeout in seconds before automatic closing (null = never, D16), the
 * agent given to new ingest sessions without one (D9), and the rate limit of
 * the conversations and assistants APIs (D20: requests per second, null =
 * unlimited; burst, null = twice the rate), and how long closed sessions and
 * events are kept (D21: whole days, null = forever).
 */
export const Settings = Schema.Struct({
  reply_debounce_seconds: Schema.Int.annotate({
    description: "Seconds an automatic reply after ingest waits for more messages (0-60, default 3; D11, R1)."
  }),
  session_idle_timeout_seconds: Schema.NullOr(Schema.Int).annotate({
    description: "Seconds after its latest message an open session closes by itself (`expired`); null: never (D16)."
  }),
  default_agent_id: Schema.NullOr(Uuid).annotate({
    description: "The agent of a new ingest session given no `agent_id` (D9); null: none."
  }),
  rate_limit_per_second: Schema.NullOr(Schema.Int).annotate({
    description:
      "Requests per second the organization may make to the conversations and assistants APIs, over all server processes (D20: a token bucket); null: unlimited."
  }),
  rate_limit_burst: Schema.NullOr(Schema.Int).annotate({
    description: "The bucket's size: requests allowed at once after a quiet period (D20); null: twice the rate."
  }),
  message_retention_days: Schema.NullOr(Schema.Int).annotate({
    description:
      "Whole days a closed session is kept after it closed (1-36500; D21): then it is deleted with everything of it (messages, runs, ingest receipts, schedules, reply jobs, assignments), and its conversation and contact with their last session. Open sessions are never deleted. null (the default): kept forever."
  }),
  event_retention_days: Schema.NullOr(Schema.Int).annotate({
    description:
      "Whole days a webhook event is kept (1-3650, default 30; D21): then it is deleted with its deliveries and their attempt logs, unless a delivery of it is still `pending`. null: kept forever."
  })
}).annotate({ identifier: "Settings" })
export type Settings = typeof Settings.Type

/**
 * The settings of an organization before any PATCH (O6): debounce 3 s, no idle timeout, no default agent, no rate
 * limit, sessions kept forever and events 30 days (D21).
 */
export const defaultSettings: Settings = {
  reply_debounce_seconds: 3,
  session_idle_timeout_seconds: null,
  default_agent_id: null,
  rate_limit_per_second: null,
  rate_limit_burst: null,
  message_retention_days: null,
  event_retention_days: 30
}

/** The organization of the request's API key, provided by the bearer middleware. */
export class CurrentOrganization extends Context.Service<CurrentOrganization, { readonly id: string }>()(
  "parley/CurrentOrganization"
) {}
