/**
 * The errors of the sessions domain (conversations.md "Sessions"; DECISIONS.md D1, D4, D5),
 * each a `Schema.TaggedError` with its status and `*.Wire`, the `{detail}`
 * body an endpoint lists (`Domain/Errors.ts` says how). Imports only `effect`
 * and `Domain/`: a contract file.
 */
import { Schema } from "effect"
import { asDetail, detailDefault } from "../Domain/Errors.ts"

/** 404 `Session not found` (D1). */
export class SessionNotFound extends Schema.TaggedError<SessionNotFound>()(
  "SessionNotFound",
  { detail: detailDefault("Session not found") },
  { httpApiStatus: 404 }
) {
  static readonly Wire = SessionNotFound.pipe(asDetail(Schema.Literal("Session not found")))
}

/** 400 `Session is not open` (D5), or `Session is closed and cannot be reopened` (D4). */
export class SessionNotOpen extends Schema.TaggedError<SessionNotOpen>()(
  "SessionNotOpen",
  { detail: detailDefault("Session is not open") },
  { httpApiStatus: 400 }
) {
  static readonly Wire = SessionNotOpen.pipe(
    asDetail(Schema.Literals(["Session is not open", "Session is closed and cannot be reopened"]))
  )
  static readonly cannotReopen = () => new SessionNotOpen({ detail: "Session is closed and cannot be reopened" })
}
