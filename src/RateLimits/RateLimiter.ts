/**
 * Rate limits per organization (DECISIONS.md D20, issue 15 item 2): a token
 * bucket of `rate_limit_burst` tokens (default twice the rate) refilled at
 * `rate_limit_per_second`, over every conversations and assistants request of
 * the organization, shared by every process on the database.
 *
 * The bucket lives in `rate_limit_buckets`; a process leases tokens from it in
 * small chunks (one statement: refill by the time since the last lease, take
 * up to {@link chunkOf} tokens) and spends them locally, so most requests cost
 * no round trip. Leases never take more than the bucket holds, so over any
 * window the organization gets at most what one bucket allows
 * (`burst + rate x seconds`), however many processes there are. Tokens a
 * process leased but did not spend within {@link LEASE_MS} are dropped (the
 * organization gets less, never more). Settings are read by every lease: a
 * changed limit applies within {@link LEASE_MS} (an unlimited organization is
 * looked at again after that long). What a process knows of an organization
 * it has not served for {@link IDLE_MS} is dropped, so its memory follows the
 * organizations it serves, not every one it ever served.
 */
import { PgClient } from "@effect/sql-pg"
import { Clock, Context, Deferred, Effect, Layer } from "effect"
import type { SqlError } from "effect/sql"

/** The names of the headers of a response to a limited organization (D20), lower case. */
export const rateLimitHeaderNames = {
  limit: "ratelimit-limit",
  remaining: "ratelimit-remaining",
  reset: "ratelimit-reset"
} as const

/** How long leased tokens, and a lease's result "unlimited", are used by a process (ms). */
const LEASE_MS = 1_000

/**
 * How long a process keeps what it knows of an organization after its latest
 * request (ms), and how often it looks for such organizations: dropping one
 * only means its next request leases again, a first chunk of 1 token.
 */
const IDLE_MS = 60_000

/** Tokens a lease asks for: 2% of a second's rate (20 ms of traffic), at least 1. */
const chunkOf = (rate: number) => Math.max(1, Math.ceil(rate / 50))

/**
 * The lease (one statement): the organization's limit from its settings (no
 * row: unlimited), the bucket refilled by the seconds since its last lease
 * (full for a new bucket), then up to $2 whole tokens taken. Concurrent leases
 * of one organization serialize on the bucket's row; a lease that waited may
 * see a later `updated_at` than its own clock, and refills nothing then.
 * Returns the tokens granted and left, the rate and the burst.
 */
const available = `least(EXCLUDED.burst, b.tokens + EXCLUDED.rate * greatest(0, extract(epoch FROM EXCLUDED.updated_at - b.updated_at)))`
const leaseSql = `INSERT INTO rate_limit_buckets AS b (organization_id, rate, burst, tokens, granted, updated_at)
SELECT s.organization_id, s.rate_limit_per_second, s.burst, s.burst - least(s.burst, $2::int4), least(s.burst, $2::int4), clock_timestamp()
FROM (SELECT organization_id, rate_limit_per_second, coalesce(rate_limit_burst, 2 * rate_limit_per_second) AS burst
  FROM organization_settings WHERE organization_id = $1::uuid AND rate_limit_per_second IS NOT NULL) s
ON CONFLICT (organization_id) DO UPDATE SET
  rate = EXCLUDED.rate, burst = EXCLUDED.burst,
  granted = least(floor(${available})::int4, $2::int4),
  tokens = ${available} - least(floor(${available})::int4, $2::int4),
  updated_at = greatest(b.updated_at, EXCLUDED.updated_at)
RETURNING granted, tokens, rate, burst`

/**
 * A request's verdict (D20) for a limited organization: whether it may run,
 * and the `RateLimit-*` headers of its response (`limit`: the burst, the most
 * requests allowed at once; `remaining`: whole tokens left as this process last
 * saw the bucket; `reset`: seconds until the bucket is full again), plus
 * `retryAfter` (whole seconds, at least 1) when it may not.
 */
export interface Verdict {
  readonly allowed: boolean
  readonly limit: number
  readonly remaining: number
  readonly reset: number
  readonly retryAfter: number
}

/** What a process knows of an organization's bucket. */
interface Entry {
  /** When the organization's latest request took from it (ms). */
  seenAt: number
  /** Until when the organization is known to be unlimited (ms), or 0. */
  unlimitedUntil: number
  /** Tokens leased and not spent, usable until `tokensUntil` (ms). */
  tokens: number
  tokensUntil: number
  /** The latest lease's rate, burst, and tokens left in the bucket. */
  rate: number
  burst: number
  left: number
  /** The lease this process is making for the organization, if any: requests arriving meanwhile wait for it. */
  leasing: Deferred.Deferred<void> | undefined
}

