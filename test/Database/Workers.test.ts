/**
 * The claims of a worker across organizations (DECISIONS.md O11, W5, R1;
 * `src/Database/Workers.ts` `makeOrganizationRotation`): each round shares
 * its batch between the organizations discovered, and the next round starts
 * after the last one it reached, so no organization's backlog starves another.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { FIRST_ORGANIZATION, makeOrganizationRotation } from "../../src/Database/Workers.ts"

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
  return { cursors, asked, discover, claimOne }
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

  it.effect("rounds start after the last organization reached, so the largest share rotates", () =>
    Effect.gen(function* () {
      const db = fakeDatabase({ [a]: 1_000, [b]: 1_000, [c]: 1_000 })
      const rotation = makeOrganizationRotation()
      // Two organizations a round at most: a round of 2 reaches a and b, the next starts at c.
      const firstOf = (limit: number) =>
        Effect.map(
          rotation.claim(limit, (after) => Effect.map(db.discover(after), (ids) => ids.slice(0, 2)), db.claimOne),
          (rows) => rows[0]
        )
      assert.strictEqual(yield* firstOf(2), a)
      assert.strictEqual(yield* firstOf(2), c)
      assert.strictEqual(yield* firstOf(2), b)
      assert.deepStrictEqual(db.cursors, [FIRST_ORGANIZATION, b, a])
    })
  )

  it.effect("a claim of one (erasures, evaluations) asks each organization in turn until one yields", () =>
    Effect.gen(function* () {
      const db = fakeDatabase({ [a]: 0, [b]: 1, [c]: 1 })
      // a has nothing due by now (the discovery may be stale): it is asked first, then b yields.
      const discover = (after: string) => Effect.map(db.discover(after), (ids) => [a, ...ids])
      const rotation = makeOrganizationRotation()
      assert.deepStrictEqual(yield* rotation.claim(1, discover, db.claimOne), [b])
      assert.deepStrictEqual(db.asked, [
        [a, 1],
        [b, 1]
      ])
      // The next starts after b.
      assert.deepStrictEqual(yield* rotation.claim(1, db.discover, db.claimOne), [c])
    })
  )
})
