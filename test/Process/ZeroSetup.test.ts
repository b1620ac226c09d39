/**
 * Zero-setup everywhere (DECISIONS.md O10, issue 12 item 1): on a clean clone,
 * the README's `npm start` and `npm test` work on the embedded PostgreSQL for
 * an ordinary user in their home and for root in a folder other users cannot
 * enter (`mktemp -d`, 0700). Each run: `npm start` serves `/readyz`, the CLI
 * (`npm run -s parley -- bootstrap`) attaches and prints only its exports on
 * stdout, a session and a message are created, SIGTERM exits 0, a second
 * `npm start` reads the session back and stops on a terminal's Ctrl-C (SIGINT
 * to the whole process group, O9), and `npm test -- <file>` passes with its
 * own embedded server (TEST_DATABASE_URL unset).
 *
 * Creating a user and running as root or as another user needs root: CI runs
 * as root; elsewhere these tests skip and say so. The clone holds committed
 * work only (uncommitted changes are not tested here; a note says so).
 */
import { type ChildProcess, execFileSync, spawn } from "node:child_process"
import * as crypto from "node:crypto"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { pathToFileURL } from "node:url"
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { freePort, isAlive, root, sleep, waitUntil } from "../support/Processes.ts"

/** Whether `command args` runs and exits 0. */
const succeeds = (command: string, args: ReadonlyArray<string>) => {
  try {
    execFileSync(command, args, { cwd: root, stdio: "ignore" })
    return true
  } catch {
    return false
  }
}

const skipReason =
  process.getuid?.() !== 0
    ? "they create an OS user and run as root and as that user: run the tests as root (CI does)"
    : !succeeds("setpriv", ["--version"])
      ? "setpriv (util-linux) is not installed"
      : !succeeds("git", ["rev-parse", "--is-inside-work-tree"])
        ? "the project is not a git checkout (the tests clone it)"
        : undefined
const userSkipReason = !succeeds("useradd", ["--help"]) ? "useradd is not installed" : undefined
if (skipReason !== undefined) console.info(`[ZeroSetup.test.ts] O10 zero-setup tests skipped: ${skipReason}`)
else if (userSkipReason !== undefined)
  console.info(`[ZeroSetup.test.ts] O10 ordinary-user test skipped: ${userSkipReason}`)
if (
  skipReason === undefined &&
  execFileSync("git", ["status", "--porcelain"], { cwd: root, encoding: "utf8" }) !== ""
) {
  console.info("[ZeroSetup.test.ts] note: the clones hold committed work only; uncommitted changes are not tested here")
}

/** Who runs the commands: root itself, or an ordinary user through setpriv. */
interface Account {
  readonly name: string
  readonly uid: number
  readonly gid: number
  readonly home: string
}

/** A clean environment for `account` (nothing of this test run's npm or vitest leaks in). */
const environment = (account: Account, extra: Record<string, string>): Record<string, string> => ({
  PATH: (process.env.PATH ?? "/usr/bin:/bin")
    .split(path.delimiter)
    .filter((entry) => !entry.includes("node_modules"))
    .join(path.delimiter),
  HOME: account.home,
  USER: account.name,
  LOGNAME: account.name,
  LANG: "C.UTF-8",
  npm_config_update_notifier: "false",
  npm_config_fund: "false",
  ...extra
})

/** Spawns `command args` in `cwd` as `account`, in a process group of its own (as a terminal's job). */
const spawnAs = (
  account: Account,
  cwd: string,
  command: string,
  args: ReadonlyArray<string>,
  env: Record<string, string>
) => {
  const [file, ...rest] =
    account.uid === 0
      ? [command, ...args]
      : ["setpriv", `--reuid=${account.uid}`, `--regid=${account.gid}`, "--init-groups", "--", command, ...args]
  return spawn(file!, rest, { cwd, env: environment(account, env), detached: true })
}

interface Finished {
  readonly code: number | null
  readonly stdout: string
  readonly stderr: string
}

const collect = (child: ChildProcess): Promise<Finished> =>
  new Promise((resolve, reject) => {
    let stdout = ""
    let stderr = ""
    child.stdout?.on("data", (chunk) => (stdout += chunk))
    child.stderr?.on("data", (chunk) => (stderr += chunk))
    child.on("error", reject)
    child.on("close", (code) => resolve({ code, stdout, stderr }))
  })

/** Runs a command to its end as `account`; its process group is added to `groups`. */
const runAs = (
  account: Account,
  groups: Array<number>,
  cwd: string,
  command: string,
  args: ReadonlyArray<string>,
  env = {}
) => {
  const child = spawnAs(account, cwd, command, args, env)
  groups.push(child.pid!)
  return collect(child)
}

