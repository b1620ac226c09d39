/**
 * One turn of the AI runtime over values, with no database (DECISIONS.md R2):
 * where a turn starts ({@link startNode}) and the walk of the assistant's graph
 * from there ({@link walk}), with the language models of {@link Models} and the
 * tool calls of {@link ToolCaller}. `Runtime.ts` reads the session, the
 * snapshot and the history, and writes what the walk produced.
 *
 * - `llm`: calls the node's model (its `config.model`, else `AI_MODEL`) with
 *   the node's `instructions` as system prompt, the history, and the node's
 *   `tools` as tools; tool calls go over HTTP and the model is asked again with
 *   their results (at most {@link MAX_TOOL_ROUNDS} calls). The final text is
 *   the reply; the turn ends here and the node's `next_node` becomes the
 *   session's current node.
 * - `router`, `logic`: go to `config.next_node` without calling the model.
 * - `classifier`: asks the model to pick one of `config.categories`
 *   (`[{name, description?, next_node}]`) and goes to that category's node
 *   (`config.next_node` when the answer names none).
 * - `skill` and anything else: the run fails (`NodeUnsupported`).
 *
 * Model errors are retried with exponential backoff from 500 ms
 * ({@link MODEL_RETRIES} times, while retryable) before the run fails.
 */
import { Effect, Schedule } from "effect"
import { type AiError, type LanguageModel, type Prompt, Tool, Toolkit } from "effect/ai"
import type { JsonObject } from "../Domain/Common.ts"
import type { HistoryEntry, NewMessage } from "../Messages/Messages.ts"
import * as RunFailure from "./Errors.ts"
import { Models } from "./Models.ts"
import { recordOf, type ToolCallRecord } from "./Records.ts"
import { ToolCaller } from "./Tools.ts"

/** Most model calls of one llm node in one turn (each tool round is one call). */
export const MAX_TOOL_ROUNDS = 8
/** Most nodes one turn visits (routers and classifiers before an llm node). */
export const MAX_NODE_STEPS = 16
/** Retries of a failing model call before the run fails. */
export const MODEL_RETRIES = 3

/** An assistant node as the runtime reads it (assistants.md "Node"). */
export interface GraphNode {
  readonly id: string
  readonly type: string
  readonly config?: Record<string, unknown> | null
}

/** An assistant tool as the runtime reads it (assistants.md "Tool"). */
export interface AssistantTool {
  readonly id: string
  readonly name?: string
  readonly description?: string
  readonly request?: { readonly url?: string; readonly method?: string }
  readonly parameters?: unknown
  readonly should_close?: boolean
}

/** The parts of an assistant's runtime snapshot (A11) a turn reads. */
export interface RuntimeSnapshot {
  readonly graph?: { readonly initial_node_id?: string | null; readonly nodes?: ReadonlyArray<GraphNode> }
  readonly tools?: ReadonlyArray<AssistantTool>
}

/** What one turn produced, before it is written. */
export interface Turn {
  /** The ids of the nodes visited, in order. */
  readonly nodes: Array<string>
  /** The messages to append: tool calls and results, then the reply. */
  readonly messages: Array<Omit<NewMessage, "run_id">>
  /** The session's next current node (the llm node's `next_node`); undefined: unchanged. */
  nextNode: string | undefined
  /** A `should_close` tool succeeded: the session closes after the reply (R2). */
  shouldClose: boolean
  /** Tokens over every model call of the turn, as the providers count them. */
  inputTokens: number
  outputTokens: number
  /** The model that answered (the last node's), as recorded on the run. */
  model: string
  /** Every tool call of the turn, in order (A15), as recorded on the run. */
  readonly toolCalls: Array<ToolCallRecord>
}

/** The parts of a model response a turn uses. */
export interface ModelAnswer {
  readonly text: string
  readonly toolCalls: ReadonlyArray<{ readonly id: string; readonly name: string; readonly params: unknown }>
  readonly inputTokens: number
  readonly outputTokens: number
}

const str = (value: unknown): string | undefined => (typeof value === "string" && value !== "" ? value : undefined)

