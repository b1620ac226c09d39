/**
 * The admin API (DECISIONS.md O6): organizations, API keys, agents and
 * settings under `/admin/v1`, authenticated with `ADMIN_TOKEN`.
 */
import { Schema } from "effect"
import { HttpApiEndpoint, HttpApiGroup, HttpApiSchema, OpenApi } from "effect/http-api"
import { Agent } from "../Domain/Agent.ts"
import { adminBasePath } from "../Domain/BasePaths.ts"
import { DateTimeInput, Identifier, PageQuery, ShortText } from "../Domain/Common.ts"
import { ValidationFailed } from "../Domain/Errors.ts"
import { Int32 } from "../Domain/Limits.ts"
import { ApiKey, ApiKeyCreated, Organization, Settings } from "../Domain/Organization.ts"
import { AdminAuthorization } from "../Domain/Security.ts"
import { AdminAgentNotFound, AgentInUse, AgentNotFound, ApiKeyNotFound, OrganizationNotFound } from "./Errors.ts"

const NonEmptyName = Schema.String.pipe(Schema.check(Schema.isBetweenLength(1, 255)))

/** POST /organizations body. */
export const CreateOrganizationPayload = Schema.Struct({ name: NonEmptyName })

/** POST /organizations/{id}/api-keys body: optional name and expiry (ISO 8601; null = never). */
export const CreateApiKeyPayload = Schema.Struct({
  name: Schema.optionalKey(Schema.NullOr(ShortText)),
  expires_at: Schema.optionalKey(Schema.NullOr(DateTimeInput))
})

/** POST /organizations/{id}/agents body: `assistant_id` for `ai`, `profile_id` for `human`. */
export const CreateAgentPayload = Schema.Struct({
  name: NonEmptyName,
  type: Schema.Literals(["ai", "human"]),
  assistant_id: Schema.optionalKey(Identifier),
  profile_id: Schema.optionalKey(Identifier)
}).annotate({ examples: [{ name: "Support bot", type: "ai", assistant_id: "0190a000-0000-7000-8000-00000000a001" }] })

/**
 * PATCH /organizations/{id}/agents/{agent_id} body (issue 39 item 6): members
 * present are changed; `assistant_id` only for an `ai` agent, `profile_id`
 * only for a `human` one (else 422 at that member). The type never changes.
 */
export const UpdateAgentPayload = Schema.Struct({
  name: Schema.optionalKey(NonEmptyName),
  assistant_id: Schema.optionalKey(Identifier),
  profile_id: Schema.optionalKey(Identifier)
}).annotate({ examples: [{ name: "Support bot (v2)" }] })

/** PATCH /organizations/{id}/settings body: members present are changed. */
export const UpdateSettingsPayload = Schema.Struct({
  reply_debounce_seconds: Schema.optionalKey(
    Schema.Int.pipe(Schema.check(Schema.isBetween({ minimum: 0, maximum: 60 })))
  ),
  session_idle_timeout_seconds: Schema.optionalKey(
    Schema.NullOr(Int32.pipe(Schema.check(Schema.isGreaterThanOrEqualTo(1))))
  ),
  default_agent_id: Schema.optionalKey(Schema.NullOr(Identifier)),
  rate_limit_per_second: Schema.optionalKey(
    Schema.NullOr(Schema.Int.pipe(Schema.check(Schema.isBetween({ minimum: 1, maximum: 1_000_000 }))))
  ),
  rate_limit_burst: Schema.optionalKey(
    Schema.NullOr(Schema.Int.pipe(Schema.check(Schema.isBetween({ minimum: 1, maximum: 2_000_000 }))))
  ),
  message_retention_days: Schema.optionalKey(
    Schema.NullOr(Schema.Int.pipe(Schema.check(Schema.isBetween({ minimum: 1, maximum: 36_500 }))))
  ),
  event_retention_days: Schema.optionalKey(
    Schema.NullOr(Schema.Int.pipe(Schema.check(Schema.isBetween({ minimum: 1, maximum: 3_650 }))))
  )
})

const organizationPath = { org_id: Identifier }
const agentPath = { org_id: Identifier, agent_id: Identifier }

