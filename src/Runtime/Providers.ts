/**
 * The language-model providers of the AI runtime (DECISIONS.md R3, O3): one
 * `LanguageModel` (`effect/ai`) chosen by `AI_PROVIDER`.
 *
 * - `echo` (the default): {@link EchoLanguageModel}, offline and deterministic.
 * - `openai`: OpenAI Chat Completions (`POST <OPENAI_BASE_URL>/chat/completions`,
 *   default base `https://api.openai.com/v1`), so any OpenAI-compatible server
 *   (Ollama `http://localhost:11434/v1`, vLLM, LM Studio, llama.cpp) works
 *   through `OPENAI_BASE_URL`. Model `AI_MODEL`, default {@link DEFAULT_OPENAI_MODEL}.
 * - `anthropic`: Anthropic Messages (`POST https://api.anthropic.com/v1/messages`).
 *   Model `AI_MODEL`, default {@link DEFAULT_ANTHROPIC_MODEL}.
 *
 * Why not `@effect/ai-openai` / `@effect/ai-anthropic`: their newest releases
 * (4.0.0-beta.106) import `effect/unstable/ai/*`, `effect/unstable/http/*` and
 * `effect/unstable/encoding/Sse`, paths effect 4.1 no longer exports (they
 * became `effect/ai`, `effect/http`, `effect/encoding`), so neither package
 * even loads with effect 4.1. Both providers here are built on
 * `LanguageModel.make` over the `effect/http` client instead: non-streaming
 * requests, text, tools and tool calls. `streamText` is served from the same
 * single request. Structured output (`generateObject`) is not supported by the
 * HTTP providers (fails with `InvalidUserInputError`); the runtime does not use it.
 *
 * Errors: every call fails only with `AiError` (`effect/ai`), whose `reason` is
 * `AuthenticationError` (401/403, or a missing key), `RateLimitError` (429, with
 * `retryAfter` from `retry-after`), `InvalidRequestError` (400),
 * `InternalProviderError` (5xx), `UnknownError` (other statuses),
 * `NetworkError` (transport failure or no answer within the timeout, 2 minutes
 * by default), `InvalidResponseError` (a body that is not the expected JSON),
 * `InvalidUserInputError` (prompt parts the provider cannot send: files,
 * provider-defined tools, structured output). `error.isRetryable` says whether a
 * retry makes sense.
 *
 * ## How to call (the runtime's contract, R2)
 *
 * Dynamic tools from a node's JSON Schemas go in a `Toolkit` built with
 * `Toolkit.make`. With `disableToolCallResolution: true` no handlers are needed:
 * `Toolkit.make(...)` is passed as is (the handlers are only looked up when a
 * tool call is resolved, and the option's type then asks for none). The model's
 * tool calls come back in `response.toolCalls` (`id`, `name`, `params`, the
 * parameters as the model encoded them, `unknown` for JSON Schema tools); the
 * caller executes them and sends a follow-up prompt that carries the calls in an
 * assistant message and the results in a tool message:
 *
 * ```ts
 * import { LanguageModel, Prompt, Tool, Toolkit } from "effect/ai"
 *
 * const toolkit = Toolkit.make(
 *   ...node.tools.map((t) =>
 *     Tool.dynamic(t.id, { description: t.description, parameters: t.parametersJsonSchema })
 *   )
 * ) // a node without tools: Toolkit.make() (the request then carries no tools)
 * const history: Array<Prompt.MessageEncoded> = [
 *   { role: "system", content: node.instructions },
 *   { role: "user", content: [{ type: "text", text: "Where is order 42?" }] },
 *   { role: "assistant", content: [{ type: "text", text: "an earlier answer" }] },
 *   { role: "user", content: [{ type: "text", text: "And order 7?" }] }
 * ]
 * const first = yield* LanguageModel.generateText({
 *   prompt: Prompt.make(history),
 *   toolkit,
 *   disableToolCallResolution: true
 * })
 * // first.text, first.toolCalls ({ id, name, params }), first.usage, first.finishReason
 * history.push(
 *   { role: "assistant", content: first.toolCalls.map((call) =>
 *     ({ type: "tool-call" as const, id: call.id, name: call.name, params: call.params })) },
 *   { role: "tool", content: [
 *     { type: "tool-result", id: "<call.id>", name: "<call.name>", isFailure: false, result: { status: "shipped" } }
 *   ] } // one tool-result part per call, in one tool message
 * )
 * const second = yield* LanguageModel.generateText({ prompt: Prompt.make(history), toolkit, disableToolCallResolution: true })
 * ```
 *
 * A tool result is sent as its text when `result` is a string, else as JSON;
 * `isFailure: true` marks it as an error for Anthropic (`is_error`). A model
 * call to a tool name absent from the toolkit makes `generateText` fail with
 * `InvalidOutputError` (strict validation, the default); with
 * `toolCallValidation: "deferred"` it is returned in `toolCalls` instead, for
 * the caller to answer with a failed tool result.
 */
