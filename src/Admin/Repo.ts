/**
 * SQL of the admin domain: organizations, API keys, agents and settings (O6).
 */
import { PgClient } from "@effect/sql-pg"
import { Context, Effect, Layer } from "effect"
import type { SqlError } from "effect/sql"
import type { WithTransaction } from "../Database/Database.ts"
import { immutableIsoTimestamp } from "../Database/Json.ts"
import type { Agent } from "../Domain/Agent.ts"
import { isUuid } from "../Domain/Common.ts"
import { type ApiKey, defaultSettings, type Organization, type Settings } from "../Domain/Organization.ts"

/**
 * The API-key check behind every request (fixed text, prepared once): $1 the
 * SHA-256 of the token -> the organization of a live key (not revoked, not
 * expired). The benchmark's baseline executes this same text.
 */
export const organizationOfTokenSql = `SELECT organization_id::text FROM api_keys
WHERE token_hash = $1 AND revoked_at IS NULL AND (expires_at IS NULL OR expires_at > now())`

/** An API key row as inserted: the SHA-256 of its token, never the token (O6); `expiresAt` null = never. */
export interface NewApiKey {
  readonly id: string
  readonly organizationId: string
  readonly name: string | null
  readonly tokenHash: Uint8Array
  /** The token's last 4 characters, the one part of it the key list shows (issue 39 item 6). */
  readonly tokenLast4: string
  /** ISO 8601 text: PostgreSQL reads it to the microsecond. */
  readonly expiresAt: string | null
}

/** An agent row as inserted: `assistantId` for `ai`, `profileId` for `human`, the other null. */
export interface NewAgent {
  readonly id: string
  readonly organizationId: string
  readonly name: string
  readonly type: "ai" | "human"
  readonly assistantId: string | null
  readonly profileId: string | null
}

/** The members of an agent to change (issue 39 item 6); absent ones are kept. */
export interface AgentChanges {
  readonly name?: string | undefined
  readonly assistantId?: string | undefined
  readonly profileId?: string | undefined
}

/** A page of a list paged by id, oldest first (`Domain/Common.ts` `PageQuery`). */
export interface Page {
  readonly limit: number
  readonly afterId?: string | undefined
}

/**
 * The admin repository: SQL only, no rules. Every method may fail with
 * `SqlError`. Ids that are not UUIDs find nothing. Timestamps are ISO 8601
 * with microseconds (`Database/Json.ts` `immutableIsoTimestamp`).
 */
export class AdminRepo extends Context.Service<
  AdminRepo,
  {
    /** Runs `self` in one transaction (nested: a savepoint). */
    readonly withTransaction: WithTransaction
    /** Inserts an organization created now. */
    readonly insertOrganization: (id: string, name: string) => Effect.Effect<Organization, SqlError.SqlError>
    /** The organization, or undefined. */
    readonly findOrganization: (id: string) => Effect.Effect<Organization | undefined, SqlError.SqlError>
    /** Organizations in id order (creation order: UUIDv7) after `afterId`; none after an `afterId` that is no UUID. */
    readonly listOrganizations: (page: Page) => Effect.Effect<ReadonlyArray<Organization>, SqlError.SqlError>
    /** The organization's keys, revoked ones included, oldest first (created_at, id); never a token (issue 39 item 6). */
    readonly listApiKeys: (organizationId: string) => Effect.Effect<ReadonlyArray<ApiKey>, SqlError.SqlError>
    /** Inserts a key created now; returns its `created_at` and `expires_at` (ISO 8601, null = never). */
    readonly insertApiKey: (
      row: NewApiKey
    ) => Effect.Effect<{ readonly created_at: string; readonly expires_at: string | null }, SqlError.SqlError>
    /** Marks a key revoked (the first revocation's moment is kept); returns whether the key exists in the organization. */
    readonly revokeApiKey: (organizationId: string, keyId: string) => Effect.Effect<boolean, SqlError.SqlError>
    /** The organization of a live key (not revoked, not expired) with this token hash ({@link organizationOfTokenSql}). */
    readonly organizationOfToken: (tokenHash: Uint8Array) => Effect.Effect<string | undefined, SqlError.SqlError>
    /** Inserts an agent created now; returns it in the spec's shape. */
    readonly insertAgent: (row: NewAgent) => Effect.Effect<Agent, SqlError.SqlError>
    /** The organization's agents not deleted, oldest first (created_at, id). */
    readonly listAgents: (organizationId: string) => Effect.Effect<ReadonlyArray<Agent>, SqlError.SqlError>
    /** The organization's agent unless deleted; `forUpdate` locks its row. */
    readonly findAgent: (
      organizationId: string,
      agentId: string,
      forUpdate?: boolean
    ) => Effect.Effect<Agent | undefined, SqlError.SqlError>
    /** Changes the members given of an agent not deleted; returns it, or undefined when there is none. */
    readonly updateAgent: (
      organizationId: string,
      agentId: string,
      changes: AgentChanges
    ) => Effect.Effect<Agent | undefined, SqlError.SqlError>
    /** Whether an open session of the organization has the agent (`sessions`, read only: Sessions writes it). */
    readonly agentHasOpenSession: (organizationId: string, agentId: string) => Effect.Effect<boolean, SqlError.SqlError>
    /** Marks the agent deleted now and clears it as the organization's default agent. */
    readonly markAgentDeleted: (organizationId: string, agentId: string) => Effect.Effect<void, SqlError.SqlError>
    /** Whether the agent exists in the organization and is not deleted. */
    readonly agentExists: (organizationId: string, agentId: string) => Effect.Effect<boolean, SqlError.SqlError>
    /** The organization's settings; `defaultSettings` (O6) when none were stored. */
    readonly getSettings: (organizationId: string) => Effect.Effect<Settings, SqlError.SqlError>
    /** Stores the organization's settings (all members); returns them. */
    readonly upsertSettings: (organizationId: string, settings: Settings) => Effect.Effect<Settings, SqlError.SqlError>
  }
