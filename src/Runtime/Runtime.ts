/**
 * The AI runtime (DECISIONS.md R2): one run answers one turn of a session from
 * its agent's assistant.
 *
 * 1. Reads the session, its AI agent's assistant runtime snapshot (HEAD of
 *    `main`, or the legacy snapshot of an unversioned assistant) and the
 *    session's text history.
 * 2. Walks the graph from `starting_node_id`, else the session's current node,
 *    else `config.initial_node_id`:
 *    - `llm`: calls the node's language model (`effect/ai` `LanguageModel`
 *      from {@link Models}: the model its `config.model` names, else
 *      `AI_MODEL`) with the node's `instructions` as system prompt, the
 *      history, and the node's `tools` as tools; tool calls go over HTTP
 *      ({@link ToolCaller}) and the model is asked again with their results (at most {@link MAX_TOOL_ROUNDS}
 *      rounds). The final text is the reply; the turn ends here and the node's
 *      `next_node` becomes the session's current node.
 *    - `router`, `logic`: go to `config.next_node` without calling the model.
 *    - `classifier`: asks the model to pick one of `config.categories`
 *      (`[{name, description?, next_node}]`) and goes to that category's node
 *      (`config.next_node` when the answer names none).
 *    - `skill` and anything else: the run fails with a clear error.
 * 3. Writes the turn in one transaction: every tool call and result as
 *    `function_call` / `function_result` messages, the reply as an assistant
 *    text message (delivery `pending`, `run_id` set, the trigger's metadata),
 *    the current node, the close of a `should_close` tool, and the run record
 *    (assistant commit, nodes visited, model, tokens, duration). A failed run
 *    writes only its record: never half a reply.
 *
 * Model errors are retried with exponential backoff ({@link MODEL_RETRIES}
 * times) before the run fails.
 */
import { PgClient } from "@effect/sql-pg"
import { Cause, Clock, Context, Data, Effect, Layer, Schedule } from "effect"
import { type AiError, type LanguageModel, type Prompt, Tool, Toolkit } from "effect/ai"
import { newId } from "../Shared/Ids.ts"
import { Assistants } from "../Assistants/Assistants.ts"
import { isUnavailable } from "../Database/Health.ts"
import type { JsonObject } from "../Domain/Common.ts"
import { Messages } from "../Messages/Messages.ts"
import type { NewMessage } from "../Messages/Repo.ts"
import { Sessions } from "../Sessions/Sessions.ts"
import * as Metrics from "../Telemetry/Metrics.ts"
import { Models } from "./Models.ts"
import { type HistoryEntry, RuntimeRepo } from "./Repo.ts"
import { ToolCaller } from "./Tools.ts"

/** Most model calls of one llm node in one turn (each tool round is one call). */
export const MAX_TOOL_ROUNDS = 8
/** Most nodes one turn visits (routers and classifiers before an llm node). */
export const MAX_NODE_STEPS = 16
/** Retries of a failing model call before the run fails. */
export const MODEL_RETRIES = 3

/** What causes a run and how its outcome is recorded. */
export interface RunRequest {
  readonly organizationId: string
  readonly sessionId: string
  readonly trigger: "reply" | "schedule"
  /** The reply job or schedule that caused the run. */
  readonly jobId: string | null
  /** R2: the node to start from, before the session's current node and the initial node. */
  readonly startingNodeId: string | null
  /** Merged into the reply message's metadata. */
  readonly metadata: JsonObject
  /**
   * Runs inside the transaction that writes the outcome; answers false when
   * the caller no longer holds the work (its lease was lost), and then nothing
   * is written. Reply jobs delete themselves here; schedules record their status.
   */
  readonly complete: (outcome: {
    readonly status: "succeeded" | "failed"
    readonly error: string | null
  }) => Effect.Effect<boolean>
}

/**
 * A run's outcome: `lost` when the work was no longer held and nothing was
 * written; `died` when the run died of a defect (a bug, not a model or tool
 * failure) and nothing was written, so its caller decides whether to try again
 * or to end it with {@link Runtime} `recordFailure` (issue 12 "Poison jobs");
 * `unavailable` tells a defect that is the database being unreachable (O9).
 */
export interface RunOutcome {
  readonly runId: string
  readonly status: "succeeded" | "failed" | "lost" | "died"
  readonly error: string | null
  readonly unavailable?: boolean
}

/** Why a run failed: a sentence recorded on the run. */
export class RunFailed extends Data.TaggedError("RunFailed")<{ readonly message: string }> {}

class Lost extends Data.TaggedError("Lost")<{}> {}