import { Duration, Effect, Layer, Redacted, Schema, Stream } from "effect"
import { AiError, IdGenerator, LanguageModel, type Prompt, type Response, Telemetry, Tool } from "effect/ai"
import { FetchHttpClient, HttpClient, type HttpClientError, HttpClientRequest } from "effect/http"
import { AppConfig, type AppConfigShape } from "../Config.ts"

/** The OpenAI model used when `AI_MODEL` is not set (R3, O3). */
export const DEFAULT_OPENAI_MODEL = "gpt-4o-mini"

/** The Anthropic model used when `AI_MODEL` is not set (R3, O3). */
export const DEFAULT_ANTHROPIC_MODEL = "claude-haiku-4-5"

/** The OpenAI API base URL used when `OPENAI_BASE_URL` is not set; requests go to `<base>/chat/completions`. */
export const DEFAULT_OPENAI_API_URL = "https://api.openai.com/v1"

/** The Anthropic API URL; requests go to `<url>/v1/messages`. */
export const DEFAULT_ANTHROPIC_API_URL = "https://api.anthropic.com"

/** The `anthropic-version` header sent with every Anthropic request. */
export const ANTHROPIC_VERSION = "2023-06-01"

const DEFAULT_TIMEOUT = Duration.minutes(2)
const DEFAULT_ANTHROPIC_MAX_TOKENS = 4096

/** The parts our providers produce (a subset of `Response.PartEncoded`). */
type OutputPart =
  | Response.TextPartEncoded
  | Response.ToolCallPartEncoded
  | Response.ResponseMetadataPartEncoded
  | Response.FinishPartEncoded

/** The same answer as stream parts: each text part becomes start, one delta, end. */
const toStreamParts = (parts: ReadonlyArray<OutputPart>): Array<Response.StreamPartEncoded> =>
  parts.flatMap((part, index): Array<Response.StreamPartEncoded> => {
    if (part.type !== "text") return [part]
    const id = `text-${index}`
    return [
      { type: "text-start", id },
      { type: "text-delta", id, delta: part.text },
      { type: "text-end", id }
    ]
  })

// ---------------------------------------------------------------------------
// echo
// ---------------------------------------------------------------------------

const countWords = (text: string): number => {
  const trimmed = text.trim()
  return trimmed === "" ? 0 : trimmed.split(/\s+/).length
}

const textOf = (parts: ReadonlyArray<{ readonly type: string; readonly text?: string }>): Array<string> =>
  parts.flatMap((part) => (part.type === "text" && part.text !== undefined ? [part.text] : []))

/** The prompt's text: system contents and the text parts of user and assistant messages. */
const promptTexts = (prompt: Prompt.Prompt): Array<string> =>
  prompt.content.flatMap((message) => {
    if (message.role === "system") return [message.content]
    if (message.role === "tool") return []
    return textOf(message.content)
  })

/** The echo answer for a prompt: `Echo: <text of the last user message>`, its usage, finish "stop". */
const echoAnswer = (prompt: Prompt.Prompt): Array<OutputPart> => {
  const lastUser = prompt.content.findLast((message) => message.role === "user")
  const text = `Echo: ${lastUser === undefined ? "" : textOf(lastUser.content).join("\n")}`
  const inputWords = promptTexts(prompt).reduce((sum, part) => sum + countWords(part), 0)
  return [
    { type: "text", text },
    {
      type: "finish",
      reason: "stop",
      usage: { inputTokens: { total: inputWords, uncached: inputWords }, outputTokens: { total: countWords(text) } }
    }
  ]
}

