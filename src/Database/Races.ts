/**
 * Writes that race a concurrent delete (DECISIONS.md D21, D22; issue 40).
 *
 * POST /sessions and ingest find a contact's conversation in their
 * statement's snapshot and then insert a session into it. When the retention
 * sweeper (D21) or an erasure (D22) deletes that conversation and commits in
 * between, the insert's foreign-key check finds the row gone and PostgreSQL
 * refuses it with `foreign_key_violation` (SQLSTATE 23503). The write is then
 * simply run again: its new snapshot no longer sees the conversation, so it
 * makes a new one, as it would have had it started a moment later.
 */
import { Effect } from "effect"
import { SqlError } from "effect/sql"

/** Times a write is run again after a foreign-key violation before the error is let through. */
export const RETRIES_AFTER_DELETED_REFERENCE = 3

/** Whether `error` is PostgreSQL's `foreign_key_violation` (SQLSTATE 23503). */
export const isForeignKeyViolation = (error: unknown): boolean => {
  if (!SqlError.isSqlError(error)) return false
  const cause: unknown = error.reason.cause
  return typeof cause === "object" && cause !== null && (cause as { code?: unknown }).code === "23503"
}

/**
 * `write` run again, at most {@link RETRIES_AFTER_DELETED_REFERENCE} times,
 * while it fails with a foreign-key violation (see the module). `write` must
 * be a whole transaction or a single statement outside one: a failed
 * statement aborts its transaction. Other failures pass at once.
 */
export const retryWhileReferenceDeleted = <A, E, R>(write: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
  Effect.retry(write, { while: isForeignKeyViolation, times: RETRIES_AFTER_DELETED_REFERENCE })
