/**
 * The claims of a worker across organizations (DECISIONS.md O11, W5, R1;
 * `src/Database/Workers.ts` `makeOrganizationRotation`): each round shares
 * its batch between the organizations discovered, those found by the previous
 * discovery claimed at the same time as the next discovery, and the shares
 * rotate, so no organization's backlog starves another.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { TestClock } from "effect/testing"
import { DISCOVERY_INTERVAL_MS, FIRST_ORGANIZATION, makeOrganizationRotation } from "../../src/Database/Workers.ts"

/** Organizations `a` < `b` < `c` as ids sort. */
const [a, b, c] = [
  "01a21bbc-0000-7000-8000-00000000000a",
  "01a21bbc-0000-7000-8000-00000000000b",
  "01a21bbc-0000-7000-8000-00000000000c"
]

/**
 * A discovery over organizations with `backlog` rows each, as the SQL orders
 * them: after the cursor first, then the others; records each cursor it got.
 */
const fakeDatabase = (backlog: Record<string, number>) => {
  const cursors: Array<string> = []
  const asked: Array<[string, number]> = []
  const discover = (after: string) =>
    Effect.sync(() => {
      cursors.push(after)
      const due = Object.keys(backlog)
        .filter((id) => backlog[id]! > 0)
        .sort()
      return [...due.filter((id) => id > after), ...due.filter((id) => id <= after)]
    })
  const claimOne = (organizationId: string, limit: number) =>
    Effect.sync(() => {
      asked.push([organizationId, limit])
      const n = Math.min(limit, backlog[organizationId]!)
      backlog[organizationId]! -= n
      return Array.from({ length: n }, () => organizationId)
    })
  return { backlog, cursors, asked, discover, claimOne }
}