/**
 * The offline, deterministic provider (`AI_PROVIDER=echo`, the default; R3):
 * answers `Echo: <text of the last user message>` (text parts joined by a
 * newline; `Echo: ` when the prompt has no user message), never calls a tool,
 * finishes with "stop". Usage counts words, not tokens: input = the
 * whitespace-separated words of the prompt's text (system contents and the text
 * parts of user and assistant messages), output = the words of the answer.
 * Never fails.
 */
export const EchoLanguageModel: Layer.Layer<LanguageModel.LanguageModel> = Layer.effect(
  LanguageModel.LanguageModel,
  LanguageModel.make({
    generateText: (options) => Effect.sync(() => echoAnswer(options.prompt)),
    streamText: (options) => Stream.fromIterableEffect(Effect.sync(() => toStreamParts(echoAnswer(options.prompt))))
  })
)

// ---------------------------------------------------------------------------
// HTTP plumbing shared by the two HTTP providers
// ---------------------------------------------------------------------------

interface PostJson {
  readonly provider: string
  readonly module: string
  readonly url: string
  readonly headers: Record<string, string>
  readonly body: unknown
  readonly timeout: Duration.Input
}

const fail = (module: string, reason: AiError.AiErrorReason) =>
  Effect.fail(AiError.make({ module, method: "generateText", reason }))

const fromHttpClientError =
  (module: string) =>
  (error: HttpClientError.HttpClientError): AiError.AiError => {
    const reason = error.reason
    switch (reason._tag) {
      case "TransportError":
      case "EncodeError":
      case "InvalidUrlError":
        return AiError.make({ module, method: "generateText", reason: AiError.NetworkError.fromRequestError(reason) })
      default:
        return AiError.make({
          module,
          method: "generateText",
          reason: new AiError.InvalidResponseError({ description: reason.message })
        })
    }
  }

/** The `error.message` of an OpenAI or Anthropic error body, when there is one. */
const errorMessage = (body: string): string | undefined => {
  try {
    const parsed = JSON.parse(body) as { error?: { message?: unknown } | string; message?: unknown }
    if (typeof parsed.error === "string") return parsed.error
    if (typeof parsed.error?.message === "string") return parsed.error.message
    if (typeof parsed.message === "string") return parsed.message
  } catch {
    // not JSON: fall through
  }
  return undefined
}

/** Seconds of a `retry-after` header (the seconds form only). */
const retryAfter = (header: string | undefined): Duration.Duration | undefined => {
  if (header === undefined || !/^\d+(\.\d+)?$/.test(header.trim())) return undefined
  return Duration.millis(Math.round(Number(header) * 1000))
}

/** POSTs JSON and returns the parsed JSON answer of a 2xx; any other outcome is an `AiError`. */
const postJson = Effect.fnUntraced(function* (client: HttpClient.HttpClient, options: PostJson) {
  const { module, url } = options
  const request = HttpClientRequest.post(url).pipe(
    HttpClientRequest.setHeaders(options.headers),
    HttpClientRequest.acceptJson,
    HttpClientRequest.bodyJsonUnsafe(options.body)
  )
  const [status, headers, text] = yield* client.execute(request).pipe(
    Effect.flatMap((response) =>
      Effect.map(response.text, (text) => [response.status, response.headers, text] as const)
    ),
    Effect.scoped,
    Effect.mapError(fromHttpClientError(module)),
    Effect.timeoutOrElse({
      duration: options.timeout,
      orElse: () =>
        fail(
          module,
          new AiError.NetworkError({
            reason: "TransportError",
            method: "POST",
            url,
            description: `${options.provider} did not answer within ${Duration.format(Duration.fromInputUnsafe(options.timeout))}`
          })
        )
    })
  )
  if (status < 200 || status >= 300) {
    const description = errorMessage(text)
    const http = { response: { status, headers }, body: text }
    const after = status === 429 ? retryAfter(headers["retry-after"]) : undefined
    return yield* fail(
      module,
      after !== undefined
        ? new AiError.RateLimitError({ retryAfter: after, http })
        : AiError.reasonFromHttpStatus({ status, body: text, http, description })
    )
  }
  return yield* Effect.try({
    try: () => JSON.parse(text) as unknown,
    catch: () =>
      AiError.make({
        module,
        method: "generateText",
        reason: new AiError.InvalidResponseError({
          description: `${options.provider} answered with a body that is not JSON`
        })
      })
  })
})

