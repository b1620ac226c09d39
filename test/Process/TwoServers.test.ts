/**
 * Two server processes on one database (O1: any number of processes may share
 * it): concurrent message POSTs and transfers split across both keep every
 * change and its event (W2), and a finish on one process closes the session for
 * the other (D5).
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { callJson, ownDatabase, startServer } from "../support/Processes.ts"

/** This file's own database: its server processes claim every organization's work. */
const databaseUrl = ownDatabase("parley_two_servers")

describe("two server processes", () => {
  it.live(
    "share one database: 40 concurrent POSTs over both, then a finish on one is seen by the other",
    () =>
      Effect.promise(async () => {
        const env = { DATABASE_URL: databaseUrl(), ADMIN_TOKEN: "two-servers", LOG_LEVEL: "error" }
        const [one, two] = await Promise.all([startServer(env), startServer(env)])
        try {
          const json = callJson
          const org = (await json(one.baseUrl, "POST", "/admin/v1/organizations", "two-servers", { name: "Two" })).body
          const key = (await json(two.baseUrl, "POST", `/admin/v1/organizations/${org.id}/api-keys`, "two-servers", {}))
            .body
          const C = "/conversations/v2/api/v1"
          const session = (
            await json(one.baseUrl, "POST", `${C}/sessions`, key.token, { contact_id: "c", contact_name: "C" })
          ).body
          const posts = await Promise.all(
            Array.from({ length: 40 }, (_, i) =>
              json(i % 2 === 0 ? one.baseUrl : two.baseUrl, "POST", `${C}/sessions/${session.id}/messages`, key.token, {
                role: "user",
                content: { type: "text", text: `m${i}` }
              })
            )
          )
          assert.deepStrictEqual(
            posts.map((post) => post.status),
            Array(40).fill(201)
          )
          const stored = await json(two.baseUrl, "POST", `${C}/sessions/${session.id}/messages/search`, key.token, {
            session_id: session.id,
            limit: 100
          })
          assert.strictEqual(stored.body.length, 40)
          assert.strictEqual(new Set(stored.body.map((m: any) => m.id)).size, 40)
          const finished = await json(two.baseUrl, "POST", `${C}/sessions/${session.id}/finish`, key.token, {})
          assert.strictEqual(finished.status, 200)
          const late = await json(one.baseUrl, "POST", `${C}/sessions/${session.id}/messages`, key.token, {
            role: "user",
            content: { type: "text", text: "late" }
          })
          assert.strictEqual(late.status, 400)
          assert.deepStrictEqual(late.body, { detail: "Session is not open" })
        } finally {
          one.child.kill("SIGTERM")
          two.child.kill("SIGTERM")
          assert.deepStrictEqual(await Promise.all([one.exited, two.exited]), [0, 0])
        }
      }),
    120_000
  )
})
