/**
 * SQL of Idempotency-Key (D19): the claim of a key, the stored response and
 * the sweep of expired responses (table `idempotency_keys`, migration 0010).
 */
import { PgClient } from "@effect/sql-pg"
import { Context, Effect, Layer } from "effect"
import type { SqlError } from "effect/sql"
import { fixedStatement } from "../Database/Statement.ts"
import type { StoredResponse } from "../Domain/Idempotency.ts"

/** How long a response is stored (D19): 24 hours. */
export const STORED_FOR_HOURS = 24

/**
 * What a claim of an organization's `Idempotency-Key` found: whether this
 * transaction now holds the key (`acquired`; false while another transaction,
 * in any process, holds it) and the response stored for it, if any and not
 * expired.
 */
export interface Claim {
  readonly acquired: boolean
  readonly stored: StoredResponse | undefined
}

/**
 * The advisory transaction lock of (organization, key): a try, true when
 * taken. Its 64-bit hash covers a JSON array, as ingest's lock does (D9),
 * tagged so the two never mean the same lock; a collision only responds 409 to
 * a request that could have run. `organizationId` is a text expression.
 */
const tryKeyLockSql = (organizationId: string, key: string) =>
  `pg_try_advisory_xact_lock(hashtextextended(json_build_array('idempotency', ${organizationId}, ${key})::text, 0))`

/** The live (not expired) stored response of (organization, key), as a row source. */
const liveResponseSql = (organizationId: string, key: string) =>
  `SELECT fingerprint, status, content_type, body FROM idempotency_keys
  WHERE organization_id = ${organizationId} AND key = ${key} AND expires_at > statement_timestamp()`

/** `expires_at` of a response stored now. */
const storedUntilSql = `statement_timestamp() + interval '${STORED_FOR_HOURS} hours'`

/** The head of an INSERT of stored responses, with every column of `idempotency_keys` but `created_at`. */
const insertStoredSql = `INSERT INTO idempotency_keys (organization_id, key, fingerprint, status, content_type, body, expires_at)`

/**
 * The conflict clause of an INSERT of {@link insertStoredSql} that replaces an
 * expired response of the same (organization, key) not swept yet, and leaves a
 * live one (the INSERT then returns no row for it). The moment comes in
 * through the proposed row (`EXCLUDED.created_at`, the column's default
 * `statement_timestamp()`): Citus refuses any function that is not IMMUTABLE
 * in DO UPDATE SET and its WHERE (O11).
 */
const replaceExpiredSql = `ON CONFLICT (organization_id, key) DO UPDATE SET fingerprint = EXCLUDED.fingerprint,
  status = EXCLUDED.status, content_type = EXCLUDED.content_type, body = EXCLUDED.body,
  created_at = EXCLUDED.created_at, expires_at = EXCLUDED.expires_at
WHERE idempotency_keys.expires_at <= EXCLUDED.created_at`

/**
 * SQL text of an `UPDATE` rewriting the live stored JSON responses of the
 * organization (a uuid expression) for which `matches` holds (an SQL boolean
 * over `k.body`, the response's bytes), each body replaced by the JSON text
 * `rewrite` gives for it (an SQL text expression over the json expression it
 * is given; null keeps the body). A repeat of the request then answers the
 * rewritten body: what a redaction (D23) does to the responses that carried a
 * message, the one exception to D19's byte-for-byte replay. Usable as a CTE.
 */
export const rewriteStoredSql = (
  organizationId: string,
  matches: string,
  rewrite: (json: string) => string
): string => `UPDATE idempotency_keys u SET body = r.body
  FROM (
    SELECT k.organization_id, k.key, convert_to(${rewrite("convert_from(k.body, 'UTF8')::json")}, 'UTF8') AS body
    FROM idempotency_keys k
    WHERE k.organization_id = ${organizationId} AND k.expires_at > statement_timestamp()
      AND k.content_type LIKE 'application/json%' AND ${matches}
  ) r
  WHERE u.organization_id = ${organizationId} AND u.organization_id = r.organization_id AND u.key = r.key
    AND r.body IS NOT NULL
  RETURNING u.key`

/**
 * The parts of a statement that stores its own response (D19 on the hot path,
 * POST message: `npm run bench`), given the placeholders of its organization
 * (uuid), key (text) and fingerprint (bytea):
 * - `ctes`: `ik_lock` (the key's lock tried, {@link tryKeyLockSql}) and
 *   `ik_live` (the live response), to come first;
 * - `locked`: whether the lock was taken, a condition for the statement's
 *   first row lock (so a repeat gets 409 at once instead of waiting behind
 *   the first request's row locks);
 * - `noneStored`: no live response, the condition of the statement's change;
 * - `store(status, body, from)`: the CTE `ik_kept` inserting the response
 *   (status, JSON text) for each row of `from`; a plain INSERT, so a response
 *   committed meanwhile (or an expired one not swept yet) fails the whole
 *   statement with a unique violation of `idempotency_keys_pkey` and nothing
 *   is written;
 * - `columns`: `ik_acquired` and the live response's `ik_fingerprint`,
 *   `ik_status`, `ik_content_type`, `ik_body` ({@link statementOutcome} reads them).
 */
