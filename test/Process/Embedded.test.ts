/**
 * The zero-setup default (DECISIONS.md O2, O5): `npm start` without
 * DATABASE_URL runs its own PostgreSQL under DATA_DIR; the CLI attaches to it
 * while the server runs; SIGTERM stops both and exits 0; a crash (kill -9)
 * leaves a record and an orphaned PostgreSQL that the next start cleans up.
 */
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { runNode, startServer } from "../support/Processes.ts"

const isAlive = (pid: number) => {
  try {
    process.kill(pid, 0)
    return true
  } catch {
    return false
  }
}

const waitUntil = async (condition: () => boolean, timeoutMs: number) => {
  const deadline = Date.now() + timeoutMs
  while (!condition()) {
    if (Date.now() > deadline) return false
    await new Promise((resolve) => setTimeout(resolve, 100))
  }
  return true
}

describe("embedded PostgreSQL", () => {
  it.live(
    "start, CLI attach, walkthrough, SIGTERM exit 0, restart keeps data, kill -9 recovery",
    () =>
      Effect.promise(async () => {
        const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "parley-embedded-"))
        const env = { DATA_DIR: dataDir, DATABASE_URL: undefined, ADMIN_TOKEN: "t0ken" }
        const record = () => JSON.parse(fs.readFileSync(path.join(dataDir, "server.json"), "utf8"))
        try {
          const server = await startServer(env)
          const first = record()
          assert.strictEqual(first.ownerPid, server.child.pid)
          assert.isTrue(isAlive(first.postgresPid))

          // The CLI attaches to the running server instead of starting another.
          const bootstrap = await runNode("src/cli.ts", ["bootstrap", "--name", "Acme"], env)
          assert.strictEqual(bootstrap.code, 0, bootstrap.stderr)
          const token = /export PARLEY_TOKEN='([^']+)'/.exec(bootstrap.stdout)?.[1]
          assert.isString(token)
          assert.deepStrictEqual(record(), first)

          const headers = { authorization: `Bearer ${token}`, "content-type": "application/json" }
          const base = `${server.baseUrl}/conversations/v2/api/v1`
          const session: any = await (
            await fetch(`${base}/sessions`, {
              method: "POST",
              headers,
              body: JSON.stringify({ contact_id: "+100", contact_name: "Ann" })
            })
          ).json()
          const message = await fetch(`${base}/sessions/${session.id}/messages`, {
            method: "POST",
            headers,
            body: JSON.stringify({ role: "user", content: { type: "text", text: "Hello" } })
          })
          assert.strictEqual(message.status, 201)

          // SIGTERM: stop accepting, stop PostgreSQL, remove the record, exit 0 (O5).
          server.child.kill("SIGTERM")
          assert.strictEqual(await server.exited, 0, server.output())
          assert.isTrue(await waitUntil(() => !isAlive(first.postgresPid), 10_000))
          assert.isFalse(fs.existsSync(path.join(dataDir, "server.json")))

          // A new start on the same DATA_DIR keeps the data.
          const again = await startServer(env)
          const read = await fetch(`${again.baseUrl}/conversations/v2/api/v1/sessions/${session.id}`, { headers })
          assert.strictEqual(read.status, 200)
          const second = record()

          // kill -9 leaves an orphaned PostgreSQL and a stale record; the next start recovers.
          again.child.kill("SIGKILL")
          await again.exited
          assert.isTrue(isAlive(second.postgresPid))
          const recovered = await startServer(env)
          const third = record()
          assert.notStrictEqual(third.postgresPid, second.postgresPid)
          assert.isFalse(isAlive(second.postgresPid))
          assert.strictEqual(
            (await fetch(`${recovered.baseUrl}/conversations/v2/api/v1/sessions/${session.id}`, { headers })).status,
            200
          )
          recovered.child.kill("SIGTERM")
          assert.strictEqual(await recovered.exited, 0, recovered.output())
          assert.isTrue(await waitUntil(() => !isAlive(third.postgresPid), 10_000))
        } finally {
          fs.rmSync(dataDir, { recursive: true, force: true })
        }
      }),
    120_000
  )

  it.live(
    "the CLI alone starts the embedded server for the command and stops it",
    () =>
      Effect.promise(async () => {
        const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "parley-cli-"))
        try {
          const env = { DATA_DIR: dataDir, DATABASE_URL: undefined }
          const migrate = await runNode("src/cli.ts", ["migrate"], env)
          assert.strictEqual(migrate.code, 0, migrate.stderr)
          assert.match(migrate.stdout, /applied=1_foundation/)
          const twice = await runNode("src/cli.ts", ["migrate"], env)
          assert.strictEqual(twice.stdout.trim(), "No pending migrations")
          assert.isFalse(fs.existsSync(path.join(dataDir, "server.json")))
          const org = await runNode("src/cli.ts", ["org", "create", "--name", "Solo"], env)
          assert.match(org.stdout, /^id=.+\nname=Solo\ncreated_at=/)
        } finally {
          fs.rmSync(dataDir, { recursive: true, force: true })
        }
      }),
    120_000
  )
})
