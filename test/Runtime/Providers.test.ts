/**
 * The language-model providers of the AI runtime (DECISIONS.md R3, O3): the
 * offline echo model, and the OpenAI (Chat Completions) and Anthropic
 * (Messages) providers against local fakes of their HTTP APIs, called the way
 * the runtime calls them (dynamic tools, tool calls not resolved, follow-ups
 * carrying tool calls and results; R2).
 */
import { createServer, type IncomingHttpHeaders } from "node:http"
import type { AddressInfo } from "node:net"
import { assert, describe, it } from "@effect/vitest"
import { Effect, Layer, Redacted, Stream } from "effect"
import { LanguageModel, Prompt, Tool, Toolkit } from "effect/ai"
import { AppConfig } from "../../src/Config.ts"
import {
  ANTHROPIC_VERSION,
  anthropicLanguageModel,
  DEFAULT_ANTHROPIC_MODEL,
  DEFAULT_OPENAI_MODEL,
  EchoLanguageModel,
  LanguageModelLive,
  modelName,
  openAiLanguageModel
} from "../../src/Runtime/Providers.ts"

/** One request the fake API got. */
interface Recorded {
  readonly method: string
  readonly path: string
  readonly headers: IncomingHttpHeaders
  readonly body: any
}

/** A fake provider API on 127.0.0.1 responding to the n-th request with `responses[n]` (JSON, status 200 unless given). */
const fakeApi = (
  responses: ReadonlyArray<{ readonly status?: number; readonly body: unknown; readonly delayMs?: number }>
) =>
  Effect.acquireRelease(
    Effect.promise(async () => {
      const requests: Array<Recorded> = []
      const server = createServer((request, response) => {
        const chunks: Array<Buffer> = []
        request.on("data", (chunk: Buffer) => chunks.push(chunk))
        request.on("end", () => {
          const text = Buffer.concat(chunks).toString("utf8")
          requests.push({
            method: request.method ?? "",
            path: request.url ?? "",
            headers: request.headers,
            body: text === "" ? undefined : JSON.parse(text)
          })
          const scripted = responses[requests.length - 1] ?? { status: 500, body: { error: { message: "unexpected" } } }
          const send = () => {
            response.statusCode = scripted.status ?? 200
            response.setHeader("content-type", "application/json")
            response.end(JSON.stringify(scripted.body))
          }
          if (scripted.delayMs === undefined) send()
          else setTimeout(send, scripted.delayMs)
        })
      })
      await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
      const { port } = server.address() as AddressInfo
      return { url: `http://127.0.0.1:${port}`, requests, server }
    }),
    ({ server }) =>
      Effect.promise(
        () =>
          new Promise<void>((resolve) => {
            server.closeAllConnections()
            server.close(() => resolve())
          })
      )
  )

/** The node's tools as the runtime builds them: dynamic tools over JSON Schemas (R2). */
const lookupOrder = Tool.dynamic("lookup_order", {
  description: "Look up an order by its number",
  parameters: {
    type: "object",
    properties: { order: { type: "string", description: "The order number" } },
    required: ["order"]
  }
})
const toolkit = Toolkit.make(lookupOrder)

const firstPrompt = Prompt.make([
  { role: "system", content: "You are the shop's assistant." },
  { role: "user", content: [{ type: "text", text: "Hello" }] },
  { role: "assistant", content: [{ type: "text", text: "Hi, how can I help?" }] },
  { role: "user", content: [{ type: "text", text: "Where is order 42?" }] }
])

/** The follow-up: the same history, the model's tool call, and the tool's result. */
const followUpPrompt = (callId: string) =>
  Prompt.make([
    ...firstPrompt.content,
    {
      role: "assistant",
      content: [{ type: "tool-call", id: callId, name: "lookup_order", params: { order: "42" } }]
    },
    {
      role: "tool",
      content: [
        { type: "tool-result", id: callId, name: "lookup_order", isFailure: false, result: { status: "shipped" } }
      ]
    }
  ])

