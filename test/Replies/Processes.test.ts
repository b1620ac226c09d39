/**
 * Reply jobs across server processes (DECISIONS.md R1, O1, O5) with the echo
 * model (R3): a job pending when its process stops runs once after a restart,
 * and with two processes on one database every job runs exactly once; under a
 * rollout (A12), every run of a session reads the branch the split gave it,
 * whichever process runs it.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import postgres from "postgres"
import { inRollout } from "../../src/Assistants/Rollouts.ts"
import { callJson, ownDatabase, startServer } from "../support/Processes.ts"

/** This file's own database: its server processes claim every organization's work. */
const databaseUrl = ownDatabase("parley_replies")

const ADMIN = "replies-processes"
const C = "/conversations/v2/api/v1"
const env = () => ({ DATABASE_URL: databaseUrl(), ADMIN_TOKEN: ADMIN, LOG_LEVEL: "error", AI_PROVIDER: "echo" })

const json = callJson

/** An organization with an echo-answering AI agent (published assistant), through the APIs of `base`. */
const setup = async (base: string) => {
  const org = (await json(base, "POST", "/admin/v1/organizations", ADMIN, { name: "Replies" })).body
  const token: string = (await json(base, "POST", `/admin/v1/organizations/${org.id}/api-keys`, ADMIN, {})).body.token
  const assistant = (
    await json(base, "POST", `/admin/v1/organizations/${org.id}/assistants`, ADMIN, {
      name: "Echo bot",
      snapshot: {
        graph: {
          initial_node_id: "start",
          nodes: [{ id: "start", name: "Start", type: "llm", config: { instructions: "Echo" } }]
        }
      }
    })
  ).body
  const published = await json(
    base,
    "POST",
    `/assistants/api/v2/assistants/${assistant.id}/branches/main/publish`,
    token,
    {
      message: "v1"
    }
  )
  assert.strictEqual(published.status, 200)
  const agent = (
    await json(base, "POST", `/admin/v1/organizations/${org.id}/agents`, ADMIN, {
      name: "Bot",
      type: "ai",
      assistant_id: assistant.id
    })
  ).body
  const session = async (text: string) => {
    const s = (
      await json(base, "POST", `${C}/sessions`, token, { contact_id: text, contact_name: "C", agent_id: agent.id })
    ).body
    await json(base, "POST", `${C}/sessions/${s.id}/messages`, token, { role: "user", content: { type: "text", text } })
    return s.id as string
  }
  const replies = async (server: string, sessionId: string) =>
    (
      await json(server, "POST", `${C}/sessions/${sessionId}/messages/search`, token, {
        session_id: sessionId,
        role: "assistant",
        limit: 100
      })
    ).body as Array<any>
  return { token, assistantId: assistant.id as string, session, replies }
}

const until = async (condition: () => Promise<boolean>, timeoutMs = 20_000) => {
  const deadline = Date.now() + timeoutMs
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error(`Timed out after ${timeoutMs} ms`)
    await new Promise((resolve) => setTimeout(resolve, 100))
  }
}

