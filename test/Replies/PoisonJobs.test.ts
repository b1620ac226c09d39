/**
 * Poison jobs (issue 12 item 6; DECISIONS.md R1, D15) on TestClock: a reply
 * job or a schedule whose run dies of a defect (injected through the scripted
 * model's test layer, not a model failure) is retried after 5 s and 30 s, then
 * ends failed with the cause recorded on its run; the session takes new
 * triggers normally afterwards. Nothing is left claimed for the lease to
 * expire.
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

/**
 * Moves TestClock on one second at a time, with a moment of real time between
 * (the worker re-arms its timers between real database round trips), until
 * `done` holds for the value of `effect`, at most `maxSeconds`; then waits for
 * it in real time ({@link waitFor}). Returns the value and the seconds stepped.
 * Stepping on until the outcome rather than a fixed number of seconds: on a
 * busy machine (CI) a backoff timer can be armed a step or two late, so it
 * falls due after a fixed count would have stopped.
 */
const advanceUntil = <A, E, R>(effect: Effect.Effect<A, E, R>, done: (a: A) => boolean, maxSeconds: number) =>
  Effect.gen(function* () {
    for (let seconds = 0; seconds < maxSeconds; seconds++) {
      const value = yield* effect
      if (done(value)) return [value, seconds] as const
      yield* TestClock.adjust("1 second")
      yield* realSleep(30)
    }
    return [yield* waitFor(effect, done), maxSeconds] as const
  })

withWorkers({}, servicesWith(scriptedModel(script)), { testClock: true })("poison jobs", (it) => {
  it.effect("a reply job dying of a defect is retried twice with backoff, then ends failed; new triggers work", () =>
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      const fx = yield* aiFixture(snapshotOf([llm("start")]))
      const session = yield* fx.session()
      yield* fx.org.call("POST", `/sessions/${session.id}/messages`, {
        role: "user",
        content: { type: "text", text: "Hi" }
      })
      const job = sql<{ status: string; attempts: number; last_error: string | null }>`
        SELECT status, attempts, last_error FROM reply_jobs WHERE session_id = ${session.id}`
      script.answers.push({ defect: "layer bug" }, { defect: "layer bug" }, { defect: "layer bug" })
      const calls = script.calls.length

      assert.strictEqual(
        (yield* fx.org.call("POST", `/sessions/${session.id}/reply`, { debounce_time: 0 })).status,
        200
      )
      yield* TestClock.adjust("10 millis")
      // Attempt 1 died: the job is pending again, due in 5 s, with the defect recorded; no run, no reply.
      const first = yield* waitFor(job, (rows) => rows[0]?.attempts === 1 && rows[0]?.status === "pending")
      assert.strictEqual(first[0]!.last_error, "Internal error: layer bug")
      assert.strictEqual(script.calls.length, calls + 1)
      yield* TestClock.adjust("4 seconds")
      yield* realSleep(300)
      assert.strictEqual(script.calls.length, calls + 1, "not before its 5 s backoff")

      yield* TestClock.adjust("1100 millis")
      yield* waitFor(job, (rows) => rows[0]?.attempts === 2 && rows[0]?.status === "pending")
      assert.strictEqual(script.calls.length, calls + 2)

      // Attempt 3, after the 30 s backoff, died too: the job is gone, one failed run records the cause.
      const [runs, waited] = yield* advanceUntil(runsOf(session.id), (rows) => rows.length === 1, 120)
      assert.isAtLeast(waited, 29, "not before its 30 s backoff")
      assert.isAtMost(waited, 60)
      assert.strictEqual(runs[0]!.status, "failed")
      assert.strictEqual(runs[0]!.error, "Internal error: layer bug (gave up after 3 attempts)")
      assert.deepStrictEqual(yield* job, [])
      assert.strictEqual(script.calls.length, calls + 3)
      assert.deepStrictEqual(
        (yield* messagesOf(fx.org, session.id)).map((m) => m.role),
        ["user"]
      )

      // The session takes new triggers normally.
      yield* fx.org.call("POST", `/sessions/${session.id}/messages`, {
        role: "user",
        content: { type: "text", text: "Still there?" }
      })
      assert.strictEqual(
        (yield* fx.org.call("POST", `/sessions/${session.id}/reply`, { debounce_time: 0 })).status,
        200
      )
      yield* TestClock.adjust("10 millis")
      const after = yield* waitFor(runsOf(session.id), (rows) => rows.length === 2)
      assert.strictEqual(after[1]!.status, "succeeded")
      const messages = yield* messagesOf(fx.org, session.id)
      assert.strictEqual(messages.at(-1).content.text, "Reply to: Still there?")
    })
  )

  it.effect("a schedule dying of a defect is retried, then ends failed with the cause; scheduled_for is kept", () =>
    Effect.gen(function* () {
      const fx = yield* aiFixture(snapshotOf([llm("start")]))
      const session = yield* fx.session()
      script.answers.push({ defect: "node bug" }, { defect: "node bug" }, { defect: "node bug" })
      // TestClock starts at the epoch: a moment at it is due at once.
      const scheduledFor = "1970-01-01T00:00:00.000000Z"
      const created = yield* fx.org.call("POST", `/sessions/${session.id}/schedule`, {
        scheduled_for: scheduledFor,
        config: { type: "node", node_id: "start" }
      })
      assert.strictEqual(created.status, 200, created.text)
      const schedules = fx.org
        .call("GET", `/sessions/${session.id}/schedules`)
        .pipe(Effect.map((response) => response.body as Array<any>))
      yield* TestClock.adjust("10 millis")
      const retried = yield* waitFor(schedules, (rows) => rows[0]?.status === "pending" && rows[0]?.error !== null)
      assert.strictEqual(retried[0].error, "Internal error: node bug")
      assert.strictEqual(retried[0].scheduled_for, scheduledFor)
      // Attempts 2 and 3, after backoffs of 5 s and 30 s.
      const [failed, waited] = yield* advanceUntil(schedules, (rows) => rows[0]?.status === "failed", 120)
      assert.isAtLeast(waited, 34, "not before its backoffs of 5 s and 30 s")
      assert.isAtMost(waited, 70)
      assert.strictEqual(failed[0].error, "Internal error: node bug (gave up after 3 attempts)")
      const runs = yield* runsOf(session.id)
      assert.deepStrictEqual(
        runs.map((run) => [run.trigger, run.status]),
        [["schedule", "failed"]]
      )
    })
  )
})
