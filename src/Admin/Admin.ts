/**
 * The admin service (DECISIONS.md O6): organizations, API keys, agents and
 * organization settings, used by the admin API and the `parley` CLI; and the
 * API-key check behind every conversations and assistants request.
 */
import * as crypto from "node:crypto"
import { Context, Effect, Layer } from "effect"
import type { Agent } from "../Domain/Agent.ts"
import { DEFAULT_PAGE_LIMIT, type PageQuery } from "../Domain/Common.ts"
import { ValidationFailed } from "../Domain/Errors.ts"
import type { ApiKey, ApiKeyCreated, Organization, Settings } from "../Domain/Organization.ts"
import { Ids } from "../Shared/Ids.ts"
import type { CreateAgentPayload, CreateApiKeyPayload, UpdateAgentPayload, UpdateSettingsPayload } from "./Api.ts"
import { AdminAgentNotFound, AgentInUse, AgentNotFound, ApiKeyNotFound, OrganizationNotFound } from "./Errors.ts"
import { AdminRepo } from "./Repo.ts"

/** Prefix of Parley API tokens, so leaked tokens are recognizable by scanners. */
const TOKEN_PREFIX = "prl_"

/** A new random API token: the prefix and 32 random bytes in base64url (O6). */
const generateToken = (): string => `${TOKEN_PREFIX}${crypto.randomBytes(32).toString("base64url")}`

/** SHA-256 of a token, as stored (tokens themselves are never stored). */
export const hashToken = (token: string): Uint8Array => crypto.createHash("sha256").update(token, "utf8").digest()

/** Body of POST /organizations/{id}/agents (O6), as its schema decodes it (`Api.ts`). */
export type CreateAgent = typeof CreateAgentPayload.Type

/** Body of PATCH /organizations/{id}/agents/{agent_id} (issue 39 item 6): members present are changed. */
export type AgentPatch = typeof UpdateAgentPayload.Type

/** Body of PATCH /organizations/{id}/settings (O6): members present are changed. */
export type SettingsPatch = typeof UpdateSettingsPayload.Type

const organizationNotFound = (organizationId: string) => new OrganizationNotFound({ organization_id: organizationId })

/** The admin service. Unknown organizations fail with OrganizationNotFound `Organization not found`. */
export class Admin extends Context.Service<
  Admin,
  {
    createOrganization(name: string): Effect.Effect<Organization>
    getOrganization(organizationId: string): Effect.Effect<Organization, OrganizationNotFound>
    /**
     * GET /organizations (O6, issue 39 item 6): every organization, oldest first,
     * `limit` of them (default {@link DEFAULT_PAGE_LIMIT}) after `after_id`.
     */
    listOrganizations(page: PageQuery): Effect.Effect<ReadonlyArray<Organization>>
    /**
     * GET /organizations/{id}/api-keys (issue 39 item 6): the keys, oldest first,
     * revoked ones included; never a token, only its last 4 characters. Fails
     * with OrganizationNotFound.
     */
    listApiKeys(organizationId: string): Effect.Effect<ReadonlyArray<ApiKey>, OrganizationNotFound>
    /**
     * POST /organizations/{id}/api-keys (O6): a new key; the token appears only
     * in this response. `expires_at` (ISO 8601, kept to the microsecond) null or
     * absent = never. Fails with OrganizationNotFound.
     */
    createApiKey(
      organizationId: string,
      payload: typeof CreateApiKeyPayload.Type
    ): Effect.Effect<ApiKeyCreated, OrganizationNotFound>
    /** Revokes a key at once. Fails with OrganizationNotFound, ApiKeyNotFound (404). */
    revokeApiKey(organizationId: string, keyId: string): Effect.Effect<void, OrganizationNotFound | ApiKeyNotFound>
    /** The organization of a live token, or undefined (missing, unknown, revoked, expired). */
    authenticate(token: string): Effect.Effect<string | undefined>
    /** Fails with ValidationFailed when the id of its type is missing (422). */
    createAgent(
      organizationId: string,
      input: CreateAgent
    ): Effect.Effect<Agent, OrganizationNotFound | ValidationFailed>
    /** The agents not deleted, oldest first. */
    listAgents(organizationId: string): Effect.Effect<ReadonlyArray<Agent>, OrganizationNotFound>
    /** GET /agents/{agent_id}: AdminAgentNotFound (404) for an agent of another organization or deleted. */
    getAgent(organizationId: string, agentId: string): Effect.Effect<Agent, OrganizationNotFound | AdminAgentNotFound>
    /**
     * PATCH /agents/{agent_id} (issue 39 item 6): changes the members present.
     * `assistant_id` on a human agent or `profile_id` on an AI agent is
     * ValidationFailed (422 at that member, `extra_forbidden`): the type never
     * changes. AdminAgentNotFound (404).
     */
    updateAgent(
      organizationId: string,
      agentId: string,
      patch: AgentPatch
    ): Effect.Effect<Agent, OrganizationNotFound | AdminAgentNotFound | ValidationFailed>
    /**
     * DELETE /agents/{agent_id} (issue 39 item 6): marks the agent deleted (its
     * sessions keep it in their history; it can no longer be read here nor
     * assigned, D6) and clears it as the default agent (D9). AgentInUse (409)
     * while an open session has it; AdminAgentNotFound (404). The agent's row
     * is locked while the open sessions are checked, so two deletes agree.
     */
    deleteAgent(
      organizationId: string,
      agentId: string
    ): Effect.Effect<void, OrganizationNotFound | AdminAgentNotFound | AgentInUse>
    getSettings(organizationId: string): Effect.Effect<Settings, OrganizationNotFound>
    /** Fails with AgentNotFound (400) for a default agent of another organization. */
    updateSettings(
      organizationId: string,
      patch: SettingsPatch
    ): Effect.Effect<Settings, OrganizationNotFound | AgentNotFound>
  }
