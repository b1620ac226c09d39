/**
 * Fixtures for fast tests over the in-memory database of the conversations
 * domains (`src/Database/Memory.ts`, issue 13 item 8): agents and organization
 * settings (the admin API's rows, O6), and readers of the events written.
 */
import {
  defaultSettings,
  type MemoryAgent,
  type MemoryDatabase,
  type MemoryEvent,
  type MemorySettings
} from "../../src/Database/Memory.ts"
import { makeIdGenerator } from "../../src/Shared/Ids.ts"

/** Ids for the fixtures (UUIDv7, as the application makes them). */
const newId = makeIdGenerator()

/** Adds an agent of `type` to the organization (O6), an AI one for `assistantId` (default: a new id); answers it. */
export const addAgent = (
  db: MemoryDatabase,
  organizationId: string,
  type: "ai" | "human",
  name = type === "ai" ? "Bot" : "Operator",
  assistantId: string = newId()
): MemoryAgent => {
  const agent: MemoryAgent = {
    id: newId(),
    organization_id: organizationId,
    name,
    type,
    assistant_id: type === "ai" ? assistantId : null,
    profile_id: type === "human" ? "profile_test" : null,
    created_at: new Date(0)
  }
  db.agents.set(agent.id, agent)
  return agent
}

/** Sets organization settings (O6) over the defaults. */
export const setSettings = (db: MemoryDatabase, organizationId: string, settings: Partial<MemorySettings>): void => {
  db.settings.set(organizationId, { ...(db.settings.get(organizationId) ?? defaultSettings()), ...settings })
}

/** The `data.object` of an event as a loose record, for assertions. */
export const objectOf = (event: MemoryEvent | undefined): Record<string, any> => event?.data.object ?? {}

/** `[type, action]` of each event (action `"-"` when the object has none), optionally of one resource id. */
export const eventLog = (db: MemoryDatabase, resourceId?: string): Array<readonly [string, unknown]> =>
  db.events
    .filter((event) => resourceId === undefined || event.data.object.id === resourceId)
    .map((event) => [event.type, "action" in event.data.object ? event.data.object.action : "-"] as const)

/** The types of the events, in order (W1). */
export const eventTypes = (db: MemoryDatabase): Array<string> => db.events.map((event) => event.type)
