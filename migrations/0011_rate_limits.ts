/**
 * Rate limits per organization (D20): the settings `rate_limit_per_second`
 * (null: unlimited) and `rate_limit_burst` (null: twice the rate), and the
 * token bucket every process leases its tokens from (`src/RateLimits/`):
 * `tokens` left at `updated_at`, with the rate and burst of the latest lease.
 */
import { Effect } from "effect"
import { SqlClient } from "effect/sql"

const statements = [
  `ALTER TABLE organization_settings ADD COLUMN rate_limit_per_second int4, ADD COLUMN rate_limit_burst int4`,
  `CREATE TABLE rate_limit_buckets (
    organization_id uuid PRIMARY KEY REFERENCES organizations (id) ON DELETE CASCADE,
    rate int4 NOT NULL,
    burst int4 NOT NULL,
    tokens double precision NOT NULL,
    granted int4 NOT NULL,
    updated_at timestamptz NOT NULL
  )`
]

export default Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  for (const statement of statements) yield* sql.unsafe(statement)
})
