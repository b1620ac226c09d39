/**
 * When a process gives memory back after load (issue 38 item 6,
 * `src/Shared/MemoryRelease.ts`): only while quiet (event loop busy under 5%
 * of the interval) and only when the RSS grew by 64 MiB or more since the
 * last release. The figures it is for are measured by `npm run bench -- memory`.
 */
import { assert, describe, it } from "@effect/vitest"
import { isQuiet, shouldRelease } from "../../src/Shared/MemoryRelease.ts"

const MIB = 1024 * 1024

describe("memory release after load (issue 38 item 6)", () => {
  it("releases when quiet after the RSS grew by 64 MiB or more", () => {
    assert.isTrue(shouldRelease({ utilization: 0.01, rssBytes: 460 * MIB, baselineBytes: 240 * MIB }))
    assert.isTrue(shouldRelease({ utilization: 0.049, rssBytes: 304 * MIB, baselineBytes: 240 * MIB }))
  })

  it("does not release under load: a collection would pause requests", () => {
    assert.isFalse(isQuiet({ utilization: 0.05, rssBytes: 460 * MIB, baselineBytes: 240 * MIB }))
    assert.isFalse(shouldRelease({ utilization: 0.6, rssBytes: 460 * MIB, baselineBytes: 240 * MIB }))
  })

  it("does not release for less growth: nothing worth a pause", () => {
    assert.isFalse(shouldRelease({ utilization: 0, rssBytes: 303 * MIB, baselineBytes: 240 * MIB }))
    assert.isFalse(shouldRelease({ utilization: 0, rssBytes: 200 * MIB, baselineBytes: 240 * MIB }))
  })
})