>()("parley/Admin") {
  /** The service, its repository left open; requires `AdminRepo` and `Ids`. */
  static readonly layerNoDeps = Layer.effect(
    Admin,
    Effect.gen(function* () {
      const repo = yield* AdminRepo
      const { newId } = yield* Ids

      const requireOrganization = Effect.fnUntraced(function* (organizationId: string) {
        const organization = yield* repo.findOrganization(organizationId)
        if (organization === undefined) return yield* organizationNotFound(organizationId)
        return organization
      })

      const createOrganization = Effect.fn("Admin.createOrganization")((name: string) =>
        repo.insertOrganization(newId(), name).pipe(Effect.orDie)
      )

      const getOrganization = Effect.fn("Admin.getOrganization")(
        requireOrganization,
        Effect.catchTag("SqlError", Effect.die)
      )

      const listOrganizations = Effect.fn("Admin.listOrganizations")((page: PageQuery) =>
        repo.listOrganizations({ limit: page.limit ?? DEFAULT_PAGE_LIMIT, afterId: page.after_id }).pipe(Effect.orDie)
      )

      const listApiKeys = Effect.fn("Admin.listApiKeys")(
        function* (organizationId: string) {
          yield* requireOrganization(organizationId)
          return yield* repo.listApiKeys(organizationId)
        },
        Effect.catchTag("SqlError", Effect.die)
      )

      const createApiKey = Effect.fn("Admin.createApiKey")(
        function* (organizationId: string, payload: typeof CreateApiKeyPayload.Type) {
          yield* requireOrganization(organizationId)
          const id = newId()
          const token = generateToken()
          const row = yield* repo.insertApiKey({
            id,
            organizationId,
            name: payload.name ?? null,
            tokenHash: hashToken(token),
            tokenLast4: token.slice(-4),
            expiresAt: payload.expires_at ?? null
          })
          return { id, name: payload.name ?? null, token, created_at: row.created_at, expires_at: row.expires_at }
        },
        Effect.catchTag("SqlError", Effect.die)
      )

      const revokeApiKey = Effect.fn("Admin.revokeApiKey")(
        function* (organizationId: string, keyId: string) {
          yield* requireOrganization(organizationId)
          if (!(yield* repo.revokeApiKey(organizationId, keyId))) {
            return yield* new ApiKeyNotFound({ key_id: keyId })
          }
        },
        Effect.catchTag("SqlError", Effect.die)
      )

      const authenticate = (token: string) =>
        token.length === 0 || token.length > 512
          ? Effect.succeed(undefined)
          : repo.organizationOfToken(hashToken(token)).pipe(Effect.orDie)

      const createAgent = Effect.fn("Admin.createAgent")(
        function* (organizationId: string, input: CreateAgent) {
          yield* requireOrganization(organizationId)
          const reference = input.type === "ai" ? input.assistant_id : input.profile_id
          if (reference === undefined) {
            const field = input.type === "ai" ? "assistant_id" : "profile_id"
            return yield* ValidationFailed.one(["body", field], "Field required", "missing")
          }
          return yield* repo.insertAgent({
            id: newId(),
            organizationId,
            name: input.name,
            type: input.type,
            assistantId: input.type === "ai" ? reference : null,
            profileId: input.type === "human" ? reference : null
          })
        },
        Effect.catchTag("SqlError", Effect.die)
      )

      const listAgents = Effect.fn("Admin.listAgents")(
        function* (organizationId: string) {
          yield* requireOrganization(organizationId)
          return yield* repo.listAgents(organizationId)
        },
        Effect.catchTag("SqlError", Effect.die)
      )

      const agentNotFound = (agentId: string) => new AdminAgentNotFound({ agent_id: agentId })

      const getAgent = Effect.fn("Admin.getAgent")(
        function* (organizationId: string, agentId: string) {
          yield* requireOrganization(organizationId)
          const agent = yield* repo.findAgent(organizationId, agentId)
          if (agent === undefined) return yield* agentNotFound(agentId)
          return agent
        },
        Effect.catchTag("SqlError", Effect.die)
      )

      const updateAgent = Effect.fn("Admin.updateAgent")(
        function* (organizationId: string, agentId: string, patch: AgentPatch) {
          const agent = yield* getAgent(organizationId, agentId)
          const foreign = agent.type === "ai" ? "profile_id" : "assistant_id"
          if (patch[foreign] !== undefined) {
            return yield* ValidationFailed.one(
              ["body", foreign],
              `Not allowed for an agent of type ${agent.type}: the type of an agent never changes`,
              "extra_forbidden"
            )
          }
          const updated = yield* repo.updateAgent(organizationId, agentId, {
            name: patch.name,
            assistantId: patch.assistant_id,
            profileId: patch.profile_id
          })
          if (updated === undefined) return yield* agentNotFound(agentId)
          return updated
        },
        Effect.catchTag("SqlError", Effect.die)
      )

      const deleteAgent = Effect.fn("Admin.deleteAgent")(
        function* (organizationId: string, agentId: string) {
          yield* requireOrganization(organizationId)
          yield* repo.withTransaction(
            Effect.gen(function* () {
              if ((yield* repo.findAgent(organizationId, agentId, true)) === undefined) {
                return yield* agentNotFound(agentId)
              }
              if (yield* repo.agentHasOpenSession(organizationId, agentId)) {
                return yield* new AgentInUse({ agent_id: agentId })
              }
              yield* repo.markAgentDeleted(organizationId, agentId)
            })
          )
        },
        Effect.catchTag("SqlError", Effect.die)
      )

      const getSettings = Effect.fn("Admin.getSettings")(
        function* (organizationId: string) {
          yield* requireOrganization(organizationId)
          return yield* repo.getSettings(organizationId)
        },
        Effect.catchTag("SqlError", Effect.die)
      )

      const updateSettings = Effect.fn("Admin.updateSettings")(
        function* (organizationId: string, patch: SettingsPatch) {
          yield* requireOrganization(organizationId)
          const current = yield* repo.getSettings(organizationId)
          // Members present are changed (null included), absent ones kept.
          const next: Settings = { ...current, ...patch }
          if (next.default_agent_id !== null && !(yield* repo.agentExists(organizationId, next.default_agent_id))) {
            return yield* new AgentNotFound()
          }
          return yield* repo.upsertSettings(organizationId, next)
        },
        Effect.catchTag("SqlError", Effect.die)
      )

      return Admin.of({
        createOrganization,
        getOrganization,
        listOrganizations,
        listApiKeys,
        createApiKey,
        revokeApiKey,
        authenticate,
        createAgent,
        listAgents,
        getAgent,
        updateAgent,
        deleteAgent,
        getSettings,
        updateSettings
      })
    })
  )

  /** The service over its PostgreSQL repository (`AdminRepo.layer`); the rest of what `layerNoDeps` requires stays open. */
  static readonly layer = Admin.layerNoDeps.pipe(Layer.provide(AdminRepo.layer))
}