/** One round as the runtime runs it: tools passed, tool calls left to the caller. */
const generate = (prompt: Prompt.Prompt) =>
  LanguageModel.generateText({ prompt, toolkit, disableToolCallResolution: true })

const orderSchema = {
  type: "object",
  properties: { order: { type: "string", description: "The order number" } },
  required: ["order"]
}

describe("echo (R3)", () => {
  it.effect("answers from the last user message, calls no tool, counts words", () =>
    Effect.gen(function* () {
      const response = yield* generate(firstPrompt)
      assert.strictEqual(response.text, "Echo: Where is order 42?")
      assert.deepStrictEqual(response.toolCalls, [])
      assert.strictEqual(response.finishReason, "stop")
      // "You are the shop's assistant." (5) + "Hello" (1) + "Hi, how can I help?" (5) + "Where is order 42?" (4)
      assert.strictEqual(response.usage.inputTokens.total, 15)
      assert.strictEqual(response.usage.outputTokens.total, 5)
      const again = yield* generate(firstPrompt)
      assert.strictEqual(again.text, response.text)
    }).pipe(Effect.provide(EchoLanguageModel))
  )

  it.effect("answers `Echo: ` without a user message, and streams the same answer", () =>
    Effect.gen(function* () {
      const response = yield* LanguageModel.generateText({ prompt: Prompt.make([{ role: "system", content: "Hi" }]) })
      assert.strictEqual(response.text, "Echo: ")
      assert.strictEqual(response.usage.inputTokens.total, 1)
      assert.strictEqual(response.usage.outputTokens.total, 1)
      const parts: Array<string> = []
      yield* Stream.runForEach(LanguageModel.streamText({ prompt: "one two" }), (part) =>
        Effect.sync(() => {
          if (part.type === "text-delta") parts.push(part.delta)
        })
      )
      assert.strictEqual(parts.join(""), "Echo: one two")
    }).pipe(Effect.provide(EchoLanguageModel))
  )
})

