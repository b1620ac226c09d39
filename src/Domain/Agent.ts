/**
 * The Agent resource (conversations.md "Agent"): an AI agent backed by an
 * assistant, or a human agent backed by an operator profile.
 */
import { Schema } from "effect"
import { Timestamp } from "./Common.ts"

/** An AI agent: `{id, name, type: "ai", assistant_id, organization_id, created_at}`. */
export const AiAgent = Schema.Struct({
  id: Schema.String,
  name: Schema.String,
  type: Schema.Literal("ai"),
  assistant_id: Schema.String,
  organization_id: Schema.String,
  created_at: Timestamp
})

/** A human agent: `{id, name, type: "human", profile_id, organization_id, created_at}`. */
export const HumanAgent = Schema.Struct({
  id: Schema.String,
  name: Schema.String,
  type: Schema.Literal("human"),
  profile_id: Schema.String,
  organization_id: Schema.String,
  created_at: Timestamp
})

/** An agent as embedded in sessions and listed by the admin API (spec "Agent", O6). */
export const Agent = Schema.Union([AiAgent, HumanAgent]).annotate({ identifier: "Agent" })
export type Agent = typeof Agent.Type

/** An agent as the session rules need it: its id and kind (D6, D7). */
export interface AgentRef {
  readonly id: string
  readonly type: "ai" | "human"
}
