/**
 * A small analyzer of V8 `.cpuprofile` files (`node --cpu-prof`): self time
 * aggregated by function (name + url:line) and by origin (package, Node
 * internals, Parley's src, GC, idle). Percentages are of busy time (all but
 * `(idle)`), so a process waiting on I/O half the time still sums to 100%.
 * Optionally only samples inside time windows count (V8 profile timestamps
 * and `process.hrtime` share the monotonic clock: see {@link nowMicros}).
 */
import * as fs from "node:fs"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import { rootDirectory } from "./process.ts"

interface CallFrame {
  readonly functionName: string
  readonly url: string
  readonly lineNumber: number
  readonly columnNumber: number
}

interface ProfileNode {
  readonly id: number
  readonly callFrame: CallFrame
}

interface CpuProfile {
  readonly nodes: ReadonlyArray<ProfileNode>
  readonly startTime: number
  readonly endTime: number
  readonly samples?: ReadonlyArray<number>
  readonly timeDeltas?: ReadonlyArray<number>
}

export interface Cost {
  readonly name: string
  readonly selfMs: number
  /** Percent of busy time. */
  readonly percent: number
}

/** A [start, end] interval in microseconds of the monotonic clock. */
export type Window = readonly [number, number]

/** Now on the clock of V8 profile timestamps (CLOCK_MONOTONIC), in microseconds. */
export const nowMicros = (): number => Number(process.hrtime.bigint() / 1000n)

export interface ProfileSummary {
  readonly file: string
  /** Profiled time counted (the windows' total when windows were given), ms. */
  readonly durationMs: number
  readonly windowed: boolean
  readonly busyMs: number
  readonly idleMs: number
  readonly functions: ReadonlyArray<Cost>
  readonly origins: ReadonlyArray<Cost>
}

const shortUrl = (url: string): string => {
  if (url === "") return ""
  let file = url
  if (url.startsWith("file://")) {
    try {
      file = fileURLToPath(url)
    } catch {
      return url
    }
  }
  return file.startsWith(rootDirectory + path.sep) ? path.relative(rootDirectory, file) : file
}

/** Where a function comes from: `effect`, `@effect/sql-pg`, `node:internal`, `src`, `(garbage collector)`... */
const originOf = (frame: CallFrame): string => {
  const url = frame.url
  if (url === "") return frame.functionName.startsWith("(") ? frame.functionName : "(native/builtin)"
  if (url.startsWith("node:")) return "node internals"
  const modules = /node_modules\/((?:@[^/]+\/)?[^/]+)\//.exec(url)
  if (modules !== null) return modules[1]!
  const file = shortUrl(url)
  if (file.startsWith("src/")) return "parley src"
  if (file.startsWith("bench/")) return "bench"
  return file
}

const functionKey = (frame: CallFrame): string => {
  const name = frame.functionName === "" ? "(anonymous)" : frame.functionName
  return frame.url === "" ? name : `${name} ${shortUrl(frame.url)}:${frame.lineNumber + 1}`
}

const sorted = (totals: Map<string, number>, busyMs: number, limit: number): Array<Cost> =>
  [...totals]
    .sort((a, b) => b[1] - a[1])
    .slice(0, limit)
    .map(([name, microseconds]) => ({
      name,
      selfMs: microseconds / 1000,
      percent: busyMs > 0 ? (microseconds / 1000 / busyMs) * 100 : 0
    }))

