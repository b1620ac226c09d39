/**
 * The retention sweeper in the worker role (DECISIONS.md D21, O1; issue 40
 * item 1): the application with its workers (`WorkersLive`) sweeps every
 * `RETENTION_SWEEP_INTERVAL` on its own. Settings through the admin API, a
 * session through the conversations API, its close moved back in the table
 * (rows backdated: the workers run on the real clock).
 */
import { assert } from "@effect/vitest"
import { Duration, Effect } from "effect"
import { SqlClient } from "effect/sql"
import { ADMIN_TOKEN, TestApi, withWorkers } from "../support/TestApp.ts"
import { waitFor } from "../support/Wait.ts"

withWorkers({ retentionSweepInterval: Duration.millis(200) })("the retention sweeper", (it) => {
  it.effect(
    "D21: a worker deletes a session closed more than message_retention_days ago every RETENTION_SWEEP_INTERVAL; the open one stays",
    () =>
      Effect.gen(function* () {
        const api = yield* TestApi
        const sql = yield* SqlClient.SqlClient
        const org = yield* api.organization()
        const settings = yield* api.request("PATCH", `/admin/v1/organizations/${org.id}/settings`, {
          token: ADMIN_TOKEN,
          body: { message_retention_days: 1 }
        })
        assert.strictEqual(settings.status, 200, settings.text)
        assert.deepStrictEqual([settings.body.message_retention_days, settings.body.event_retention_days], [1, 30])
        const closed = yield* org.session({ contact_id: "+1555000101" })
        yield* org.call("POST", `/sessions/${closed.id}/messages`, {
          role: "user",
          content: { type: "text", text: "Bye" }
        })
        assert.strictEqual((yield* org.call("POST", `/sessions/${closed.id}/finish`, {})).status, 200)
        const open = yield* org.session({ contact_id: "+1555000102" })
        // Closed two days ago; the open session is as old.
        yield* sql`UPDATE sessions SET updated_at = now() - interval '2 days', created_at = now() - interval '2 days'
          WHERE organization_id = ${org.id}`
        const gone = yield* waitFor(
          org.call("GET", `/sessions/${closed.id}`),
          (response) => response.status === 404,
          10_000
        )
        assert.deepStrictEqual(gone.body, { detail: "Session not found" })
        assert.strictEqual((yield* org.call("GET", `/sessions/${open.id}`)).body.status, "open")
        const messages = yield* sql<{
          n: number
        }>`SELECT count(*)::int AS n FROM messages WHERE session_id = ${closed.id}`
        assert.strictEqual(messages[0]!.n, 0)
      })
  )
})