describe("makeOrganizationRotation (O11)", () => {
  it.effect("a round shares its batch between the organizations with due work; what one leaves goes to the next", () =>
    Effect.gen(function* () {
      const db = fakeDatabase({ [a]: 1_000, [b]: 3, [c]: 1_000 })
      const claimed = yield* makeOrganizationRotation().claim(30, db.discover, db.claimOne)
      // a: ceil(30 / 3) = 10; b takes 3 of ceil(20 / 2) = 10; c gets the 17 left.
      assert.deepStrictEqual(db.asked, [
        [a, 10],
        [b, 10],
        [c, 17]
      ])
      assert.strictEqual(claimed.length, 30)
      assert.deepStrictEqual(db.cursors, [FIRST_ORGANIZATION])
    })
  )

  it.effect("the organizations found before are claimed with the discovery; the larger shares rotate", () =>
    Effect.gen(function* () {
      const db = fakeDatabase({ [a]: 1_000, [b]: 1_000, [c]: 1_000 })
      const rotation = makeOrganizationRotation()
      // Nothing found before: the discovery, then each organization in turn.
      yield* rotation.claim(3, db.discover, db.claimOne)
      assert.deepStrictEqual(db.asked.splice(0), [
        [a, 1],
        [b, 1],
        [c, 1]
      ])
      // Then the three are claimed at once with the next discovery, the extra row to the one after a.
      yield* rotation.claim(4, db.discover, db.claimOne)
      assert.deepStrictEqual(db.asked.splice(0), [
        [b, 2],
        [c, 1],
        [a, 1]
      ])
      yield* rotation.claim(4, db.discover, db.claimOne)
      assert.deepStrictEqual(db.asked.splice(0), [
        [c, 2],
        [a, 1],
        [b, 1]
      ])
      // Each discovery starts after the last organization the previous one found.
      assert.deepStrictEqual(db.cursors, [FIRST_ORGANIZATION, c, c])
    })
  )

  it.effect("an organization found beside a backlog that took the batch is claimed in the next round", () =>
    Effect.gen(function* () {
      const db = fakeDatabase({ [a]: 1_000, [b]: 0 })
      const rotation = makeOrganizationRotation()
      yield* rotation.claim(10, db.discover, db.claimOne)
      // b's work comes due: found while a (found before) takes the whole batch, then shares the next.
      db.backlog[b] = 5
      assert.deepStrictEqual(yield* rotation.claim(10, db.discover, db.claimOne), Array(10).fill(a))
      const next = yield* rotation.claim(10, db.discover, db.claimOne)
      assert.strictEqual(next.filter((id) => id === b).length, 5)
    })
  )

  it.effect("a claim of one (erasures, evaluations) asks each organization in turn until one yields", () =>
    Effect.gen(function* () {
      const db = fakeDatabase({ [a]: 0, [b]: 1, [c]: 1 })
      // a has nothing due by now (the discovery may be stale): it is asked first, then b yields.
      const discover = (after: string) => Effect.map(db.discover(after), (ids) => [a, ...ids])
      const rotation = makeOrganizationRotation()
      assert.deepStrictEqual(yield* rotation.claim(1, discover, db.claimOne), [b])
      assert.deepStrictEqual(db.asked.splice(0), [
        [a, 1],
        [b, 1]
      ])
      // The next asks b (found before, the one after a) with the discovery, then c, which yields.
      assert.deepStrictEqual(yield* rotation.claim(1, db.discover, db.claimOne), [c])
      assert.deepStrictEqual(db.asked.splice(0), [
        [b, 1],
        [c, 1]
      ])
    })
  )

  it.effect("a failed claim leaves the others' rows to the round; with none claimed the round fails", () =>
    Effect.gen(function* () {
      const db = fakeDatabase({ [a]: 1_000, [b]: 1_000 })
      const rotation = makeOrganizationRotation()
      yield* rotation.claim(2, db.discover, db.claimOne)
      let failing = [a]
      const claimOne = (organizationId: string, limit: number) =>
        failing.includes(organizationId) ? Effect.fail("database gone") : db.claimOne(organizationId, limit)
      // a's claim fails while b's, made at the same time, commits: its rows are the round's, not lost.
      assert.deepStrictEqual(yield* rotation.claim(2, db.discover, claimOne), [b])
      failing = [a, b]
      assert.strictEqual(yield* Effect.flip(rotation.claim(2, db.discover, claimOne)), "database gone")
    })
  )

  it.effect("told where to look, a round claims the organizations its wakeups named without discovering", () =>
    Effect.gen(function* () {
      const db = fakeDatabase({ [a]: 0, [b]: 0 })
      const rotation = makeOrganizationRotation()
      // The worker's first round discovers (nothing is due yet).
      yield* rotation.claim(4, db.discover, db.claimOne, { everywhere: false })
      assert.deepStrictEqual(db.cursors.splice(0), [FIRST_ORGANIZATION])
      db.backlog[a] = 1_000
      db.backlog[b] = 5
      // A wakeup names b (POST message's organization, a NOTIFY's payload): one claim, no discovery.
      assert.deepStrictEqual(yield* rotation.claim(4, db.discover, db.claimOne, { hinted: [b], everywhere: false }), [
        b,
        b,
        b,
        b
      ])
      // b took its whole share, so it is still known: the next round claims it again, and it comes up short.
      yield* rotation.claim(4, db.discover, db.claimOne, { everywhere: false })
      assert.deepStrictEqual(db.asked.splice(0), [
        [b, 4],
        [b, 4]
      ])
      assert.deepStrictEqual(db.cursors, [])
      // Short of its share, b is known no more: with nowhere to look, the round discovers (and finds a).
      const found = yield* rotation.claim(4, db.discover, db.claimOne, { everywhere: false })
      assert.deepStrictEqual(found, [a, a, a, a])
      assert.deepStrictEqual(db.cursors, [FIRST_ORGANIZATION])
    })
  )

  it.effect("a busy worker told where to look still discovers once per DISCOVERY_INTERVAL_MS; a poll always does", () =>
    Effect.gen(function* () {
      const db = fakeDatabase({ [a]: 1_000, [b]: 0 })
      const rotation = makeOrganizationRotation()
      const round = (options: { everywhere: boolean }) => rotation.claim(10, db.discover, db.claimOne, options)
      yield* round({ everywhere: false })
      assert.strictEqual(db.cursors.length, 1)
      // Work of b that no wakeup here named (another process's, a lost notification).
      db.backlog[b] = 5
      yield* round({ everywhere: false })
      yield* TestClock.adjust(DISCOVERY_INTERVAL_MS - 1)
      yield* round({ everywhere: false })
      assert.strictEqual(db.cursors.length, 1)
      assert.strictEqual(db.backlog[b], 5)
      // The interval is up: the round discovers b beside a, and the next shares the batch with it.
      yield* TestClock.adjust(1)
      yield* round({ everywhere: false })
      assert.strictEqual(db.cursors.length, 2)
      const next = yield* round({ everywhere: false })
      assert.strictEqual(next.filter((id) => id === b).length, 5)
      // A poll (or a wakeup naming no organization) discovers at once.
      yield* round({ everywhere: true })
      assert.strictEqual(db.cursors.length, 3)
    })
  )
})
