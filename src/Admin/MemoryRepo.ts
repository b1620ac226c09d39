/**
 * The admin repository in memory (`AdminRepo.layerTest`, issue 13 item 8):
 * the same answers as the SQL of `Repo.ts` over an {@link AdminStore} the test
 * creates and reads, so the `Admin` service's rules (O6: organizations, API
 * keys, agents, settings) run with no database. Moments come from the
 * effect's `Clock` (`TestClock` in tests) and are written as PostgreSQL's
 * `isoTimestamp` writes them (ISO 8601 with microseconds).
 */
import { Clock, Effect } from "effect"
import type { Agent } from "../Domain/Agent.ts"
import { defaultSettings, type Organization, type Settings } from "../Domain/Organization.ts"
import type { AdminRepo } from "./Repo.ts"

/** An API key as stored: the hex SHA-256 of its token, never the token (O6). */
export interface MemoryApiKey {
  readonly id: string
  readonly organization_id: string
  readonly name: string | null
  /** Lowercase hex of the token's SHA-256. */
  readonly token_hash: string
  readonly created_at: Date
  /** null = never expires. */
  readonly expires_at: Date | null
  /** null while the key is live. */
  revoked_at: Date | null
}

/** What the in-memory repository holds (the tables of migrations/0001_foundation.ts); tests fill and read it. */
export interface AdminStore {
  readonly organizations: Map<string, Organization>
  readonly apiKeys: Map<string, MemoryApiKey>
  /** Agents in insertion order (ids increase, so this is (created_at, id) order for one clock). */
  readonly agents: Array<Agent>
  /** Stored settings by organization id; an organization without an entry has {@link defaultSettings}. */
  readonly settings: Map<string, Settings>
}

/** An empty store. */
export const makeMemoryStore = (): AdminStore => ({
  organizations: new Map(),
  apiKeys: new Map(),
  agents: [],
  settings: new Map()
})

/** A moment as PostgreSQL answers it through `isoTimestamp` (microseconds). */
const timestamp = (millis: number) => new Date(millis).toISOString().replace("Z", "000Z")

const hex = (bytes: Uint8Array) => Buffer.from(bytes).toString("hex")

/** The repository over `store` (see module docs). */
export const makeMemoryRepo = (store: AdminStore): AdminRepo["Service"] => ({
  insertOrganization: (id, name) =>
    Effect.map(Clock.currentTimeMillis, (now) => {
      const organization: Organization = { id, name, created_at: timestamp(now) }
      store.organizations.set(id, organization)
      return organization
    }),
  findOrganization: (id) => Effect.sync(() => store.organizations.get(id)),
  insertApiKey: (row) =>
    Effect.map(Clock.currentTimeMillis, (now) => {
      store.apiKeys.set(row.id, {
        id: row.id,
        organization_id: row.organizationId,
        name: row.name,
        token_hash: hex(row.tokenHash),
        created_at: new Date(now),
        expires_at: row.expiresAt === null ? null : new Date(row.expiresAt),
        revoked_at: null
      })
      return {
        created_at: timestamp(now),
        expires_at: row.expiresAt === null ? null : timestamp(new Date(row.expiresAt).getTime())
      }
    }),
  revokeApiKey: (organizationId, keyId) =>
    Effect.map(Clock.currentTimeMillis, (now) => {
      const key = store.apiKeys.get(keyId)
      if (key?.organization_id !== organizationId) return false
      key.revoked_at ??= new Date(now)
      return true
    }),
  organizationOfToken: (tokenHash) =>
    Effect.map(Clock.currentTimeMillis, (now) => {
      const wanted = hex(tokenHash)
      for (const key of store.apiKeys.values()) {
        if (key.token_hash !== wanted || key.revoked_at !== null) continue
        if (key.expires_at === null || key.expires_at.getTime() > now) return key.organization_id
      }
      return undefined
    }),
  insertAgent: (row) =>
    Effect.map(Clock.currentTimeMillis, (now) => {
      const common = { id: row.id, name: row.name }
      const agent: Agent =
        row.type === "ai"
          ? {
              ...common,
              type: "ai",
              assistant_id: row.assistantId!,
              organization_id: row.organizationId,
              created_at: timestamp(now)
            }
          : {
              ...common,
              type: "human",
              profile_id: row.profileId!,
              organization_id: row.organizationId,
              created_at: timestamp(now)
            }
      store.agents.push(agent)
      return agent
    }),
  listAgents: (organizationId) =>
    Effect.sync(() =>
      store.agents
        .filter((agent) => agent.organization_id === organizationId)
        .sort((a, b) => (a.created_at !== b.created_at ? (a.created_at < b.created_at ? -1 : 1) : a.id < b.id ? -1 : 1))
    ),
  agentExists: (organizationId, agentId) =>
    Effect.sync(() => store.agents.some((agent) => agent.id === agentId && agent.organization_id === organizationId)),
  getSettings: (organizationId) => Effect.sync(() => store.settings.get(organizationId) ?? defaultSettings),
  upsertSettings: (organizationId, settings) =>
    Effect.sync(() => {
      const stored = { ...settings }
      store.settings.set(organizationId, stored)
      return { ...stored }
    })
})