export const statementStoredParts = (p: { organizationId: string; key: string; fingerprint: string }) => ({
  ctes: `ik_lock AS (SELECT ${tryKeyLockSql(`${p.organizationId}::text`, p.key)} AS acquired),
ik_live AS (${liveResponseSql(p.organizationId, p.key)})`,
  locked: "(SELECT acquired FROM ik_lock)",
  noneStored: "NOT EXISTS (SELECT 1 FROM ik_live)",
  store: (status: number, body: string, from: string) => `ik_kept AS (
  ${insertStoredSql}
  SELECT ${p.organizationId}, ${p.key}, ${p.fingerprint}, ${status}, 'application/json', convert_to(${body}, 'UTF8'), ${storedUntilSql}
  FROM ${from}
  RETURNING 1
)`,
  columns: `(SELECT acquired FROM ik_lock) AS ik_acquired, (SELECT fingerprint FROM ik_live) AS ik_fingerprint,
  (SELECT status FROM ik_live) AS ik_status, (SELECT content_type FROM ik_live) AS ik_content_type,
  (SELECT body FROM ik_live) AS ik_body`
})

/** The columns {@link statementStoredParts} adds to a statement's row. */
export interface StatementStoredColumns {
  readonly ik_acquired: boolean
  readonly ik_fingerprint: Uint8Array | null
  readonly ik_status: number | null
  readonly ik_content_type: string | null
  readonly ik_body: Uint8Array | null
}

/** What a statement of {@link statementStoredParts} found instead of running: undefined when it ran. */
export const statementOutcome = (row: StatementStoredColumns): "in-progress" | StoredResponse | undefined =>
  !row.ik_acquired
    ? "in-progress"
    : row.ik_fingerprint === null
      ? undefined
      : {
          fingerprint: row.ik_fingerprint,
          status: row.ik_status!,
          contentType: row.ik_content_type!,
          body: row.ik_body!
        }

/**
 * Whether `error` is the unique violation of a stored response (see {@link
 * statementStoredParts}): of `idempotency_keys_pkey`. On Citus the violation
 * is raised on a shard and passed on by the coordinator without the
 * constraint's field, its message naming the shard's copy
 * (`idempotency_keys_pkey_102084`, O11), which is read then.
 */
export const isStoredResponseConflict = (error: SqlError.SqlError): boolean => {
  if (error.cause._tag !== "UniqueViolation") return false
  const named = error.cause.constraint === "unknown" ? String(error.cause.cause) : error.cause.constraint
  return /\bidempotency_keys_pkey(_\d+)?\b/.test(named)
}

/**
 * The claim, in one round trip inside the caller's transaction: a try of the
 * advisory transaction lock of (organization, key) and the stored response.
 * $1 organization id, $2 key.
 */
const claimSql = `SELECT ${tryKeyLockSql("$1::text", "$2::text")} AS acquired,
  k.fingerprint, k.status, k.content_type, k.body
FROM (SELECT 1) one LEFT JOIN (${liveResponseSql("$1::uuid", "$2::text")}) k ON true`

/**
 * Stores a response for (organization, key), replacing an expired one;
 * returns no row when a live response is there (stored by a transaction that
 * committed after the claim's snapshot was taken).
 */
const storeSql = `${insertStoredSql}
VALUES ($1::uuid, $2::text, $3::bytea, $4::int4, $5::text, $6::bytea, ${storedUntilSql})
${replaceExpiredSql}
RETURNING 1 AS stored`

/**
 * Stores a response that changed nothing (a 4xx of an operation that stores
 * its response in its own statement), after the fact; returns the live
 * response stored before, if any (then nothing is written). $1 organization
 * id, $2 key, $3 fingerprint, $4 status, $5 content type, $6 body.
 */
const storeUnchangedSql = `WITH live AS (${liveResponseSql("$1::uuid", "$2::text")}),
stored AS (
  ${insertStoredSql}
  SELECT $1::uuid, $2::text, $3::bytea, $4::int4, $5::text, $6::bytea, ${storedUntilSql}
  WHERE NOT EXISTS (SELECT 1 FROM live)
  ${replaceExpiredSql}
)
SELECT fingerprint, status, content_type, body FROM live`

