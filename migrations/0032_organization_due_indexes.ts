/**
 * The due work of one organization, indexed (DECISIONS.md O11, W5, R1; issue
 * 43). The workers claim organization by organization (`Database/Workers.ts`
 * `makeOrganizationRotation`): on Citus a claim with `FOR UPDATE SKIP LOCKED`
 * must be a router statement of one organization. Over the indexes by due
 * time alone, a claim of one organization read past every due row of the
 * others before its own (a shard holds many organizations, and one server
 * all of them); these lead with `organization_id`. The indexes by due time
 * alone stay: the discoveries read the due work of all organizations,
 * oldest first (`Webhooks/Repo.ts` `discoverStatement`, `Replies/Repo.ts`).
 */
import { Effect } from "effect"
import { SqlClient } from "effect/sql"

export default Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  yield* sql`CREATE INDEX deliveries_organization_due_idx ON deliveries (organization_id, next_attempt_at)
    WHERE status = 'pending' AND ordering_key IS NULL`
  yield* sql`CREATE INDEX reply_jobs_organization_due_idx ON reply_jobs (organization_id, due_at) WHERE status = 'pending'`
})