/** An assistant node as the runtime reads it (assistants.md "Node"). */
interface GraphNode {
  readonly id: string
  readonly type: string
  readonly config?: Record<string, unknown> | null
}

/** An assistant tool as the runtime reads it (assistants.md "Tool"). */
interface AssistantTool {
  readonly id: string
  readonly name?: string
  readonly description?: string
  readonly request?: { readonly url?: string; readonly method?: string }
  readonly parameters?: unknown
  readonly should_close?: boolean
}

/** What one turn produced before it is written. */
interface Turn {
  readonly nodes: Array<string>
  readonly messages: Array<Omit<NewMessage, "run_id">>
  nextNode: string | null | undefined
  shouldClose: boolean
  inputTokens: number
  outputTokens: number
  /** The model that answered (the last node's), as recorded on the run. */
  model: string
}

/** The parts of a model response a run uses. */
interface ModelAnswer {
  readonly text: string
  readonly toolCalls: ReadonlyArray<{ readonly id: string; readonly name: string; readonly params: unknown }>
  readonly inputTokens: number
  readonly outputTokens: number
}

/** The first line of a defect's message, as recorded on a run that died (no stack, no data). */
const defectMessage = (cause: Cause.Cause<unknown>): string => {
  const defect = Cause.squash(cause)
  return (defect instanceof Error ? defect.message : String(defect)).split("\n")[0]!.slice(0, 500)
}

/**
 * The `died` outcome of a run that ended by `cause` (a defect, a timeout, the
 * database gone) with nothing written; interruptions pass through.
 */
export const diedOutcome = (runId: string, cause: Cause.Cause<unknown>): Effect.Effect<RunOutcome> =>
  Cause.hasInterruptsOnly(cause)
    ? Effect.failCause(cause as Cause.Cause<never>)
    : Effect.succeed({
        runId,
        status: "died",
        error: `Internal error: ${defectMessage(cause)}`,
        unavailable: isUnavailable(cause)
      })

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

/** The AI runtime service (see module docs). */
export class Runtime extends Context.Service<
  Runtime,
  {
    /**
     * Runs one turn (R2) and records it; never fails (a failed run is an
     * outcome). A defect is the outcome `died`, with nothing written.
     */
    run(request: RunRequest): Effect.Effect<RunOutcome>
    /**
     * Ends the work of `request` as a failed run with `error` (after its runs
     * died too often): completes it through `request.complete` and records the
     * run, in one transaction. `lost` when the work was no longer held.
     */
    recordFailure(request: RunRequest, error: string): Effect.Effect<RunOutcome>
  }