/** The command lines of the running processes by pid (Linux /proc). */
const processes = (): Array<{ pid: number; group: number; uid: number; argv: Array<string> }> =>
  fs.readdirSync("/proc").flatMap((entry) => {
    if (!/^\d+$/.test(entry)) return []
    try {
      const stat = fs.readFileSync(`/proc/${entry}/stat`, "utf8")
      const group = Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[2])
      const uid = Number(/^Uid:\s+(\d+)/m.exec(fs.readFileSync(`/proc/${entry}/status`, "utf8"))?.[1])
      const argv = fs.readFileSync(`/proc/${entry}/cmdline`, "utf8").split("\0").slice(0, -1)
      return [{ pid: Number(entry), group, uid, argv }]
    } catch {
      return []
    }
  })

/** The node process running `script` in process group `group`. */
const nodeIn = (group: number, script: string): number | undefined =>
  processes().find(
    (process) =>
      process.group === group && path.basename(process.argv[0] ?? "") === "node" && process.argv.includes(script)
  )?.pid

/** Kills (SIGKILL, by pid) what this test started and left: its process groups, processes of `uid`, processes naming `folder`. */
const killLeftovers = async (groups: ReadonlyArray<number>, folder: string, uid?: number) => {
  for (const group of groups) {
    try {
      process.kill(-group, "SIGKILL")
    } catch {}
  }
  const ours = () =>
    processes().filter(
      (entry) =>
        entry.pid !== process.pid && (entry.uid === uid || entry.argv.some((argument) => argument.includes(folder)))
    )
  for (const entry of ours()) {
    try {
      process.kill(entry.pid, "SIGKILL")
    } catch {}
  }
  await waitUntil(() => ours().length === 0, 10_000)
}

/** `npm start` as `account` in `clone`, waited for until /readyz responds 200. */
const npmStart = async (account: Account, clone: string, groups: Array<number>) => {
  const port = await freePort()
  const child = spawnAs(account, clone, "npm", ["start"], { PORT: String(port) })
  groups.push(child.pid!)
  const finished = collect(child)
  let exited = false
  void finished.then(() => (exited = true))
  const base = `http://127.0.0.1:${port}`
  const deadline = Date.now() + 60_000
  for (;;) {
    if (exited) assert.fail(`npm start exited early:\n${JSON.stringify(await finished, null, 2)}`)
    try {
      if ((await fetch(`${base}/readyz`)).status === 200) break
    } catch {}
    if (Date.now() > deadline) assert.fail("npm start: /readyz did not respond 200 within 60 s")
    await sleep(100)
  }
  const node = nodeIn(child.pid!, "src/main.ts")
  assert.isDefined(node, "the node process of npm start")
  return { child, base, finished, node: node!, group: child.pid! }
}

const serverRecord = (dataDir: string): { postgresPid: number; ownerPid: number } =>
  JSON.parse(fs.readFileSync(path.join(dataDir, "server.json"), "utf8"))

/** A clean clone of this repository at `clone`, with this checkout's node_modules (no network). */
const cloneRepository = (clone: string, owner?: Account) => {
  execFileSync("git", ["clone", "--quiet", "--no-hardlinks", root, clone], { stdio: "pipe" })
  if (owner !== undefined) execFileSync("chown", ["-R", `${owner.uid}:${owner.gid}`, clone])
  const modules = path.join(clone, "node_modules")
  try {
    // Hard links: fast, no network. Their files stay root's and read-only to others; no one writes them.
    execFileSync("cp", ["-al", path.join(root, "node_modules"), modules], { stdio: "pipe" })
  } catch {
    fs.rmSync(modules, { recursive: true, force: true })
    execFileSync("cp", ["-a", path.join(root, "node_modules"), modules], { stdio: "pipe" })
  }
  // Caches are written there (vite, vitest): the clone's own, not shared links.
  for (const cache of [".vite", ".vite-temp", ".vitest", ".cache"]) {
    fs.rmSync(path.join(modules, cache), { recursive: true, force: true })
  }
  // The copied folders are new and become the user's; the linked files are shared and stay as they are.
  if (owner !== undefined) {
    execFileSync("find", [modules, "-type", "d", "-exec", "chown", `${owner.uid}:${owner.gid}`, "{}", "+"])
  }
}

/**
 * The README's commands in `clone` as `account`: npm start, the CLI, the
 * walkthrough's first calls, SIGTERM, a restart that finds the data, Ctrl-C,
 * then `npm test -- <one test file>` on its own embedded server.
 */
