/**
 * The Agent resource (conversations.md "Agent"): an AI agent backed by an
 * assistant, or a human agent backed by an operator profile.
 */
import { Schema } from "effect"
import { Timestamp, Uuid } from "./Common.ts"

/** An AI agent: `{id, name, type: "ai", assistant_id, organization_id, created_at}`. */
export const AiAgent = Schema.Struct({
  id: Uuid.annotate({ description: "The agent's id." }),
  name: Schema.String.annotate({ description: "The agent's name." }),
  type: Schema.Literal("ai").annotate({ description: "An AI agent answers from an assistant (R2)." }),
  assistant_id: Schema.String.annotate({ description: "The assistant the agent answers from." }),
  organization_id: Uuid.annotate({ description: "The organization the agent belongs to." }),
  created_at: Timestamp.annotate({ description: "When the agent was created (ISO 8601, UTC)." })
}).annotate({ identifier: "AiAgent", description: "An agent answering from an assistant." })

/** A human agent: `{id, name, type: "human", profile_id, organization_id, created_at}`. */
export const HumanAgent = Schema.Struct({
  id: Uuid.annotate({ description: "The agent's id." }),
  name: Schema.String.annotate({ description: "The agent's name." }),
  type: Schema.Literal("human").annotate({ description: "A human agent: an operator of yours." }),
  profile_id: Schema.String.annotate({ description: "The operator's id in your user system." }),
  organization_id: Uuid.annotate({ description: "The organization the agent belongs to." }),
  created_at: Timestamp.annotate({ description: "When the agent was created (ISO 8601, UTC)." })
}).annotate({ identifier: "HumanAgent", description: "An agent who is a person." })

/** An agent as embedded in sessions and listed by the admin API (spec "Agent", O6). */
export const Agent = Schema.Union([AiAgent, HumanAgent]).annotate({ identifier: "Agent" })
export type Agent = typeof Agent.Type

/** An agent as the session rules need it: its id and kind (D6, D7). */
export interface AgentRef {
  readonly id: string
  readonly type: "ai" | "human"
}
