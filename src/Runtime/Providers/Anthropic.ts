/**
 * The Anthropic Messages provider of the AI runtime (`AI_PROVIDER=anthropic`;
 * DECISIONS.md R3, O3). Non-streaming requests, text, tools and tool calls;
 * errors as `Http.ts` describes.
 */
import { Effect, Layer, Redacted, Schema } from "effect"
import { AiError, IdGenerator, LanguageModel, type Prompt, type Response } from "effect/ai"
import { HttpClient } from "effect/http"
import {
  annotate,
  DEFAULT_TIMEOUT,
  decodeResponse,
  fail,
  functionTools,
  type ProviderOptions,
  postJson,
  providerHttpClient,
  refuseStructuredOutput,
  toolResultText,
  trimUrl,
  unsupportedFile
} from "./Http.ts"
import { fromGenerate, type OutputPart } from "./Model.ts"

/** The Anthropic model used when `AI_MODEL` is not set (R3, O3). */
export const DEFAULT_ANTHROPIC_MODEL = "claude-haiku-4-5"

/** The Anthropic API URL; requests go to `<url>/v1/messages`. */
const DEFAULT_ANTHROPIC_API_URL = "https://api.anthropic.com"

/** The `anthropic-version` header sent with every Anthropic request. */
export const ANTHROPIC_VERSION = "2023-06-01"

const DEFAULT_ANTHROPIC_MAX_TOKENS = 4096

type AnthropicBlock =
  | { readonly type: "text"; readonly text: string }
  | { readonly type: "tool_use"; readonly id: string; readonly name: string; readonly input: unknown }
  | {
      readonly type: "tool_result"
      readonly tool_use_id: string
      readonly content: string
      readonly is_error?: boolean
    }

interface AnthropicMessage {
  readonly role: "user" | "assistant"
  content: Array<AnthropicBlock>
}

/** System text and alternating messages; consecutive user/tool messages merge, tool results first. */
const anthropicMessages = Effect.fnUntraced(function* (module: string, prompt: Prompt.Prompt) {
  const system: Array<string> = []
  const messages: Array<AnthropicMessage> = []
  const push = (role: "user" | "assistant", blocks: Array<AnthropicBlock>) => {
    if (blocks.length === 0) return
    const last = messages.at(-1)
    if (last !== undefined && last.role === role) last.content.push(...blocks)
    else messages.push({ role, content: blocks })
  }
  for (const message of prompt.content) {
    switch (message.role) {
      case "system":
        system.push(message.content)
        break
      case "user": {
        const blocks: Array<AnthropicBlock> = []
        for (const part of message.content) {
          if (part.type === "file") return yield* unsupportedFile(module, part)
          if (part.text !== "") blocks.push({ type: "text", text: part.text })
        }
        push("user", blocks)
        break
      }
      case "assistant": {
        const blocks: Array<AnthropicBlock> = []
        for (const part of message.content) {
          if (part.type === "text" && part.text !== "") blocks.push({ type: "text", text: part.text })
          else if (part.type === "tool-call" && !part.providerExecuted)
            blocks.push({ type: "tool_use", id: part.id, name: part.name, input: part.params ?? {} })
        }
        push("assistant", blocks)
        break
      }
      case "tool": {
        const blocks: Array<AnthropicBlock> = []
        for (const part of message.content) {
          if (part.type === "tool-result")
            blocks.push({
              type: "tool_result",
              tool_use_id: part.id,
              content: toolResultText(part),
              ...(part.isFailure ? { is_error: true } : {})
            })
        }
        push("user", blocks)
        break
      }
    }
  }
  for (const message of messages) {
    if (message.role === "user")
      message.content = [
        ...message.content.filter((block) => block.type === "tool_result"),
        ...message.content.filter((block) => block.type !== "tool_result")
      ]
  }
  return { system: system.join("\n\n"), messages }
})

const anthropicToolChoice = (choice: LanguageModel.ToolChoice<string>) => {
  if (choice === "auto") return { type: "auto" }
  if (choice === "none") return { type: "none" }
  if (choice === "required") return { type: "any" }
  if ("tool" in choice) return { type: "tool", name: choice.tool }
  return { type: choice.mode === "required" ? "any" : "auto" }
}

const AnthropicResponse = Schema.Struct({
  id: Schema.optional(Schema.NullOr(Schema.String)),
  model: Schema.optional(Schema.NullOr(Schema.String)),
  content: Schema.Array(
    Schema.Struct({
      type: Schema.String,
      text: Schema.optional(Schema.String),
      id: Schema.optional(Schema.String),
      name: Schema.optional(Schema.String),
      input: Schema.optional(Schema.Unknown)
    })
  ),
  stop_reason: Schema.optional(Schema.NullOr(Schema.String)),
  usage: Schema.optional(
    Schema.NullOr(
      Schema.Struct({
        input_tokens: Schema.optional(Schema.NullOr(Schema.Number)),
        output_tokens: Schema.optional(Schema.NullOr(Schema.Number)),
        cache_creation_input_tokens: Schema.optional(Schema.NullOr(Schema.Number)),
        cache_read_input_tokens: Schema.optional(Schema.NullOr(Schema.Number))
      })
    )
  )
})