>()("parley/Admin/AdminRepo") {
  /** The repository on PostgreSQL. Requires `PgClient`. */
  static readonly layer = Layer.effect(
    AdminRepo,
    Effect.gen(function* () {
      return AdminRepo.of(makeSqlRepo(yield* PgClient.PgClient))
    })
  )
}

/** The repository over PostgreSQL client `sql`. */
const makeSqlRepo = (sql: PgClient.PgClient): AdminRepo["Service"] => {
  const organizationColumns = sql.literal(`id::text, name, ${immutableIsoTimestamp("created_at")} AS created_at`)
  const apiKeyColumns = sql.literal(`id::text, name, token_last4, ${immutableIsoTimestamp("created_at")} AS created_at,
    ${immutableIsoTimestamp("expires_at")} AS expires_at, ${immutableIsoTimestamp("revoked_at")} AS revoked_at`)
  const agentColumns = sql.literal(`id::text, name, type, assistant_id, profile_id, organization_id::text,
    ${immutableIsoTimestamp("created_at")} AS created_at`)
  const toAgent = (row: {
    id: string
    name: string
    type: "ai" | "human"
    assistant_id: string | null
    profile_id: string | null
    organization_id: string
    created_at: string
  }): Agent =>
    row.type === "ai"
      ? {
          id: row.id,
          name: row.name,
          type: "ai",
          assistant_id: row.assistant_id!,
          organization_id: row.organization_id,
          created_at: row.created_at
        }
      : {
          id: row.id,
          name: row.name,
          type: "human",
          profile_id: row.profile_id!,
          organization_id: row.organization_id,
          created_at: row.created_at
        }

  const insertOrganization = (id: string, name: string) =>
    sql<Organization>`INSERT INTO organizations (id, name, created_at) VALUES (${id}, ${name}, now())
      RETURNING ${organizationColumns}`.pipe(Effect.map((rows) => rows[0]!))

  const findOrganization = (id: string) =>
    isUuid(id)
      ? sql<Organization>`SELECT ${organizationColumns} FROM organizations WHERE id = ${id}`.pipe(
          Effect.map((rows) => rows[0])
        )
      : Effect.succeed(undefined)

  const listOrganizations = (page: Page) =>
    page.afterId !== undefined && !isUuid(page.afterId)
      ? Effect.succeed([])
      : sql<Organization>`SELECT ${organizationColumns} FROM organizations
          ${page.afterId === undefined ? sql`` : sql`WHERE id > ${page.afterId}`}
          ORDER BY id LIMIT ${page.limit}`

  const listApiKeys = (organizationId: string) =>
    sql<ApiKey>`SELECT ${apiKeyColumns} FROM api_keys WHERE organization_id = ${organizationId}
      ORDER BY created_at, id`

  const insertApiKey = (row: NewApiKey) =>
    sql<{ created_at: string; expires_at: string | null }>`
      INSERT INTO api_keys (id, organization_id, name, token_hash, token_last4, created_at, expires_at)
      VALUES (${row.id}, ${row.organizationId}, ${row.name}, ${row.tokenHash}, ${row.tokenLast4}, now(), ${row.expiresAt})
      RETURNING ${sql.literal(`${immutableIsoTimestamp("created_at")} AS created_at, ${immutableIsoTimestamp("expires_at")} AS expires_at`)}`.pipe(
      Effect.map((rows) => rows[0]!)
    )

  const revokeApiKey = (organizationId: string, keyId: string) =>
    isUuid(keyId)
      ? // The first revocation's moment stays; `revoked_at IS NULL` rather than a coalesce in SET,
        // which Citus refuses with a function that is not IMMUTABLE (O11). Still 204 for a revoked key.
        sql<{ id: string }>`WITH u AS (UPDATE api_keys SET revoked_at = now()
            WHERE id = ${keyId} AND organization_id = ${organizationId} AND revoked_at IS NULL)
          SELECT id::text FROM api_keys WHERE id = ${keyId} AND organization_id = ${organizationId}`.pipe(
          Effect.map((rows) => rows.length > 0)
        )
      : Effect.succeed(false)

  const organizationOfToken = (tokenHash: Uint8Array) =>
    sql
      .unsafe<{ organization_id: string }>(organizationOfTokenSql, [tokenHash])
      .pipe(Effect.map((rows) => rows[0]?.organization_id))

  const insertAgent = (row: NewAgent) =>
    sql`INSERT INTO agents (id, organization_id, name, type, assistant_id, profile_id, created_at)
      VALUES (${row.id}, ${row.organizationId}, ${row.name}, ${row.type}, ${row.assistantId}, ${row.profileId}, now())
      RETURNING ${agentColumns}`.pipe(Effect.map((rows) => toAgent(rows[0] as never)))

  const listAgents = (organizationId: string) =>
    sql`SELECT ${agentColumns} FROM agents WHERE organization_id = ${organizationId} AND deleted_at IS NULL
      ORDER BY created_at, id`.pipe(Effect.map((rows) => rows.map((row) => toAgent(row as never))))

  const findAgent = (organizationId: string, agentId: string, forUpdate = false) =>
    isUuid(agentId)
      ? sql`SELECT ${agentColumns} FROM agents
          WHERE id = ${agentId} AND organization_id = ${organizationId} AND deleted_at IS NULL
          ${forUpdate ? sql`FOR UPDATE` : sql``}`.pipe(
          Effect.map((rows) => (rows[0] === undefined ? undefined : toAgent(rows[0] as never)))
        )
      : Effect.succeed(undefined)

  const updateAgent = (organizationId: string, agentId: string, changes: AgentChanges) =>
    isUuid(agentId)
      ? sql`UPDATE agents SET name = coalesce(${changes.name ?? null}, name),
            assistant_id = coalesce(${changes.assistantId ?? null}, assistant_id),
            profile_id = coalesce(${changes.profileId ?? null}, profile_id)
          WHERE id = ${agentId} AND organization_id = ${organizationId} AND deleted_at IS NULL
          RETURNING ${agentColumns}`.pipe(
          Effect.map((rows) => (rows[0] === undefined ? undefined : toAgent(rows[0] as never)))
        )
      : Effect.succeed(undefined)

  const agentHasOpenSession = (organizationId: string, agentId: string) =>
    sql`SELECT 1 FROM sessions WHERE organization_id = ${organizationId} AND agent_id = ${agentId}
      AND status = 'open' LIMIT 1`.pipe(Effect.map((rows) => rows.length > 0))

  const markAgentDeleted = (organizationId: string, agentId: string) =>
    sql`UPDATE agents SET deleted_at = now() WHERE id = ${agentId} AND organization_id = ${organizationId}`.pipe(
      Effect.andThen(
        sql`UPDATE organization_settings SET default_agent_id = NULL, updated_at = now()
          WHERE organization_id = ${organizationId} AND default_agent_id = ${agentId}`
      ),
      Effect.asVoid
    )

  const agentExists = (organizationId: string, agentId: string) =>
    Effect.map(findAgent(organizationId, agentId), (agent) => agent !== undefined)

  const settingsColumns = sql.literal(
    "reply_debounce_seconds, session_idle_timeout_seconds, default_agent_id::text AS default_agent_id, rate_limit_per_second, rate_limit_burst, message_retention_days, event_retention_days"
  )

  const getSettings = (organizationId: string) =>
    sql<Settings>`SELECT ${settingsColumns} FROM organization_settings WHERE organization_id = ${organizationId}`.pipe(
      Effect.map((rows): Settings => rows[0] ?? defaultSettings)
    )

  const upsertSettings = (organizationId: string, settings: Settings) =>
    sql<Settings>`INSERT INTO organization_settings
        (organization_id, reply_debounce_seconds, session_idle_timeout_seconds, default_agent_id,
          rate_limit_per_second, rate_limit_burst, message_retention_days, event_retention_days, updated_at)
      VALUES (${organizationId}, ${settings.reply_debounce_seconds}, ${settings.session_idle_timeout_seconds},
        ${settings.default_agent_id}, ${settings.rate_limit_per_second}, ${settings.rate_limit_burst},
        ${settings.message_retention_days}, ${settings.event_retention_days}, now())
      ON CONFLICT (organization_id) DO UPDATE SET
        reply_debounce_seconds = EXCLUDED.reply_debounce_seconds,
        session_idle_timeout_seconds = EXCLUDED.session_idle_timeout_seconds,
        default_agent_id = EXCLUDED.default_agent_id, rate_limit_per_second = EXCLUDED.rate_limit_per_second,
        rate_limit_burst = EXCLUDED.rate_limit_burst, message_retention_days = EXCLUDED.message_retention_days,
        event_retention_days = EXCLUDED.event_retention_days, updated_at = EXCLUDED.updated_at
      RETURNING ${settingsColumns}`.pipe(Effect.map((rows) => rows[0]!))

  return {
    withTransaction: sql.withTransaction,
    insertOrganization,
    listOrganizations,
    listApiKeys,
    findOrganization,
    insertApiKey,
    revokeApiKey,
    organizationOfToken,
    insertAgent,
    listAgents,
    findAgent,
    updateAgent,
    agentHasOpenSession,
    markAgentDeleted,
    agentExists,
    getSettings,
    upsertSettings
  }
}
