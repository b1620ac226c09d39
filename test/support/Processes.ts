/**
 * Parley as child processes, for tests of start-up, shutdown, the CLI and
 * several servers on one database.
 */
import { type ChildProcess, spawn } from "node:child_process"
import * as path from "node:path"
import { freePort, isPidAlive } from "../../src/Database/Embedded.ts"

/** The project's root folder. */
export const root = path.resolve(import.meta.dirname, "../..")

/** A free loopback port. */
export { freePort }

/** `process.env` with `env` applied; `undefined` removes a variable. */
const environment = (env: Record<string, string | undefined>) => {
  const merged: Record<string, string> = {}
  for (const [key, value] of Object.entries({ ...process.env, ...env })) if (value !== undefined) merged[key] = value
  return merged
}

/** The outcome of a finished command. */
export interface Finished {
  readonly code: number | null
  readonly stdout: string
  readonly stderr: string
}

/** A started process: the child, and its outcome once it exits. */
export interface StartedProcess {
  readonly child: ChildProcess
  readonly finished: Promise<Finished>
}

/** Starts `command ...args` from the project root with `env` added; `finished` resolves when it exits. */
export const spawnCommand = (
  command: string,
  args: ReadonlyArray<string>,
  env: Record<string, string | undefined>
): StartedProcess => {
  const child = spawn(command, args, { cwd: root, env: environment(env) })
  const finished = new Promise<Finished>((resolve, reject) => {
    let stdout = ""
    let stderr = ""
    child.stdout.on("data", (chunk) => (stdout += chunk))
    child.stderr.on("data", (chunk) => (stderr += chunk))
    child.on("error", reject)
    child.on("exit", (code) => resolve({ code, stdout, stderr }))
  })
  return { child, finished }
}

/** Starts `node <script> ...args` from the project root with `env` added ({@link spawnCommand}). */
export const spawnNode = (script: string, args: ReadonlyArray<string>, env: Record<string, string | undefined>) =>
  spawnCommand(process.execPath, [script, ...args], env)

/** Runs `node <script> ...args` from the project root with `env` added; resolves when it exits. */
export const runNode = (script: string, args: ReadonlyArray<string>, env: Record<string, string | undefined>) =>
  spawnNode(script, args, env).finished

/** A running server process. */
export interface ServerProcess {
  readonly child: ChildProcess
  readonly baseUrl: string
  readonly output: () => string
  /** Resolves with the exit code once the process has exited. */
  readonly exited: Promise<number | null>
}

/**
 * Starts `node src/main.ts` (or `node` with `args`, e.g. `src/cli.ts serve`) with `env` on a free port and waits
 * until /readyz responds 200.
 */
export const startServer = async (
  env: Record<string, string | undefined>,
  timeoutMs = 60_000,
  args: ReadonlyArray<string> = ["src/main.ts"]
): Promise<ServerProcess> => {
  const port = await freePort()
  const child = spawn(process.execPath, args, {
    cwd: root,
    env: environment({ LOG_FORMAT: "json", HOST: "127.0.0.1", PORT: String(port), ...env })
  })
  let output = ""
  child.stdout.on("data", (chunk) => (output += chunk))
  child.stderr.on("data", (chunk) => (output += chunk))
  const exited = new Promise<number | null>((resolve) => child.on("exit", (code) => resolve(code)))
  const baseUrl = `http://127.0.0.1:${port}`
  const deadline = Date.now() + timeoutMs
  for (;;) {
    if (child.exitCode !== null) throw new Error(`server exited with ${child.exitCode}:\n${output}`)
    try {
      const response = await fetch(`${baseUrl}/readyz`)
      if (response.status === 200) break
    } catch {}
    if (Date.now() > deadline) {
      child.kill("SIGKILL")
      throw new Error(`server not ready in ${timeoutMs} ms:\n${output}`)
    }
    await new Promise((resolve) => setTimeout(resolve, 100))
  }
  return { child, baseUrl, output: () => output, exited }
}

/** A database of the calling test file's own (cloned from the run's template; see test/support/Database.ts). */
export { ownDatabase } from "./Database.ts"

/**
 * A JSON request to a server process: `base` + `path` with a bearer `token`
 * and `body` as JSON; returns the status and the parsed body (undefined when
 * empty).
 */
export const callJson = async (base: string, method: string, path: string, token: string, body?: unknown) => {
  const response = await fetch(`${base}${path}`, {
    method,
    headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
    ...(body !== undefined ? { body: JSON.stringify(body) } : {})
  })
  const text = await response.text()
  return { status: response.status, body: text === "" ? undefined : (JSON.parse(text) as any) }
}

/** Waits `ms` milliseconds. */
export const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms))

/** Whether a process with `pid` runs (a zombie does not: `Embedded.isPidAlive`). */
export const isAlive = isPidAlive

/** Polls `condition` every 100 ms until it holds (true) or `timeoutMs` passed (false). */
export const waitUntil = async (condition: () => boolean, timeoutMs: number) => {
  const deadline = Date.now() + timeoutMs
  while (!condition()) {
    if (Date.now() > deadline) return false
    await sleep(100)
  }
  return true
}

/** The `key=value` lines the CLI prints (`src/cli.ts` `show`) as a record. */
export const parseShow = (stdout: string): Record<string, string> =>
  Object.fromEntries(
    stdout
      .trim()
      .split("\n")
      .map((line) => [line.slice(0, line.indexOf("=")), line.slice(line.indexOf("=") + 1)])
  )
