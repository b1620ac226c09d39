/**
 * The example of README.md "Testing a layer", run so that it stays true: a
 * service over its in-memory repository, time on TestClock, no database.
 */
import { assert, it } from "@effect/vitest"
import { Effect } from "effect"
import { TestClock } from "effect/testing"
import { makeMemoryStore } from "../../src/Replies/MemoryRepo.ts"
import { Replies } from "../../src/Replies/Replies.ts"

it.effect("R1: a second trigger within the debounce window moves the due time", () => {
  const store = makeMemoryStore()
  const org = store.newId()
  const session = {
    id: store.newId(),
    organization_id: org,
    status: "open",
    agent_id: store.newId(),
    agent_type: "ai",
    thread_id: store.newId()
  } as const
  store.sessions.set(session.id, session)
  return Effect.gen(function* () {
    const replies = yield* Replies
    yield* replies.reply(org, session.id, {}) // t = 0 s: due at 3 s (the default debounce)
    yield* TestClock.adjust("2 seconds")
    yield* replies.reply(org, session.id, {}) // t = 2 s: due at 5 s, still one job
    assert.deepStrictEqual(
      store.jobs.map((job) => job.due_at.getTime()),
      [5_000]
    )
  }).pipe(Effect.provide(Replies.layerTest(store)))
})
