/**
 * PARLEY_ROLE (DECISIONS.md O1): an `api` process serves the API and runs no
 * worker (a due reply job stays pending); a `worker` process serves only the
 * health routes and runs the job.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import postgres from "postgres"
import { ownDatabase, startServer } from "../support/Processes.ts"

/** This file's own database: its server processes claim every organization's work. */
const databaseUrl = ownDatabase("parley_roles")

const ADMIN = "roles"
const env = () => ({ DATABASE_URL: databaseUrl(), ADMIN_TOKEN: ADMIN, LOG_LEVEL: "error" })

const json = async (url: string, method: string, token?: string, body?: unknown) => {
  const response = await fetch(url, {
    method,
    headers: { ...(token ? { authorization: `Bearer ${token}` } : {}), "content-type": "application/json" },
    ...(body !== undefined ? { body: JSON.stringify(body) } : {})
  })
  const text = await response.text()
  return { status: response.status, body: text === "" ? undefined : (JSON.parse(text) as any) }
}

describe("roles", () => {
  it.live(
    "O1: api serves and runs no worker; worker serves only health and runs the jobs",
    () =>
      Effect.promise(async () => {
        const api = await startServer({ ...env(), PARLEY_ROLE: "api" })
        let worker: Awaited<ReturnType<typeof startServer>> | undefined
        const db = postgres(databaseUrl(), { max: 1 })
        try {
          const base = api.baseUrl
          const org = (await json(`${base}/admin/v1/organizations`, "POST", ADMIN, { name: "Roles" })).body
          const token = (await json(`${base}/admin/v1/organizations/${org.id}/api-keys`, "POST", ADMIN, {})).body.token
          const assistant = (
            await json(`${base}/admin/v1/organizations/${org.id}/assistants`, "POST", ADMIN, {
              name: "Echo",
              snapshot: { graph: { initial_node_id: "s", nodes: [{ id: "s", name: "S", type: "llm", config: {} }] } }
            })
          ).body
          await json(`${base}/assistants/api/v2/assistants/${assistant.id}/branches/main/publish`, "POST", token, {
            message: "v1"
          })
          const agent = (
            await json(`${base}/admin/v1/organizations/${org.id}/agents`, "POST", ADMIN, {
              name: "Bot",
              type: "ai",
              assistant_id: assistant.id
            })
          ).body
          const C = `${base}/conversations/v2/api/v1`
          const session = (
            await json(`${C}/sessions`, "POST", token, { contact_id: "r", contact_name: "R", agent_id: agent.id })
          ).body
          await json(`${C}/sessions/${session.id}/messages`, "POST", token, {
            role: "user",
            content: { type: "text", text: "Hi" }
          })
          assert.strictEqual(
            (await json(`${C}/sessions/${session.id}/reply`, "POST", token, { debounce_time: 0 })).status,
            200
          )
          await new Promise((resolve) => setTimeout(resolve, 1500))
          const pending = await db`SELECT status FROM reply_jobs WHERE session_id = ${session.id}`
          assert.deepStrictEqual(
            pending.map((row) => row.status),
            ["pending"],
            "an api process runs no reply worker"
          )

          worker = await startServer({ ...env(), PARLEY_ROLE: "worker" })
          assert.strictEqual((await fetch(`${worker.baseUrl}/readyz`)).status, 200)
          assert.strictEqual((await fetch(`${worker.baseUrl}/healthz`)).status, 200)
          assert.strictEqual(
            (await json(`${worker.baseUrl}/admin/v1/organizations`, "POST", ADMIN, { name: "x" })).status,
            404
          )
          const deadline = Date.now() + 15_000
          for (;;) {
            const replies =
              await db`SELECT count(*)::int AS n FROM messages WHERE session_id = ${session.id} AND role = 'assistant'`
            if (replies[0]!.n === 1) break
            if (Date.now() > deadline) throw new Error("the worker process did not run the reply job")
            await new Promise((resolve) => setTimeout(resolve, 100))
          }
        } finally {
          await db.end()
          api.child.kill("SIGTERM")
          worker?.child.kill("SIGTERM")
          assert.deepStrictEqual(await Promise.all([api.exited, worker?.exited ?? 0]), [0, 0])
        }
      }),
    120_000
  )
})