/** The rate limiter (D20). */
export class RateLimiter extends Context.Service<
  RateLimiter,
  {
    /**
     * Takes a token of `organizationId`'s bucket: undefined when the
     * organization has no limit, else the {@link Verdict}. Fails with
     * `SqlError` when a lease cannot be made.
     */
    readonly take: (organizationId: string) => Effect.Effect<Verdict | undefined, SqlError.SqlError>
    /** How many organizations this process keeps state for (those served within about {@link IDLE_MS}). */
    readonly tracked: () => number
  }
>()("parley/RateLimits/RateLimiter") {
  /** The limiter over PostgreSQL, its per-process state in this layer. Requires `PgClient`. */
  static readonly layer = Layer.effect(
    RateLimiter,
    Effect.gen(function* () {
      const sql = yield* PgClient.PgClient
      const entries = new Map<string, Entry>()
      /** When the next look for idle organizations is due (ms). */
      let nextSweep = 0

      /** Drops the organizations with no request for {@link IDLE_MS} and no lease under way. */
      const sweep = (now: number) => {
        nextSweep = now + IDLE_MS
        for (const [organizationId, entry] of entries) {
          if (entry.leasing === undefined && entry.seenAt + IDLE_MS <= now) {
            entries.delete(organizationId)
          }
        }
      }

      const verdictOf = (entry: Entry, allowed: boolean): Verdict => {
        const remaining = Math.max(0, Math.floor(entry.left + entry.tokens))
        return {
          allowed,
          limit: entry.burst,
          remaining,
          reset: Math.ceil(Math.max(0, entry.burst - entry.left - entry.tokens) / entry.rate),
          retryAfter: Math.max(1, Math.ceil((1 - entry.left) / entry.rate))
        }
      }

      const take = (organizationId: string) =>
        Effect.flatMap(Clock.currentTimeMillis, (now): Effect.Effect<Verdict | undefined, SqlError.SqlError> => {
          if (now >= nextSweep) sweep(now)
          let entry = entries.get(organizationId)
          if (entry === undefined) {
            entry = {
              seenAt: now,
              unlimitedUntil: 0,
              tokens: 0,
              tokensUntil: 0,
              rate: 1,
              burst: 1,
              left: 0,
              leasing: undefined
            }
            entries.set(organizationId, entry)
          }
          entry.seenAt = now
          if (entry.unlimitedUntil > now) return Effect.succeed(undefined)
          if (entry.tokens >= 1 && entry.tokensUntil > now) {
            entry.tokens -= 1
            return Effect.succeed(verdictOf(entry, true))
          }
          const current = entry
          // One lease at a time per organization and process: the requests arriving meanwhile take from its
          // result (unlimited, or tokens left), and lease themselves only when it left them nothing.
          if (current.leasing !== undefined) {
            return Deferred.await(current.leasing).pipe(Effect.andThen(takeAfterLease(current, organizationId)))
          }
          return lease(current, organizationId, now)
        })

      /** After another request's lease: its result if it covers this request, else a lease of this request's own. */
      const takeAfterLease = (entry: Entry, organizationId: string) =>
        Effect.flatMap(Clock.currentTimeMillis, (now): Effect.Effect<Verdict | undefined, SqlError.SqlError> => {
          if (entry.unlimitedUntil > now) return Effect.succeed(undefined)
          if (entry.tokens >= 1 && entry.tokensUntil > now) {
            entry.tokens -= 1
            return Effect.succeed(verdictOf(entry, true))
          }
          return lease(entry, organizationId, now)
        })

      /** Leases a chunk of the bucket ({@link leaseSql}) and takes one token of it. */
      const lease = (current: Entry, organizationId: string, now: number) =>
        Effect.suspend(() => {
          const done = Deferred.makeUnsafe<void>()
          current.leasing = done
          return Effect.map(
            sql.unsafe<{ granted: number; tokens: number; rate: number; burst: number }>(leaseSql, [
              organizationId,
              chunkOf(current.rate)
            ]),
            ([row]): Verdict | undefined => {
              if (row === undefined) {
                current.unlimitedUntil = now + LEASE_MS
                current.tokens = 0
                return undefined
              }
              current.rate = row.rate
              current.burst = row.burst
              current.left = row.tokens
              if (row.granted === 0) {
                current.tokens = 0
                return verdictOf(current, false)
              }
              current.tokens = row.granted - 1
              current.tokensUntil = now + LEASE_MS
              return verdictOf(current, true)
            }
          ).pipe(
            Effect.ensuring(
              Effect.sync(() => {
                if (current.leasing === done) current.leasing = undefined
                Deferred.doneUnsafe(done, Effect.void)
              })
            )
          )
        })

      return RateLimiter.of({ take, tracked: () => entries.size })
    })
  )
}
