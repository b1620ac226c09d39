/**
 * The `Idempotency-Key` request header (DECISIONS.md D19): its value rule, its
 * fixed responses and its description, used by the server (`src/Idempotency/`)
 * and the OpenAPI document (`src/OpenApi.ts`).
 */
import { Context } from "effect"
import type { ValidationIssue } from "./Errors.ts"

/** The request header (lower case, as Node gives headers). */
export const IDEMPOTENCY_KEY_HEADER = "idempotency-key"

/** The response header of a replay. */
export const REPLAYED_HEADER = "idempotent-replayed"

/** A key as D19 allows it: 1-255 visible ASCII characters (0x21-0x7e). */
const KEY = /^[\x21-\x7e]{1,255}$/

/** Whether `value` is a valid `Idempotency-Key` (D19). */
export const isIdempotencyKey = (value: string): boolean => KEY.test(value)

/** The 422 problem of a key that is not 1-255 visible ASCII characters (D19). */
export const invalidKeyIssue: ValidationIssue = {
  loc: ["header", IDEMPOTENCY_KEY_HEADER],
  msg: "Idempotency-Key must be 1-255 visible ASCII characters",
  type: "value_error"
}

/** The fixed `detail` texts of D19's responses. */
export const idempotencyDetails = {
  inProgress: "A request with this Idempotency-Key is in progress",
  differentRequest: "Idempotency-Key was used with a different request"
} as const

/**
 * Seconds a client waits before repeating a request whose key is in progress:
 * the 409's `Retry-After` (D19, issue 38 item 6).
 */
export const IN_PROGRESS_RETRY_AFTER_SECONDS = 1

/** The header's description in the OpenAPI document. */
export const idempotencyKeyDescription =
  "Makes the request safe to retry (D19): the first response for this key is stored 24 hours per organization; a repeat with the same method, path and body (compared as canonical JSON) gets it again, status and bytes, with `Idempotent-Replayed: true`, and changes nothing. The same key with another request gets 422; a repeat while the first still runs, 409. 401, 413, 415, 422, 429 and 5xx responses are not stored (a retry runs again). 1-255 visible ASCII characters, such as a UUID."

/** A response as stored (D19): the request's fingerprint, and the status, content type and bytes sent. */
export interface StoredResponse {
  readonly fingerprint: Uint8Array
  readonly status: number
  readonly contentType: string
  readonly body: Uint8Array
}

/**
 * What a statement that stores its own response found instead of running
 * (D19): the key held by another transaction (`in-progress`), a live response
 * stored for it (to replay, or 422 when the fingerprints differ), or a unique
 * violation on the stored response (`conflict`: a response committed
 * meanwhile, or an expired one not swept yet).
 */
export type StatementOutcome = "in-progress" | "conflict" | StoredResponse

/**
 * The Idempotency-Key of the current request, for an operation whose own
 * statement claims the key and stores its response (POST message, the measured hot
 * path: `npm run bench`); provided by `Idempotency.around` to those routes
 * only. `outcome` is set by that statement when it did not run the operation.
 */
export class IdempotencyRequest extends Context.Service<
  IdempotencyRequest,
  {
    readonly key: string
    readonly fingerprint: Uint8Array
    outcome: StatementOutcome | undefined
  }
>()("parley/Domain/IdempotencyRequest") {}
