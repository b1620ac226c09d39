/**
 * The example of docs/architecture.md "Testing a layer", run so that it stays true: the
 * production services over the test file's own database (a clone of the
 * migrated template: test/support/RulesDatabase.ts), time on TestClock, so the
 * rule is checked in the SQL that keeps it (issue 37 item 1).
 */
import { assert } from "@effect/vitest"
import { Effect } from "effect"
import { TestClock } from "effect/testing"
import { Replies } from "../../src/Replies/Replies.ts"
import { Sessions } from "../../src/Sessions/Sessions.ts"
import { addAgent, onDatabase, organization, rowsOf } from "../support/RulesDatabase.ts"

onDatabase()("Replies on PostgreSQL", (it) => {
  it.effect("R1: a second trigger within the debounce window moves the due time", () =>
    Effect.gen(function* () {
      const org = yield* organization()
      const agent = yield* addAgent(org, "ai")
      // D7: a session with an AI agent has a thread, so it can be answered.
      const session = yield* (yield* Sessions).create(org, { contact_id: "c", contact_name: "Ada", agent_id: agent.id })
      const replies = yield* Replies
      yield* replies.reply(org, session.id, {}) // t = 0 s: due at 3 s (the default debounce)
      yield* TestClock.adjust("2 seconds")
      yield* replies.reply(org, session.id, {}) // t = 2 s: due at 5 s, still one job
      assert.deepStrictEqual(
        (yield* rowsOf("reply_jobs", "session_id", session.id)).map((job) => job.due_at.getTime()),
        [5_000]
      )
    })
  )
})
