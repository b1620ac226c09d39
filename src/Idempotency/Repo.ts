/**
 * SQL of Idempotency-Key (D19): the claim of a key, the kept answer and the
 * sweep of expired answers (table `idempotency_keys`, migration 0010).
 */
import { PgClient } from "@effect/sql-pg"
import { Context, Effect, Layer } from "effect"
import type { SqlError } from "effect/sql"
import { organizationOfTokenSql } from "../Admin/Repo.ts"

/** How long an answer is kept (D19): 24 hours. */
export const KEPT_FOR_HOURS = 24

/** An answer as kept: the request's fingerprint, and the status, content type and bytes sent. */
export interface KeptAnswer {
  readonly fingerprint: Uint8Array
  readonly status: number
  readonly contentType: string
  readonly body: Uint8Array
}

/**
 * What a claim found for an API key's token and an `Idempotency-Key`:
 * `undefined` when the token is no live key (the request answers 401);
 * else the key's organization, whether this transaction now holds the key
 * (`acquired`; false while another transaction, in any process, holds it) and
 * the answer kept for it, if any and not expired.
 */
export type Claim =
  | undefined
  | { readonly organizationId: string; readonly acquired: boolean; readonly kept: KeptAnswer | undefined }

/**
 * The claim, in one round trip inside the caller's transaction: the token's
 * organization (the API-key check of `AdminRepo`, {@link organizationOfTokenSql}),
 * a try of the advisory transaction lock of (organization, key), and the kept
 * answer. $1 token hash, $2 key. The lock's 64-bit hash covers a JSON array,
 * as ingest's does (D9), tagged so the two never mean the same lock; a
 * collision only answers 409 to a request that could have run.
 */
const claimSql = `SELECT a.organization_id,
  pg_try_advisory_xact_lock(hashtextextended(json_build_array('idempotency', a.organization_id, $2::text)::text, 0)) AS acquired,
  k.fingerprint, k.status, k.content_type, k.body
FROM (${organizationOfTokenSql}) a
LEFT JOIN idempotency_keys k
  ON k.organization_id = a.organization_id::uuid AND k.key = $2::text AND k.expires_at > statement_timestamp()`

/**
 * Keeps an answer for (organization, key), replacing an expired one; answers
 * no row when a live answer is there (kept by a transaction that committed
 * after the claim's snapshot was taken).
 */
const keepSql = `INSERT INTO idempotency_keys (organization_id, key, fingerprint, status, content_type, body, expires_at)
VALUES ($1::uuid, $2::text, $3::bytea, $4::int4, $5::text, $6::bytea, statement_timestamp() + interval '${KEPT_FOR_HOURS} hours')
ON CONFLICT (organization_id, key) DO UPDATE SET fingerprint = EXCLUDED.fingerprint, status = EXCLUDED.status,
  content_type = EXCLUDED.content_type, body = EXCLUDED.body, created_at = statement_timestamp(),
  expires_at = EXCLUDED.expires_at
WHERE idempotency_keys.expires_at <= statement_timestamp()
RETURNING 1 AS kept`

/** Deletes at most $1 expired answers (oldest expiry first); answers how many. */
const sweepSql = `WITH expired AS (
  SELECT organization_id, key FROM idempotency_keys WHERE expires_at <= statement_timestamp()
  ORDER BY expires_at LIMIT $1::int4
)
DELETE FROM idempotency_keys k USING expired e
WHERE k.organization_id = e.organization_id AND k.key = e.key
RETURNING 1 AS deleted`

/** The idempotency repository (D19). */
export class IdempotencyRepo extends Context.Service<
  IdempotencyRepo,
  {
    /** The {@link Claim} of `key` for the token with SHA-256 `tokenHash`; inside a transaction only. */
    readonly claim: (tokenHash: Uint8Array, key: string) => Effect.Effect<Claim, SqlError.SqlError>
    /**
     * Keeps `answer` for (organization, key) for {@link KEPT_FOR_HOURS} hours,
     * in the caller's transaction; false when a live answer is already kept.
     */
    readonly keep: (
      organizationId: string,
      key: string,
      answer: KeptAnswer
    ) => Effect.Effect<boolean, SqlError.SqlError>
    /** Deletes at most `limit` expired answers; answers how many it deleted. */
    readonly sweep: (limit: number) => Effect.Effect<number, SqlError.SqlError>
  }
>()("parley/Idempotency/IdempotencyRepo") {
  /** The repository on PostgreSQL. Requires `PgClient`. */
  static readonly layer = Layer.effect(
    IdempotencyRepo,
    Effect.gen(function* () {
      const sql = yield* PgClient.PgClient
      return IdempotencyRepo.of({
        claim: (tokenHash, key) =>
          Effect.map(
            sql.unsafe<{
              organization_id: string
              acquired: boolean
              fingerprint: Uint8Array | null
              status: number | null
              content_type: string | null
              body: Uint8Array | null
            }>(claimSql, [tokenHash, key]),
            ([row]): Claim =>
              row === undefined
                ? undefined
                : {
                    organizationId: row.organization_id,
                    acquired: row.acquired,
                    kept:
                      row.fingerprint === null
                        ? undefined
                        : {
                            fingerprint: row.fingerprint,
                            status: row.status!,
                            contentType: row.content_type!,
                            body: row.body!
                          }
                  }
          ),
        keep: (organizationId, key, answer) =>
          Effect.map(
            sql.unsafe(keepSql, [
              organizationId,
              key,
              answer.fingerprint,
              answer.status,
              answer.contentType,
              answer.body
            ]),
            (rows) => rows.length > 0
          ),
        sweep: (limit) => Effect.map(sql.unsafe(sweepSql, [limit]), (rows) => rows.length)
      })
    })
  )
}