/** Decodes a provider answer, failing with `InvalidResponseError`. */
const decodeAnswer = <S extends Schema.Constraint & { readonly DecodingServices: never }>(
  module: string,
  schema: S
) => {
  const decode = Schema.decodeUnknownEffect(schema)
  return (body: unknown) =>
    decode(body).pipe(
      Effect.mapError((error) =>
        AiError.make({
          module,
          method: "generateText",
          reason: new AiError.InvalidResponseError({ description: `Unexpected answer: ${error.message}` })
        })
      )
    )
}

const trimUrl = (url: string) => url.replace(/\/+$/, "")

/** The JSON text sent to the model for a tool result. */
const toolResultText = (part: Prompt.ToolResultPart): string => {
  if (part.modelOutput !== undefined) return part.modelOutput.map((p) => (p.type === "text" ? p.text : "")).join("")
  if (typeof part.result === "string") return part.result
  return JSON.stringify(part.result ?? null)
}

/** The user-defined and dynamic tools of a request; provider-defined tools are refused. */
const functionTools = (module: string, tools: ReadonlyArray<Tool.Any>) =>
  Effect.forEach(tools, (tool) =>
    Tool.isProviderDefined(tool)
      ? fail(
          module,
          new AiError.InvalidUserInputError({ description: `Provider-defined tool ${tool.name} is not supported` })
        )
      : Effect.succeed({
          name: tool.name,
          description: Tool.getDescription(tool),
          parameters: Tool.getJsonSchema(tool)
        })
  )

const unsupportedFile = (module: string, part: Prompt.FilePart) =>
  fail(
    module,
    new AiError.InvalidUserInputError({
      description: `File parts (${part.mediaType}) are not supported by this provider`
    })
  )

const refuseStructuredOutput = (module: string, options: LanguageModel.ProviderOptions) =>
  options.responseFormat.type === "json"
    ? fail(
        module,
        new AiError.InvalidUserInputError({ description: "Structured output (generateObject) is not supported" })
      )
    : Effect.void

const annotate = (
  options: LanguageModel.ProviderOptions,
  provider: string,
  model: string,
  parts?: ReadonlyArray<OutputPart>
) => {
  const finish = parts?.find((part): part is Response.FinishPartEncoded => part.type === "finish")
  Telemetry.addGenAIAnnotations(options.span, {
    provider: { name: provider },
    operation: { name: "chat" },
    request: { model },
    ...(finish === undefined
      ? {}
      : {
          response: { finishReasons: [finish.reason] },
          usage: { inputTokens: finish.usage.inputTokens.total, outputTokens: finish.usage.outputTokens.total }
        })
  })
}

/** Options of the HTTP providers (apart from the URL and key, which differ per provider). */
export interface ProviderOptions {
  /** Base URL of the API (see each factory for the default and the path it appends). */
  readonly apiUrl?: string | undefined
  /** The API key; see each factory for what happens without one. */
  readonly apiKey?: Redacted.Redacted<string> | undefined
  /** The model id sent with every request. */
  readonly model?: string | undefined
  /** How long to wait for an answer before failing with `NetworkError` (default 2 minutes). */
  readonly timeout?: Duration.Input | undefined
}

// ---------------------------------------------------------------------------
// OpenAI Chat Completions
// ---------------------------------------------------------------------------

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

