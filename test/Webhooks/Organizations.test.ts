/**
 * The delivery worker's claims across organizations (DECISIONS.md O11, W5,
 * W7): organization by organization, after a discovery without locks
 * (`src/Webhooks/Repo.ts` `discoverStatement`, `claimStatement`;
 * `src/Database/Workers.ts` `makeOrganizationRotation`). On one server, as on
 * Citus: two organizations' due deliveries are both claimed in one round,
 * an organization's backlog does not take the whole batch, and each claim
 * takes only its organization's deliveries.
 */
import { assert, layer } from "@effect/vitest"
import { Effect, Layer, Redacted } from "effect"
import { SqlClient } from "effect/sql"
import { WebhooksRepo } from "../../src/Webhooks/Repo.ts"
import { workerClientLayer } from "../../src/Webhooks/Worker.ts"
import { FileDatabase, insertApp, TestDatabaseUrl } from "../support/Database.ts"
import { deliverDue } from "../support/Deliveries.ts"

/** A connection of the worker's pool (its settings) to the file's database. */
const workerConnection = Layer.unwrap(
  Effect.map(Effect.service(TestDatabaseUrl), (url) => workerClientLayer(Redacted.make(url), 1))
)

layer(WebhooksRepo.layer.pipe(Layer.provideMerge(workerConnection), Layer.provide(FileDatabase)), {
  timeout: "60 seconds"
})("deliveries of several organizations (O11)", (it) => {
  it.effect("a round claims the due deliveries of both organizations; a backlog takes its share, not all (W5)", () =>
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      const small = "01a21bbc-0000-7000-8000-0000000000b1"
      const large = "01a21bbc-0000-7000-8000-0000000000b2"
      for (const [id, name] of [
        [small, "small"],
        [large, "large"]
      ] as const) {
        yield* sql`INSERT INTO organizations (id, name, created_at) VALUES (${id}, ${name}, now())`
        yield* insertApp(id, name)
      }
      // The small organization's delivery is due first, then the large one's 100.
      yield* sql`INSERT INTO events (id, organization_id, type, body, created_at)
        VALUES (gen_random_uuid(), ${small}, 'message.created', '{}', now())`
      yield* sql`INSERT INTO events (id, organization_id, type, body, created_at)
        SELECT gen_random_uuid(), ${large}, 'message.created', '{}', now() FROM generate_series(1, 100)`
      // One round of 32 (deliverDue): both discovered, the small one's delivery claimed with 31 of the large one's.
      const first = yield* deliverDue()
      const count = (rows: ReadonlyArray<{ organization_id: string }>, id: string) =>
        rows.filter((row) => row.organization_id === id).length
      assert.strictEqual(count(first, small), 1)
      assert.strictEqual(count(first, large), 31)
      // The rest follow, each once (leases), in rounds of 32.
      let total = first.length
      for (let round = 0; round < 10 && total < 101; round++) total += (yield* deliverDue()).length
      assert.strictEqual(total, 101)
      const left = yield* sql<{ n: number }>`SELECT count(*)::int AS n FROM deliveries WHERE status = 'pending'
        AND organization_id IN (${small}, ${large})`
      assert.strictEqual(left[0]!.n, 0)
    })
  )

  it.effect("a claim takes its organization's deliveries only", () =>
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      const repo = yield* WebhooksRepo
      const mine = "01a21bbc-0000-7000-8000-0000000000c1"
      const other = "01a21bbc-0000-7000-8000-0000000000c2"
      for (const id of [mine, other]) {
        yield* sql`INSERT INTO organizations (id, name, created_at) VALUES (${id}, 'x', now())`
        yield* insertApp(id, "x", "conversation")
        yield* sql`INSERT INTO events (id, organization_id, type, body, created_at, conversation_id)
          VALUES (gen_random_uuid(), ${id}, 'message.created', '{}', now(), md5('c')::uuid)`
      }
      const claimed = yield* repo.claim(mine, {
        workerId: "01a21bbc-0000-7000-8000-0000000000cc",
        leaseMs: 60_000,
        limit: 10,
        perApp: 10,
        busyApps: [],
        busyCounts: [],
        saturated: []
      })
      assert.deepStrictEqual(
        claimed.map((row) => row.organization_id),
        [mine]
      )
    })
  )
})
