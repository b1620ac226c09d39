/**
 * The start's garbage is released (issue 44, `src/Shared/MemoryRelease.ts`):
 * a server process runs one memory-reducing collection as it starts, logged
 * at debug level, and no other while it stays idle. What it saves is measured by `npm run bench -- memory`
 * (bench/README.md "memory"), not here.
 */
import { assert, describe, it } from "@effect/vitest"
import { ownDatabase, startServer, waitUntil } from "../support/Processes.ts"

const databaseUrl = ownDatabase("parley_memory_release")

/** The debug lines of a release, from the server's JSON log output. */
const releases = (output: string) =>
  output
    .split("\n")
    .filter((line) => line.includes("Memory released after"))
    .map((line) => String((JSON.parse(line) as { message: unknown }).message))

describe("memory release after the start (issue 44)", () => {
  it("an idle server releases the start's garbage within seconds of being ready, once", {
    timeout: 60_000
  }, async () => {
    const server = await startServer({ DATABASE_URL: databaseUrl(), ADMIN_TOKEN: "memory", LOG_LEVEL: "debug" })
    try {
      assert.isTrue(await waitUntil(() => releases(server.output()).length > 0, 20_000), server.output())
      // Still idle: no second release (the RSS has not grown by 64 MiB since).
      await new Promise((resolve) => setTimeout(resolve, 3_000))
      const seen = releases(server.output())
      assert.strictEqual(seen.length, 1, server.output())
      assert.match(seen[0]!, /^Memory released after the start: RSS \d+ MB -> \d+ MB$/)
    } finally {
      server.child.kill("SIGTERM")
      await server.exited
    }
  })
})
