/**
 * Server child processes for benchmarks: started with the pinned Node (the one
 * running the benchmark), output kept for diagnosis, ready when an HTTP path
 * responds 200, stopped with SIGTERM (SIGKILL after a timeout).
 */
import { type ChildProcess, spawn } from "node:child_process"
import * as path from "node:path"

/** The repository root (bench/lib/../..). */
export const rootDirectory = path.resolve(import.meta.dirname, "../..")

/** A free TCP port on the loopback interface. */
export { freePort } from "../../src/Database/Embedded.ts"

export const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms))

/** A started server process. */
export interface ServerProcess {
  readonly name: string
  readonly pid: number
  readonly port: number
  readonly baseUrl: string
  readonly child: ChildProcess
  /** The last lines the process wrote (stdout and stderr). */
  readonly output: () => string
  /** SIGTERM, then SIGKILL after `timeoutMs`; returns the exit code (null when killed by a signal). */
  readonly stop: (timeoutMs?: number) => Promise<number | null>
}

export interface StartServerOptions {
  readonly name: string
  /** Arguments to `node` (flags, then the script). */
  readonly args: ReadonlyArray<string>
  readonly port: number
  /** Variables added to the inherited environment. */
  readonly env: Record<string, string>
  /** Path polled until it responds 200. */
  readonly readyPath: string
  readonly cwd?: string
  readonly readyTimeoutMs?: number
}

const exited = (child: ChildProcess) => child.exitCode !== null || child.signalCode !== null

/** Starts `node <args>` and waits until `GET <readyPath>` responds 200. */
export const startServer = async (options: StartServerOptions): Promise<ServerProcess> => {
  const lines: Array<string> = []
  const keep = (chunk: Buffer) => {
    for (const line of chunk.toString("utf8").split("\n")) if (line.trim() !== "") lines.push(line)
    if (lines.length > 200) lines.splice(0, lines.length - 200)
  }
  const child = spawn(process.execPath, [...options.args], {
    cwd: options.cwd ?? rootDirectory,
    env: { ...process.env, ...options.env },
    stdio: ["ignore", "pipe", "pipe"]
  })
  child.stdout!.on("data", keep)
  child.stderr!.on("data", keep)
  const exit = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)))
  const output = () => lines.join("\n")
  const stop = async (timeoutMs = 20_000) => {
    if (exited(child)) return child.exitCode
    child.kill("SIGTERM")
    const timer = setTimeout(() => {
      if (!exited(child)) child.kill("SIGKILL")
    }, timeoutMs)
    const code = await exit
    clearTimeout(timer)
    return code
  }
  const baseUrl = `http://127.0.0.1:${options.port}`
  const deadline = Date.now() + (options.readyTimeoutMs ?? 60_000)
  for (;;) {
    if (exited(child)) {
      throw new Error(`${options.name} exited (code ${child.exitCode}) before it was ready:\n${output()}`)
    }
    const ready = await fetch(`${baseUrl}${options.readyPath}`, { signal: AbortSignal.timeout(2_000) }).then(
      (response) => response.status === 200,
      () => false
    )
    if (ready) break
    if (Date.now() > deadline) {
      await stop(2_000)
      throw new Error(`${options.name} was not ready on ${baseUrl}${options.readyPath} in time:\n${output()}`)
    }
    await sleep(100)
  }
  return { name: options.name, pid: child.pid!, port: options.port, baseUrl, child, output, stop }
}
