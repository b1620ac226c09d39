/**
 * The errors of the admin domain: organizations, API keys and agents (O6, D6),
 * each a `Schema.TaggedError` with its status and `*.Wire`, the `{detail}`
 * body an endpoint lists (`Domain/Errors.ts` says how). Imports only `effect`
 * and `Domain/`: a contract file.
 */
import { Schema } from "effect"
import { asDetail, detailDefault } from "../Domain/Errors.ts"

/** 400 `Agent not found`: an agent_id that is not an agent of the organization (D6). */
export class AgentNotFound extends Schema.TaggedError<AgentNotFound>()(
  "AgentNotFound",
  { detail: detailDefault("Agent not found") },
  { httpApiStatus: 400 }
) {
  static readonly Wire = AgentNotFound.pipe(asDetail(Schema.Literal("Agent not found")))
}

/** 404 `Organization not found` (O6): an unknown organization on the admin API. */
export class OrganizationNotFound extends Schema.TaggedError<OrganizationNotFound>()(
  "OrganizationNotFound",
  { detail: detailDefault("Organization not found"), organization_id: Schema.optionalKey(Schema.String) },
  { httpApiStatus: 404 }
) {
  static readonly Wire = OrganizationNotFound.pipe(asDetail(Schema.Literal("Organization not found")))
}

/** 404 `API key not found` (O6): revoking a key the organization does not have. */
export class ApiKeyNotFound extends Schema.TaggedError<ApiKeyNotFound>()(
  "ApiKeyNotFound",
  { detail: detailDefault("API key not found"), key_id: Schema.optionalKey(Schema.String) },
  { httpApiStatus: 404 }
) {
  static readonly Wire = ApiKeyNotFound.pipe(asDetail(Schema.Literal("API key not found")))
}

/**
 * 404 `Agent not found` (O6) on the admin API's `/agents/{agent_id}`: an
 * agent the organization does not have, or one it deleted. D6's 400 of the
 * same text (`AgentNotFound`) is for an `agent_id` named in a request body.
 */
export class AdminAgentNotFound extends Schema.TaggedError<AdminAgentNotFound>()(
  "AdminAgentNotFound",
  { detail: detailDefault("Agent not found"), agent_id: Schema.optionalKey(Schema.String) },
  { httpApiStatus: 404 }
) {
  static readonly Wire = AdminAgentNotFound.pipe(asDetail(Schema.Literal("Agent not found")))
}

/**
 * 409 `Agent is in use` (issue 39 item 6, docs/behaviour.md): DELETE of an
 * agent assigned to an open session; transfer the session or close it first.
 */
export class AgentInUse extends Schema.TaggedError<AgentInUse>()(
  "AgentInUse",
  { detail: detailDefault("Agent is in use"), agent_id: Schema.optionalKey(Schema.String) },
  { httpApiStatus: 409 }
) {
  static readonly Wire = AgentInUse.pipe(asDetail(Schema.Literal("Agent is in use")))
}