>()("parley/Runtime") {
  /** Requires `Models`, `Assistants`, `Messages`, `Sessions`, `PgClient`, `AppConfig` (tool calls, W6). */
  static readonly layer = Layer.effect(
    Runtime,
    Effect.gen(function* () {
      const sql = yield* PgClient.PgClient
      const repo = yield* RuntimeRepo
      const models = yield* Models
      const assistants = yield* Assistants
      const messages = yield* Messages
      const sessions = yield* Sessions
      const tools = yield* ToolCaller
      const defaultModel = models.defaultName

      const fail = (message: string) => Effect.fail(new RunFailed({ message }))

      /** One model call with retries; AiErrors become RunFailed after the last retry. */
      const generate = (
        model: LanguageModel.LanguageModel,
        prompt: Array<Prompt.MessageEncoded>,
        toolkit: Toolkit.Toolkit<any> | undefined
      ): Effect.Effect<ModelAnswer, RunFailed> => {
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
          Effect.mapError((error) => new RunFailed({ message: `Model error: ${error.message}` }))
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
        const nodeConfig = node.config ?? {}
        const toolIds = Array.isArray(nodeConfig.tools) ? (nodeConfig.tools as ReadonlyArray<unknown>) : []
        const byName = new Map<string, AssistantTool>()
        for (const id of toolIds) {
          const tool = typeof id === "string" ? toolsById.get(id) : undefined
          if (tool === undefined)
            return yield* fail(`Tool ${JSON.stringify(id)} of node "${node.id}" is not in the assistant`)
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
            if (text === "") return yield* fail(`The model gave an empty answer at node "${node.id}"`)
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
                : yield* tools.call({ url: tool.request.url, method: tool.request.method ?? "POST" }, call.params)
            const name = tool?.id ?? call.name
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
        return yield* fail(`The model was still calling tools after ${MAX_TOOL_ROUNDS} rounds at node "${node.id}"`)
      })

      /** Asks the model to pick a category of a classifier node; answers the next node. */
      const classifierNode = Effect.fnUntraced(function* (
        node: GraphNode,
        history: ReadonlyArray<HistoryEntry>,
        turn: Turn
      ) {
        const nodeConfig = node.config ?? {}
        const categories = (Array.isArray(nodeConfig.categories) ? nodeConfig.categories : []).filter(
          (c): c is { name: string; description?: string; next_node: string } =>
            typeof c === "object" && c !== null && str(c.name) !== undefined && str(c.next_node) !== undefined
        )
        if (categories.length === 0) {
          return yield* fail(`Classifier node "${node.id}" has no categories ([{name, next_node}]) to route by`)
        }
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
        if (next === undefined) {
          return yield* fail(`Classifier node "${node.id}": the answer names no category and there is no next_node`)
        }
        return next
      })

      /** What a run learns before its record is written. */
      interface RunInfo {
        assistantId: string | null
        commitId: string | null
        /** R2/A13: the session's current node the published version no longer has (started at the initial node). */
        missingNodeId: string | null
      }

      /** Computes the turn (no writes). */
      const computeTurn = Effect.fn("Runtime.turn")(function* (request: RunRequest, run: RunInfo) {
        const session = yield* repo.session(request.organizationId, request.sessionId)
        if (session === undefined) return yield* fail("Session not found")
        if (session.status !== "open") return yield* fail("Session is not open")
        if (session.agent_type !== "ai") return yield* fail("Session agent is not an AI agent")
        if (session.assistant_id === null) return yield* fail("The session's AI agent has no assistant")
        run.assistantId = session.assistant_id
        const runtime = yield* assistants
          .runtime(request.organizationId, session.assistant_id)
          .pipe(
            Effect.mapError((error) => new RunFailed({ message: `Assistant ${session.assistant_id}: ${error.detail}` }))
          )
        run.commitId = runtime.commit_id
        const snapshot = runtime.snapshot as unknown as {
          readonly graph?: { readonly initial_node_id?: string | null; readonly nodes?: ReadonlyArray<GraphNode> }
          readonly tools?: ReadonlyArray<AssistantTool>
        }
        const nodesById = new Map((snapshot.graph?.nodes ?? []).map((node) => [node.id, node]))
        const toolsById = new Map((snapshot.tools ?? []).map((tool) => [tool.id, tool]))
        const history = yield* repo.history(session.id)
        const turn: Turn = {
          nodes: [],
          messages: [],
          nextNode: undefined,
          shouldClose: false,
          inputTokens: 0,
          outputTokens: 0,
          model: defaultModel
        }
        const initial = str(snapshot.graph?.initial_node_id)
        let nodeId = request.startingNodeId ?? session.current_node_id ?? initial
        if (
          request.startingNodeId === null &&
          session.current_node_id !== null &&
          !nodesById.has(session.current_node_id)
        ) {
          // R2, A13: a publish deleted or renamed the node the session stood on; start over rather than strand it.
          run.missingNodeId = session.current_node_id
          nodeId = initial
          yield* Effect.annotateCurrentSpan("parley.missing_node_id", session.current_node_id)
        }
        if (nodeId === undefined) return yield* fail("The assistant has no initial_node_id and no node to start from")
        for (let step = 0; step < MAX_NODE_STEPS; step++) {
          const node = nodesById.get(nodeId)
          if (node === undefined) return yield* fail(`Node "${nodeId}" is not in the assistant's published version`)
          turn.nodes.push(node.id)
          switch (node.type) {
            case "llm":
              yield* llmNode(node, toolsById, history, request.metadata, turn)
              return turn
            case "router":
            case "logic": {
              const next = str(node.config?.next_node)
              if (next === undefined) return yield* fail(`Node "${node.id}" (${node.type}) has no next_node to go to`)
              nodeId = next
              break
            }
            case "classifier":
              nodeId = yield* classifierNode(node, history, turn)
              break
            default:
              return yield* fail(`Node "${node.id}" has type "${node.type}", which the runtime does not run`)
          }
        }
        return yield* fail(`No llm node was reached within ${MAX_NODE_STEPS} nodes`)
      })

      /** Records a finished run (`runs`), inside the caller's transaction. */
      const recordRun = (
        request: RunRequest,
        run: { readonly id: string; readonly startedAt: number; readonly durationMs: number; readonly info: RunInfo },
        turn: Turn | undefined,
        status: "succeeded" | "failed",
        error: string | null
      ) =>
        repo.insertRun({
          id: run.id,
          organizationId: request.organizationId,
          sessionId: request.sessionId,
          trigger: request.trigger,
          jobId: request.jobId,
          assistantId: run.info.assistantId,
          commitId: run.info.commitId,
          nodes: turn?.nodes ?? [],
          model: turn?.model ?? defaultModel,
          inputTokens: turn?.inputTokens ?? null,
          outputTokens: turn?.outputTokens ?? null,
          status,
          error,
          missingNodeId: run.info.missingNodeId,
          startedAt: new Date(run.startedAt),
          durationMs: run.durationMs
        })

      /** Logs, measures and puts a failed or died run on its span. */
      const report = (request: RunRequest, outcome: RunOutcome) =>
        Effect.gen(function* () {
          yield* Metrics.record(Metrics.runs, 1, { trigger: request.trigger, status: outcome.status })
          // During a database outage DatabaseHealth reports once (O9).
          if (outcome.status === "failed" || (outcome.status === "died" && outcome.unavailable !== true)) {
            yield* Effect.logError(outcome.status === "died" ? "AI run died" : "AI run failed", {
              run_id: outcome.runId,
              session_id: request.sessionId,
              error: outcome.error
            })
            yield* Effect.annotateCurrentSpan({
              "error.type": outcome.status === "died" ? "RunDied" : "RunFailed",
              "parley.run_error": outcome.error ?? ""
            })
          }
        })

      const run = Effect.fn("Runtime.run")(function* (request: RunRequest) {
        const runId = newId()
        const startedAt = yield* Clock.currentTimeMillis
        const started = performance.now()
        const info: RunInfo = { assistantId: null, commitId: null, missingNodeId: null }
        yield* Effect.annotateCurrentSpan({
          "parley.run_id": runId,
          "parley.session_id": request.sessionId,
          "parley.trigger": request.trigger
        })
        const record = (turn: Turn | undefined, status: "succeeded" | "failed", error: string | null) =>
          recordRun(
            request,
            { id: runId, startedAt, durationMs: Math.round(performance.now() - started), info },
            turn,
            status,
            error
          )

        const write = (turn: Turn) =>
          sql.withTransaction(
            Effect.gen(function* () {
              if (!(yield* request.complete({ status: "succeeded", error: null }))) return yield* new Lost()
              for (const message of turn.messages) {
                yield* messages
                  .append(request.organizationId, request.sessionId, { ...message, run_id: runId })
                  .pipe(Effect.mapError((error) => new RunFailed({ message: error.detail })))
              }
              if (turn.nextNode !== undefined) yield* repo.setCurrentNode(request.sessionId, turn.nextNode)
              if (turn.shouldClose) yield* sessions.closeBySystem(request.organizationId, request.sessionId, null)
              yield* record(turn, "succeeded", null)
            })
          )

        const writeFailure = (turn: Turn | undefined, error: string) =>
          sql.withTransaction(
            Effect.gen(function* () {
              if (!(yield* request.complete({ status: "failed", error }))) return yield* new Lost()
              yield* record(turn, "failed", error)
            })
          )

        const outcome = yield* computeTurn(request, info).pipe(
          Effect.flatMap((turn) =>
            write(turn).pipe(
              Effect.as<RunOutcome>({ runId, status: "succeeded", error: null }),
              Effect.catchTag("RunFailed", (failure) =>
                writeFailure(turn, failure.message).pipe(
                  Effect.as<RunOutcome>({ runId, status: "failed", error: failure.message })
                )
              )
            )
          ),
          Effect.catchTag("RunFailed", (failure) =>
            writeFailure(undefined, failure.message).pipe(
              Effect.as<RunOutcome>({ runId, status: "failed", error: failure.message })
            )
          ),
          Effect.catchTag("Lost", () => Effect.succeed<RunOutcome>({ runId, status: "lost", error: null })),
          Effect.catchTag("SqlError", Effect.die),
          // A defect (a bug, the database gone): nothing was written; the caller retries or ends the work.
          Effect.catchCause((cause) => diedOutcome(runId, cause))
        )
        yield* report(request, outcome)
        return outcome
      })

      const recordFailure = Effect.fn("Runtime.recordFailure")(function* (request: RunRequest, error: string) {
        const runId = newId()
        const startedAt = yield* Clock.currentTimeMillis
        const info: RunInfo = { assistantId: null, commitId: null, missingNodeId: null }
        const held = yield* sql
          .withTransaction(
            Effect.gen(function* () {
              if (!(yield* request.complete({ status: "failed", error }))) return false
              yield* recordRun(request, { id: runId, startedAt, durationMs: 0, info }, undefined, "failed", error)
              return true
            })
          )
          .pipe(Effect.orDie)
        const outcome: RunOutcome = held ? { runId, status: "failed", error } : { runId, status: "lost", error: null }
        yield* report(request, outcome)
        return outcome
      })

      return Runtime.of({ run, recordFailure })
    })
  ).pipe(Layer.provide(RuntimeRepo.layer), Layer.provide(ToolCaller.layer))
}