/** Deletes the expired response of ($1 organization id, $2 key), if any. */
const deleteExpiredSql = `DELETE FROM idempotency_keys
WHERE organization_id = $1::uuid AND key = $2::text AND expires_at <= statement_timestamp()`

/**
 * Deletes at most `limit` expired responses (oldest expiry first); returns a
 * row per response deleted. Planned on every call (`Database/Statement.ts`
 * `plannedPerCall`; it runs once a minute): prepared, its generic plan made
 * while the table was small stayed a nested loop over two sequential scans once
 * it had grown (PREPARE, seven calls on 3 rows, then 200,000 rows: 442 ms for
 * 10 expired responses, growing with expired responses times table size, against
 * 0.15 ms re-planned). Autovacuum's ANALYZE of the table makes PostgreSQL
 * re-plan it too, but only when it runs. test/Idempotency/Sweep.test.ts counts
 * 12 sequential scans for one sweep of 10 expired responses prepared, and none
 * planned per call.
 */
const sweepStatement = fixedStatement(
  { limit: "int4" },
  (p) => `WITH expired AS (
  SELECT organization_id, key FROM idempotency_keys WHERE expires_at <= statement_timestamp()
  ORDER BY expires_at LIMIT ${p.limit}
)
DELETE FROM idempotency_keys k USING expired e
WHERE k.organization_id = e.organization_id AND k.key = e.key
RETURNING 1 AS deleted`,
  { plannedPerCall: true }
)

/** The idempotency repository (D19). */
export class IdempotencyRepo extends Context.Service<
  IdempotencyRepo,
  {
    /** The {@link Claim} of the organization's `key`; inside a transaction only. */
    readonly claim: (organizationId: string, key: string) => Effect.Effect<Claim, SqlError.SqlError>
    /**
     * Stores `response` for (organization, key) for {@link STORED_FOR_HOURS}
     * hours, in the caller's transaction; false when a live response is
     * already stored.
     */
    readonly store: (
      organizationId: string,
      key: string,
      response: StoredResponse
    ) => Effect.Effect<boolean, SqlError.SqlError>
    /**
     * Stores `response` of an operation that changed nothing, for the
     * organization, outside any transaction; returns the live response stored
     * before instead, if any (then it writes nothing).
     */
    readonly storeUnchanged: (
      organizationId: string,
      key: string,
      response: StoredResponse
    ) => Effect.Effect<StoredResponse | undefined, SqlError.SqlError>
    /** Deletes the organization's expired response for `key`, if any. */
    readonly deleteExpired: (organizationId: string, key: string) => Effect.Effect<void, SqlError.SqlError>
    /** Deletes at most `limit` expired responses; returns how many it deleted. */
    readonly sweep: (limit: number) => Effect.Effect<number, SqlError.SqlError>
  }
>()("parley/Idempotency/IdempotencyRepo") {
  /** The repository on PostgreSQL. Requires `PgClient`. */
  static readonly layer = Layer.effect(
    IdempotencyRepo,
    Effect.gen(function* () {
      const sql = yield* PgClient.PgClient
      return IdempotencyRepo.of({
        claim: (organizationId, key) =>
          Effect.map(
            sql.unsafe<{
              acquired: boolean
              fingerprint: Uint8Array | null
              status: number | null
              content_type: string | null
              body: Uint8Array | null
            }>(claimSql, [organizationId, key]),
            ([row]): Claim => ({
              acquired: row!.acquired,
              stored:
                row!.fingerprint === null
                  ? undefined
                  : {
                      fingerprint: row!.fingerprint,
                      status: row!.status!,
                      contentType: row!.content_type!,
                      body: row!.body!
                    }
            })
          ),
        store: (organizationId, key, response) =>
          Effect.map(
            sql.unsafe(storeSql, [
              organizationId,
              key,
              response.fingerprint,
              response.status,
              response.contentType,
              response.body
            ]),
            (rows) => rows.length > 0
          ),
        storeUnchanged: (organizationId, key, response) =>
          Effect.map(
            sql.unsafe<{ fingerprint: Uint8Array; status: number; content_type: string; body: Uint8Array }>(
              storeUnchangedSql,
              [organizationId, key, response.fingerprint, response.status, response.contentType, response.body]
            ),
            ([row]) =>
              row === undefined
                ? undefined
                : { fingerprint: row.fingerprint, status: row.status, contentType: row.content_type, body: row.body }
          ),
        deleteExpired: (organizationId, key) => Effect.asVoid(sql.unsafe(deleteExpiredSql, [organizationId, key])),
        sweep: (limit) => Effect.map(sweepStatement.run(sql, { limit }), (rows) => rows.length)
      })
    })
  )
}