/** A name the model providers accept for a tool (`^[a-zA-Z0-9_-]{1,64}$`). */
const toolName = (id: string) => id.replace(/[^a-zA-Z0-9_-]/g, "_").slice(0, 64) || "tool"

/** The JSON Schema of a tool's parameters: its `parameters` when an object schema, else an empty object schema. */
const parametersSchema = (parameters: unknown): Record<string, unknown> => {
  if (typeof parameters === "object" && parameters !== null && !Array.isArray(parameters)) {
    const schema = parameters as Record<string, unknown>
    return schema.type === undefined ? { type: "object", ...schema } : schema
  }
  return { type: "object", properties: {} }
}

const historyPrompt = (history: ReadonlyArray<HistoryEntry>): Array<Prompt.MessageEncoded> =>
  history.map((entry) =>
    entry.role === "user"
      ? { role: "user", content: [{ type: "text", text: entry.text }] }
      : { role: "assistant", content: [{ type: "text", text: entry.text }] }
  )

/**
 * Where a turn starts (R2, A13): `startingNodeId` (the trigger's), else the
 * session's `currentNodeId`, else the snapshot's `initial_node_id`. A current
 * node the snapshot no longer has (a publish deleted or renamed it) is
 * `missingNodeId`, and the turn starts at `initial_node_id` instead, rather
 * than strand the session. `nodeId` undefined: there is nowhere to start.
 */
export const startNode = (
  snapshot: RuntimeSnapshot,
  startingNodeId: string | null,
  currentNodeId: string | null
): { readonly nodeId: string | undefined; readonly missingNodeId: string | null } => {
  const initial = str(snapshot.graph?.initial_node_id)
  if (startingNodeId !== null) return { nodeId: startingNodeId, missingNodeId: null }
  if (currentNodeId === null) return { nodeId: initial, missingNodeId: null }
  const known = (snapshot.graph?.nodes ?? []).some((node) => node.id === currentNodeId)
  return known ? { nodeId: currentNodeId, missingNodeId: null } : { nodeId: initial, missingNodeId: currentNodeId }
}

/**
 * One model call with retries ({@link MODEL_RETRIES}, exponential from 500
 * ms, while retryable); AiErrors become `RunFailed` of `ModelFailed` after the
 * last retry. `toolkit` undefined: a call without tools.
 */
export const generate = (
  model: LanguageModel.LanguageModel,
  prompt: Array<Prompt.MessageEncoded>,
  toolkit: Toolkit.Toolkit<any> | undefined
): Effect.Effect<ModelAnswer, RunFailure.RunFailed> => {
  // The runtime executes tool calls itself (HTTP, stored as messages): no handlers are needed, and
  // "deferred" validation hands back calls to unknown tools so they are answered with an error result.
  const call: Effect.Effect<LanguageModel.GenerateTextResponse<any, any>, AiError.AiError> = toolkit === undefined
    ? model.generateText({ prompt })
    : (model.generateText({
        prompt,
        toolkit: toolkit as any,
        disableToolCallResolution: true,
        toolCallValidation: "deferred"
      }) as Effect.Effect<LanguageModel.GenerateTextResponse<any, any>, AiError.AiError>)
  return call.pipe(
    Effect.retry({
      times: MODEL_RETRIES,
      schedule: Schedule.exponential("500 millis"),
      while: (error: AiError.AiError) => error.isRetryable
    }),
    Effect.map(
      (response): ModelAnswer => ({
        text: response.text,
        toolCalls: response.toolCalls.map((call: { id: string; name: string; params: unknown }) => ({
          id: call.id,
          name: call.name,
          params: call.params
        })),
        inputTokens: response.usage.inputTokens.total ?? 0,
        outputTokens: response.usage.outputTokens.total ?? 0
      })
    ),
    Effect.mapError(
      (error) => new RunFailure.RunFailed({ reason: new RunFailure.ModelFailed({ detail: error.message }) })
    )
  )
}