describe("openai (R3): Chat Completions", () => {
  it.live("sends the prompt and tools, reads text, tool calls and usage, encodes the follow-up", () =>
    Effect.gen(function* () {
      const api = yield* fakeApi([
        {
          body: {
            id: "chatcmpl-1",
            object: "chat.completion",
            created: 1_700_000_000,
            model: "m",
            choices: [
              {
                index: 0,
                message: {
                  role: "assistant",
                  content: null,
                  tool_calls: [
                    {
                      id: "call_1",
                      type: "function",
                      function: { name: "lookup_order", arguments: '{"order":"42"}' }
                    }
                  ]
                },
                finish_reason: "tool_calls"
              }
            ],
            usage: { prompt_tokens: 50, completion_tokens: 7, total_tokens: 57 }
          }
        },
        {
          body: {
            id: "chatcmpl-2",
            object: "chat.completion",
            created: 1_700_000_001,
            model: "m",
            choices: [
              {
                index: 0,
                message: { role: "assistant", content: "Order 42 has shipped." },
                finish_reason: "stop"
              }
            ],
            usage: { prompt_tokens: 80, completion_tokens: 6, total_tokens: 86 }
          }
        }
      ])
      const model = openAiLanguageModel({ apiUrl: `${api.url}/v1`, apiKey: Redacted.make("sk-test"), model: "m" })

      // (b) a tool call comes back in response.toolCalls, with parsed params
      const first = yield* generate(firstPrompt).pipe(Effect.provide(model))
      assert.strictEqual(first.text, "")
      assert.strictEqual(first.finishReason, "tool-calls")
      assert.strictEqual(first.toolCalls.length, 1)
      const call = first.toolCalls[0]!
      assert.strictEqual(call.id, "call_1")
      assert.strictEqual(call.name, "lookup_order")
      assert.deepStrictEqual(call.params, { order: "42" })
      assert.strictEqual(first.usage.inputTokens.total, 50)
      assert.strictEqual(first.usage.outputTokens.total, 7)

      const request = api.requests[0]!
      assert.strictEqual(request.method, "POST")
      assert.strictEqual(request.path, "/v1/chat/completions")
      assert.strictEqual(request.headers.authorization, "Bearer sk-test")
      assert.strictEqual(request.body.model, "m")
      assert.strictEqual(request.body.stream, false)
      assert.deepStrictEqual(request.body.messages, [
        { role: "system", content: "You are the shop's assistant." },
        { role: "user", content: "Hello" },
        { role: "assistant", content: "Hi, how can I help?" },
        { role: "user", content: "Where is order 42?" }
      ])
      assert.deepStrictEqual(request.body.tools, [
        {
          type: "function",
          function: { name: "lookup_order", description: "Look up an order by its number", parameters: orderSchema }
        }
      ])
      assert.strictEqual(request.body.tool_choice, "auto")

      // (c) the follow-up carries the tool call and its result; (a) a text answer with usage
      const second = yield* generate(followUpPrompt(call.id)).pipe(Effect.provide(model))
      assert.strictEqual(second.text, "Order 42 has shipped.")
      assert.deepStrictEqual(second.toolCalls, [])
      assert.strictEqual(second.finishReason, "stop")
      assert.strictEqual(second.usage.inputTokens.total, 80)
      assert.strictEqual(second.usage.outputTokens.total, 6)
      assert.deepStrictEqual(api.requests[1]!.body.messages.slice(4), [
        {
          role: "assistant",
          content: null,
          tool_calls: [
            { id: "call_1", type: "function", function: { name: "lookup_order", arguments: '{"order":"42"}' } }
          ]
        },
        { role: "tool", tool_call_id: "call_1", content: '{"status":"shipped"}' }
      ])
    })
  )

  it.live("a tool the node does not have is an InvalidOutputError (deferred: returned); HTTP errors are AiErrors", () =>
    Effect.gen(function* () {
      const unknownToolAnswer = {
        body: {
          choices: [
            {
              message: {
                content: null,
                tool_calls: [{ id: "c", type: "function", function: { name: "delete_everything", arguments: "{}" } }]
              },
              finish_reason: "tool_calls"
            }
          ]
        }
      }
      const api = yield* fakeApi([
        unknownToolAnswer,
        unknownToolAnswer,
        { status: 401, body: { error: { message: "Incorrect API key provided", type: "invalid_request_error" } } },
        { status: 429, body: { error: { message: "Slow down" } } }
      ])
      const model = openAiLanguageModel({ apiUrl: `${api.url}/v1`, apiKey: Redacted.make("k"), model: "m" })
      const unknownTool = yield* Effect.flip(generate(firstPrompt).pipe(Effect.provide(model)))
      assert.strictEqual(unknownTool.reason._tag, "InvalidOutputError")
      const deferred = yield* LanguageModel.generateText({
        prompt: firstPrompt,
        toolkit,
        disableToolCallResolution: true,
        toolCallValidation: "deferred"
      }).pipe(Effect.provide(model))
      assert.deepStrictEqual(
        deferred.toolCalls.map((call) => [call.name, call.params]),
        [["delete_everything", {}]]
      )
      const unauthorized = yield* Effect.flip(generate(firstPrompt).pipe(Effect.provide(model)))
      assert.strictEqual(unauthorized.reason._tag, "AuthenticationError")
      assert.include(unauthorized.message, "Incorrect API key provided")
      const limited = yield* Effect.flip(generate(firstPrompt).pipe(Effect.provide(model)))
      assert.strictEqual(limited.reason._tag, "RateLimitError")
      assert.isTrue(limited.isRetryable)
    })
  )

  it.live("no response within the timeout is a retryable NetworkError", () =>
    Effect.gen(function* () {
      const api = yield* fakeApi([{ body: { choices: [] }, delayMs: 2_000 }])
      const model = openAiLanguageModel({ apiUrl: api.url, apiKey: Redacted.make("k"), timeout: "100 millis" })
      const error = yield* Effect.flip(generate(firstPrompt).pipe(Effect.provide(model)))
      assert.strictEqual(error.reason._tag, "NetworkError")
      assert.isTrue(error.isRetryable)
    })
  )

  it.effect("without a key, api.openai.com is not called: AuthenticationError (MissingKey)", () =>
    Effect.gen(function* () {
      const error = yield* Effect.flip(generate(firstPrompt).pipe(Effect.provide(openAiLanguageModel({}))))
      assert.strictEqual(error.reason._tag, "AuthenticationError")
      assert.strictEqual((error.reason as { kind?: string }).kind, "MissingKey")
    })
  )
})

