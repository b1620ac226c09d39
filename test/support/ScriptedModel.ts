/**
 * A scripted language model for runtime tests (R3: "tests script the language
 * model through a test layer"): each call takes the next scripted answer (text,
 * tool calls, an error or a defect) from `respond` when set, else from the queue, or, when the
 * queue is empty, answers `Reply to: <last user text>`. Every call's prompt and tool names are recorded.
 * {@link scriptedModel} gives it to the runtime as its `Models` (every node,
 * whatever model it names, is answered by the script; runs record `test`).
 */
import { Effect, Layer, Stream } from "effect"
import { AiError, LanguageModel, type Prompt, type Response } from "effect/ai"
import { Models } from "../../src/Runtime/Models.ts"

/** One scripted answer. */
export type ScriptedAnswer =
  | { readonly text: string }
  | { readonly toolCalls: ReadonlyArray<{ readonly id: string; readonly name: string; readonly params: unknown }> }
  | { readonly error: "retryable" | "fatal" }
  /** A defect (a bug in a layer, not a model failure): the call dies with this message. */
  | { readonly defect: string }

/** A recorded model call. */
export interface RecordedCall {
  readonly system: string | undefined
  readonly messages: ReadonlyArray<Prompt.Message>
  readonly tools: ReadonlyArray<string>
  readonly lastUserText: string | undefined
}

/** The script: push answers, read the calls. */
export interface Script {
  readonly answers: Array<ScriptedAnswer>
  readonly calls: Array<RecordedCall>
  /**
   * When set, answers every call from the call itself, before the queue
   * (undefined: the queue, then the default): what a test needs when calls
   * run concurrently in no fixed order (an evaluation's turns, A16).
   */
  respond?: ((call: RecordedCall) => ScriptedAnswer | undefined) | undefined
  /** When set, every call waits for it before answering (a test holds calls in flight). */
  gate?: Promise<void> | undefined
}

const lastUserText = (prompt: Prompt.Prompt): string | undefined => {
  const message = prompt.content.findLast((m) => m.role === "user")
  if (message === undefined || message.role !== "user") return undefined
  return message.content.flatMap((part) => (part.type === "text" ? [part.text] : [])).join("\n")
}

/** A new, empty script. */
export const makeScript = (): Script => ({ answers: [], calls: [] })

/** The answer of `script` to one call (see the module docs), recording the call. */
const answerOf = (script: Script, options: LanguageModel.ProviderOptions) =>
  Effect.suspend((): Effect.Effect<Array<Response.PartEncoded>, AiError.AiError> => {
    const system = options.prompt.content.find((m) => m.role === "system")
    const call: RecordedCall = {
      system: system?.role === "system" ? system.content : undefined,
      messages: options.prompt.content,
      tools: options.tools.map((tool) => tool.name),
      lastUserText: lastUserText(options.prompt)
    }
    script.calls.push(call)
    const answer = script.respond?.(call) ??
      script.answers.shift() ?? { text: `Reply to: ${lastUserText(options.prompt) ?? ""}` }
    const usage = { inputTokens: { total: 10 }, outputTokens: { total: 5 } }
    if ("defect" in answer) return Effect.die(new Error(answer.defect))
    if ("error" in answer) {
      return Effect.fail(
        AiError.make({
          module: "Scripted",
          method: "generateText",
          reason:
            answer.error === "retryable"
              ? new AiError.InternalProviderError({ description: "scripted outage" })
              : new AiError.InvalidRequestError({ description: "scripted bad request" })
        })
      )
    }
    if ("text" in answer) {
      return Effect.succeed([
        { type: "text" as const, text: answer.text },
        { type: "finish" as const, reason: "stop" as const, usage }
      ])
    }
    return Effect.succeed([
      ...answer.toolCalls.map((call) => ({ type: "tool-call" as const, ...call })),
      { type: "finish" as const, reason: "tool-calls" as const, usage }
    ])
  })

/** The `LanguageModel` layer playing `script`. */
export const scriptedLanguageModel = (script: Script) =>
  Layer.effect(
    LanguageModel.LanguageModel,
    LanguageModel.make({
      generateText: (options) => {
        const gate = script.gate
        return gate === undefined
          ? answerOf(script, options)
          : Effect.andThen(
              Effect.promise(() => gate),
              answerOf(script, options)
            )
      },
      streamText: () => Stream.empty
    })
  )

/** The runtime's models (`Models.layerTest`, R3) playing `script` for every node: for `servicesWith`. */
export const scriptedModel = (script: Script) => Models.layerTest(scriptedLanguageModel(script))
