/**
 * The zero-setup default (DECISIONS.md O2, O5): `npm start` without
 * DATABASE_URL runs its own PostgreSQL under DATA_DIR; the CLI attaches to it
 * while the server runs; SIGTERM stops both and exits 0; a crash (kill -9)
 * leaves a record and an orphaned PostgreSQL that the next start cleans up
 * and starts again on its port.
 * When it cannot start, the error is one line naming the cause (O9).
 */
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { assert, describe, it } from "@effect/vitest"
import { Effect, Layer } from "effect"
import * as Embedded from "../../src/Database/Embedded.ts"
import { freePort, isAlive, runNode, startServer, waitUntil } from "../support/Processes.ts"

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
          // On the same port, so processes still attached to the orphan find the new server (issue 38 item 2).
          assert.strictEqual(third.port, second.port)
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

  it.live(
    "O9: a PostgreSQL on DATA_DIR/pg that no record names (owner killed, server.json gone) is left alone; the start fails with one line naming its pid",
    () =>
      Effect.gen(function* () {
        const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "parley-foreign-"))
        const pgDir = path.join(dataDir, "pg")
        let orphan: number | undefined
        yield* Effect.addFinalizer(() =>
          Effect.promise(async () => {
            if (orphan !== undefined && isAlive(orphan)) {
              process.kill(orphan, "SIGINT")
              await waitUntil(() => !isAlive(orphan!), 15_000)
            }
            fs.rmSync(dataDir, { recursive: true, force: true })
          })
        )
        const env = { DATA_DIR: dataDir, DATABASE_URL: undefined }
        const server = yield* Effect.promise(() => startServer(env))
        const record = JSON.parse(fs.readFileSync(path.join(dataDir, "server.json"), "utf8"))
        orphan = record.postgresPid as number
        server.child.kill("SIGKILL")
        yield* Effect.promise(() => server.exited)
        fs.rmSync(path.join(dataDir, "server.json"))

        const expected = `Embedded PostgreSQL could not start under ${dataDir}: another PostgreSQL (pid ${orphan}) is already running on ${pgDir}`
        const error = yield* Effect.flip(Layer.build(Embedded.layer({ dataDir })))
        assert.strictEqual(error._tag, "EmbeddedPostgresError")
        assert.strictEqual(error.message, expected)
        assert.isTrue(isAlive(orphan), "the other PostgreSQL is not stopped")

        // The server start fails too and names it (how main.ts prints it is its own matter).
        const started = yield* Effect.promise(async () =>
          runNode("src/main.ts", [], { ...env, PORT: String(await freePort()) })
        )
        assert.notStrictEqual(started.code, 0)
        assert.include(`${started.stdout}${started.stderr}`, expected)
      }).pipe(Effect.scoped),
    60_000
  )

  it.live(
    "O9: data of a newer PostgreSQL major version: one line from PostgreSQL's FATAL and DETAIL, the output in details",
    () =>
      Effect.gen(function* () {
        const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "parley-version-"))
        yield* Effect.addFinalizer(() => Effect.sync(() => fs.rmSync(dataDir, { recursive: true, force: true })))
        yield* Effect.scoped(Layer.build(Embedded.layer({ dataDir })))
        fs.writeFileSync(path.join(dataDir, "pg", "PG_VERSION"), "99\n")
        const error = yield* Effect.flip(Layer.build(Embedded.layer({ dataDir })))
        assert.match(
          error.message,
          /^Embedded PostgreSQL could not start under .+: database files are incompatible with server \(The data directory was initialized by PostgreSQL version 99, which is not compatible with this version 18\.\d+\.\)$/
        )
        assert.notInclude(error.message, "\n")
        assert.match(error.details ?? "", /FATAL: {2}database files are incompatible with server/)
      }).pipe(Effect.scoped)
  )

  it("O9: the cause named from initdb's and PostgreSQL's output", () => {
    assert.strictEqual(
      Embedded.failureReason(
        'initdb: error: could not create directory "/x/.parley/pg.init-1/pg_wal": No space left on device\ninitdb: removing data directory "/x/.parley/pg.init-1"\n'
      ),
      'could not create directory "/x/.parley/pg.init-1/pg_wal": No space left on device'
    )
    assert.strictEqual(
      Embedded.failureReason(
        '2026-01-01 00:00:00.000 UTC [10] FATAL:  lock file "postmaster.pid" already exists\n2026-01-01 00:00:00.000 UTC [10] HINT:  Is another postmaster (PID 1234) running in data directory "/x/.parley/pg"?\n'
      ),
      "another PostgreSQL (pid 1234) is already running on /x/.parley/pg"
    )
    assert.strictEqual(
      Embedded.failureReason(
        '2026-01-01 00:00:00.000 UTC [10] PANIC:  could not write to file "pg_wal/xlogtemp.10": No space left on device\n'
      ),
      'could not write to file "pg_wal/xlogtemp.10": No space left on device'
    )
    assert.strictEqual(
      Embedded.failureReason("setpriv: failed to execute postgres: Permission denied\n"),
      "setpriv: failed to execute postgres: Permission denied"
    )
  })
})
