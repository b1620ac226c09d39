/**
 * SQL of the admin domain: organizations, API keys, agents and settings (O6).
 */
import { PgClient } from "@effect/sql-pg"
import { Context, Effect, Layer } from "effect"
import { isoTimestamp } from "../Database/Json.ts"
import type { Agent } from "../Domain/Agent.ts"
import { isUuid } from "../Domain/Common.ts"
import type { Organization, Settings } from "../Domain/Organization.ts"

/**
 * The API-key check behind every request (fixed text, prepared once): $1 the
 * SHA-256 of the token -> the organization of a live key (not revoked, not
 * expired). The benchmark's baseline executes this same text.
 */
export const organizationOfTokenSql = `SELECT organization_id::text FROM api_keys
WHERE token_hash = $1 AND revoked_at IS NULL AND (expires_at IS NULL OR expires_at > now())`

const makeRepo = Effect.gen(function* () {
  const sql = yield* PgClient.PgClient
  const organizationColumns = sql.literal(`id::text, name, ${isoTimestamp("created_at")} AS created_at`)
  const agentColumns = sql.literal(`id::text, name, type, assistant_id, profile_id, organization_id::text,
    ${isoTimestamp("created_at")} AS created_at`)
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

  const insertApiKey = (row: {
    id: string
    organizationId: string
    name: string | null
    tokenHash: Uint8Array
    expiresAt: Date | null
  }) =>
    sql<{ created_at: string; expires_at: string | null }>`
      INSERT INTO api_keys (id, organization_id, name, token_hash, created_at, expires_at)
      VALUES (${row.id}, ${row.organizationId}, ${row.name}, ${row.tokenHash}, now(), ${row.expiresAt})
      RETURNING ${sql.literal(`${isoTimestamp("created_at")} AS created_at, ${isoTimestamp("expires_at")} AS expires_at`)}`.pipe(
      Effect.map((rows) => rows[0]!)
    )

  /** Marks a key revoked; answers whether the key exists in the organization. */
  const revokeApiKey = (organizationId: string, keyId: string) =>
    isUuid(keyId)
      ? sql<{ id: string }>`UPDATE api_keys SET revoked_at = coalesce(revoked_at, now())
          WHERE id = ${keyId} AND organization_id = ${organizationId} RETURNING id`.pipe(
          Effect.map((rows) => rows.length > 0)
        )
      : Effect.succeed(false)

  /** The organization of a live key with this token hash ({@link organizationOfTokenSql}). */
  const organizationOfToken = (tokenHash: Uint8Array) =>
    sql
      .unsafe<{ organization_id: string }>(organizationOfTokenSql, [tokenHash])
      .pipe(Effect.map((rows) => rows[0]?.organization_id))

  const insertAgent = (row: {
    id: string
    organizationId: string
    name: string
    type: "ai" | "human"
    assistantId: string | null
    profileId: string | null
  }) =>
    sql`INSERT INTO agents (id, organization_id, name, type, assistant_id, profile_id, created_at)
      VALUES (${row.id}, ${row.organizationId}, ${row.name}, ${row.type}, ${row.assistantId}, ${row.profileId}, now())
      RETURNING ${agentColumns}`.pipe(Effect.map((rows) => toAgent(rows[0] as never)))

  const listAgents = (organizationId: string) =>
    sql`SELECT ${agentColumns} FROM agents WHERE organization_id = ${organizationId} ORDER BY created_at, id`.pipe(
      Effect.map((rows) => rows.map((row) => toAgent(row as never)))
    )

  const agentExists = (organizationId: string, agentId: string) =>
    isUuid(agentId)
      ? sql`SELECT 1 FROM agents WHERE id = ${agentId} AND organization_id = ${organizationId}`.pipe(
          Effect.map((rows) => rows.length > 0)
        )
      : Effect.succeed(false)

  const settingsColumns = sql.literal(
    "reply_debounce_seconds, session_idle_timeout_seconds, default_agent_id::text AS default_agent_id"
  )

  /** The organization's settings; defaults when none were stored. */
  const getSettings = (organizationId: string) =>
    sql<Settings>`SELECT ${settingsColumns} FROM organization_settings WHERE organization_id = ${organizationId}`.pipe(
      Effect.map(
        (rows): Settings =>
          rows[0] ?? { reply_debounce_seconds: 3, session_idle_timeout_seconds: null, default_agent_id: null }
      )
    )

  const upsertSettings = (organizationId: string, settings: Settings) =>
    sql<Settings>`INSERT INTO organization_settings
        (organization_id, reply_debounce_seconds, session_idle_timeout_seconds, default_agent_id, updated_at)
      VALUES (${organizationId}, ${settings.reply_debounce_seconds}, ${settings.session_idle_timeout_seconds},
        ${settings.default_agent_id}, now())
      ON CONFLICT (organization_id) DO UPDATE SET
        reply_debounce_seconds = EXCLUDED.reply_debounce_seconds,
        session_idle_timeout_seconds = EXCLUDED.session_idle_timeout_seconds,
        default_agent_id = EXCLUDED.default_agent_id, updated_at = now()
      RETURNING ${settingsColumns}`.pipe(Effect.map((rows) => rows[0]!))

  return {
    insertOrganization,
    findOrganization,
    insertApiKey,
    revokeApiKey,
    organizationOfToken,
    insertAgent,
    listAgents,
    agentExists,
    getSettings,
    upsertSettings
  }
})

/** The admin repository (SQL only). Requires `PgClient`. */
export class AdminRepo extends Context.Service<AdminRepo, Effect.Success<typeof makeRepo>>()("parley/Admin/AdminRepo") {
  static readonly layer = Layer.effect(AdminRepo, makeRepo)
}
