/**
 * The OpenAI Chat Completions provider of the AI runtime (`AI_PROVIDER=openai`;
 * DECISIONS.md R3, O3), also for any OpenAI-compatible server (Ollama
 * `http://localhost:11434/v1`, vLLM, LM Studio, llama.cpp) through
 * `OPENAI_BASE_URL`. Non-streaming requests, text, tools and tool calls;
 * errors as `Http.ts` describes.
 */
import { Effect, Layer, Redacted, Schema } from "effect"
import { AiError, IdGenerator, LanguageModel, type Prompt, type Response, Tool } from "effect/ai"
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

/** The OpenAI model used when `AI_MODEL` is not set (R3, O3). */
export const DEFAULT_OPENAI_MODEL = "gpt-4o-mini"

/** The OpenAI API base URL used when `OPENAI_BASE_URL` is not set; requests go to `<base>/chat/completions`. */
const DEFAULT_OPENAI_API_URL = "https://api.openai.com/v1"

type OpenAiMessage =
  | { readonly role: "system"; readonly content: string }
  | {
      readonly role: "user"
      readonly content: string | ReadonlyArray<{ readonly type: "text"; readonly text: string }>
    }
  | {
      readonly role: "assistant"
      readonly content: string | null
      readonly tool_calls?: ReadonlyArray<{
        readonly id: string
        readonly type: "function"
        readonly function: { readonly name: string; readonly arguments: string }
      }>
    }
  | { readonly role: "tool"; readonly tool_call_id: string; readonly content: string }

const openAiMessages = Effect.fnUntraced(function* (module: string, prompt: Prompt.Prompt) {
  const messages: Array<OpenAiMessage> = []
  for (const message of prompt.content) {
    switch (message.role) {
      case "system":
        messages.push({ role: "system", content: message.content })
        break
      case "user": {
        const texts: Array<string> = []
        for (const part of message.content) {
          if (part.type === "file") return yield* unsupportedFile(module, part)
          texts.push(part.text)
        }
        messages.push({
          role: "user",
          content: texts.length === 1 ? texts[0]! : texts.map((text) => ({ type: "text" as const, text }))
        })
        break
      }
      case "assistant": {
        const texts: Array<string> = []
        const calls: Array<{ id: string; type: "function"; function: { name: string; arguments: string } }> = []
        for (const part of message.content) {
          if (part.type === "text") texts.push(part.text)
          else if (part.type === "tool-call" && !part.providerExecuted)
            calls.push({
              id: part.id,
              type: "function",
              function: { name: part.name, arguments: JSON.stringify(part.params ?? {}) }
            })
        }
        if (texts.length === 0 && calls.length === 0) break
        messages.push({
          role: "assistant",
          content: texts.length === 0 ? null : texts.join(""),
          ...(calls.length === 0 ? {} : { tool_calls: calls })
        })
        break
      }
      case "tool":
        for (const part of message.content) {
          if (part.type === "tool-result")
            messages.push({ role: "tool", tool_call_id: part.id, content: toolResultText(part) })
        }
        break
    }
  }
  return messages
})

const openAiToolChoice = (choice: LanguageModel.ToolChoice<string>) => {
  if (typeof choice === "string") return choice
  if ("tool" in choice) return { type: "function", function: { name: choice.tool } }
  return choice.mode ?? "auto"
}

const OpenAiResponse = Schema.Struct({
  id: Schema.optional(Schema.NullOr(Schema.String)),
  model: Schema.optional(Schema.NullOr(Schema.String)),
  created: Schema.optional(Schema.NullOr(Schema.Number)),
  choices: Schema.Array(
    Schema.Struct({
      message: Schema.Struct({
        content: Schema.optional(Schema.NullOr(Schema.String)),
        tool_calls: Schema.optional(
          Schema.NullOr(
            Schema.Array(
              Schema.Struct({
                id: Schema.optional(Schema.NullOr(Schema.String)),
                function: Schema.Struct({ name: Schema.String, arguments: Schema.optional(Schema.Unknown) })
              })
            )
          )
        )
      }),
      finish_reason: Schema.optional(Schema.NullOr(Schema.String))
    })
  ),
  usage: Schema.optional(
    Schema.NullOr(
      Schema.Struct({
        prompt_tokens: Schema.optional(Schema.NullOr(Schema.Number)),
        completion_tokens: Schema.optional(Schema.NullOr(Schema.Number)),
        prompt_tokens_details: Schema.optional(
          Schema.NullOr(Schema.Struct({ cached_tokens: Schema.optional(Schema.NullOr(Schema.Number)) }))
        ),
        completion_tokens_details: Schema.optional(
          Schema.NullOr(Schema.Struct({ reasoning_tokens: Schema.optional(Schema.NullOr(Schema.Number)) }))
        )
      })
    )
  )
})

const openAiFinishReason = (reason: string | null | undefined): Response.FinishReason => {
  switch (reason) {
    case "stop":
      return "stop"
    case "length":
      return "length"
    case "tool_calls":
    case "function_call":
      return "tool-calls"
    case "content_filter":
      return "content-filter"
    case null:
    case undefined:
      return "unknown"
    default:
      return "other"
  }
}

