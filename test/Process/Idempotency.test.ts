/**
 * Idempotency-Key across processes and crashes (DECISIONS.md D19, issue 15
 * item 1): one key sent to two server processes at once runs the operation
 * once; a process killed (kill -9) between the operation and its stored
 * response leaves neither, so the retry runs it once; a process killed after
 * the commit leaves both, so the retry on the other process replays the
 * response.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import postgres from "postgres"
import { lockWaits } from "../support/Database.ts"
import { callJson, ownDatabase, type ServerProcess, sleep, startServer } from "../support/Processes.ts"

const databaseUrl = ownDatabase("parley_idempotency")
const ADMIN = "idempotency-admin"
const C = "/conversations/v2/api/v1"

/** POST /sessions for `contactId` with `key`: status, body text and whether it was replayed. */
const createSession = async (server: ServerProcess, token: string, key: string, contactId: string) => {
  const response = await fetch(`${server.baseUrl}${C}/sessions`, {
    method: "POST",
    headers: { authorization: `Bearer ${token}`, "content-type": "application/json", "idempotency-key": key },
    body: JSON.stringify({ contact_id: contactId, contact_name: "Ada" })
  })
  return {
    status: response.status,
    text: await response.text(),
    replayed: response.headers.get("idempotent-replayed") === "true"
  }
}

/** An organization and an API key through the admin API of `server`. */
const organization = async (server: ServerProcess) => {
  const org = (await callJson(server.baseUrl, "POST", "/admin/v1/organizations", ADMIN, { name: "Idem" })).body
  const key = (await callJson(server.baseUrl, "POST", `/admin/v1/organizations/${org.id}/api-keys`, ADMIN, {})).body
  return { id: org.id as string, token: key.token as string }
}

/** Stops `servers` with SIGTERM; each must exit 0. */
const stop = async (...servers: Array<ServerProcess>) => {
  for (const server of servers) server.child.kill("SIGTERM")
  assert.deepStrictEqual(
    await Promise.all(servers.map((server) => server.exited)),
    servers.map(() => 0)
  )
}

const env = () => ({ DATABASE_URL: databaseUrl(), ADMIN_TOKEN: ADMIN, LOG_LEVEL: "error" })