/** Runs an llm node: model calls and tool rounds until a final text (R2). */
const llmNode = Effect.fnUntraced(function* (
  node: GraphNode,
  toolsById: ReadonlyMap<string, AssistantTool>,
  history: ReadonlyArray<HistoryEntry>,
  metadata: JsonObject,
  turn: Turn
) {
  const models = yield* Models
  const tools = yield* ToolCaller
  const nodeConfig = node.config ?? {}
  const toolIds = Array.isArray(nodeConfig.tools) ? (nodeConfig.tools as ReadonlyArray<unknown>) : []
  const byName = new Map<string, AssistantTool>()
  for (const id of toolIds) {
    const tool = typeof id === "string" ? toolsById.get(id) : undefined
    if (tool === undefined) return yield* RunFailure.fail(new RunFailure.ToolMissing({ nodeId: node.id, toolId: id }))
    byName.set(toolName(tool.id), tool)
  }
  const toolkit =
    byName.size === 0
      ? undefined
      : Toolkit.make(
          ...[...byName].map(([name, tool]) =>
            Tool.dynamic(name, {
              description: tool.description ?? tool.name ?? name,
              parameters: parametersSchema(tool.parameters) as any
            })
          )
        )
  const instructions = str(nodeConfig.instructions)
  const prompt: Array<Prompt.MessageEncoded> = [
    ...(instructions === undefined ? [] : [{ role: "system" as const, content: instructions }]),
    ...historyPrompt(history)
  ]
  const chosen = yield* models.forNode(str(nodeConfig.model))
  turn.model = chosen.name
  for (let round = 0; round < MAX_TOOL_ROUNDS; round++) {
    const response = yield* generate(chosen.model, prompt, toolkit)
    turn.inputTokens += response.inputTokens
    turn.outputTokens += response.outputTokens
    const calls = response.toolCalls
    if (calls.length === 0) {
      const text = response.text.trim()
      if (text === "") return yield* RunFailure.fail(new RunFailure.EmptyAnswer({ nodeId: node.id }))
      turn.messages.push({
        role: "assistant",
        content: { type: "text", text },
        provider_message_id: null,
        replied_provider_message_id: null,
        metadata
      })
      const next = str(nodeConfig.next_node)
      if (next !== undefined) turn.nextNode = next
      return
    }
    prompt.push({
      role: "assistant",
      content: [
        ...(response.text === "" ? [] : [{ type: "text" as const, text: response.text }]),
        ...calls.map((call) => ({
          type: "tool-call" as const,
          id: call.id,
          name: call.name,
          params: call.params
        }))
      ]
    })
    const results: Array<Prompt.ToolResultPartEncoded> = []
    for (const call of calls) {
      const tool = byName.get(call.name)
      const outcome =
        tool?.request?.url === undefined
          ? { result: { error: `Unknown tool ${call.name}` }, isError: true }
          : yield* tools.call(
              { id: tool.id, url: tool.request.url, method: tool.request.method ?? "POST" },
              call.params
            )
      const name = tool?.id ?? call.name
      turn.toolCalls.push(recordOf(node.id, name, call.params, outcome))
      turn.messages.push(
        {
          role: "assistant",
          content: { type: "function_call", call_id: call.id, name, arguments: call.params as unknown },
          provider_message_id: null,
          replied_provider_message_id: null
        },
        {
          role: "assistant",
          content: {
            type: "function_result",
            call_id: call.id,
            name,
            result: outcome.result,
            is_error: outcome.isError
          },
          provider_message_id: null,
          replied_provider_message_id: null
        }
      )
      if (tool?.should_close === true && !outcome.isError) turn.shouldClose = true
      results.push({
        type: "tool-result",
        id: call.id,
        name: call.name,
        isFailure: outcome.isError,
        result: outcome.result
      })
    }
    prompt.push({ role: "tool", content: results })
  }
  return yield* RunFailure.fail(new RunFailure.ToolLoop({ nodeId: node.id, rounds: MAX_TOOL_ROUNDS }))
})

