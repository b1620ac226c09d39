/**
 * Trailing debounce of reply jobs (DECISIONS.md R1) driven by TestClock: the
 * app and its replies worker run on @effect/vitest's TestClock, so due times
 * and the worker's timers move only when the test adjusts the clock. Three
 * triggers within the window give one run (at last trigger + debounce); a
 * trigger after the window gives a second run.
 */
import { assert } from "@effect/vitest"
import { Effect } from "effect"
import { SqlClient } from "effect/sql"
import { TestClock } from "effect/testing"
import { servicesWith } from "../../src/Server.ts"
import { llm } from "../support/Assistants.ts"
import { makeScript, scriptedModel } from "../support/ScriptedModel.ts"
import { withWorkers } from "../support/TestApp.ts"
import { aiFixture, messagesOf, realSleep, runsOf, snapshotOf, waitFor } from "./support.ts"

const script = makeScript()

withWorkers({}, servicesWith(scriptedModel(script)), { testClock: true })("debounce on TestClock", (it) => {
  it.effect("R1: 3 triggers within the window give 1 run; a trigger after the window gives a second", () =>
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      const fx = yield* aiFixture(snapshotOf([llm("start")]))
      const session = yield* fx.session()
      const say = (text: string) =>
        fx.org.call("POST", `/sessions/${session.id}/messages`, { role: "user", content: { type: "text", text } })
      const trigger = () => fx.org.call("POST", `/sessions/${session.id}/reply`, { debounce_time: 3 })
      const pending = sql<{ triggers: number; status: string }>`SELECT triggers, status FROM reply_jobs
        WHERE session_id = ${session.id}`

      // t = 0, 1, 2 s: three messages, three triggers; the due time moves to 2 + 3 = 5 s.
      for (const text of ["Hi", "I need help", "with my order"]) {
        yield* say(text)
        assert.strictEqual((yield* trigger()).status, 200)
        yield* TestClock.adjust("1 second")
      }
      assert.deepStrictEqual(yield* pending, [{ triggers: 3, status: "pending" }])

      // t = 4.9 s: still inside the window of the last trigger: nothing runs.
      yield* TestClock.adjust("1900 millis")
      yield* realSleep(400)
      assert.strictEqual((yield* runsOf(session.id)).length, 0)

      // t = 5.1 s: due; exactly one run answers all three messages.
      yield* TestClock.adjust("200 millis")
      const runs = yield* waitFor(runsOf(session.id), (rows) => rows.length === 1)
      assert.strictEqual(runs[0]!.status, "succeeded")
      assert.deepStrictEqual(yield* waitFor(pending, (rows) => rows.length === 0), [])
      const messages = yield* messagesOf(fx.org, session.id)
      assert.deepStrictEqual(
        messages.map((m) => m.role),
        ["user", "user", "user", "assistant"]
      )
      assert.strictEqual(messages[3].content.text, "Reply to: with my order")

      // A trigger after the window: a second run, after its own debounce.
      yield* say("Thanks")
      yield* trigger()
      yield* TestClock.adjust("2 seconds")
      yield* realSleep(400)
      assert.strictEqual((yield* runsOf(session.id)).length, 1)
      yield* TestClock.adjust("1100 millis")
      const second = yield* waitFor(runsOf(session.id), (rows) => rows.length === 2)
      assert.strictEqual(second[1]!.status, "succeeded")
      assert.strictEqual((yield* messagesOf(fx.org, session.id)).length, 6)
    })
  )
})
