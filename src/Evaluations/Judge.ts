/**
 * The judge of an evaluation (DECISIONS.md A17): for a changed turn, the
 * configured model (R3, the process's `AI_MODEL`) is asked whether the
 * candidate's reply is `better`, `same` or `worse` than the baseline's for
 * that history, with the evaluation's `judge.instructions` as the rubric.
 * The model's calls go through the runtime's `generate` (the same retries as
 * a run's). The verdict is the first of the three words the answer holds; an
 * answer with none of them, or a model that fails after its retries, gives
 * no verdict (null).
 */
import { Effect } from "effect"
import type { Verdict } from "../Domain/Evaluation.ts"
import type { HistoryEntry } from "../Messages/Messages.ts"
import { Models } from "../Runtime/Models.ts"
import { generate } from "../Runtime/Walk.ts"

/** The system prompt of a judge call: the rubric, then how to answer. */
const judgeSystemPrompt = (instructions: string) =>
  `You compare two replies of an assistant to the same conversation.\nRubric:\n${instructions}\n\n` +
  "Answer with exactly one word: better if reply B is better than reply A, worse if it is worse, same otherwise."

/** The conversation and the two replies, as the judge reads them. */
const judgeUserPrompt = (history: ReadonlyArray<HistoryEntry>, baseline: string, candidate: string) =>
  `Conversation:\n${history.map((entry) => `${entry.role}: ${entry.text}`).join("\n")}\n\n` +
  `Reply A:\n${baseline}\n\nReply B:\n${candidate}`

/** The verdict an answer names first, or null. */
export const verdictOf = (answer: string): Verdict | null => {
  const match = /\b(better|same|worse)\b/i.exec(answer)
  return match === null ? null : (match[1]!.toLowerCase() as Verdict)
}

/**
 * A17: the judge's verdict on `candidate` against `baseline` (reply texts)
 * after `history`, graded by `instructions`; null when the model names none
 * or fails. Requires `Models`.
 */
export const judgeTurn = (input: {
  readonly instructions: string
  readonly history: ReadonlyArray<HistoryEntry>
  readonly baseline: string
  readonly candidate: string
}): Effect.Effect<Verdict | null, never, Models> =>
  Effect.gen(function* () {
    const chosen = yield* (yield* Models).forNode(undefined)
    const answer = yield* generate(
      chosen.model,
      [
        { role: "system", content: judgeSystemPrompt(input.instructions) },
        {
          role: "user",
          content: [{ type: "text", text: judgeUserPrompt(input.history, input.baseline, input.candidate) }]
        }
      ],
      undefined
    )
    return verdictOf(answer.text)
  }).pipe(Effect.catchTag("RunFailed", () => Effect.succeed(null)))
