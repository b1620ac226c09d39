/**
 * The offline, deterministic provider of the AI runtime (`AI_PROVIDER=echo`,
 * the default; DECISIONS.md R3): for development and tests.
 */
import { Effect, Layer } from "effect"
import { LanguageModel, type Prompt } from "effect/ai"
import { fromGenerate, type OutputPart } from "./Model.ts"

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
  fromGenerate((options) => Effect.sync(() => echoAnswer(options.prompt)))
)