describe("anthropic (R3): Messages", () => {
  it.live("sends the prompt and tools, reads text, tool calls and usage, encodes the follow-up", () =>
    Effect.gen(function* () {
      const api = yield* fakeApi([
        {
          body: {
            id: "msg_1",
            type: "message",
            role: "assistant",
            model: "m",
            content: [
              { type: "text", text: "Let me check." },
              { type: "tool_use", id: "toolu_1", name: "lookup_order", input: { order: "42" } }
            ],
            stop_reason: "tool_use",
            usage: { input_tokens: 40, output_tokens: 12 }
          }
        },
        {
          body: {
            id: "msg_2",
            type: "message",
            role: "assistant",
            model: "m",
            content: [{ type: "text", text: "Order 42 has shipped." }],
            stop_reason: "end_turn",
            usage: { input_tokens: 70, output_tokens: 6, cache_read_input_tokens: 10 }
          }
        }
      ])
      const model = anthropicLanguageModel({ apiUrl: api.url, apiKey: Redacted.make("ak-test"), model: "m" })

      const first = yield* generate(firstPrompt).pipe(Effect.provide(model))
      assert.strictEqual(first.text, "Let me check.")
      assert.strictEqual(first.finishReason, "tool-calls")
      assert.strictEqual(first.toolCalls.length, 1)
      const call = first.toolCalls[0]!
      assert.strictEqual(call.id, "toolu_1")
      assert.strictEqual(call.name, "lookup_order")
      assert.deepStrictEqual(call.params, { order: "42" })
      assert.strictEqual(first.usage.inputTokens.total, 40)
      assert.strictEqual(first.usage.outputTokens.total, 12)

      const request = api.requests[0]!
      assert.strictEqual(request.method, "POST")
      assert.strictEqual(request.path, "/v1/messages")
      assert.strictEqual(request.headers["x-api-key"], "ak-test")
      assert.strictEqual(request.headers["anthropic-version"], ANTHROPIC_VERSION)
      assert.isUndefined(request.headers.authorization)
      assert.strictEqual(request.body.model, "m")
      assert.strictEqual(request.body.stream, false)
      assert.isNumber(request.body.max_tokens)
      assert.strictEqual(request.body.system, "You are the shop's assistant.")
      assert.deepStrictEqual(request.body.messages, [
        { role: "user", content: [{ type: "text", text: "Hello" }] },
        { role: "assistant", content: [{ type: "text", text: "Hi, how can I help?" }] },
        { role: "user", content: [{ type: "text", text: "Where is order 42?" }] }
      ])
      assert.deepStrictEqual(request.body.tools, [
        { name: "lookup_order", description: "Look up an order by its number", input_schema: orderSchema }
      ])
      assert.deepStrictEqual(request.body.tool_choice, { type: "auto" })

      const second = yield* generate(followUpPrompt(call.id)).pipe(Effect.provide(model))
      assert.strictEqual(second.text, "Order 42 has shipped.")
      assert.deepStrictEqual(second.toolCalls, [])
      assert.strictEqual(second.finishReason, "stop")
      assert.strictEqual(second.usage.inputTokens.total, 80)
      assert.strictEqual(second.usage.inputTokens.cacheRead, 10)
      assert.strictEqual(second.usage.outputTokens.total, 6)
      assert.deepStrictEqual(api.requests[1]!.body.messages.slice(3), [
        {
          role: "assistant",
          content: [{ type: "tool_use", id: "toolu_1", name: "lookup_order", input: { order: "42" } }]
        },
        {
          role: "user",
          content: [{ type: "tool_result", tool_use_id: "toolu_1", content: '{"status":"shipped"}' }]
        }
      ])
    })
  )

  it.live("a failed tool result is sent with is_error; an overloaded API is a retryable InternalProviderError", () =>
    Effect.gen(function* () {
      const api = yield* fakeApi([
        { status: 529, body: { type: "error", error: { type: "overloaded_error", message: "Overloaded" } } }
      ])
      const model = anthropicLanguageModel({ apiUrl: api.url, apiKey: Redacted.make("k") })
      const prompt = Prompt.make([
        ...firstPrompt.content,
        { role: "assistant", content: [{ type: "tool-call", id: "t", name: "lookup_order", params: { order: "42" } }] },
        {
          role: "tool",
          content: [{ type: "tool-result", id: "t", name: "lookup_order", isFailure: true, result: "timed out" }]
        }
      ])
      const error = yield* Effect.flip(generate(prompt).pipe(Effect.provide(model)))
      assert.strictEqual(error.reason._tag, "InternalProviderError")
      assert.isTrue(error.isRetryable)
      const request = api.requests[0]!
      assert.strictEqual(request.body.model, DEFAULT_ANTHROPIC_MODEL)
      assert.deepStrictEqual(request.body.messages.at(-1), {
        role: "user",
        content: [{ type: "tool_result", tool_use_id: "t", content: "timed out", is_error: true }]
      })
    })
  )
})

