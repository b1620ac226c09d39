/**
 * The errors of the evaluations domain (DECISIONS.md A16), each a
 * `Schema.TaggedError` with its status and `*.Wire`, the `{detail}` body an
 * endpoint lists (`Domain/Errors.ts` says how). Imports only `effect` and
 * `Domain/`: a contract file.
 */
import { Schema } from "effect"
import { asDetail, detailDefault } from "../Domain/Errors.ts"

/** 404 `Evaluation not found`: unknown, another assistant's or another organization's (A16). */
export class EvaluationNotFound extends Schema.TaggedError<EvaluationNotFound>()(
  "EvaluationNotFound",
  { detail: detailDefault("Evaluation not found") },
  { httpApiStatus: 404 }
) {
  static readonly Wire = EvaluationNotFound.pipe(asDetail(Schema.Literal("Evaluation not found")))
}

/** 409 `Evaluation is already finished`: a DELETE of one completed, failed or cancelled (A16). */
export class EvaluationFinished extends Schema.TaggedError<EvaluationFinished>()(
  "EvaluationFinished",
  { detail: detailDefault("Evaluation is already finished") },
  { httpApiStatus: 409 }
) {
  static readonly Wire = EvaluationFinished.pipe(asDetail(Schema.Literal("Evaluation is already finished")))
}