const anthropicFinishReason = (reason: string | null | undefined): Response.FinishReason => {
  switch (reason) {
    case "end_turn":
    case "stop_sequence":
      return "stop"
    case "max_tokens":
    case "model_context_window_exceeded":
      return "length"
    case "tool_use":
      return "tool-calls"
    case "refusal":
      return "content-filter"
    case "pause_turn":
      return "pause"
    case null:
    case undefined:
      return "unknown"
    default:
      return "other"
  }
}

/** Options of {@link anthropicLanguageModel}. */
export interface AnthropicOptions extends ProviderOptions {
  /** `max_tokens` of every request (Anthropic requires one); default 4096. */
  readonly maxTokens?: number | undefined
}

const makeAnthropic = Effect.fnUntraced(function* (options: AnthropicOptions) {
  const module = "AnthropicLanguageModel"
  const client = yield* HttpClient.HttpClient
  const model = options.model ?? DEFAULT_ANTHROPIC_MODEL
  const url = `${trimUrl(options.apiUrl ?? DEFAULT_ANTHROPIC_API_URL)}/v1/messages`
  const timeout = options.timeout ?? DEFAULT_TIMEOUT
  const decode = decodeResponse(module, AnthropicResponse)
  const apiKey = options.apiKey

  const generate = Effect.fnUntraced(function* (providerOptions: LanguageModel.ProviderOptions) {
    annotate(providerOptions, "anthropic", model)
    yield* refuseStructuredOutput(module, providerOptions)
    if (apiKey === undefined)
      return yield* fail(
        module,
        new AiError.AuthenticationError({ kind: "MissingKey", description: "ANTHROPIC_API_KEY is not set" })
      )
    const { system, messages } = yield* anthropicMessages(module, providerOptions.prompt)
    const tools = yield* functionTools(module, providerOptions.tools)
    const body = {
      model,
      max_tokens: options.maxTokens ?? DEFAULT_ANTHROPIC_MAX_TOKENS,
      ...(system === "" ? {} : { system }),
      messages,
      ...(tools.length === 0
        ? {}
        : {
            tools: tools.map((tool) => ({
              name: tool.name,
              ...(tool.description === undefined ? {} : { description: tool.description }),
              input_schema: tool.parameters
            })),
            tool_choice: anthropicToolChoice(providerOptions.toolChoice)
          }),
      stream: false
    }
    const headers = { "x-api-key": Redacted.value(apiKey), "anthropic-version": ANTHROPIC_VERSION }
    const response = yield* decode(
      yield* postJson(client, { provider: "Anthropic", module, url, headers, body, timeout })
    )
    const idGenerator = yield* IdGenerator.IdGenerator
    const parts: Array<OutputPart> = [
      {
        type: "response-metadata",
        ...(response.id == null ? {} : { id: response.id }),
        ...(response.model == null ? {} : { modelId: response.model })
      }
    ]
    for (const block of response.content) {
      if (block.type === "text" && block.text !== undefined && block.text !== "")
        parts.push({ type: "text", text: block.text })
      else if (block.type === "tool_use" && block.name !== undefined)
        parts.push({
          type: "tool-call",
          id: block.id ?? (yield* idGenerator.generateId()),
          name: block.name,
          params: block.input ?? {}
        })
    }
    const uncached = response.usage?.input_tokens ?? undefined
    const cacheRead = response.usage?.cache_read_input_tokens ?? undefined
    const cacheWrite = response.usage?.cache_creation_input_tokens ?? undefined
    const output = response.usage?.output_tokens ?? undefined
    parts.push({
      type: "finish",
      reason: anthropicFinishReason(response.stop_reason),
      usage: {
        inputTokens: {
          ...(uncached === undefined ? {} : { uncached, total: uncached + (cacheRead ?? 0) + (cacheWrite ?? 0) }),
          ...(cacheRead === undefined ? {} : { cacheRead }),
          ...(cacheWrite === undefined ? {} : { cacheWrite })
        },
        outputTokens: output === undefined ? {} : { total: output }
      }
    })
    annotate(providerOptions, "anthropic", model, parts)
    return parts
  })

  return yield* fromGenerate(generate)
})

/**
 * An Anthropic Messages provider (`AI_PROVIDER=anthropic`; R3, O3): each
 * `generateText` is one non-streaming `POST <apiUrl>/v1/messages` with
 * `x-api-key` and `anthropic-version: 2023-06-01`, the model, `max_tokens`, the
 * system messages joined into `system`, the rest as alternating user/assistant
 * messages (`tool_use` blocks for tool calls, `tool_result` blocks for tool
 * results) and the tools as `{name, description, input_schema}`. `apiUrl`
 * defaults to {@link DEFAULT_ANTHROPIC_API_URL}, `model` to
 * {@link DEFAULT_ANTHROPIC_MODEL}. Without `apiKey` every call fails with
 * `AuthenticationError` (`MissingKey`). The HTTP client (fetch) is provided
 * inside. Errors: `AiError` with the reasons of `Providers/Http.ts`.
 */
export const anthropicLanguageModel = (options: AnthropicOptions = {}): Layer.Layer<LanguageModel.LanguageModel> =>
  Layer.effect(LanguageModel.LanguageModel, makeAnthropic(options)).pipe(Layer.provide(providerHttpClient))