/** Self time of the `top` costliest functions and of every origin, within `windows` when given. */
export const analyzeProfile = (file: string, top = 25, windows?: ReadonlyArray<Window>): ProfileSummary => {
  const profile = JSON.parse(fs.readFileSync(file, "utf8")) as CpuProfile
  const frames = new Map<number, CallFrame>(profile.nodes.map((node) => [node.id, node.callFrame]))
  const samples = profile.samples ?? []
  const deltas = profile.timeDeltas ?? []
  // Sample i lasts until sample i+1 (DevTools' attribution); the last one until endTime.
  const selfByNode = new Map<number, number>()
  let timestamp = profile.startTime
  const timestamps = deltas.map((delta) => (timestamp += delta))
  const inWindow = (at: number) => windows === undefined || windows.some(([start, end]) => at >= start && at < end)
  for (let i = 0; i < samples.length; i++) {
    if (!inWindow(timestamps[i]!)) continue
    const duration = (i + 1 < timestamps.length ? timestamps[i + 1]! : profile.endTime) - timestamps[i]!
    if (duration > 0) selfByNode.set(samples[i]!, (selfByNode.get(samples[i]!) ?? 0) + duration)
  }
  const byFunction = new Map<string, number>()
  const byOrigin = new Map<string, number>()
  let idle = 0
  let total = 0
  for (const [id, microseconds] of selfByNode) {
    const frame = frames.get(id)
    if (frame === undefined) continue
    total += microseconds
    if (frame.functionName === "(idle)") {
      idle += microseconds
      continue
    }
    const key = functionKey(frame)
    byFunction.set(key, (byFunction.get(key) ?? 0) + microseconds)
    const origin = originOf(frame)
    byOrigin.set(origin, (byOrigin.get(origin) ?? 0) + microseconds)
  }
  const busyMs = (total - idle) / 1000
  return {
    file,
    durationMs:
      windows === undefined
        ? (profile.endTime - profile.startTime) / 1000
        : windows.reduce(
            (sum, [start, end]) =>
              sum + Math.max(0, Math.min(end, profile.endTime) - Math.max(start, profile.startTime)) / 1000,
            0
          ),
    windowed: windows !== undefined,
    busyMs,
    idleMs: idle / 1000,
    functions: sorted(byFunction, busyMs, top),
    origins: sorted(byOrigin, busyMs, 15)
  }
}

/** The `.cpuprofile` Node wrote in `directory` for `pid` (`CPU.<date>.<time>.<pid>.<tid>.<seq>.cpuprofile`). */
export const findProfile = (directory: string, pid: number): string | undefined => {
  if (!fs.existsSync(directory)) return undefined
  const files = fs
    .readdirSync(directory)
    .filter((name) => name.endsWith(".cpuprofile") && name.split(".")[3] === String(pid))
    .map((name) => path.join(directory, name))
  return files.sort((a, b) => fs.statSync(b).mtimeMs - fs.statSync(a).mtimeMs)[0]
}

/** The summary as text: the top functions, then the origins. */
export const formatProfile = (summary: ProfileSummary): string => {
  const pct = (value: number) => `${value.toFixed(1).padStart(5)}%`
  const ms = (value: number) => `${value.toFixed(0).padStart(7)} ms`
  return [
    `CPU profile ${shortUrl(summary.file)}${summary.windowed ? " (measured rounds only)" : ""}: ${(summary.durationMs / 1000).toFixed(1)} s, busy ${(summary.busyMs / 1000).toFixed(1)} s (idle ${(summary.idleMs / 1000).toFixed(1)} s); self time, % of busy`,
    "",
    `Top ${summary.functions.length} functions:`,
    ...summary.functions.map(
      (cost, i) => `${String(i + 1).padStart(3)}. ${pct(cost.percent)} ${ms(cost.selfMs)}  ${cost.name}`
    ),
    "",
    "By origin:",
    ...summary.origins.map((cost) => `     ${pct(cost.percent)} ${ms(cost.selfMs)}  ${cost.name}`)
  ].join("\n")
}

/** `node bench/lib/cpuprofile.ts <file.cpuprofile> [top]`: prints the summary. */
if (import.meta.main) {
  const [file, top] = process.argv.slice(2)
  if (file === undefined) {
    process.stderr.write("usage: node bench/lib/cpuprofile.ts <file.cpuprofile> [top]\n")
    process.exit(2)
  }
  const summary = analyzeProfile(file, top === undefined ? 25 : Number(top))
  process.stdout.write(`${formatProfile(summary)}\n`)
}
