/**
 * Idempotency-Key (D19): the first response to a POST or PATCH sent with an
 * `Idempotency-Key`, stored 24 hours per (organization, key). A row is written
 * in the transaction of the operation it responds to, so a change and its
 * stored response commit together or not at all. `fingerprint` is the SHA-256
 * of the request's method, path and canonical JSON body; `body` the response's
 * bytes as sent.
 * `expires_at` is indexed for the worker role's sweep.
 */
import { Effect } from "effect"
import { SqlClient } from "effect/sql"

const statements = [
  `CREATE TABLE idempotency_keys (
    organization_id uuid NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
    key text NOT NULL,
    fingerprint bytea NOT NULL,
    status int4 NOT NULL,
    content_type text NOT NULL,
    body bytea NOT NULL,
    created_at timestamptz NOT NULL DEFAULT statement_timestamp(),
    expires_at timestamptz NOT NULL,
    PRIMARY KEY (organization_id, key)
  )`,
  `CREATE INDEX idempotency_keys_expires_at ON idempotency_keys (expires_at)`
]

export default Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  for (const statement of statements) yield* sql.unsafe(statement)
})