/** Tool-call arguments: a JSON string (the standard) or, from some compatible servers, an object. */
const parseArguments = (module: string, name: string, raw: unknown) => {
  if (typeof raw !== "string") return Effect.succeed(raw ?? {})
  if (raw.trim() === "") return Effect.succeed({})
  return Effect.try({
    try: () => Tool.unsafeSecureJsonParse(raw),
    catch: () =>
      AiError.make({
        module,
        method: "generateText",
        reason: new AiError.InvalidResponseError({ description: `Tool call ${name} has arguments that are not JSON` })
      })
  })
}

const makeOpenAi = Effect.fnUntraced(function* (options: ProviderOptions) {
  const module = "OpenAiLanguageModel"
  const client = yield* HttpClient.HttpClient
  const model = options.model ?? DEFAULT_OPENAI_MODEL
  const apiUrl = trimUrl(options.apiUrl ?? DEFAULT_OPENAI_API_URL)
  const url = `${apiUrl}/chat/completions`
  const timeout = options.timeout ?? DEFAULT_TIMEOUT
  const decode = decodeResponse(module, OpenAiResponse)
  const headers: Record<string, string> =
    options.apiKey === undefined ? {} : { authorization: `Bearer ${Redacted.value(options.apiKey)}` }

  const generate = Effect.fnUntraced(function* (providerOptions: LanguageModel.ProviderOptions) {
    annotate(providerOptions, "openai", model)
    yield* refuseStructuredOutput(module, providerOptions)
    if (options.apiKey === undefined && apiUrl === DEFAULT_OPENAI_API_URL)
      return yield* fail(
        module,
        new AiError.AuthenticationError({ kind: "MissingKey", description: "OPENAI_API_KEY is not set" })
      )
    const messages = yield* openAiMessages(module, providerOptions.prompt)
    const tools = yield* functionTools(module, providerOptions.tools)
    const body = {
      model,
      messages,
      ...(tools.length === 0
        ? {}
        : {
            tools: tools.map((tool) => ({
              type: "function",
              function: {
                name: tool.name,
                ...(tool.description === undefined ? {} : { description: tool.description }),
                parameters: tool.parameters
              }
            })),
            tool_choice: openAiToolChoice(providerOptions.toolChoice)
          }),
      stream: false
    }
    const response = yield* decode(yield* postJson(client, { provider: "OpenAI", module, url, headers, body, timeout }))
    const choice = response.choices[0]
    if (choice === undefined)
      return yield* fail(module, new AiError.InvalidResponseError({ description: "The answer has no choices" }))
    const idGenerator = yield* IdGenerator.IdGenerator
    const parts: Array<OutputPart> = [
      {
        type: "response-metadata",
        ...(response.id == null ? {} : { id: response.id }),
        ...(response.model == null ? {} : { modelId: response.model }),
        ...(response.created == null ? {} : { timestamp: new Date(response.created * 1000).toISOString() })
      }
    ]
    const content = choice.message.content
    if (content != null && content !== "") parts.push({ type: "text", text: content })
    for (const call of choice.message.tool_calls ?? []) {
      parts.push({
        type: "tool-call",
        id: call.id ?? (yield* idGenerator.generateId()),
        name: call.function.name,
        params: yield* parseArguments(module, call.function.name, call.function.arguments)
      })
    }
    const usage = response.usage
    const cached = usage?.prompt_tokens_details?.cached_tokens ?? undefined
    const input = usage?.prompt_tokens ?? undefined
    const output = usage?.completion_tokens ?? undefined
    const reasoning = usage?.completion_tokens_details?.reasoning_tokens ?? undefined
    const hasCalls = (choice.message.tool_calls ?? []).length > 0
    parts.push({
      type: "finish",
      reason: hasCalls && choice.finish_reason === "stop" ? "tool-calls" : openAiFinishReason(choice.finish_reason),
      usage: {
        inputTokens: {
          ...(input === undefined ? {} : { total: input }),
          ...(input === undefined ? {} : { uncached: input - (cached ?? 0) }),
          ...(cached === undefined ? {} : { cacheRead: cached })
        },
        outputTokens: {
          ...(output === undefined ? {} : { total: output }),
          ...(reasoning === undefined ? {} : { reasoning }),
          ...(output === undefined ? {} : { text: output - (reasoning ?? 0) })
        }
      }
    })
    annotate(providerOptions, "openai", model, parts)
    return parts
  })

  return yield* fromGenerate(generate)
})

/**
 * An OpenAI Chat Completions provider (`AI_PROVIDER=openai`; R3, O3): each
 * `generateText` is one non-streaming `POST <apiUrl>/chat/completions` with
 * `authorization: Bearer <apiKey>`, the model, the prompt as chat messages
 * (system, user, assistant with `tool_calls`, `tool` results) and the tools as
 * `{type:"function", function:{name, description, parameters}}` (the tool's
 * JSON Schema). `apiUrl` defaults to {@link DEFAULT_OPENAI_API_URL} and takes
 * any OpenAI-compatible server (Ollama `http://localhost:11434/v1`, vLLM);
 * `model` defaults to {@link DEFAULT_OPENAI_MODEL}. Without `apiKey` no
 * authorization header is sent, and against api.openai.com every call fails
 * with `AuthenticationError` (`MissingKey`). The HTTP client (fetch) is
 * provided inside. Errors: `AiError` with the reasons of `Providers/Http.ts`.
 */
export const openAiLanguageModel = (options: ProviderOptions = {}): Layer.Layer<LanguageModel.LanguageModel> =>
  Layer.effect(LanguageModel.LanguageModel, makeOpenAi(options)).pipe(Layer.provide(providerHttpClient))
