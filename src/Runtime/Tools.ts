/**
 * Tool calls of the AI runtime (R2): an assistant tool is an HTTP endpoint
 * (`request.url`, `request.method`). The model's arguments go as a JSON body
 * (as the query string for GET and DELETE); the response body (JSON when it parses,
 * else text) is the result given back to the model. The URL passes the SSRF
 * guard of W6 (on the resolved address) unless
 * `ALLOW_PRIVATE_NETWORK_TARGETS=true`, and each call is bounded by
 * {@link TOOL_TIMEOUT_MS}. A failure (refused, timeout, non-2xx) is a result
 * with `is_error`, not a failed run: the model decides what to say.
 */
import { Context, Effect, Layer } from "effect"
import { HttpClient, HttpClientRequest } from "effect/http"
import { AppConfig } from "../Config.ts"
import { describeOutboundFailure, guardedHttpClient, guardedTarget } from "../Shared/Ssrf.ts"

/** Time limit of one tool call, in ms. */
const TOOL_TIMEOUT_MS = 10_000
/** Most characters of a tool's response body kept (stored and sent to the model). */
const TOOL_RESULT_MAX_CHARS = 16_384

/** An assistant tool as the runtime calls it (assistants.md "Tool"). */
export interface ToolTarget {
  /** The tool's id (A15: the runs record it; a replay matches by it, A16). */
  readonly id: string
  readonly url: string
  readonly method: string
}

/** The outcome of one tool call: the result for the model, and whether it failed. */
export interface ToolOutcome {
  readonly result: unknown
  readonly isError: boolean
}

const parseBody = (text: string): unknown => {
  const clipped = text.length > TOOL_RESULT_MAX_CHARS ? text.slice(0, TOOL_RESULT_MAX_CHARS) : text
  try {
    return JSON.parse(clipped)
  } catch {
    return clipped
  }
}

/** Calls assistant tools over HTTP (see module docs). */
export class ToolCaller extends Context.Service<
  ToolCaller,
  {
    /**
     * Calls `target` with the model's `args` (an object's members; anything
     * else sends `{}`). Never fails: a refusal (W6), a timeout
     * ({@link TOOL_TIMEOUT_MS}), a transport error or a non-2xx response is an
     * `isError` outcome, with `{error}` or `{status, body}` as its result.
     */
    call(target: ToolTarget, args: unknown): Effect.Effect<ToolOutcome>
  }
>()("parley/Runtime/ToolCaller") {
  /**
   * Tool calls for tests, with no network: each call's outcome is
   * `outcomeOf(target, args)` (default: the result `{ok: true}`).
   */
  static readonly layerTest = (
    outcomeOf: (target: ToolTarget, args: unknown) => ToolOutcome = () => ({ result: { ok: true }, isError: false })
  ): Layer.Layer<ToolCaller> =>
    Layer.succeed(ToolCaller, ToolCaller.of({ call: (target, args) => Effect.sync(() => outcomeOf(target, args)) }))

  /** Node's HTTP client with the W6 lookup unless private targets are allowed. Requires `AppConfig`. */
  static readonly layer = Layer.effect(
    ToolCaller,
    Effect.gen(function* () {
      const config = yield* AppConfig
      const allowPrivate = config.allowPrivateNetworkTargets
      const client = yield* HttpClient.HttpClient

      const call = (target: ToolTarget, args: unknown) =>
        Effect.flatMap(guardedTarget(target.url, allowPrivate), (url) => {
          const method = target.method.toUpperCase()
          const params = typeof args === "object" && args !== null ? (args as Record<string, unknown>) : {}
          let request: HttpClientRequest.HttpClientRequest
          if (method === "GET" || method === "DELETE") {
            for (const [key, value] of Object.entries(params)) {
              url.searchParams.set(key, typeof value === "string" ? value : JSON.stringify(value))
            }
            request = HttpClientRequest.make(method)(url)
          } else {
            request = HttpClientRequest.make(method as "POST")(url).pipe(
              HttpClientRequest.bodyText(JSON.stringify(params), "application/json")
            )
          }
          return client.execute(
            request.pipe(HttpClientRequest.setHeaders({ accept: "application/json", "user-agent": "Parley-Tools/1" }))
          )
        }).pipe(
          Effect.flatMap((response) =>
            Effect.map(response.text, (text): ToolOutcome => {
              const body = parseBody(text)
              return response.status >= 200 && response.status < 300
                ? { result: body, isError: false }
                : { result: { status: response.status, body }, isError: true }
            })
          ),
          Effect.timeout(TOOL_TIMEOUT_MS),
          Effect.catch((error) =>
            Effect.succeed<ToolOutcome>({
              result: { error: describeOutboundFailure(error, TOOL_TIMEOUT_MS) },
              isError: true
            })
          ),
          Effect.withSpan("Runtime.toolCall", { attributes: { "http.request.method": target.method.toUpperCase() } })
        )

      return ToolCaller.of({ call })
    })
  ).pipe(Layer.provide(guardedHttpClient()))
}