describe("reply jobs across processes", () => {
  it.live(
    "R1: a job pending when its process stops runs once after a restart",
    () =>
      Effect.promise(async () => {
        const first = await startServer(env())
        let second: Awaited<ReturnType<typeof startServer>> | undefined
        try {
          const fx = await setup(first.baseUrl)
          const sessionId = await fx.session("Are you there?")
          const triggered = await json(first.baseUrl, "POST", `${C}/sessions/${sessionId}/reply`, fx.token, {
            debounce_time: 2
          })
          assert.strictEqual(triggered.status, 200)
          first.child.kill("SIGTERM")
          assert.strictEqual(await first.exited, 0)
          // While no process runs, the job waits in the table and nothing answered yet.
          const db = postgres(databaseUrl(), { max: 1 })
          try {
            const jobs = await db`SELECT status FROM reply_jobs WHERE session_id = ${sessionId}`
            assert.deepStrictEqual(
              jobs.map((j) => j.status),
              ["pending"]
            )
            const answered =
              await db`SELECT count(*)::int AS n FROM messages WHERE session_id = ${sessionId} AND role = 'assistant'`
            assert.strictEqual(answered[0]!.n, 0)
          } finally {
            await db.end()
          }

          second = await startServer(env())
          await until(async () => (await fx.replies(second!.baseUrl, sessionId)).length > 0)
          // Give a duplicate the time to appear, if there were one.
          await new Promise((resolve) => setTimeout(resolve, 1500))
          const answers = await fx.replies(second.baseUrl, sessionId)
          assert.strictEqual(answers.length, 1)
          assert.deepStrictEqual(answers[0].content, { type: "text", text: "Echo: Are you there?" })
          assert.notStrictEqual(answers[0].run_id, null)
        } finally {
          if (first.child.exitCode === null) first.child.kill("SIGTERM")
          second?.child.kill("SIGTERM")
          if (second !== undefined) assert.strictEqual(await second.exited, 0)
        }
      }),
    120_000
  )

  it.live(
    "R1: with two processes, 30 sessions triggered on both give exactly one reply each",
    () =>
      Effect.promise(async () => {
        const [one, two] = await Promise.all([startServer(env()), startServer(env())])
        try {
          const fx = await setup(one.baseUrl)
          const sessions = await Promise.all(Array.from({ length: 30 }, (_, i) => fx.session(`question ${i}`)))
          // Each session is triggered on both processes within its 5 s window (R1 trailing debounce). The
          // window is wide because the 60 triggers race a loaded machine: a second trigger that arrived
          // after the first one's run started would rightly make a second run.
          const triggers = await Promise.all(
            sessions.flatMap((id) =>
              [one, two].map((server) =>
                json(server.baseUrl, "POST", `${C}/sessions/${id}/reply`, fx.token, { debounce_time: 5 })
              )
            )
          )
          assert.deepStrictEqual(
            triggers.map((t) => t.status),
            Array(60).fill(200)
          )
          await until(async () => {
            const counts = await Promise.all(sessions.map(async (id) => (await fx.replies(two.baseUrl, id)).length))
            return counts.every((n) => n >= 1)
          })
          await new Promise((resolve) => setTimeout(resolve, 1500))
          const answers = await Promise.all(sessions.map((id) => fx.replies(one.baseUrl, id)))
          assert.deepStrictEqual(
            answers.map((a) => a.length),
            Array(30).fill(1)
          )
          assert.deepStrictEqual(
            answers.map((a) => a[0].content.text),
            sessions.map((_, i) => `Echo: question ${i}`)
          )
        } finally {
          one.child.kill("SIGTERM")
          two.child.kill("SIGTERM")
          assert.deepStrictEqual(await Promise.all([one.exited, two.exited]), [0, 0])
        }
      }),
    120_000
  )

  it.live(
    "A12: with two processes, every run of a session reads the branch the split gave it",
    () =>
      Effect.promise(async () => {
        const [one, two] = await Promise.all([startServer(env()), startServer(env())])
        try {
          const fx = await setup(one.baseUrl)
          const assistant = `/assistants/api/v2/assistants/${fx.assistantId}`
          assert.strictEqual(
            (await json(one.baseUrl, "POST", `${assistant}/branches`, fx.token, { name: "b" })).status,
            201
          )
          const renamed = await json(one.baseUrl, "PATCH", `${assistant}/branches/b/draft/nodes/start`, fx.token, {
            name: "Start on b"
          })
          assert.strictEqual(renamed.status, 200)
          const published = await json(one.baseUrl, "POST", `${assistant}/branches/b/publish`, fx.token, {
            message: "b"
          })
          assert.strictEqual(published.status, 200)
          const rollout = await json(two.baseUrl, "PUT", `${assistant}/rollout`, fx.token, {
            branch_name: "b",
            percent: 50
          })
          assert.strictEqual(rollout.status, 200)
          const sessions = await Promise.all(Array.from({ length: 30 }, (_, i) => fx.session(`question ${i}`)))
          const db = postgres(databaseUrl(), { max: 1 })
          try {
            const runs = async () =>
              await db<Array<{ session_id: string; branch_name: string; commit_id: string }>>`
                SELECT session_id::text, branch_name, commit_id FROM runs
                WHERE session_id = ANY(${sessions}::uuid[]) ORDER BY started_at`
            // Two turns per session, triggered on one process then the other; either process's worker may run each.
            for (const [turn, server] of [
              [1, one],
              [2, two]
            ] as const) {
              const triggers = await Promise.all(
                sessions.map((id) =>
                  json(server.baseUrl, "POST", `${C}/sessions/${id}/reply`, fx.token, { debounce_time: 0 })
                )
              )
              assert.deepStrictEqual(
                triggers.map((t) => t.status),
                Array(30).fill(200)
              )
              await until(async () => {
                const recorded = await runs()
                return sessions.every((id) => recorded.filter((run) => run.session_id === id).length >= turn)
              })
            }
            const recorded = await runs()
            const mainCommits = new Set<string>()
            for (const id of sessions) {
              const own = recorded.filter((run) => run.session_id === id)
              const expected = inRollout(id, 50) ? "b" : "main"
              assert.deepStrictEqual(
                own.map((run) => run.branch_name),
                [expected, expected],
                id
              )
              for (const run of own) {
                if (expected === "b") assert.strictEqual(run.commit_id, published.body.commit.id, id)
                else mainCommits.add(run.commit_id)
              }
            }
            // main's runs all read its one commit, which is not the branch's.
            assert.strictEqual(mainCommits.size, 1)
            assert.isFalse(mainCommits.has(published.body.commit.id))
          } finally {
            await db.end()
          }
        } finally {
          one.child.kill("SIGTERM")
          two.child.kill("SIGTERM")
          assert.deepStrictEqual(await Promise.all([one.exited, two.exited]), [0, 0])
        }
      }),
    120_000
  )
})
