/**
 * One autocannon run (in this process) with the server's RSS and CPU, the
 * PostgreSQL processes' CPU and the load generator's own CPU sampled meanwhile.
 */

import { spawn } from "node:child_process"
import * as os from "node:os"
import * as path from "node:path"
import autocannon from "autocannon"
import { measureCpu, measureMachine, pidsNamed, processAndChildren, sampleRss } from "./proc.ts"

export interface LoadOptions {
  readonly url: string
  readonly method?: string
  readonly headers?: Record<string, string>
  readonly body?: string
  /** Headers made per request (for example a new `Idempotency-Key` each time), merged over `headers`. */
  readonly headersPerRequest?: () => Record<string, string>
  /** The path of each request (for example one of several sessions in turn), instead of `url`'s. */
  readonly pathPerRequest?: () => string
  readonly connections: number
  /** Seconds. */
  readonly duration: number
  /** The server process whose RSS and CPU are sampled. */
  readonly serverPid?: number
  /** The PostgreSQL postmaster, whose children's CPU is summed; else every `postgres` process. */
  readonly postmasterPid?: number | undefined
}

export interface LoadResult {
  /** Mean requests per second (autocannon's `requests.average`). */
  readonly requestsPerSecond: number
  /** Latency percentiles and mean, milliseconds. */
  readonly p50: number
  readonly p99: number
  readonly latencyMean: number
  readonly total: number
  readonly non2xx: number
  readonly errors: number
  readonly timeouts: number
  readonly statusCodes: Record<string, number>
  /** Max RSS of the server process during the run, MB (MiB). */
  readonly rssMaxMb: number | undefined
  /**
   * CPU over the run, percent of one core: the server, PostgreSQL (postmaster and children), this process
   * (autocannon), and the rest of the machine's busy time (kernel, steal, other processes).
   */
  readonly cpu: {
    readonly server: number | undefined
    readonly postgres: number
    readonly loadGenerator: number
    readonly other: number | undefined
  }
  /** The whole machine over the run, percent of all cores (busy includes steal; iowait counts as idle). */
  readonly machine: { readonly busy: number; readonly iowait: number; readonly steal: number } | undefined
}

const MB = 1024 * 1024

/** Runs autocannon against `url` for `duration` seconds at `connections`. */
export const runLoad = async (options: LoadOptions): Promise<LoadResult> => {
  const pid = options.serverPid
  const rss = pid === undefined ? undefined : sampleRss(pid)
  const serverCpu = pid === undefined ? undefined : measureCpu(() => [pid])
  const postmaster = options.postmasterPid
  const postgresCpu = measureCpu(() =>
    postmaster === undefined ? pidsNamed("postgres") : processAndChildren(postmaster)
  )
  const selfCpu = measureCpu(() => [process.pid])
  const perRequest = options.headersPerRequest
  const pathOf = options.pathPerRequest
  const machine = measureMachine()
  const result = await autocannon({
    url: options.url,
    method: options.method ?? "GET",
    ...(options.headers !== undefined ? { headers: options.headers } : {}),
    ...(options.body !== undefined ? { body: options.body } : {}),
    // autocannon has merged `options.headers` into `request.headers` before `setupRequest`.
    ...(perRequest !== undefined || pathOf !== undefined
      ? {
          requests: [
            {
              setupRequest: (request: { headers?: Record<string, string>; path?: string }) => ({
                ...request,
                ...(perRequest !== undefined ? { headers: { ...request.headers, ...perRequest() } } : {}),
                ...(pathOf !== undefined ? { path: pathOf() } : {})
              })
            }
          ]
        }
      : {}),
    connections: options.connections,
    duration: options.duration,
    timeout: 10
  })
  const measured = { server: serverCpu?.stop(), postgres: postgresCpu.stop(), loadGenerator: selfCpu.stop() }
  const machineUse = machine.stop()
  const cpu = {
    ...measured,
    other:
      machineUse === undefined
        ? undefined
        : Math.max(
            0,
            machineUse.busy * os.availableParallelism() -
              (measured.server ?? 0) -
              measured.postgres -
              measured.loadGenerator
          )
  }
  const rssMax = rss?.stop()
  return {
    requestsPerSecond: result.requests.average,
    p50: result.latency.p50,
    p99: result.latency.p99,
    latencyMean: result.latency.average,
    total: result.requests.total,
    non2xx: result.non2xx,
    errors: result.errors,
    timeouts: result.timeouts,
    statusCodes: Object.fromEntries(Object.entries(result.statusCodeStats).map(([code, { count }]) => [code, count])),
    rssMaxMb: rssMax === undefined ? undefined : rssMax / MB,
    cpu,
    machine: machineUse
  }
}

/**
 * {@link runLoad} in a child process (bench/lib/loadChild.ts), so that its
 * autocannon does not share this process's event loop with a load measured at
 * the same time. `headersPerRequest` and `pathPerRequest` are not supported
 * (functions do not cross processes). Its `cpu.loadGenerator` is the child's own CPU.
 */
export const runLoadApart = (options: Omit<LoadOptions, "headersPerRequest" | "pathPerRequest">): Promise<LoadResult> =>
  new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [path.join(import.meta.dirname, "loadChild.ts"), JSON.stringify(options)], {
      stdio: ["ignore", "pipe", "inherit"]
    })
    let output = ""
    child.stdout!.on("data", (chunk: Buffer) => (output += chunk.toString("utf8")))
    child.once("error", reject)
    child.once("exit", (code) => {
      if (code !== 0) reject(new Error(`load child exited with ${code}: ${output}`))
      else resolve(JSON.parse(output) as LoadResult)
    })
  })
