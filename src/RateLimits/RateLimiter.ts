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
 *
 * Refusals from memory (issue 38 item 4): a lease that finds the bucket
 * without a whole token tells when it can hold one again (`(1 - tokens) /
 * rate` seconds later, at most {@link LEASE_MS}); until then the process
 * refuses the organization's requests itself, and those bearing an API key it
 * refused since that lease before they are authenticated ({@link
 * RateLimiter} `refusalOf`: no database round trip, no span, no body read), so
 * a hammering organization costs the others little. A bucket cannot refill
 * earlier, and processes only take from it, so this never refuses what the
 * bucket would allow. When that moment comes, one request per key (a probe)
 * goes on to the database; the key's other requests are still refused while
 * it is under way, for at most one more token's time (`1 / rate` s), which the
 * probe takes if it is allowed. A refusal from memory is held until the
 * refusal it rests on ends ({@link Refusal}): refusing cheaply is not enough
 * against a client that repeats at once, which then repeats faster
 * (`npm run bench -- fairness`). A key is remembered only until the refusal it
 * was authenticated for ends, and forgotten at its first 401, so a revoked or
 * expired key gets 429 instead of 401 for at most one refill interval of its
 * organization (`1 / rate` s, at most 1 s) after its last authentication.
 */
import * as crypto from "node:crypto"
import { PgClient } from "@effect/sql-pg"
import { Clock, Context, Deferred, Effect, Layer } from "effect"
import type { HttpServerRequest } from "effect/http"
import type { SqlError } from "effect/sql"
import { isOrganizationApiPath } from "../Domain/BasePaths.ts"

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
 * Returns the tokens granted and left, the rate and the burst. The update
 * caps its grant by `EXCLUDED.granted` (the tokens asked for, capped by the
 * burst, which caps the tokens available anyway) rather than by $2: Citus
 * sends the update to the shard without the parameters it pruned by, and a
 * parameter left only in DO UPDATE fails there ("could not determine data
 * type of parameter $1", O11).
 */
const available = `least(EXCLUDED.burst, b.tokens + EXCLUDED.rate * greatest(0, extract(epoch FROM EXCLUDED.updated_at - b.updated_at)))`
const leaseSql = `INSERT INTO rate_limit_buckets AS b (organization_id, rate, burst, tokens, granted, updated_at)
SELECT s.organization_id, s.rate_limit_per_second, s.burst, s.burst - least(s.burst, $2::int4), least(s.burst, $2::int4), clock_timestamp()
FROM (SELECT organization_id, rate_limit_per_second, coalesce(rate_limit_burst, 2 * rate_limit_per_second) AS burst
  FROM organization_settings WHERE organization_id = $1::uuid AND rate_limit_per_second IS NOT NULL) s
ON CONFLICT (organization_id) DO UPDATE SET
  rate = EXCLUDED.rate, burst = EXCLUDED.burst,
  granted = least(floor(${available})::int4, EXCLUDED.granted),
  tokens = ${available} - least(floor(${available})::int4, EXCLUDED.granted),
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

/**
 * A refusal from memory (issue 38 item 4): its {@link Verdict}, and how long
 * to hold its response (ms): until the refusal it rests on ends, so a client
 * that repeats a refused request at once waits as its bucket does, instead of
 * taking the server's time with a stream of 429s.
 */
export interface Refusal {
  readonly verdict: Verdict
  readonly holdMs: number
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
  /** Until when the bucket cannot hold a whole token (ms), as the latest refused lease found it; 0 = not known. */
  refusedUntil: number
  /** When the latest lease was sent (ms): `left` is the bucket as of then. */
  leasedAt: number
}

/** An API key this process refused (by the SHA-256 of its request's `Authorization` header). */
interface RefusedKey {
  /** Its organization's bucket. */
  readonly entry: Entry
  /** The end of the refusal the key was authenticated for (ms): from then on it is authenticated again. */
  until: number
  /** Whether a request bearing the key is on its way to the database after `until` (the probe). */
  probing: boolean
}

/** The key of a request's `Authorization` header in the memory of refused keys (no secret is kept). */
const keyOf = (authorization: string): string => crypto.createHash("sha256").update(authorization).digest("base64")

/** The rate limiter (D20). */
export class RateLimiter extends Context.Service<
  RateLimiter,
  {
    /**
     * Takes a token of `organizationId`'s bucket: undefined when the
     * organization has no limit, else the {@link Verdict}. Without a lease
     * while the bucket is known to be empty. `authorization` is the request's
     * `Authorization` header, its key just authenticated: a refused one is
     * remembered for {@link RateLimiter} `refusalOf`. Fails with `SqlError`
     * when a lease cannot be made.
     */
    readonly take: (
      organizationId: string,
      authorization?: string | undefined
    ) => Effect.Effect<Verdict | undefined, SqlError.SqlError>
    /**
     * The {@link Refusal} of a request to the conversations or assistants
     * API bearing a key refused since the bucket's latest refused lease,
     * decided from memory before the request is authenticated (issue 38 item
     * 4, see the module docs); undefined when the request must go on. The
     * same answer for every call with one request, so the server span (not
     * made for a refusal) and the response agree.
     */
    readonly refusalOf: (request: HttpServerRequest.HttpServerRequest) => Refusal | undefined
    /** Forgets a refused key whose request got 401 (revoked or expired since), so its next requests get 401 too. */
    readonly forget: (authorization: string | undefined) => void
    /** How many organizations this process keeps state for (those served within about {@link IDLE_MS}). */
    readonly tracked: () => number
  }
>()("parley/RateLimits/RateLimiter") {
  /** The limiter over PostgreSQL, its per-process state in this layer. Requires `PgClient`. */
  static readonly layer = Layer.effect(
    RateLimiter,
    Effect.gen(function* () {
      const sql = yield* PgClient.PgClient
      // `refusalOf` runs outside any effect (the server's tracer asks it): it reads the layer's clock.
      const clock = yield* Clock.Clock
      const entries = new Map<string, Entry>()
      const refusedKeys = new Map<string, RefusedKey>()
      /** `refusalOf`'s answers, per request, once it looked the request's key up (null: go on). */
      const decided = new WeakMap<HttpServerRequest.HttpServerRequest, Refusal | null>()
      /** When the next look for idle organizations is due (ms). */
      let nextSweep = 0

      /** A refused key whose refusal and probe time are over: its next request is authenticated as any other. */
      const isStale = (refused: RefusedKey, now: number) => now >= refused.until + 1000 / refused.entry.rate

      /** Drops the organizations with no request for {@link IDLE_MS} and no lease under way, and stale refused keys. */
      const sweep = (now: number) => {
        nextSweep = now + IDLE_MS
        for (const [organizationId, entry] of entries) {
          if (entry.leasing === undefined && entry.seenAt + IDLE_MS <= now) {
            entries.delete(organizationId)
          }
        }
        for (const [key, refused] of refusedKeys) {
          if (isStale(refused, now)) refusedKeys.delete(key)
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

      /** A refusal at `now` (ms) of an organization whose latest lease was refused: the bucket refilled since that lease. */
      const refusalAt = (entry: Entry, now: number): Verdict => {
        const left = Math.min(entry.burst, entry.left + (entry.rate * Math.max(0, now - entry.leasedAt)) / 1000)
        return {
          allowed: false,
          limit: entry.burst,
          remaining: 0,
          reset: Math.ceil(Math.max(0, entry.burst - left) / entry.rate),
          retryAfter: Math.max(1, Math.ceil((1 - left) / entry.rate))
        }
      }

      /** The bucket must be asked: what the process knows does not decide. */
      const LEASE = Symbol("lease")

      /** A verdict from what the process knows of the organization at `now`, else {@link LEASE}. */
      const settle = (entry: Entry, now: number): Verdict | undefined | typeof LEASE => {
        if (entry.unlimitedUntil > now) return undefined
        if (entry.tokens >= 1 && entry.tokensUntil > now) {
          entry.tokens -= 1
          return verdictOf(entry, true)
        }
        if (now < entry.refusedUntil) return refusalAt(entry, now)
        return LEASE
      }

      /**
       * The verdict's mark on the request's key (`authorization`, just
       * authenticated): a refused key is remembered until the refusal ends;
       * an allowed one ends its probe.
       */
      const note = (entry: Entry, authorization: string | undefined, verdict: Verdict | undefined) => {
        if (authorization === undefined || verdict === undefined || (verdict.allowed && refusedKeys.size === 0)) {
          return verdict
        }
        const key = keyOf(authorization)
        if (!verdict.allowed) {
          refusedKeys.set(key, { entry, until: entry.refusedUntil, probing: false })
        } else {
          const refused = refusedKeys.get(key)
          if (refused !== undefined) refused.probing = false
        }
        return verdict
      }

      const take = (organizationId: string, authorization?: string | undefined) =>
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
              leasing: undefined,
              refusedUntil: 0,
              leasedAt: 0
            }
            entries.set(organizationId, entry)
          }
          entry.seenAt = now
          const settled = settle(entry, now)
          if (settled !== LEASE) return Effect.succeed(note(entry, authorization, settled))
          const current = entry
          // One lease at a time per organization and process: the requests arriving meanwhile take from its
          // result (unlimited, tokens left, or refused), and lease themselves only when it left them nothing.
          if (current.leasing !== undefined) {
            return Deferred.await(current.leasing).pipe(
              Effect.andThen(takeAfterLease(current, organizationId, authorization))
            )
          }
          return lease(current, organizationId, authorization, now)
        })

      /** After another request's lease: its result if it decides this request, else a lease of this request's own. */
      const takeAfterLease = (entry: Entry, organizationId: string, authorization: string | undefined) =>
        Effect.flatMap(Clock.currentTimeMillis, (now): Effect.Effect<Verdict | undefined, SqlError.SqlError> => {
          const settled = settle(entry, now)
          if (settled !== LEASE) return Effect.succeed(note(entry, authorization, settled))
          return lease(entry, organizationId, authorization, now)
        })

      /**
       * Leases a chunk of the bucket ({@link leaseSql}), sent at `now` (ms), and
       * takes one token of it. A lease that gets none also learns until when
       * the bucket cannot hold a token: `(1 - tokens) / rate` seconds after
       * `now` (the lease ran later, so the bucket refills no earlier), at most
       * {@link LEASE_MS} so a changed limit still applies within it.
       */
      const lease = (current: Entry, organizationId: string, authorization: string | undefined, now: number) =>
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
              current.leasedAt = now
              if (row.granted === 0) {
                current.tokens = 0
                current.refusedUntil = now + Math.min(LEASE_MS, Math.floor(((1 - row.tokens) * 1000) / row.rate))
                return note(current, authorization, refusalAt(current, now))
              }
              current.tokens = row.granted - 1
              current.tokensUntil = now + LEASE_MS
              return note(current, authorization, verdictOf(current, true))
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

      const refusalOf = (request: HttpServerRequest.HttpServerRequest): Refusal | undefined => {
        if (refusedKeys.size === 0) return undefined
        const known = decided.get(request)
        if (known !== undefined) return known ?? undefined
        const authorization = request.headers.authorization
        if (authorization === undefined || !isOrganizationApiPath(request.url)) return undefined
        const key = keyOf(authorization)
        const refused = refusedKeys.get(key)
        if (refused === undefined) {
          // The tracer and the middleware both ask: hash the header once per request.
          decided.set(request, null)
          return undefined
        }
        const verdict = decide(refused, key, clock.currentTimeMillisUnsafe())
        decided.set(request, verdict ?? null)
        return verdict
      }

      /**
       * A request of a refused key at `now` (ms): refused while its refusal
       * lasts, held until it ends; then the first one goes on (the probe) and
       * the others are refused while it is under way, for one more token's
       * time at most (held until then), unless the process holds tokens of the
       * organization.
       */
      const decide = (refused: RefusedKey, key: string, now: number): Refusal | undefined => {
        const entry = refused.entry
        let holdUntil = refused.until
        if (now >= refused.until) {
          // Stale, or a lease found the limit lifted: the key is no longer refused.
          if (isStale(refused, now) || entry.unlimitedUntil > now) {
            refusedKeys.delete(key)
            return undefined
          }
          if (entry.tokens >= 1 && entry.tokensUntil > now) return undefined
          if (!refused.probing) {
            refused.probing = true
            return undefined
          }
          holdUntil = refused.until + 1000 / entry.rate
        }
        entry.seenAt = now
        return { verdict: refusalAt(entry, now), holdMs: Math.min(LEASE_MS, Math.max(0, holdUntil - now)) }
      }

      const forget = (authorization: string | undefined) => {
        if (authorization !== undefined && refusedKeys.size > 0) refusedKeys.delete(keyOf(authorization))
      }

      return RateLimiter.of({ take, refusalOf, forget, tracked: () => entries.size })
    })
  )
}