const zeroSetup = async (account: Account, clone: string, extraTestEnv: Record<string, string> = {}) => {
  const groups: Array<number> = []
  const dataDir = path.join(clone, ".parley")
  try {
    const server = await npmStart(account, clone, groups)
    const first = serverRecord(dataDir)
    assert.strictEqual(first.ownerPid, server.node)
    // PostgreSQL runs in a process group of its own, as the account or (root) as postgres.
    const postgresStatus = fs.readFileSync(`/proc/${first.postgresPid}/status`, "utf8")
    const postgresUid = Number(/^Uid:\s+(\d+)/m.exec(postgresStatus)?.[1])
    if (account.uid === 0) {
      assert.strictEqual(postgresUid, Number(execFileSync("id", ["-u", "postgres"], { encoding: "utf8" })))
    } else {
      assert.strictEqual(postgresUid, account.uid)
    }
    assert.strictEqual(
      processes().find((entry) => entry.pid === first.postgresPid)?.group,
      first.postgresPid,
      "PostgreSQL leads a process group of its own"
    )

    // The CLI attaches to the running server; stdout holds the exports only.
    const bootstrap = await runAs(account, groups, clone, "npm", [
      "run",
      "-s",
      "parley",
      "--",
      "bootstrap",
      "--name",
      "Zero"
    ])
    assert.strictEqual(bootstrap.code, 0, bootstrap.stderr)
    const lines = bootstrap.stdout.trimEnd().split("\n")
    assert.isTrue(
      lines.every((line) => /^export PARLEY_[A-Z_]+='[^']*'$/.test(line) || line.startsWith("# ")),
      bootstrap.stdout
    )
    const token = /^export PARLEY_TOKEN='([^']+)'$/m.exec(bootstrap.stdout)?.[1]
    assert.isString(token)
    assert.match(bootstrap.stdout, /^export PARLEY_ORG_ID='[^']+'$/m)
    assert.deepStrictEqual(serverRecord(dataDir), first)

    const headers = { authorization: `Bearer ${token}`, "content-type": "application/json" }
    const api = "/conversations/v2/api/v1"
    const created = await fetch(`${server.base}${api}/sessions`, {
      method: "POST",
      headers,
      body: JSON.stringify({ contact_id: "+15550100", contact_name: "Ada" })
    })
    assert.strictEqual(created.status, 201)
    const session = (await created.json()) as { id: string }
    const message = await fetch(`${server.base}${api}/sessions/${session.id}/messages`, {
      method: "POST",
      headers,
      body: JSON.stringify({ role: "user", content: { type: "text", text: "Hello" } })
    })
    assert.strictEqual(message.status, 201)

    // SIGTERM to the server process: npm start exits 0 and PostgreSQL is stopped (O5).
    process.kill(server.node, "SIGTERM")
    const stopped = await server.finished
    assert.strictEqual(stopped.code, 0, stopped.stderr)
    assert.isTrue(await waitUntil(() => !isAlive(first.postgresPid), 15_000))
    assert.isFalse(fs.existsSync(path.join(dataDir, "server.json")))

    // Again: the data is found again; a terminal's Ctrl-C (SIGINT to the job's process group) stops it cleanly.
    const again = await npmStart(account, clone, groups)
    const second = serverRecord(dataDir)
    const read = await fetch(`${again.base}${api}/sessions/${session.id}`, { headers })
    assert.strictEqual(read.status, 200)
    process.kill(-again.group, "SIGINT")
    assert.isTrue(await waitUntil(() => !isAlive(again.node) && !isAlive(second.postgresPid), 20_000))
    const interrupted = (await again.finished).stdout
    assert.match(interrupted, /Embedded PostgreSQL stopped/)
    // O9: Ctrl-C shuts down as cleanly as SIGTERM: no warning or error on the way out.
    assert.notMatch(interrupted, /"level":"(WARN|ERROR|FATAL)"/, interrupted)
    assert.isFalse(fs.existsSync(path.join(dataDir, "server.json")))

    // npm test -- <file>: the global setup starts an embedded PostgreSQL of its own as this account.
    const tested = await runAs(account, groups, clone, "npm", ["test", "--", "test/Telemetry/Tracing.test.ts"], {
      NO_COLOR: "1",
      ...extraTestEnv
    })
    assert.strictEqual(tested.code, 0, `${tested.stdout}\n${tested.stderr}`)
    assert.match(tested.stderr, /on an embedded PostgreSQL/)
    assert.match(tested.stdout, /Tests\s+2 passed/, tested.stdout)
  } finally {
    await killLeftovers(groups, path.dirname(clone), account.uid === 0 ? undefined : account.uid)
  }
}