describe("the runtime's call (R2)", () => {
  /** A node's tools as stored: ids, descriptions and JSON Schemas known only at run time. */
  interface NodeTool {
    readonly id: string
    readonly description: string
    readonly parametersJsonSchema: Record<string, unknown>
  }
  const nodeTools: ReadonlyArray<NodeTool> = [
    { id: "lookup_order", description: "Look up an order", parametersJsonSchema: orderSchema },
    { id: "close_ticket", description: "Close the ticket", parametersJsonSchema: { type: "object", properties: {} } }
  ]

  it.live("tools mapped from a node, two parallel calls and their results in one follow-up", () =>
    Effect.gen(function* () {
      const api = yield* fakeApi([
        {
          body: {
            choices: [
              {
                message: {
                  content: null,
                  tool_calls: [
                    { id: "a", type: "function", function: { name: "lookup_order", arguments: '{"order":"7"}' } },
                    { id: "b", type: "function", function: { name: "close_ticket", arguments: "" } }
                  ]
                },
                finish_reason: "tool_calls"
              }
            ]
          }
        },
        { body: { choices: [{ message: { content: "Done." }, finish_reason: "stop" }] } }
      ])
      const model = openAiLanguageModel({ apiUrl: `${api.url}/v1`, apiKey: Redacted.make("k") })
      const tools = nodeTools.map((t) =>
        Tool.dynamic(t.id, { description: t.description, parameters: t.parametersJsonSchema })
      )
      const nodeToolkit = Toolkit.make(...tools)
      const history: Array<Prompt.MessageEncoded> = [
        { role: "system", content: "Be brief." },
        { role: "user", content: [{ type: "text", text: "Close my ticket about order 7" }] }
      ]
      const first = yield* LanguageModel.generateText({
        prompt: Prompt.make(history),
        toolkit: nodeToolkit,
        disableToolCallResolution: true
      }).pipe(Effect.provide(model))
      assert.deepStrictEqual(
        first.toolCalls.map((call) => [call.id, call.name, call.params]),
        [
          ["a", "lookup_order", { order: "7" }],
          ["b", "close_ticket", {}]
        ]
      )
      assert.strictEqual(api.requests[0]!.body.model, DEFAULT_OPENAI_MODEL)
      assert.deepStrictEqual(
        api.requests[0]!.body.tools.map((tool: any) => tool.function.name),
        ["lookup_order", "close_ticket"]
      )
      history.push(
        {
          role: "assistant",
          content: first.toolCalls.map((call) => ({
            type: "tool-call" as const,
            id: call.id,
            name: call.name,
            params: call.params
          }))
        },
        {
          role: "tool",
          content: [
            { type: "tool-result", id: "a", name: "lookup_order", isFailure: false, result: { status: "delivered" } },
            { type: "tool-result", id: "b", name: "close_ticket", isFailure: false, result: "closed" }
          ]
        }
      )
      const second = yield* LanguageModel.generateText({
        prompt: Prompt.make(history),
        toolkit: nodeToolkit,
        disableToolCallResolution: true
      }).pipe(Effect.provide(model))
      assert.strictEqual(second.text, "Done.")
      assert.deepStrictEqual(api.requests[1]!.body.messages.slice(2), [
        {
          role: "assistant",
          content: null,
          tool_calls: [
            { id: "a", type: "function", function: { name: "lookup_order", arguments: '{"order":"7"}' } },
            { id: "b", type: "function", function: { name: "close_ticket", arguments: "{}" } }
          ]
        },
        { role: "tool", tool_call_id: "a", content: '{"status":"delivered"}' },
        { role: "tool", tool_call_id: "b", content: "closed" }
      ])
    })
  )

  it.live("a node without tools sends none (no tools, no tool_choice)", () =>
    Effect.gen(function* () {
      const api = yield* fakeApi([
        { body: { id: "m", content: [{ type: "text", text: "Hi" }], stop_reason: "end_turn", usage: {} } }
      ])
      const response = yield* LanguageModel.generateText({
        prompt: "Hello",
        toolkit: Toolkit.make(),
        disableToolCallResolution: true
      }).pipe(Effect.provide(anthropicLanguageModel({ apiUrl: api.url, apiKey: Redacted.make("k") })))
      assert.strictEqual(response.text, "Hi")
      assert.isUndefined(api.requests[0]!.body.tools)
      assert.isUndefined(api.requests[0]!.body.tool_choice)
      assert.isUndefined(api.requests[0]!.body.system)
    })
  )
})

