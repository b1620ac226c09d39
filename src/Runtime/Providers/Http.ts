/**
 * The HTTP plumbing shared by the two HTTP providers of the AI runtime
 * (`OpenAi.ts`, `Anthropic.ts`; DECISIONS.md R3): one JSON POST per call with
 * a timeout, provider responses decoded with a schema, and every failure mapped
 * to an `AiError` (`effect/ai`) whose `reason` is:
 *
 * - `AuthenticationError` (401/403; a missing key is checked by each provider),
 * - `RateLimitError` (429, with `retryAfter` from a `retry-after` in seconds),
 * - `InvalidRequestError` (400), `InternalProviderError` (5xx),
 *   `UnknownError` (other statuses),
 * - `NetworkError` (transport failure, or no response within the timeout,
 *   {@link DEFAULT_TIMEOUT} unless the provider's options say otherwise),
 * - `InvalidResponseError` (a body that is not the expected JSON),
 * - `InvalidUserInputError` (prompt parts a provider cannot send: files,
 *   provider-defined tools, structured output).
 *
 * `error.isRetryable` says whether a retry makes sense.
 */

import * as NodeHttpClient from "@effect/platform-node/NodeHttpClient"
import { Duration, Effect, type Redacted, Schema } from "effect"
import { AiError, type LanguageModel, type Prompt, type Response, Telemetry, Tool } from "effect/ai"
import { type HttpClient, type HttpClientError, HttpClientRequest } from "effect/http"
import type { OutputPart } from "./Model.ts"

/** How long an HTTP provider waits for a response by default: 2 minutes. */
export const DEFAULT_TIMEOUT = Duration.minutes(2)

/** Options of the HTTP providers (apart from the URL and key, which differ per provider). */
export interface ProviderOptions {
  /** Base URL of the API (see each factory for the default and the path it appends). */
  readonly apiUrl?: string | undefined
  /** The API key; see each factory for what happens without one. */
  readonly apiKey?: Redacted.Redacted<string> | undefined
  /** The model id sent with every request. */
  readonly model?: string | undefined
  /** How long to wait for a response before failing with `NetworkError` (default 2 minutes). */
  readonly timeout?: Duration.Input | undefined
}

/** One JSON POST to a provider. */
interface PostJson {
  /** The provider's name in error descriptions (`OpenAI`, `Anthropic`). */
  readonly provider: string
  /** The `module` of the `AiError`s (`OpenAiLanguageModel`, ...). */
  readonly module: string
  readonly url: string
  readonly headers: Record<string, string>
  readonly body: unknown
  readonly timeout: Duration.Input
}

/** Fails `generateText` of `module` with an `AiError` of `reason`. */
export const fail = (module: string, reason: AiError.AiErrorReason) =>
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

/**
 * The HTTP client of the providers: undici's dispatcher directly
 * (`@effect/platform-node` `NodeHttpClient.layerUndici`), not `fetch`. Speed
 * tactic measured by `npm run bench -- evaluations` (bench/README.md
 * "evaluations"): server CPU per model call 3.1 ms with `fetch`, 1.5-1.9 ms
 * with undici on the OpenAI-compatible test server; a live reply makes the
 * same call.
 */
export const providerHttpClient = NodeHttpClient.layerUndici

/**
 * POSTs `options.body` as JSON and returns the parsed JSON of a 2xx response;
 * any other outcome fails with an `AiError` (see the module docs).
 */
export const postJson = Effect.fnUntraced(function* (client: HttpClient.HttpClient, options: PostJson) {
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

/** Decodes a provider's response body with `schema`, failing with `InvalidResponseError`. */
export const decodeResponse = <S extends Schema.Constraint & { readonly DecodingServices: never }>(
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

/** `url` without trailing slashes. */
export const trimUrl = (url: string) => url.replace(/\/+$/, "")

/**
 * The text sent to the model for a tool result: the text of its `modelOutput`
 * when set, else `result` itself when a string, else `result` as JSON.
 */
export const toolResultText = (part: Prompt.ToolResultPart): string => {
  if (part.modelOutput !== undefined) return part.modelOutput.map((p) => (p.type === "text" ? p.text : "")).join("")
  if (typeof part.result === "string") return part.result
  return JSON.stringify(part.result ?? null)
}

/**
 * The user-defined and dynamic tools of a request as `{name, description,
 * parameters}` (the JSON Schema); a provider-defined tool fails with
 * `InvalidUserInputError`.
 */
export const functionTools = (module: string, tools: ReadonlyArray<Tool.Any>) =>
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

/** Fails with `InvalidUserInputError`: file parts are not sent to the HTTP providers. */
export const unsupportedFile = (module: string, part: Prompt.FilePart) =>
  fail(
    module,
    new AiError.InvalidUserInputError({
      description: `File parts (${part.mediaType}) are not supported by this provider`
    })
  )

/** Fails with `InvalidUserInputError` when structured output (`generateObject`) is asked for. */
export const refuseStructuredOutput = (module: string, options: LanguageModel.ProviderOptions) =>
  options.responseFormat.type === "json"
    ? fail(
        module,
        new AiError.InvalidUserInputError({ description: "Structured output (generateObject) is not supported" })
      )
    : Effect.void

/**
 * Puts the GenAI attributes on the call's span: provider, operation `chat`,
 * the model, and once `parts` are known the finish reason and token usage.
 */
export const annotate = (
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
