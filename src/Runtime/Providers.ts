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
 * One file per provider (`Providers/Echo.ts`, `Providers/OpenAi.ts`,
 * `Providers/Anthropic.ts`), the HTTP plumbing of the two HTTP providers in
 * `Providers/Http.ts`; this module chooses among them and re-exports them.
 *
 * Errors: every call fails only with `AiError` (`effect/ai`); the reasons of
 * the HTTP providers are listed in `Providers/Http.ts`. `error.isRetryable`
 * says whether a retry makes sense.
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
import { Effect, Layer, type Redacted } from "effect"
import type { LanguageModel } from "effect/ai"
import { AppConfig, type AppConfigShape } from "../Config.ts"
import { anthropicLanguageModel, DEFAULT_ANTHROPIC_MODEL } from "./Providers/Anthropic.ts"
import { EchoLanguageModel } from "./Providers/Echo.ts"
import { DEFAULT_OPENAI_MODEL, openAiLanguageModel } from "./Providers/OpenAi.ts"

// The providers, for callers that pick one themselves (tests, tools).
export { ANTHROPIC_VERSION, anthropicLanguageModel, DEFAULT_ANTHROPIC_MODEL } from "./Providers/Anthropic.ts"
export { EchoLanguageModel } from "./Providers/Echo.ts"
export { DEFAULT_OPENAI_MODEL, openAiLanguageModel } from "./Providers/OpenAi.ts"

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
