/**
 * Database outages an operator can read (DECISIONS.md O9): while PostgreSQL
 * cannot be reached, API requests get 503 `{"detail":"Service unavailable"}`
 * with `Retry-After: 1` (`src/Http.ts`), workers keep retrying quietly, and the
 * log carries one WARN when the outage starts and one INFO when it ends, not a
 * line per request or per retry.
 *
 * An outage starts when any failure is an unreachable database
 * ({@link isUnavailable}): a connection refused or reset, a server going
 * away, a connection not made within `DATABASE_CONNECT_TIMEOUT`, or an API
 * request with no response within `REQUEST_TIMEOUT` ({@link DatabaseTimeout},
 * issue 38 item 1: a database that does not respond within a bound cannot be
 * reached). It ends when a probe (`SELECT 1` every second while down) succeeds.
 * The probe runs on a fiber of its own, started with the service, so the end of
 * an outage belongs to no request: its INFO carries no request id (issue 38 item 6).
 */
import { Cause, Clock, Context, Data, Duration, Effect, Layer, Queue, Ref } from "effect"
import { SqlClient } from "effect/sql"
import * as SqlError from "effect/sql/SqlError"

/** SQLSTATEs of a server that is going away or not taking connections: admin/crash shutdown, starting up, too many connections. */
const UNAVAILABLE_STATES = new Set(["57P01", "57P02", "57P03", "53300"])

/** Socket errors of a database that cannot be reached. */
const UNREACHABLE_CODES = new Set([
  "ECONNREFUSED",
  "ECONNRESET",
  "EPIPE",
  "ETIMEDOUT",
  "EHOSTUNREACH",
  "ENETUNREACH",
  "ENOTFOUND",
  "EAI_AGAIN"
])

/**
 * An API request that got no response from the database within
 * `REQUEST_TIMEOUT` (issue 38 item 1, O9): its statements were abandoned and
 * it responds 503. Counted as an unreachable database ({@link isUnavailable}).
 */
export class DatabaseTimeout extends Data.TaggedError("DatabaseTimeout")<{
  /** The bound that passed. */
  readonly timeout: Duration.Duration
}> {
  override get message() {
    return `no response within ${Duration.format(this.timeout)}`
  }
}

const codeOf = (value: unknown): unknown =>
  typeof value === "object" && value !== null ? (value as { code?: unknown }).code : undefined

/** Whether `error` says the database cannot be reached (a connection failure, or a server going away). */
const isUnavailableError = (error: unknown): boolean => {
  if (error instanceof DatabaseTimeout) return true
  if (!SqlError.isSqlError(error)) return false
  const reason = error.reason
  if (reason._tag === "ConnectionError") return true
  const code = codeOf(reason.cause)
  return typeof code === "string" && (UNAVAILABLE_STATES.has(code) || UNREACHABLE_CODES.has(code))
}

/** Whether `cause` failed or died because the database cannot be reached (O9). */
export const isUnavailable = (cause: Cause.Cause<unknown>): boolean =>
  cause.reasons.some(
    (reason) =>
      (reason._tag === "Fail" && isUnavailableError(reason.error)) ||
      (reason._tag === "Die" && isUnavailableError(reason.defect))
  )

/**
 * Whether `cause` failed because the database refused the work for now, not
 * because it cannot be reached: a lock held past `DATABASE_LOCK_TIMEOUT`
 * (SQLSTATE 55P03), a statement past `DATABASE_STATEMENT_TIMEOUT` (57014), a
 * deadlock (40P01, on Citus also a distributed one) or a serialization failure
 * (40001): the reasons `effect/sql` marks retryable, other than a connection
 * failure ({@link isUnavailable}). An API request that fails so answers 503
 * with `Retry-After: 1` (`src/Http.ts`), without starting an outage: the
 * same request may well succeed at once.
 */
export const isContention = (cause: Cause.Cause<unknown>): boolean =>
  cause.reasons.some((reason) => {
    const error = reason._tag === "Fail" ? reason.error : reason._tag === "Die" ? reason.defect : undefined
    return SqlError.isSqlError(error) && error.reason._tag !== "ConnectionError" && error.reason.isRetryable
  })