const OpenAiAnswer = Schema.Struct({
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
  const decode = decodeAnswer(module, OpenAiAnswer)
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
    const answer = yield* decode(yield* postJson(client, { provider: "OpenAI", module, url, headers, body, timeout }))
    const choice = answer.choices[0]
    if (choice === undefined)
      return yield* fail(module, new AiError.InvalidResponseError({ description: "The answer has no choices" }))
    const idGenerator = yield* IdGenerator.IdGenerator
    const parts: Array<OutputPart> = [
      {
        type: "response-metadata",
        ...(answer.id == null ? {} : { id: answer.id }),
        ...(answer.model == null ? {} : { modelId: answer.model }),
        ...(answer.created == null ? {} : { timestamp: new Date(answer.created * 1000).toISOString() })
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
    const usage = answer.usage
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

  return yield* LanguageModel.make({
    generateText: generate,
    streamText: (providerOptions) => Stream.fromIterableEffect(Effect.map(generate(providerOptions), toStreamParts))
  })
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
 * provided inside. Errors: `AiError`, see the module docs.
 */
export const openAiLanguageModel = (options: ProviderOptions = {}): Layer.Layer<LanguageModel.LanguageModel> =>
  Layer.effect(LanguageModel.LanguageModel, makeOpenAi(options)).pipe(Layer.provide(FetchHttpClient.layer))

// ---------------------------------------------------------------------------
// Anthropic Messages
// ---------------------------------------------------------------------------

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

const AnthropicAnswer = Schema.Struct({
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
  const decode = decodeAnswer(module, AnthropicAnswer)
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
    const answer = yield* decode(
      yield* postJson(client, { provider: "Anthropic", module, url, headers, body, timeout })
    )
    const idGenerator = yield* IdGenerator.IdGenerator
    const parts: Array<OutputPart> = [
      {
        type: "response-metadata",
        ...(answer.id == null ? {} : { id: answer.id }),
        ...(answer.model == null ? {} : { modelId: answer.model })
      }
    ]
    for (const block of answer.content) {
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
    const uncached = answer.usage?.input_tokens ?? undefined
    const cacheRead = answer.usage?.cache_read_input_tokens ?? undefined
    const cacheWrite = answer.usage?.cache_creation_input_tokens ?? undefined
    const output = answer.usage?.output_tokens ?? undefined
    parts.push({
      type: "finish",
      reason: anthropicFinishReason(answer.stop_reason),
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

  return yield* LanguageModel.make({
    generateText: generate,
    streamText: (providerOptions) => Stream.fromIterableEffect(Effect.map(generate(providerOptions), toStreamParts))
  })
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
 * inside. Errors: `AiError`, see the module docs.
 */
export const anthropicLanguageModel = (options: AnthropicOptions = {}): Layer.Layer<LanguageModel.LanguageModel> =>
  Layer.effect(LanguageModel.LanguageModel, makeAnthropic(options)).pipe(Layer.provide(FetchHttpClient.layer))

// ---------------------------------------------------------------------------
// Choice by configuration
// ---------------------------------------------------------------------------

/** The part of the configuration (`AppConfig`, O3) that chooses the provider. */
export interface ProviderConfig {
  readonly aiProvider: AppConfigShape["aiProvider"]
  readonly aiModel?: string | undefined
  readonly openaiApiKey?: Redacted.Redacted<string> | undefined
  readonly openaiBaseUrl?: string | undefined
  readonly anthropicApiKey?: Redacted.Redacted<string> | undefined
}

/**
 * The provider and model a configuration uses, as recorded on a run:
 * `echo`, `openai/<model>` or `anthropic/<model>` (with `AI_MODEL` or the
 * provider's default model; R3, O3).
 */
export const modelName = (config: ProviderConfig): string => {
  switch (config.aiProvider) {
    case "echo":
      return "echo"
    case "openai":
      return `openai/${config.aiModel ?? DEFAULT_OPENAI_MODEL}`
    case "anthropic":
      return `anthropic/${config.aiModel ?? DEFAULT_ANTHROPIC_MODEL}`
  }
}

/** The provider layer of a configuration (see {@link LanguageModelLive}). */
export const languageModelFor = (config: ProviderConfig): Layer.Layer<LanguageModel.LanguageModel> => {
  switch (config.aiProvider) {
    case "echo":
      return EchoLanguageModel
    case "openai":
      return openAiLanguageModel({
        apiUrl: config.openaiBaseUrl,
        apiKey: config.openaiApiKey,
        model: config.aiModel
      })
    case "anthropic":
      return anthropicLanguageModel({ apiKey: config.anthropicApiKey, model: config.aiModel })
  }
}

/**
 * The language model of the AI runtime, chosen by `AI_PROVIDER` (R3, O3):
 * `echo` (default) -> {@link EchoLanguageModel}; `openai` ->
 * {@link openAiLanguageModel} with `OPENAI_API_KEY`, `OPENAI_BASE_URL` as the
 * API URL when set, `AI_MODEL`; `anthropic` -> {@link anthropicLanguageModel}
 * with `ANTHROPIC_API_KEY`, `AI_MODEL`. Building it never fails (a missing key
 * surfaces as `AuthenticationError` on the first call).
 */
export const LanguageModelLive: Layer.Layer<LanguageModel.LanguageModel, never, AppConfig> = Layer.unwrap(
  Effect.gen(function* () {
    return languageModelFor(yield* AppConfig)
  })
)
