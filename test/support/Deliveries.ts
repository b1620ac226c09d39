/**
 * The delivery worker's turn for tests of the webhooks repository on
 * PostgreSQL (DECISIONS.md W5): claim and complete with `WebhooksRepo` alone,
 * no HTTP.
 */
import { Effect } from "effect"
import { makeOrganizationRotation } from "../../src/Database/Workers.ts"
import { WebhooksRepo } from "../../src/Webhooks/Repo.ts"
import { attemptVerdict } from "../../src/Webhooks/Worker.ts"

/** The worker id the tests' {@link deliverDue} claims as. */
const testWorkerId = "01a21bbc-b215-734e-a34c-edfb1bf5ba73"

/**
 * What one turn of the delivery worker does, with the repository alone
 * (`WebhooksRepo` required): claims what is due (up to 32, 32 per app), as the
 * worker does: the organizations with due work discovered, then each claimed
 * (O11, `Database/Workers.ts` `makeOrganizationRotation`), and
 * records for each the response `statusCode` (W5 verdict), `durationMs` and
 * `startedAt`. Returns the claimed deliveries.
 */
export const deliverDue = (
  outcome: { statusCode: number; durationMs?: number; startedAt?: Date } = { statusCode: 200 }
) =>
  Effect.gen(function* () {
    const repo = yield* WebhooksRepo
    const claimed = yield* makeOrganizationRotation().claim(
      32,
      (after) => repo.discover({ after, limit: 32, saturated: [], organizations: 16 }),
      (organizationId, limit) =>
        repo.claim(organizationId, {
          workerId: testWorkerId,
          leaseMs: 30_000,
          limit,
          perApp: 32,
          busyApps: [],
          busyCounts: [],
          saturated: []
        })
    )
    if (claimed.length > 0) {
      yield* repo.complete(
        testWorkerId,
        claimed.map((delivery) => ({
          organizationId: delivery.organization_id,
          id: delivery.id,
          durationMs: outcome.durationMs ?? 1,
          startedAt: outcome.startedAt ?? new Date(),
          ...attemptVerdict({ statusCode: outcome.statusCode }, delivery.attempts + 1, [])
        })),
        // APP_DISABLE_AFTER's default, 5 days (W10).
        5 * 24 * 3_600_000
      )
    }
    return claimed
  })