/** A one-line description of an unavailable database's failure, for the outage's WARN. */
const describe = (cause: Cause.Cause<unknown>): string => {
  for (const reason of cause.reasons) {
    const error = reason._tag === "Fail" ? reason.error : reason._tag === "Die" ? reason.defect : undefined
    if (error instanceof DatabaseTimeout) return error.message
    if (SqlError.isSqlError(error)) {
      const inner = error.reason.cause
      const detail = inner instanceof Error ? inner.message : String(inner)
      return `${error.reason.message ?? error.reason._tag}${detail ? ` (${detail})` : ""}`.replace(/\s+/g, " ")
    }
  }
  return "unknown failure"
}

/** How often the database is probed while it is down, in ms. */
const PROBE_INTERVAL_MS = 1_000

/** Tracks whether the database is reachable (see module docs). */
export class DatabaseHealth extends Context.Service<
  DatabaseHealth,
  {
    /**
     * Whether `cause` is an unreachable database (O9). The first such failure
     * of an outage logs one WARN (its cause at debug level) and starts the
     * probe that logs the INFO at its end.
     */
    readonly isOutage: (cause: Cause.Cause<unknown>) => Effect.Effect<boolean>
    /** Whether an outage is under way. */
    readonly down: Effect.Effect<boolean>
  }
>()("parley/Database/DatabaseHealth") {
  /** Requires `SqlClient` (for the probe). */
  static readonly layer = Layer.effect(
    DatabaseHealth,
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      const since = yield* Ref.make<number | undefined>(undefined)
      /** Offered when an outage starts; the probe's fiber waits on it. */
      const started = yield* Queue.sliding<void>(1)

      const probe = Effect.gen(function* () {
        for (;;) {
          yield* Effect.sleep(PROBE_INTERVAL_MS)
          const ok = yield* sql`SELECT 1`.pipe(
            Effect.timeout("2 seconds"),
            Effect.as(true),
            Effect.catchCause(() => Effect.succeed(false))
          )
          if (!ok) continue
          const began = yield* Ref.getAndSet(since, undefined)
          const now = yield* Clock.currentTimeMillis
          yield* Effect.logInfo(`Database reachable again after ${((now - (began ?? now)) / 1000).toFixed(1)} s`)
          return
        }
      })
      // Forked here, not by the request that found the outage: none of a request's annotations.
      yield* Effect.forkScoped(Effect.forever(Effect.andThen(Queue.take(started), probe)))

      const isOutage = (cause: Cause.Cause<unknown>) =>
        Effect.suspend(() => {
          if (!isUnavailable(cause)) return Effect.succeed(false)
          return Effect.flatMap(Clock.currentTimeMillis, (now) =>
            Ref.modify(since, (current) => [current === undefined, current ?? now] as const).pipe(
              Effect.flatMap((first) =>
                first
                  ? Effect.logWarning(
                      `Database unreachable: ${describe(cause)}; requests answer 503 until it is back`
                    ).pipe(
                      Effect.andThen(Effect.logDebug("Database outage cause", cause)),
                      Effect.andThen(Queue.offer(started, undefined)),
                      Effect.as(true)
                    )
                  : Effect.succeed(true)
              )
            )
          )
        })

      return DatabaseHealth.of({ isOutage, down: Effect.map(Ref.get(since), (value) => value !== undefined) })
    })
  )
}

/**
 * Logs a background failure at WARN with its cause, unless it is a database
 * outage, which {@link DatabaseHealth} reports once (O9). Interruptions pass
 * through.
 */
export const logUnlessOutage = (message: string, cause: Cause.Cause<unknown>) =>
  Effect.gen(function* () {
    if (Cause.hasInterruptsOnly(cause)) return yield* Effect.failCause(cause as Cause.Cause<never>)
    const health = yield* DatabaseHealth
    if (!(yield* health.isOutage(cause))) yield* Effect.logWarning(message, cause)
  })
