/**
 * Graceful shutdown under load (DECISIONS.md O5, issue 8 item 5): SIGTERM while
 * POST message runs at full speed exits 0 within 15 s, responds no 5xx (a
 * request after the stop is refused at the connection, never given a response
 * with an error status), loses no message it responded 201 to and keeps one
 * message.created per message (W2); SIGTERM while reply jobs run loses no
 * job: the next process answers every session exactly once and leaves
 * `reply_jobs` empty (R1).
 */
import * as http from "node:http"
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import postgres from "postgres"
import { callJson, ownDatabase, type ServerProcess, sleep, startServer } from "../support/Processes.ts"

/** This file's own database: its server processes claim every organization's work. */
const databaseUrl = ownDatabase("parley_shutdown")

const ADMIN = "shutdown"
const C = "/conversations/v2/api/v1"
const env = () => ({ DATABASE_URL: databaseUrl(), ADMIN_TOKEN: ADMIN, LOG_LEVEL: "error", AI_PROVIDER: "echo" })

const json = callJson

/** An organization and an API key of it, through the admin API of `base`. */
const organization = async (base: string, name: string) => {
  const org = await json(base, "POST", "/admin/v1/organizations", ADMIN, { name })
  assert.strictEqual(org.status, 201)
  const key = await json(base, "POST", `/admin/v1/organizations/${org.body.id}/api-keys`, ADMIN, {})
  assert.strictEqual(key.status, 201)
  return { id: org.body.id as string, token: key.body.token as string }
}

/** Resolves with the exit code, or with "timeout" after `ms` (the process is then killed). */
const exitWithin = async (server: ServerProcess, ms: number): Promise<number | null | "timeout"> => {
  let timer: ReturnType<typeof setTimeout> | undefined
  const outcome = await Promise.race([
    server.exited,
    new Promise<"timeout">((resolve) => {
      timer = setTimeout(() => resolve("timeout"), ms)
    })
  ])
  clearTimeout(timer)
  if (outcome === "timeout") server.child.kill("SIGKILL")
  return outcome
}

/** The error code under a failed `fetch` (`ECONNREFUSED`, `ECONNRESET`, `UND_ERR_SOCKET`...). */
const codeOf = (error: unknown): string => {
  let current: any = error
  for (let depth = 0; current !== undefined && current !== null && depth < 5; depth++) {
    if (typeof current.code === "string") return current.code
    if (current.name === "TimeoutError") return "TimeoutError"
    current = current.cause
  }
  return String((error as any)?.message ?? error)
}

/** One POST of the load: an HTTP response, or a failure at the connection; times in ms of `performance.now()`. */
type Outcome =
  | {
      readonly kind: "response"
      readonly status: number
      readonly id: string | undefined
      readonly startedAt: number
      readonly endedAt: number
      /** Whether the response said `Connection: close` (the server ends the kept-alive connection). */
      readonly closes: boolean
    }
  | { readonly kind: "error"; readonly code: string; readonly startedAt: number; readonly endedAt: number }