/** The admin group. */
export class AdminApi extends HttpApiGroup.make("admin")
  .add(
    HttpApiEndpoint.post("createOrganization", "/organizations", {
      payload: CreateOrganizationPayload,
      success: Organization.pipe(HttpApiSchema.status(201))
    }).annotateMerge(
      OpenApi.annotations({
        summary: "Create an organization",
        description: "A new organization: every conversation, assistant, app and API key belongs to one (O6)."
      })
    ),
    HttpApiEndpoint.get("listOrganizations", "/organizations", {
      query: PageQuery,
      success: Schema.Array(Organization)
    }).annotateMerge(
      OpenApi.annotations({
        summary: "List organizations",
        description:
          "Every organization, oldest first, in pages: `limit` 1-1000 (default 100), next page with `after_id` = the last id of the previous page (O6, issue 39 item 6)."
      })
    ),
    HttpApiEndpoint.get("getOrganization", "/organizations/:org_id", {
      params: organizationPath,
      success: Organization,
      error: OrganizationNotFound.Wire
    }).annotateMerge(
      OpenApi.annotations({
        summary: "Get an organization",
        description: "The organization, or 404 `Organization not found` (O6)."
      })
    ),
    HttpApiEndpoint.post("createApiKey", "/organizations/:org_id/api-keys", {
      params: organizationPath,
      payload: CreateApiKeyPayload,
      success: ApiKeyCreated.pipe(HttpApiSchema.status(201)),
      error: OrganizationNotFound.Wire
    }).annotateMerge(
      OpenApi.annotations({
        summary: "Create an API key",
        description:
          "A new API key of the organization for the conversations and assistants APIs. The key (`prl_` and 43 characters) is in this response only: Parley keeps its SHA-256 (O6). `expires_at` null or omitted: it never expires."
      })
    ),
    HttpApiEndpoint.get("listApiKeys", "/organizations/:org_id/api-keys", {
      params: organizationPath,
      success: Schema.Array(ApiKey),
      error: OrganizationNotFound.Wire
    }).annotateMerge(
      OpenApi.annotations({
        summary: "List API keys",
        description:
          "The organization's API keys, oldest first, revoked ones included (`revoked_at`). Never the token: only its last 4 characters, `token_last4` (O6, issue 39 item 6)."
      })
    ),
    HttpApiEndpoint.delete("revokeApiKey", "/organizations/:org_id/api-keys/:key_id", {
      params: { org_id: Identifier, key_id: Identifier },
      success: HttpApiSchema.NoContent,
      error: [OrganizationNotFound.Wire, ApiKeyNotFound.Wire]
    }).annotateMerge(
      OpenApi.annotations({
        summary: "Revoke an API key",
        description: "The key stops working at once: its requests get 401 (O6)."
      })
    ),
    HttpApiEndpoint.post("createAgent", "/organizations/:org_id/agents", {
      params: organizationPath,
      payload: CreateAgentPayload,
      success: Agent.pipe(HttpApiSchema.status(201)),
      error: [OrganizationNotFound.Wire, ValidationFailed.Wire]
    }).annotateMerge(
      OpenApi.annotations({
        summary: "Create an agent",
        description:
          "An agent sessions can be given: `ai` with the `assistant_id` it answers from, or `human` with a `profile_id` of your user system (O6)."
      })
    ),
    HttpApiEndpoint.get("listAgents", "/organizations/:org_id/agents", {
      params: organizationPath,
      success: Schema.Array(Agent),
      error: OrganizationNotFound.Wire
    }).annotateMerge(
      OpenApi.annotations({ summary: "List agents", description: "The organization's agents, oldest first (O6)." })
    ),
    HttpApiEndpoint.get("getAgent", "/organizations/:org_id/agents/:agent_id", {
      params: agentPath,
      success: Agent,
      error: [OrganizationNotFound.Wire, AdminAgentNotFound.Wire]
    }).annotateMerge(
      OpenApi.annotations({
        summary: "Get an agent",
        description: "The agent, or 404 `Agent not found` for an agent the organization does not have or deleted (O6)."
      })
    ),
    HttpApiEndpoint.patch("updateAgent", "/organizations/:org_id/agents/:agent_id", {
      params: agentPath,
      payload: UpdateAgentPayload,
      success: Agent,
      error: [OrganizationNotFound.Wire, AdminAgentNotFound.Wire, ValidationFailed.Wire]
    }).annotateMerge(
      OpenApi.annotations({
        summary: "Update an agent",
        description:
          "Changes the members present: `name`, `assistant_id` (an `ai` agent only) or `profile_id` (a `human` agent only; the other gets 422). The type never changes. Sessions embedding the agent show the change (issue 39 item 6)."
      })
    ),
    HttpApiEndpoint.delete("deleteAgent", "/organizations/:org_id/agents/:agent_id", {
      params: agentPath,
      success: HttpApiSchema.NoContent,
      error: [OrganizationNotFound.Wire, AdminAgentNotFound.Wire, AgentInUse.Wire]
    }).annotateMerge(
      OpenApi.annotations({
        summary: "Delete an agent",
        description:
          "204: the agent is gone from the agent list and reads, cannot be assigned any more (400 `Agent not found`, D6) and stops being the default agent; the sessions it served keep it in their history. 409 `Agent is in use` while an open session has it: transfer or close that session first (issue 39 item 6)."
      })
    ),
    HttpApiEndpoint.get("getSettings", "/organizations/:org_id/settings", {
      params: organizationPath,
      success: Settings,
      error: OrganizationNotFound.Wire
    }).annotateMerge(
      OpenApi.annotations({
        summary: "Get settings",
        description: "The organization's settings; an organization that never changed them gets the defaults (O6)."
      })
    ),
    HttpApiEndpoint.patch("updateSettings", "/organizations/:org_id/settings", {
      params: organizationPath,
      payload: UpdateSettingsPayload,
      success: Settings,
      error: [OrganizationNotFound.Wire, AgentNotFound.Wire]
    }).annotateMerge(
      OpenApi.annotations({
        summary: "Update settings",
        description:
          "Changes the members present: `reply_debounce_seconds` (0-60, the ingest reply debounce, D11), `session_idle_timeout_seconds` (null: sessions never expire; else idle sessions close, D16), `default_agent_id` (the agent of new ingest sessions, D9; it must be an agent of the organization, D6)."
      })
    )
  )
  .middleware(AdminAuthorization)
  .prefix(adminBasePath)
  .annotateMerge(
    OpenApi.annotations({
      title: "Admin",
      description:
        "Organizations, their API keys, agents and settings (O6, issue 39 item 6). Requests use the server's `ADMIN_TOKEN`."
    })
  ) {}
