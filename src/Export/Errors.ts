/**
 * The errors of bulk export (D14),
 * each a `Schema.TaggedError` with its status and `*.Wire`, the `{detail}`
 * body an endpoint lists (`Domain/Errors.ts` says how). Imports only `effect`
 * and `Domain/`: a contract file.
 */
import { Schema } from "effect"
import { asDetail, detailDefault } from "../Domain/Errors.ts"

/** 400 `Invalid cursor` (D14): an export `after_id` that is unknown or another organization's. */
export class InvalidCursor extends Schema.TaggedError<InvalidCursor>()(
  "InvalidCursor",
  { detail: detailDefault("Invalid cursor"), after_id: Schema.optionalKey(Schema.String) },
  { httpApiStatus: 400 }
) {
  static readonly Wire = InvalidCursor.pipe(asDetail(Schema.Literal("Invalid cursor")))
}