/** A user of its own for this run, removed with its home afterwards. */
const withUser = async (use: (account: Account) => Promise<void>) => {
  const name = `pz${crypto.randomBytes(4).toString("hex")}`
  execFileSync("useradd", ["--create-home", "--shell", "/bin/sh", name], { stdio: "pipe" })
  try {
    const [, , uid, gid, , home] = execFileSync("getent", ["passwd", name], { encoding: "utf8" }).trim().split(":")
    await use({ name, uid: Number(uid), gid: Number(gid), home: home! })
  } finally {
    try {
      execFileSync("userdel", ["-r", name], { stdio: "pipe" })
    } catch (error) {
      console.warn(
        `[ZeroSetup.test.ts] could not remove the user ${name}: ${String((error as { stderr?: unknown }).stderr ?? error)}`
      )
    }
  }
}

const rootAccount: Account = { name: "root", uid: 0, gid: 0, home: process.env.HOME ?? "/root" }

describe.skipIf(skipReason !== undefined)("zero-setup (O10)", () => {
  it.live.skipIf(userSkipReason !== undefined)(
    "O10: an ordinary user, clean clone in their home: npm start (readyz, CLI, walkthrough, SIGTERM exit 0, restart keeps data, Ctrl-C) and npm test run PostgreSQL as that user",
    () =>
      Effect.promise(() =>
        withUser(async (account) => {
          const clone = path.join(account.home, "parley")
          cloneRepository(clone, account)
          await zeroSetup(account, clone)
          // Everything is the user's: no user was created, nothing runs as postgres.
          for (const entry of [".parley", ".parley/pg", ".parley/auth.json"]) {
            assert.strictEqual(fs.statSync(path.join(clone, entry)).uid, account.uid, entry)
          }
          assert.strictEqual(fs.statSync(path.join(clone, ".parley/auth.json")).mode & 0o777, 0o600)
        })
      ),
    150_000
  )

  it.live(
    "O10: root, clean clone in a 0700 mktemp -d folder: npm start (readyz, CLI, walkthrough, SIGTERM exit 0, restart keeps data, Ctrl-C) and npm test run PostgreSQL as postgres, no permission changed",
    () =>
      Effect.promise(async () => {
        const folder = fs.mkdtempSync(path.join(os.tmpdir(), "parley-zero-"))
        try {
          assert.strictEqual(fs.statSync(folder).mode & 0o777, 0o700)
          const clone = path.join(folder, "parley")
          cloneRepository(clone)
          // The test run's own temporary folders are inside the 0700 folder too.
          const tmp = path.join(folder, "tmp")
          fs.mkdirSync(tmp, { mode: 0o700 })
          await zeroSetup(rootAccount, clone, { TMPDIR: tmp })
          const postgres = Number(execFileSync("id", ["-u", "postgres"], { encoding: "utf8" }))
          assert.strictEqual(fs.statSync(path.join(clone, ".parley/pg")).uid, postgres)
          assert.strictEqual(fs.statSync(path.join(clone, ".parley")).uid, 0)
          assert.strictEqual(fs.statSync(path.join(clone, ".parley")).mode & 0o777, 0o700)
          assert.strictEqual(fs.statSync(folder).mode & 0o777, 0o700)
          assert.deepStrictEqual(
            fs.readdirSync(clone).filter((entry) => entry.startsWith("pwfile")),
            []
          )
          assert.deepStrictEqual(
            fs.readdirSync(path.join(clone, ".parley")).filter((entry) => entry.startsWith("pwfile")),
            []
          )
        } finally {
          fs.rmSync(folder, { recursive: true, force: true })
        }
      }),
    150_000
  )

  it.live("O10, O9: as root without setpriv, the start fails with one line naming it", () =>
    Effect.promise(async () => {
      const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "parley-nosetpriv-"))
      try {
        const script = `
          import { Effect, Layer } from "effect"
          import * as Embedded from ${JSON.stringify(pathToFileURL(path.join(root, "src/Database/Embedded.ts")).href)}
          const error = await Effect.runPromise(Effect.flip(Effect.scoped(Layer.build(Embedded.layer({ dataDir: process.argv[1] })))))
          process.stdout.write(JSON.stringify({ tag: error._tag, message: error.message }))
        `
        const child = spawn(process.execPath, ["--input-type=module", "-e", script, dataDir], {
          cwd: root,
          env: { PATH: "/nonexistent", HOME: os.homedir() }
        })
        const finished = await collect(child)
        assert.strictEqual(finished.code, 0, finished.stderr)
        const error = JSON.parse(finished.stdout)
        assert.strictEqual(error.tag, "EmbeddedPostgresError")
        assert.strictEqual(
          error.message,
          `Embedded PostgreSQL could not start under ${dataDir}: setpriv (util-linux) is needed to run PostgreSQL as the user postgres when Parley runs as root; install util-linux or set DATABASE_URL`
        )
      } finally {
        fs.rmSync(dataDir, { recursive: true, force: true })
      }
    })
  )
})