/** Asks the model to pick a category of a classifier node; returns the next node. */
const classifierNode = Effect.fnUntraced(function* (node: GraphNode, history: ReadonlyArray<HistoryEntry>, turn: Turn) {
  const models = yield* Models
  const nodeConfig = node.config ?? {}
  const categories = (Array.isArray(nodeConfig.categories) ? nodeConfig.categories : []).filter(
    (c): c is { name: string; description?: string; next_node: string } =>
      typeof c === "object" && c !== null && str(c.name) !== undefined && str(c.next_node) !== undefined
  )
  if (categories.length === 0) return yield* RunFailure.fail(new RunFailure.NoCategories({ nodeId: node.id }))
  const list = categories.map((c) => `- ${c.name}${c.description ? `: ${c.description}` : ""}`).join("\n")
  const chosen = yield* models.forNode(str(nodeConfig.model))
  turn.model = chosen.name
  const response = yield* generate(
    chosen.model,
    [
      {
        role: "system",
        content: `${str(nodeConfig.instructions) ?? "Classify the conversation."}\nAnswer with exactly one category name from this list and nothing else:\n${list}`
      },
      ...historyPrompt(history)
    ],
    undefined
  )
  turn.inputTokens += response.inputTokens
  turn.outputTokens += response.outputTokens
  const answer = response.text.trim().toLowerCase()
  const picked =
    categories.find((c) => c.name.toLowerCase() === answer) ??
    categories.find((c) => answer.includes(c.name.toLowerCase()))
  const next = picked?.next_node ?? str(nodeConfig.next_node)
  if (next === undefined) return yield* RunFailure.fail(new RunFailure.NoCategoryMatch({ nodeId: node.id }))
  return next
})

/**
 * Walks `snapshot`'s graph from `startNodeId` (see {@link startNode}) until an
 * llm node answers (see module docs), at most {@link MAX_NODE_STEPS} nodes;
 * `history` is the session's text history, oldest first; `metadata` goes on
 * the reply message. Returns the {@link Turn}, written by the caller. Fails
 * with `RunFailed` of `NoStartNode`, `NodeMissing`, `NodeUnsupported`,
 * `NoNextNode`, `StepLimit`, `ToolMissing`, `EmptyAnswer`, `ToolLoop`,
 * `NoCategories`, `NoCategoryMatch` or `ModelFailed`. Tool failures are
 * results for the model, not failures. Requires `Models` and `ToolCaller`.
 */
export const walk = Effect.fnUntraced(function* (input: {
  readonly snapshot: RuntimeSnapshot
  readonly startNodeId: string | undefined
  readonly history: ReadonlyArray<HistoryEntry>
  readonly metadata: JsonObject
  /** Where the turn's tool-call records go (A15), so a caller keeps them when the walk fails; default: a new list. */
  readonly toolCalls?: Array<ToolCallRecord>
}) {
  const models = yield* Models
  const nodesById = new Map((input.snapshot.graph?.nodes ?? []).map((node) => [node.id, node]))
  const toolsById = new Map((input.snapshot.tools ?? []).map((tool) => [tool.id, tool]))
  const turn: Turn = {
    nodes: [],
    messages: [],
    nextNode: undefined,
    shouldClose: false,
    inputTokens: 0,
    outputTokens: 0,
    model: models.defaultName,
    toolCalls: input.toolCalls ?? []
  }
  let nodeId = input.startNodeId
  if (nodeId === undefined) return yield* RunFailure.fail(new RunFailure.NoStartNode())
  for (let step = 0; step < MAX_NODE_STEPS; step++) {
    const node = nodesById.get(nodeId)
    if (node === undefined) return yield* RunFailure.fail(new RunFailure.NodeMissing({ nodeId }))
    turn.nodes.push(node.id)
    switch (node.type) {
      case "llm":
        yield* llmNode(node, toolsById, input.history, input.metadata, turn)
        return turn
      case "router":
      case "logic": {
        const next = str(node.config?.next_node)
        if (next === undefined)
          return yield* RunFailure.fail(new RunFailure.NoNextNode({ nodeId: node.id, type: node.type }))
        nodeId = next
        break
      }
      case "classifier":
        nodeId = yield* classifierNode(node, input.history, turn)
        break
      default:
        return yield* RunFailure.fail(new RunFailure.NodeUnsupported({ nodeId: node.id, type: node.type }))
    }
  }
  return yield* RunFailure.fail(new RunFailure.StepLimit({ steps: MAX_NODE_STEPS }))
})
