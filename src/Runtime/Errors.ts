/**
 * Why an AI run failed (DECISIONS.md R2, D15; issue 13 item 5): one tagged
 * reason per case, with its data, so callers decide by `_tag` (a schedule whose
 * session closed is `canceled`, any other failure `failed`). Each reason's
 * `message` is the sentence recorded in `runs.error` (and a schedule's
 * `error`), word for word what the runtime has always recorded.
 *
 * Use as a namespace: `import * as RunFailure from "./Errors.ts"`.
 */
import { Data, Effect } from "effect"

/** The session is not in the organization (any more). */
export class SessionNotFound extends Data.TaggedClass("SessionNotFound")<{}> {
  get message() {
    return "Session not found"
  }
}

/** The session is closed (D5): a schedule of it ends `canceled` (D15). */
export class SessionNotOpen extends Data.TaggedClass("SessionNotOpen")<{}> {
  get message() {
    return "Session is not open"
  }
}

/** The session has no agent, or a human one. */
export class AgentNotAi extends Data.TaggedClass("AgentNotAi")<{}> {
  get message() {
    return "Session agent is not an AI agent"
  }
}

/** The session's AI agent names no assistant. */
export class NoAssistant extends Data.TaggedClass("NoAssistant")<{}> {
  get message() {
    return "The session's AI agent has no assistant"
  }
}

/** The assistant's runtime snapshot cannot be read (`detail`: the Assistants error's, e.g. A2's `Assistant has no published version`). */
export class AssistantUnavailable extends Data.TaggedClass("AssistantUnavailable")<{
  readonly assistantId: string
  readonly detail: string
}> {
  get message() {
    return `Assistant ${this.assistantId}: ${this.detail}`
  }
}

/** Neither `starting_node_id`, the session's current node nor `initial_node_id` names a node to start from (R2). */
export class NoStartNode extends Data.TaggedClass("NoStartNode")<{}> {
  get message() {
    return "The assistant has no initial_node_id and no node to start from"
  }
}

/** The walk reached a node id the published version does not have. */
export class NodeMissing extends Data.TaggedClass("NodeMissing")<{ readonly nodeId: string }> {
  get message() {
    return `Node "${this.nodeId}" is not in the assistant's published version`
  }
}

/** A node of a type the runtime does not run (`skill`, anything but llm, router, logic, classifier). */
export class NodeUnsupported extends Data.TaggedClass("NodeUnsupported")<{
  readonly nodeId: string
  readonly type: string
}> {
  get message() {
    return `Node "${this.nodeId}" has type "${this.type}", which the runtime does not run`
  }
}

/** A `router` or `logic` node without `config.next_node`. */
export class NoNextNode extends Data.TaggedClass("NoNextNode")<{ readonly nodeId: string; readonly type: string }> {
  get message() {
    return `Node "${this.nodeId}" (${this.type}) has no next_node to go to`
  }
}

/** The walk visited `steps` nodes (`MAX_NODE_STEPS`) without reaching an llm node. */
export class StepLimit extends Data.TaggedClass("StepLimit")<{ readonly steps: number }> {
  get message() {
    return `No llm node was reached within ${this.steps} nodes`
  }
}

/** An llm node's `config.tools` names `toolId` (any JSON value), which is not a tool of the assistant. */
export class ToolMissing extends Data.TaggedClass("ToolMissing")<{
  readonly nodeId: string
  readonly toolId: unknown
}> {
  get message() {
    return `Tool ${JSON.stringify(this.toolId)} of node "${this.nodeId}" is not in the assistant`
  }
}

/** The model's final answer at an llm node was empty (or only whitespace). */
export class EmptyAnswer extends Data.TaggedClass("EmptyAnswer")<{ readonly nodeId: string }> {
  get message() {
    return `The model gave an empty answer at node "${this.nodeId}"`
  }
}

/** The model still called tools after `rounds` model calls (`MAX_TOOL_ROUNDS`) at an llm node. */
export class ToolLoop extends Data.TaggedClass("ToolLoop")<{ readonly nodeId: string; readonly rounds: number }> {
  get message() {
    return `The model was still calling tools after ${this.rounds} rounds at node "${this.nodeId}"`
  }
}

/** A classifier node without usable `config.categories` (`[{name, next_node}]`). */
export class NoCategories extends Data.TaggedClass("NoCategories")<{ readonly nodeId: string }> {
  get message() {
    return `Classifier node "${this.nodeId}" has no categories ([{name, next_node}]) to route by`
  }
}

/** The classifier's answer names no category and the node has no `config.next_node`. */
export class NoCategoryMatch extends Data.TaggedClass("NoCategoryMatch")<{ readonly nodeId: string }> {
  get message() {
    return `Classifier node "${this.nodeId}": the answer names no category and there is no next_node`
  }
}

/** The model call failed after its retries (`detail`: the `AiError`'s message). */
export class ModelFailed extends Data.TaggedClass("ModelFailed")<{ readonly detail: string }> {
  get message() {
    return `Model error: ${this.detail}`
  }
}

/**
 * The run died `attempts` times (defects, timeouts: issue 12 "Poison jobs")
 * and its work was ended; `error` is the last death's `Internal error: ...`.
 */
export class GaveUp extends Data.TaggedClass("GaveUp")<{ readonly error: string; readonly attempts: number }> {
  get message() {
    return `${this.error} (gave up after ${this.attempts} attempts)`
  }
}

/** Every reason a run can fail with. */
export type Reason =
  | SessionNotFound
  | SessionNotOpen
  | AgentNotAi
  | NoAssistant
  | AssistantUnavailable
  | NoStartNode
  | NodeMissing
  | NodeUnsupported
  | NoNextNode
  | StepLimit
  | ToolMissing
  | EmptyAnswer
  | ToolLoop
  | NoCategories
  | NoCategoryMatch
  | ModelFailed
  | GaveUp

/** The error of a run that fails with `reason` (the run then records `reason.message`). */
export class RunFailed extends Data.TaggedError("RunFailed")<{ readonly reason: Reason }> {}

/** Fails with {@link RunFailed} of `reason`. */
export const fail = (reason: Reason): Effect.Effect<never, RunFailed> => Effect.fail(new RunFailed({ reason }))
