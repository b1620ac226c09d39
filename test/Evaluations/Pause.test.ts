/**
 * The pause after an evaluation's turn beside live runs (A16, issue 41 item 6):
 * 12 times the event loop's busy time over the turn, at most 1 s, so a turn
 * held seconds on a model while live traffic keeps the loop busy does not
 * stop the evaluation for a minute.
 */
import { assert, describe, it } from "@effect/vitest"
import { MAX_PAUSE_MS, PAUSE_PER_TURN_TIME, pauseAfterTurn } from "../../src/Evaluations/Evaluations.ts"

describe("the pause after a turn beside live runs (A16)", () => {
  it("is 12 times the loop's busy time over the turn", () => {
    assert.strictEqual(PAUSE_PER_TURN_TIME, 12)
    assert.strictEqual(pauseAfterTurn(0), 0)
    assert.strictEqual(pauseAfterTurn(2.5), 30)
    assert.strictEqual(pauseAfterTurn(80), 960)
  })

  it("is at most 1 s, however busy the loop was while the turn waited", () => {
    assert.strictEqual(MAX_PAUSE_MS, 1_000)
    assert.strictEqual(pauseAfterTurn(100), 1_000)
    assert.strictEqual(pauseAfterTurn(3_000), 1_000)
  })
})