describe("graceful shutdown (O5)", () => {
  it.live(
    "O5/W2: SIGTERM under a steady POST message load exits 0, responds no 5xx and loses no message it responded 201 to",
    () =>
      Effect.promise(async () => {
        const server = await startServer(env())
        const db = postgres(databaseUrl(), { max: 1 })
        try {
          const org = await organization(server.baseUrl, "Shutdown under load")
          const session = await json(server.baseUrl, "POST", `${C}/sessions`, org.token, {
            contact_id: "load",
            contact_name: "Load"
          })
          assert.strictEqual(session.status, 201)
          const url = `${server.baseUrl}${C}/sessions/${session.body.id}/messages`
          const body = JSON.stringify({ role: "user", content: { type: "text", text: "under load" } })

          const outcomes: Array<Outcome> = []
          let stop = false
          const loop = async () => {
            while (!stop) {
              const startedAt = performance.now()
              try {
                // Node's fetch keeps connections alive between the loop's requests.
                const response = await fetch(url, {
                  method: "POST",
                  headers: { authorization: `Bearer ${org.token}`, "content-type": "application/json" },
                  body,
                  signal: AbortSignal.timeout(20_000)
                })
                const text = await response.text()
                let id: string | undefined
                try {
                  id = JSON.parse(text)?.id
                } catch {}
                outcomes.push({
                  kind: "response",
                  status: response.status,
                  id,
                  startedAt,
                  endedAt: performance.now(),
                  closes: response.headers.get("connection") === "close"
                })
              } catch (error) {
                outcomes.push({ kind: "error", code: codeOf(error), startedAt, endedAt: performance.now() })
                await sleep(20)
              }
            }
          }
          const loops = Array.from({ length: 20 }, loop)
          // A second of load, and more until over 20 responses (a Citus cluster on a busy machine is slower, O11).
          const loadStarted = performance.now()
          await sleep(1_000)
          while (outcomes.length <= 20 && performance.now() - loadStarted < 20_000) await sleep(50)
          const respondedBeforeStop = outcomes.length
          const stoppedAt = performance.now()
          server.child.kill("SIGTERM")
          const exit = await exitWithin(server, 15_000)
          const exitedAfterMs = performance.now() - stoppedAt
          // Keep knocking a little after the exit: those requests must be refused, not responded to.
          await sleep(300)
          stop = true
          await Promise.all(loops)

          const responses = outcomes.filter((o) => o.kind === "response")
          const errors = outcomes.filter((o) => o.kind === "error")
          const statuses: Record<string, number> = {}
          for (const r of responses) statuses[r.status] = (statuses[r.status] ?? 0) + 1
          const errorCodes: Record<string, number> = {}
          for (const e of errors) errorCodes[e.code] = (errorCodes[e.code] ?? 0) + 1
          const respondedAfterStop = responses.filter((r) => r.startedAt >= stoppedAt).length
          const errorsOfEarlierRequests = errors.filter((e) => e.startedAt < stoppedAt)
          const created = responses.filter((r) => r.status === 201).map((r) => r.id!)
          const [stored] = await db`
            SELECT count(*)::int AS n FROM messages WHERE organization_id = ${org.id}`
          const [events] = await db`
            SELECT count(*)::int AS n FROM events WHERE organization_id = ${org.id} AND type = 'message.created'`
          const storedIds = new Set(
            (await db`SELECT id::text FROM messages WHERE organization_id = ${org.id}`).map((row) => row.id as string)
          )
          const eventIds = (
            await db`
              SELECT body::jsonb #>> '{data,object,id}' AS id FROM events
              WHERE organization_id = ${org.id} AND type = 'message.created'`
          ).map((row) => row.id as string)
          const eventIdSet = new Set(eventIds)
          const withoutEvent = [...storedIds].filter((id) => !eventIdSet.has(id))
          console.log(
            `[shutdown under load] exit ${exit} after ${exitedAfterMs.toFixed(0)} ms; ${respondedBeforeStop} responded before SIGTERM; ` +
              `statuses ${JSON.stringify(statuses)} (${respondedAfterStop} responses to requests sent after SIGTERM); ` +
              `connection errors ${JSON.stringify(errorCodes)} (${errorsOfEarlierRequests.length} of requests sent before SIGTERM); ` +
              `messages stored ${stored!.n} (${stored!.n - created.length} without a 201), message.created events ${events!.n}`
          )
          // Diagnosis: when, relative to the SIGTERM, the last 201, the other responses and the resets came.
          const at = (ms: number) => `${(ms - stoppedAt).toFixed(0)}`
          const last201 = Math.max(...responses.filter((r) => r.status === 201).map((r) => r.endedAt))
          const timeline = (list: ReadonlyArray<Outcome>) =>
            list.map((o) => `${at(o.startedAt)}->${at(o.endedAt)}`).join(" ")
          console.log(
            `[shutdown under load] ms after SIGTERM: last 201 at ${at(last201)}; ` +
              `responses with Connection: close ${responses.filter((r) => r.closes).length}; ` +
              `other responses (sent->responded): ${timeline(responses.filter((r) => r.status !== 201))}; ` +
              `resets (sent->failed): ${timeline(errors.filter((e) => e.code !== "ECONNREFUSED"))}`
          )

          assert.strictEqual(exit, 0, `exit code (or timeout) after SIGTERM:\n${server.output().slice(-4_000)}`)
          assert.isAbove(respondedBeforeStop, 20, "the load ran before the stop")
          assert.deepStrictEqual(Object.keys(statuses), ["201"], "every HTTP response is 201, none 5xx")
          assert.isAbove(errors.length, 0, "requests after the stop are refused at the connection")
          // Resets are not asserted here: a new connection still in the kernel's accept queue when the
          // listener closes is reset (seen once under the full suite's load, sent 35 ms after SIGTERM),
          // which no server can avoid. Requests on open connections are the next test's (issue 38 item 5).
          assert.strictEqual(
            errors.filter((e) => e.code === "TimeoutError").length,
            0,
            "no request hangs until its 20 s timeout"
          )
          assert.strictEqual(new Set(created).size, created.length, "every 201 has its own message id")
          const missing = created.filter((id) => !storedIds.has(id))
          assert.deepStrictEqual(missing, [], "every message responded 201 to is stored")
          assert.strictEqual(events!.n, stored!.n, "one message.created event per stored message (W2)")
          assert.deepStrictEqual(withoutEvent, [], "every stored message has its message.created event (W2)")
        } finally {
          if (server.child.exitCode === null && server.child.signalCode === null) server.child.kill("SIGKILL")
          await db.end()
        }
      }),
    120_000
  )

  it.live(
    "O5/R1: SIGTERM while 40 reply jobs run loses none: the next process answers each session exactly once",
    () =>
      Effect.promise(async () => {
        const first = await startServer(env())
        let second: ServerProcess | undefined
        const db = postgres(databaseUrl(), { max: 1 })
        try {
          const base = first.baseUrl
          const org = await organization(base, "Shutdown with reply jobs")
          const assistant = await json(base, "POST", `/admin/v1/organizations/${org.id}/assistants`, ADMIN, {
            name: "Echo bot",
            snapshot: {
              graph: {
                initial_node_id: "start",
                nodes: [{ id: "start", name: "Start", type: "llm", config: { instructions: "Echo" } }]
              }
            }
          })
          assert.strictEqual(assistant.status, 201)
          const published = await json(
            base,
            "POST",
            `/assistants/api/v2/assistants/${assistant.body.id}/branches/main/publish`,
            org.token,
            { message: "v1" }
          )
          assert.strictEqual(published.status, 200)
          const agent = await json(base, "POST", `/admin/v1/organizations/${org.id}/agents`, ADMIN, {
            name: "Bot",
            type: "ai",
            assistant_id: assistant.body.id
          })
          assert.strictEqual(agent.status, 201)
          const sessions = await Promise.all(
            Array.from({ length: 40 }, async (_, i) => {
              const session = await json(base, "POST", `${C}/sessions`, org.token, {
                contact_id: `contact-${i}`,
                contact_name: "C",
                agent_id: agent.body.id
              })
              assert.strictEqual(session.status, 201)
              const message = await json(base, "POST", `${C}/sessions/${session.body.id}/messages`, org.token, {
                role: "user",
                content: { type: "text", text: `question ${i}` }
              })
              assert.strictEqual(message.status, 201)
              return session.body.id as string
            })
          )

          const triggers = await Promise.all(
            sessions.map((id) => json(base, "POST", `${C}/sessions/${id}/reply`, org.token, { debounce_time: 0 }))
          )
          first.child.kill("SIGTERM")
          const [atStop] = await db`
            SELECT count(*)::int AS n FROM messages WHERE organization_id = ${org.id} AND role = 'assistant'`
          assert.deepStrictEqual(
            triggers.map((t) => t.status),
            Array(40).fill(200)
          )
          const exit = await exitWithin(first, 15_000)
          assert.strictEqual(exit, 0, `exit code (or timeout) after SIGTERM:\n${first.output().slice(-4_000)}`)

          const repliesOf = async () =>
            new Map(
              (
                await db`
                  SELECT s.id::text AS session_id, count(m.id)::int AS n
                  FROM sessions s LEFT JOIN messages m
                    ON m.organization_id = s.organization_id AND m.session_id = s.id AND m.role = 'assistant'
                  WHERE s.organization_id = ${org.id} GROUP BY s.id`
              ).map((row) => [row.session_id as string, row.n as number])
            )
          const jobsLeft = async () =>
            (await db`SELECT status, leased_by FROM reply_jobs WHERE organization_id = ${org.id}`).map((row) => ({
              status: row.status as string,
              leased: row.leased_by !== null
            }))
          const answeredByFirst = [...(await repliesOf()).values()].filter((n) => n > 0).length
          const leftByFirst = await jobsLeft()
          console.log(
            `[shutdown with reply jobs] ${atStop!.n}/40 sessions answered just after SIGTERM; the stopped process ` +
              `answered ${answeredByFirst}/40 and left ` +
              `${leftByFirst.length} job(s): ${JSON.stringify(leftByFirst.slice(0, 3))}`
          )

          second = await startServer(env())
          const deadline = Date.now() + 20_000
          let counts = await repliesOf()
          while ([...counts.values()].some((n) => n === 0) && Date.now() < deadline) {
            await sleep(200)
            counts = await repliesOf()
          }
          // Give a duplicate the time to appear, if there were one.
          await sleep(1_500)
          counts = await repliesOf()
          assert.deepStrictEqual(
            sessions.map((id) => counts.get(id)),
            Array(40).fill(1),
            "exactly one assistant reply per session"
          )
          const answers = await db`
            SELECT session_id::text AS session_id, content->>'text' AS text FROM messages
            WHERE organization_id = ${org.id} AND role = 'assistant'`
          const textOf = new Map(answers.map((row) => [row.session_id as string, row.text as string]))
          assert.deepStrictEqual(
            sessions.map((id) => textOf.get(id)),
            sessions.map((_, i) => `Echo: question ${i}`)
          )
          assert.deepStrictEqual(await jobsLeft(), [], "reply_jobs is empty")
          const [allJobs] = await db`SELECT count(*)::int AS n FROM reply_jobs`
          assert.strictEqual(allJobs!.n, 0)
        } finally {
          if (first.child.exitCode === null && first.child.signalCode === null) first.child.kill("SIGKILL")
          if (second !== undefined) {
            second.child.kill("SIGTERM")
            assert.strictEqual(await exitWithin(second, 15_000), 0)
          }
          await db.end()
        }
      }),
    120_000
  )
  it.live(
    "issue 38 item 5: requests sent on idle kept-alive connections just after SIGTERM get a response with Connection: close, never a reset",
    () =>
      Effect.promise(async () => {
        const server = await startServer(env())
        const agent = new http.Agent({ keepAlive: true, maxSockets: 40 })
        try {
          const org = await organization(server.baseUrl, "Idle connections at shutdown")
          const session = await json(server.baseUrl, "POST", `${C}/sessions`, org.token, {
            contact_id: "idle",
            contact_name: "Idle"
          })
          const url = new URL(`${server.baseUrl}${C}/sessions/${session.body.id}`)
          type Result = { status: number; close: boolean } | { error: string }
          const get = () =>
            new Promise<Result>((resolve) => {
              const request = http.request(
                url,
                { agent, headers: { authorization: `Bearer ${org.token}` } },
                (response) => {
                  response.resume()
                  response.on("end", () =>
                    resolve({ status: response.statusCode ?? 0, close: response.headers.connection === "close" })
                  )
                }
              )
              request.on("error", (error: NodeJS.ErrnoException) => resolve({ error: error.code ?? error.message }))
              request.end()
            })
          // 40 kept-alive connections, then idle in the agent's pool.
          const warm = await Promise.all(Array.from({ length: 40 }, get))
          assert.deepStrictEqual(new Set(warm.map((r) => ("status" in r ? r.status : r.error))), new Set([200]))
          assert.strictEqual(Object.values(agent.freeSockets).flat().length, 40)

          server.child.kill("SIGTERM")
          // One request every 2 ms on those connections while the server shuts down.
          const results = await Promise.all(Array.from({ length: 40 }, (_, i) => sleep(i * 2).then(get)))
          const exit = await server.exited
          const resets = results.filter((r) => "error" in r && r.error !== "ECONNREFUSED")
          console.log(
            `[idle connections at shutdown] ${results.filter((r) => "status" in r).length} responses, ` +
              `errors ${JSON.stringify(results.filter((r) => "error" in r).map((r) => (r as { error: string }).error))}`
          )
          assert.strictEqual(exit, 0)
          assert.deepStrictEqual(resets, [], "no request sent on an open connection is reset")
          for (const result of results) {
            if ("status" in result) assert.deepStrictEqual(result, { status: 200, close: true })
          }
        } finally {
          agent.destroy()
          if (server.child.exitCode === null && server.child.signalCode === null) server.child.kill("SIGKILL")
        }
      }),
    120_000
  )
})
