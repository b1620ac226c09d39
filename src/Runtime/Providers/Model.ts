/**
 * How each provider of the AI runtime (R3) becomes a `LanguageModel`
 * (`effect/ai`): from one function that answers a whole request at once
 * (no provider here streams), with `streamText` served from that same answer.
 */
import { Effect, Stream } from "effect"
import { type AiError, type IdGenerator, LanguageModel, type Response } from "effect/ai"

/** The parts our providers produce (a subset of `Response.PartEncoded`). */
export type OutputPart =
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

/**
 * A `LanguageModel` whose `generateText` is `generate` and whose `streamText`
 * emits the same answer as stream parts (each text part as start, one delta,
 * end), from one call of `generate`. Errors: those of `generate` (`AiError`).
 */
export const fromGenerate = (
  generate: (
    options: LanguageModel.ProviderOptions
  ) => Effect.Effect<Array<OutputPart>, AiError.AiError, IdGenerator.IdGenerator>
): Effect.Effect<LanguageModel.LanguageModel> =>
  LanguageModel.make({
    generateText: generate,
    streamText: (options) => Stream.fromIterableEffect(Effect.map(generate(options), toStreamParts))
  })
