/**
 * Organizations, API keys and organization settings, managed by the admin API
 * and the CLI (DECISIONS.md O6).
 */
import { Context, Schema } from "effect"
import { Timestamp } from "./Common.ts"

/** `{id, name, created_at}` (O6). */
export const Organization = Schema.Struct({
  id: Schema.String,
  name: Schema.String,
  created_at: Timestamp
}).annotate({ identifier: "Organization" })
export type Organization = typeof Organization.Type

/** A new API key: the token is shown only in this answer (O6). */
export const ApiKeyCreated = Schema.Struct({
  id: Schema.String,
  name: Schema.NullOr(Schema.String),
  token: Schema.String,
  created_at: Timestamp,
  expires_at: Schema.NullOr(Timestamp)
}).annotate({ identifier: "ApiKeyCreated" })
export type ApiKeyCreated = typeof ApiKeyCreated.Type

/**
 * Organization settings (O6): reply debounce in seconds (0-60, default 3),
 * idle timeout in seconds before automatic closing (null = never, D16), and the
 * agent given to new ingest sessions without one (D9).
 */
export const Settings = Schema.Struct({
  reply_debounce_seconds: Schema.Int,
  session_idle_timeout_seconds: Schema.NullOr(Schema.Int),
  default_agent_id: Schema.NullOr(Schema.String)
}).annotate({ identifier: "Settings" })
export type Settings = typeof Settings.Type

/** The settings of an organization before any PATCH (O6): debounce 3 s, no idle timeout, no default agent. */
export const defaultSettings: Settings = {
  reply_debounce_seconds: 3,
  session_idle_timeout_seconds: null,
  default_agent_id: null
}

/** The organization of the request's API key, provided by the bearer middleware. */
export class CurrentOrganization extends Context.Service<CurrentOrganization, { readonly id: string }>()(
  "parley/CurrentOrganization"
) {}
