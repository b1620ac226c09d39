/**
 * The deliveries of one organization by app (DECISIONS.md O11, W2; issue 43).
 * The sweep of deleted apps' deliveries (`src/Webhooks/Repo.ts`
 * `sweepStatement`, migrations/0017) walks the app ids of the deliveries one
 * index probe each; over every organization at once that walk is a recursive
 * CTE Citus refuses (it needs a filter on the distribution column), so it
 * walks one organization at a time, which needs an index that leads with
 * `organization_id`. `deliveries_app_idx (app_id, id)` becomes
 * `deliveries_organization_app_idx (organization_id, app_id, id)`: the other
 * statements that used it name the organization too (the admin listing of an
 * app's deliveries, newest first; the `apps_deleted` trigger, migrations/0027),
 * so the table keeps the same number of indexes.
 */
import { Effect } from "effect"
import { SqlClient } from "effect/sql"

export default Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  yield* sql`CREATE INDEX deliveries_organization_app_idx ON deliveries (organization_id, app_id, id)`
  yield* sql`DROP INDEX deliveries_app_idx`
})
