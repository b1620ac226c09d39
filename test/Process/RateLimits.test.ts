/**
 * Rate limits across processes (DECISIONS.md D20, issue 15 item 2): two server
 * processes on one database share an organization's bucket, so over the run
 * the organization gets at most 10% more than its limit (burst + rate x
 * seconds), and at least most of it.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { callJson, ownDatabase, type ServerProcess, startServer } from "../support/Processes.ts"

const databaseUrl = ownDatabase("parley_rate_limits")
const ADMIN = "rate-limits-admin"
const C = "/conversations/v2/api/v1"

describe("rate limits across processes (D20)", () => {
  it.live(
    "D20: one organization's limit holds across two processes: allowed requests over 10 s stay within 10% of burst + rate x seconds",
    () =>
      Effect.promise(async () => {
        const env = { DATABASE_URL: databaseUrl(), ADMIN_TOKEN: ADMIN, LOG_LEVEL: "error" }
        const [one, two] = await Promise.all([startServer(env), startServer(env)])
        try {
          const org = (await callJson(one.baseUrl, "POST", "/admin/v1/organizations", ADMIN, { name: "Limited" })).body
          const key = (await callJson(one.baseUrl, "POST", `/admin/v1/organizations/${org.id}/api-keys`, ADMIN, {}))
            .body
          // Low enough that the clients exceed it on a busy CI machine too (one run sent 1,693 requests in 10 s,
          // under a limit of 200/s, and none was limited).
          const [rate, burst] = [50, 50]
          const set = await callJson(two.baseUrl, "PATCH", `/admin/v1/organizations/${org.id}/settings`, ADMIN, {
            rate_limit_per_second: rate,
            rate_limit_burst: burst
          })
          assert.strictEqual(set.status, 200)
          const counts = { allowed: 0, limited: 0, other: 0 }
          const started = Date.now()
          const until = started + 10_000
          const worker = async (server: ServerProcess) => {
            while (Date.now() < until) {
              const response = await fetch(`${server.baseUrl}${C}/sessions/search`, {
                method: "POST",
                headers: { authorization: `Bearer ${key.token}`, "content-type": "application/json" },
                body: JSON.stringify({ limit: 1 })
              })
              await response.arrayBuffer()
              if (response.status === 200) counts.allowed++
              else if (response.status === 429) counts.limited++
              else counts.other++
            }
          }
          await Promise.all(Array.from({ length: 16 }, (_, i) => worker(i % 2 === 0 ? one : two)))
          const seconds = (Date.now() - started) / 1000
          const limit = burst + rate * seconds
          process.stdout.write(
            `[rate limits] ${seconds.toFixed(1)} s over two processes: ${counts.allowed} allowed, ${counts.limited} limited, limit ${limit.toFixed(0)}\n`
          )
          assert.strictEqual(counts.other, 0)
          assert.isAbove(counts.limited, 0, "the load exceeded the limit")
          assert.isAtMost(counts.allowed, limit * 1.1)
          // And not far less (half, as the clients' own pace, not the limit, may be what held them back).
          assert.isAtLeast(counts.allowed, Math.min(limit, counts.allowed + counts.limited) * 0.5)
        } finally {
          one.child.kill("SIGTERM")
          two.child.kill("SIGTERM")
          assert.deepStrictEqual(await Promise.all([one.exited, two.exited]), [0, 0])
        }
      }),
    120_000
  )
})