describe("LanguageModelLive (R3, O3)", () => {
  it.live("AI_PROVIDER=openai with OPENAI_BASE_URL calls that server", () =>
    Effect.gen(function* () {
      const api = yield* fakeApi([
        { body: { choices: [{ message: { content: "hello from the fake" }, finish_reason: "stop" }] } }
      ])
      const config = {
        aiProvider: "openai" as const,
        openaiBaseUrl: `${api.url}/v1`,
        openaiApiKey: Redacted.make("k"),
        aiModel: "m"
      }
      const response = yield* generate(firstPrompt).pipe(
        Effect.provide(LanguageModelLive.pipe(Layer.provide(AppConfig.layerWith(config))))
      )
      assert.strictEqual(response.text, "hello from the fake")
      assert.strictEqual(api.requests.length, 1)
      assert.strictEqual(api.requests[0]!.path, "/v1/chat/completions")
      assert.strictEqual(api.requests[0]!.headers.authorization, "Bearer k")
      assert.strictEqual(api.requests[0]!.body.model, "m")
      assert.strictEqual(modelName(config), "openai/m")
    })
  )

  it.effect("AI_PROVIDER=echo (the default) is the echo model", () =>
    Effect.gen(function* () {
      const response = yield* LanguageModel.generateText({ prompt: "ping" })
      assert.strictEqual(response.text, "Echo: ping")
    }).pipe(Effect.provide(LanguageModelLive.pipe(Layer.provide(AppConfig.layerWith({ aiProvider: "echo" })))))
  )

  it("modelName records the provider and the model (default when AI_MODEL is unset)", () => {
    assert.strictEqual(modelName({ aiProvider: "echo", aiModel: "x" }), "echo")
    assert.strictEqual(modelName({ aiProvider: "openai" }), `openai/${DEFAULT_OPENAI_MODEL}`)
    assert.strictEqual(modelName({ aiProvider: "anthropic" }), `anthropic/${DEFAULT_ANTHROPIC_MODEL}`)
    assert.strictEqual(modelName({ aiProvider: "anthropic", aiModel: "claude-x" }), "anthropic/claude-x")
  })
})
