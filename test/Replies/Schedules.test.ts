/**
 * Schedules (DECISIONS.md D15) and automatic closing (D16), run by the
 * in-process replies worker: a future schedule runs at its moment, a past one
 * at once, `node` runs the AI from that node, cancel responds 204/409/404, a
 * closed session cancels its schedules; idle sessions expire with
 * session.finished/session.closed `action: "expired"`.
 */
import { assert } from "@effect/vitest"
import { Duration, Effect } from "effect"
import { servicesWith } from "../../src/Server.ts"
import { llm } from "../support/Assistants.ts"
import { makeScript, scriptedModel } from "../support/ScriptedModel.ts"
import { ADMIN_TOKEN, TestApi, withWorkers } from "../support/TestApp.ts"
import { aiFixture, messagesOf, runsOf, snapshotOf, waitFor } from "./support.ts"

const script = makeScript()

const inMs = (ms: number) => new Date(Date.now() + ms).toISOString()

withWorkers({ sessionExpirySweepInterval: Duration.millis(200) }, servicesWith(scriptedModel(script)))(
  "schedules and expiry",
  (it) => {
    it.effect("D15: a message schedule inserts the assistant message at its moment; past moments run at once", () =>
      Effect.gen(function* () {
        const api = yield* TestApi
        const org = yield* api.organization()
        const session = yield* org.session()
        // Far enough ahead that the past schedule runs and is listed before it, on a loaded Citus cluster too
        // (1.5 s was not: .ci/run once listed it running, O11).
        const future = yield* org.call("POST", `/sessions/${session.id}/schedule`, {
          scheduled_for: inMs(6000),
          config: { type: "message", message: { type: "text", text: "Reminder: your appointment is tomorrow" } }
        })
        assert.strictEqual(future.status, 200)
        assert.deepStrictEqual(Object.keys(future.body), [
          "id",
          "session_id",
          "organization_id",
          "scheduled_for",
          "config",
          "status",
          "error",
          "created_at",
          "executed_at"
        ])
        assert.strictEqual(future.body.status, "pending")
        assert.strictEqual(future.body.session_id, session.id)
        assert.strictEqual(future.body.executed_at, null)

        const past = yield* org.call("POST", `/sessions/${session.id}/schedule`, {
          scheduled_for: "2020-01-01T00:00:00Z",
          config: { type: "message", message: { type: "text", text: "Welcome back" } }
        })
        assert.strictEqual(past.status, 200)
        // The past one runs at once; the future one is still pending meanwhile.
        const afterPast = yield* waitFor(messagesOf(org, session.id), (messages) => messages.length === 1)
        assert.deepStrictEqual(afterPast[0].content, { type: "text", text: "Welcome back" })
        assert.strictEqual(afterPast[0].role, "assistant")
        const listed = (yield* org.call("GET", `/sessions/${session.id}/schedules`)).body
        assert.deepStrictEqual(
          listed.map((s: any) => [s.id, s.status]),
          [
            [future.body.id, "pending"],
            [past.body.id, "done"]
          ]
        )
        const all = yield* waitFor(messagesOf(org, session.id), (messages) => messages.length === 2, 20_000)
        assert.strictEqual(all[1].content.text, "Reminder: your appointment is tomorrow")
        const done = (yield* org.call("GET", `/sessions/${session.id}/schedules`)).body
        assert.strictEqual(done[0].status, "done")
        assert.ok(Date.parse(done[0].executed_at) >= Date.parse(future.body.scheduled_for))
        // message.created follows for scheduled messages (D15, W1).
        const events = yield* api.events(org.id)
        assert.strictEqual(events.filter((e) => e.type === "message.created").length, 2)
      })
    )

    it.effect("D15: a node schedule runs the AI from that node", () =>
      Effect.gen(function* () {
        const fx = yield* aiFixture(snapshotOf([llm("start"), llm("followup", { instructions: "Follow up kindly." })]))
        const session = yield* fx.session()
        script.calls.length = 0
        const scheduled = yield* fx.org.call("POST", `/sessions/${session.id}/schedule`, {
          scheduled_for: inMs(0),
          config: { type: "node", node_id: "followup" }
        })
        assert.strictEqual(scheduled.status, 200)
        const [run] = yield* waitFor(runsOf(session.id), (rows) => rows.length === 1)
        assert.strictEqual(run!.trigger, "schedule")
        assert.deepStrictEqual(run!.nodes, ["followup"])
        assert.strictEqual(script.calls[0]!.system, "Follow up kindly.")
        const schedules = yield* waitFor(
          fx.org.call("GET", `/sessions/${session.id}/schedules`).pipe(Effect.map((r) => r.body as Array<any>)),
          (rows) => rows[0].status === "done"
        )
        assert.strictEqual(schedules[0].error, null)
        assert.strictEqual((yield* messagesOf(fx.org, session.id)).at(-1).run_id, run!.id)
      })
    )

    it.effect("D15: cancel gives 204 and status canceled; again 409; unknown 404; a closed session cancels", () =>
      Effect.gen(function* () {
        const api = yield* TestApi
        const org = yield* api.organization()
        const session = yield* org.session()
        const body = {
          scheduled_for: inMs(3_600_000),
          config: { type: "message", message: { type: "text", text: "Later" } }
        }
        const a = (yield* org.call("POST", `/sessions/${session.id}/schedule`, body)).body
        const b = (yield* org.call("POST", `/sessions/${session.id}/schedule`, body)).body
        const cancel = yield* org.call("DELETE", `/sessions/${session.id}/schedules/${a.id}`)
        assert.strictEqual(cancel.status, 204)
        assert.strictEqual(cancel.text, "")
        const again = yield* org.call("DELETE", `/sessions/${session.id}/schedules/${a.id}`)
        assert.deepStrictEqual([again.status, again.body], [409, { detail: "Schedule is not pending" }])
        const unknown = yield* org.call(
          "DELETE",
          `/sessions/${session.id}/schedules/0190a000-0000-7000-8000-000000000000`
        )
        assert.deepStrictEqual([unknown.status, unknown.body], [404, { detail: "Schedule not found" }])
        const malformed = yield* org.call("DELETE", `/sessions/${session.id}/schedules/not-an-id`)
        assert.strictEqual(malformed.status, 404)
        // Another organization's session: 404 Session not found (D1).
        const other = yield* api.organization()
        const foreign = yield* other.call("DELETE", `/sessions/${session.id}/schedules/${b.id}`)
        assert.deepStrictEqual([foreign.status, foreign.body], [404, { detail: "Session not found" }])

        yield* org.call("POST", `/sessions/${session.id}/finish`, {})
        const listed = (yield* org.call("GET", `/sessions/${session.id}/schedules`)).body
        assert.deepStrictEqual(
          listed.map((s: any) => [s.id, s.status]),
          [
            [a.id, "canceled"],
            [b.id, "canceled"]
          ]
        )
        // D5: no new schedule on a closed session.
        const closed = yield* org.call("POST", `/sessions/${session.id}/schedule`, body)
        assert.deepStrictEqual([closed.status, closed.body], [400, { detail: "Session is not open" }])
      })
    )

    it.effect("D15: schedule bodies are validated (422 with loc, 400 for an unknown content type)", () =>
      Effect.gen(function* () {
        const api = yield* TestApi
        const org = yield* api.organization()
        const session = yield* org.session()
        const noMoment = yield* org.call("POST", `/sessions/${session.id}/schedule`, {
          scheduled_for: "tomorrow",
          config: { type: "node", node_id: "x" }
        })
        assert.strictEqual(noMoment.status, 422)
        assert.deepStrictEqual(noMoment.body.detail[0].loc, ["body", "scheduled_for"])
        const badConfig = yield* org.call("POST", `/sessions/${session.id}/schedule`, {
          scheduled_for: inMs(1000),
          config: { type: "launch" }
        })
        assert.strictEqual(badConfig.status, 422)
        const badContent = yield* org.call("POST", `/sessions/${session.id}/schedule`, {
          scheduled_for: inMs(1000),
          config: { type: "message", message: { type: "function_call" } }
        })
        assert.deepStrictEqual([badContent.status, badContent.body], [400, { detail: "Invalid content type" }])
        const emptyText = yield* org.call("POST", `/sessions/${session.id}/schedule`, {
          scheduled_for: inMs(1000),
          config: { type: "message", message: { type: "text", text: "" } }
        })
        assert.strictEqual(emptyText.status, 422)
        assert.deepStrictEqual(emptyText.body.detail[0].loc, ["body", "config", "message", "text"])
        const missing = yield* org.call("POST", "/sessions/0190a000-0000-7000-8000-000000000000/schedule", {
          scheduled_for: inMs(1000),
          config: { type: "node", node_id: "x" }
        })
        assert.strictEqual(missing.status, 404)
      })
    )

    it.effect(
      "D16: idle sessions expire with action expired; active ones and organizations without a timeout stay open",
      () =>
        Effect.gen(function* () {
          const api = yield* TestApi
          const org = yield* api.organization()
          const settings = yield* api.request("PATCH", `/admin/v1/organizations/${org.id}/settings`, {
            token: ADMIN_TOKEN,
            body: { session_idle_timeout_seconds: 1 }
          })
          assert.strictEqual(settings.status, 200, settings.text)
          const idle = yield* org.session({ contact_id: "+1555000001" })
          const active = yield* org.session({ contact_id: "+1555000002" })
          const untimedOrg = yield* api.organization()
          const untimed = yield* untimedOrg.session()
          // Keep `active` busy for ~2 s: a message every 300 ms.
          for (let i = 0; i < 7; i++) {
            yield* org.call("POST", `/sessions/${active.id}/messages`, {
              role: "user",
              content: { type: "text", text: `ping ${i}` }
            })
            yield* Effect.promise(() => new Promise((resolve) => setTimeout(resolve, 300)))
          }
          const closed = yield* waitFor(
            org.call("GET", `/sessions/${idle.id}`).pipe(Effect.map((r) => r.body)),
            (s) => s.status === "closed",
            10_000
          )
          assert.strictEqual(closed.status, "closed")
          assert.strictEqual((yield* org.call("GET", `/sessions/${active.id}`)).body.status, "open")
          const events = (yield* api.events(org.id)).filter((e) => e.data.object.id === idle.id)
          assert.deepStrictEqual(
            events.map((e) => [e.type, e.data.object.action ?? "-"]),
            [
              ["session.created", "-"],
              ["session.finished", "expired"],
              ["session.closed", "expired"]
            ]
          )
          // An organization without session_idle_timeout_seconds never expires sessions.
          assert.strictEqual((yield* untimedOrg.call("GET", `/sessions/${untimed.id}`)).body.status, "open")
        })
    )
  }
)