describe("Idempotency-Key across processes (D19)", () => {
  it.live(
    "D19: twenty keys, each sent to two processes at once: each operation runs once; the other response is 409 or the replay",
    () =>
      Effect.promise(async () => {
        const [one, two] = await Promise.all([startServer(env()), startServer(env())])
        const db = postgres(databaseUrl(), { max: 1 })
        try {
          const org = await organization(one)
          for (let i = 0; i < 20; i++) {
            const pair = await Promise.all([
              createSession(one, org.token, `both-${i}`, `both-${i}`),
              createSession(two, org.token, `both-${i}`, `both-${i}`)
            ])
            const originals = pair.filter((response) => response.status === 201 && !response.replayed)
            assert.strictEqual(originals.length, 1, JSON.stringify(pair))
            for (const response of pair.filter((response) => response !== originals[0])) {
              if (response.status === 201)
                assert.deepStrictEqual([response.replayed, response.text], [true, originals[0]!.text])
              else assert.strictEqual(response.status, 409, response.text)
            }
          }
          const [row] = await db<Array<{ sessions: number }>>`
            SELECT count(*)::int AS sessions FROM sessions WHERE organization_id = ${org.id}`
          assert.strictEqual(row!.sessions, 20)
        } finally {
          await db.end()
          await stop(one, two)
        }
      }),
    120_000
  )

  it.live(
    "D19: kill -9 between the operation and its stored response leaves neither: the retry on another process runs it once; kill -9 after the commit: the retry replays",
    () =>
      Effect.promise(async () => {
        const [doomed, survivor] = await Promise.all([startServer(env()), startServer(env())])
        const db = postgres(databaseUrl(), { max: 1 })
        const locker = postgres(databaseUrl(), { max: 1 })
        try {
          const org = await organization(survivor)
          // Storing responses is blocked: the request's session is inserted in its transaction, which
          // then waits to store the response. The server is killed there.
          const first = await locker.begin(async (tx) => {
            await tx`LOCK TABLE idempotency_keys IN SHARE ROW EXCLUSIVE MODE`
            const pending = createSession(doomed, org.token, "crash", "crash").catch((error: unknown) => error)
            for (let waited = 0; ; waited++) {
              if ((await lockWaits(db, "idempotency_keys")) > 0) break
              if (waited > 200) throw new Error("the request never waited to store its response")
              await sleep(25)
            }
            doomed.child.kill("SIGKILL")
            await doomed.exited
            return pending
          })
          assert.instanceOf(first, Error, "the killed process sent no response")
          const count = async (table: "sessions" | "idempotency_keys") =>
            (
              await db<Array<{ n: number }>>`
                SELECT count(*)::int AS n FROM ${db(table)} WHERE organization_id = ${org.id}`
            )[0]!.n
          assert.deepStrictEqual([await count("sessions"), await count("idempotency_keys")], [0, 0])
          const retry = await createSession(survivor, org.token, "crash", "crash")
          assert.deepStrictEqual([retry.status, retry.replayed], [201, false])
          assert.deepStrictEqual([await count("sessions"), await count("idempotency_keys")], [1, 1])

          // Committed, then the process dies: the response outlives it, the retry elsewhere replays it.
          const third = await startServer(env())
          const committed = await createSession(third, org.token, "after-commit", "after-commit")
          third.child.kill("SIGKILL")
          await third.exited
          const replay = await createSession(survivor, org.token, "after-commit", "after-commit")
          assert.deepStrictEqual([replay.status, replay.replayed, replay.text], [201, true, committed.text])
          assert.strictEqual(await count("sessions"), 2)
        } finally {
          await Promise.all([db.end(), locker.end()])
          if (doomed.child.exitCode === null && doomed.child.signalCode === null) doomed.child.kill("SIGKILL")
          await stop(survivor)
        }
      }),
    120_000
  )

  it.live(
    "D19: POST message while the same key's first request still runs on the other process gets 409, then the replay",
    () =>
      Effect.promise(async () => {
        const [one, two] = await Promise.all([startServer(env()), startServer(env())])
        const db = postgres(databaseUrl(), { max: 1 })
        try {
          const org = await organization(one)
          const session = (
            await callJson(one.baseUrl, "POST", `${C}/sessions`, org.token, { contact_id: "hot", contact_name: "H" })
          ).body
          const post = (server: ServerProcess) =>
            fetch(`${server.baseUrl}${C}/sessions/${session.id}/messages`, {
              method: "POST",
              headers: {
                authorization: `Bearer ${org.token}`,
                "content-type": "application/json",
                "idempotency-key": "hot"
              },
              body: JSON.stringify({ role: "user", content: { type: "text", text: "hot" } })
            }).then(async (response) => ({
              status: response.status,
              text: await response.text(),
              replayed: response.headers.get("idempotent-replayed"),
              retryAfter: response.headers.get("retry-after")
            }))
          const locker = await db.reserve()
          await locker`BEGIN`
          await locker`SELECT 1 FROM sessions WHERE organization_id = ${org.id} AND id = ${session.id} FOR UPDATE`
          // The first request holds the key while its statement waits for the session's row lock.
          const first = post(one)
          for (let waited = 0; ; waited++) {
            if ((await lockWaits(locker)) > 0) break
            if (waited > 200) throw new Error("the first request never waited on the session's lock")
            await sleep(25)
          }
          const during = await post(two)
          await locker`COMMIT`
          locker.release()
          assert.deepStrictEqual(
            [during.status, JSON.parse(during.text)],
            [409, { detail: "A request with this Idempotency-Key is in progress" }]
          )
          // Issue 38 item 6: the statement path's 409 says when to repeat the request too.
          assert.strictEqual(during.retryAfter, "1")
          const done = await first
          assert.deepStrictEqual([done.status, done.replayed], [201, null])
          const after = await post(two)
          assert.deepStrictEqual([after.status, after.text, after.replayed], [201, done.text, "true"])
          const [row] = await db<
            Array<{ n: number }>
          >`SELECT count(*)::int AS n FROM messages WHERE organization_id = ${org.id} AND session_id = ${session.id}`
          assert.strictEqual(row!.n, 1)
        } finally {
          await db.end()
          await stop(one, two)
        }
      }),
    120_000
  )
})
