/**
 * Process statistics from Linux `/proc`: resident memory (`VmRSS`) and CPU
 * time, sampled while a load runs. Elsewhere they read as undefined / zero.
 */
import * as fs from "node:fs"

/** Clock ticks per second of `/proc/<pid>/stat` times (USER_HZ; 100 on Linux). */
const TICKS_PER_SECOND = 100

/** The resident set size of `pid` in bytes (`VmRSS` of `/proc/<pid>/status`), or undefined. */
export const rssBytes = (pid: number): number | undefined => {
  try {
    const match = /^VmRSS:\s+(\d+)\s+kB$/m.exec(fs.readFileSync(`/proc/${pid}/status`, "utf8"))
    return match === null ? undefined : Number(match[1]) * 1024
  } catch {
    return undefined
  }
}

/** User + system CPU seconds used by `pid` so far, or undefined. */
export const cpuSeconds = (pid: number): number | undefined => {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, "utf8")
    // Fields after the command name (which may hold spaces) start after the last ')'.
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ")
    return (Number(fields[11]) + Number(fields[12])) / TICKS_PER_SECOND
  } catch {
    return undefined
  }
}

/** The parent pid of `pid`, or undefined. */
export const parentPid = (pid: number): number | undefined => {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, "utf8")
    return Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1])
  } catch {
    return undefined
  }
}

/** `pid` and its direct children (a postmaster and its backends and workers). */
export const processAndChildren = (pid: number): Array<number> => {
  const pids = [pid]
  let entries: Array<string>
  try {
    entries = fs.readdirSync("/proc")
  } catch {
    return pids
  }
  for (const entry of entries) if (/^\d+$/.test(entry) && parentPid(Number(entry)) === pid) pids.push(Number(entry))
  return pids
}

/** Pids of every running process whose command name is `name` (e.g. all `postgres` backends). */
export const pidsNamed = (name: string): Array<number> => {
  const pids: Array<number> = []
  let entries: Array<string>
  try {
    entries = fs.readdirSync("/proc")
  } catch {
    return pids
  }
  for (const entry of entries) {
    if (!/^\d+$/.test(entry)) continue
    try {
      if (fs.readFileSync(`/proc/${entry}/comm`, "utf8").trim() === name) pids.push(Number(entry))
    } catch {
      // exited meanwhile
    }
  }
  return pids
}

/** Max RSS sampled while running, in bytes. */
export interface RssSampler {
  readonly stop: () => number | undefined
}

/** Samples the RSS of `pid` every `intervalMs` until `stop()`, which returns the maximum seen. */
export const sampleRss = (pid: number, intervalMs = 200): RssSampler => {
  let max = rssBytes(pid)
  const timer = setInterval(() => {
    const rss = rssBytes(pid)
    if (rss !== undefined && (max === undefined || rss > max)) max = rss
  }, intervalMs)
  return {
    stop: () => {
      clearInterval(timer)
      const rss = rssBytes(pid)
      if (rss !== undefined && (max === undefined || rss > max)) max = rss
      return max
    }
  }
}

/** CPU seconds used by a set of processes between `start` and `stop` (processes born meanwhile included). */
export const measureCpu = (pids: () => ReadonlyArray<number>) => {
  const total = () => {
    const seen = new Map<number, number>()
    for (const pid of pids()) seen.set(pid, cpuSeconds(pid) ?? 0)
    return seen
  }
  const before = total()
  const startedAt = performance.now()
  return {
    /** CPU use over the interval as a percentage of one core. */
    stop: (): number => {
      const after = total()
      let used = 0
      for (const [pid, seconds] of after) used += seconds - (before.get(pid) ?? 0)
      const elapsed = (performance.now() - startedAt) / 1000
      return elapsed > 0 ? (used / elapsed) * 100 : 0
    }
  }
}

/** Jiffies of the machine's aggregate `cpu` line of /proc/stat: [user..steal] fields. */
const machineTicks = (): Array<number> | undefined => {
  try {
    const line = fs.readFileSync("/proc/stat", "utf8").split("\n")[0]!
    return line.trim().split(/\s+/).slice(1, 9).map(Number)
  } catch {
    return undefined
  }
}

/** Whole-machine CPU use over an interval, percent of all cores: busy, iowait, steal. */
export const measureMachine = () => {
  const before = machineTicks()
  return {
    stop: (): { readonly busy: number; readonly iowait: number; readonly steal: number } | undefined => {
      const after = machineTicks()
      if (before === undefined || after === undefined) return undefined
      // user nice system idle iowait irq softirq steal
      const delta = after.map((value, i) => value - (before[i] ?? 0))
      const total = delta.reduce((a, b) => a + b, 0)
      if (total <= 0) return undefined
      const idle = delta[3]! + delta[4]!
      return {
        busy: ((total - idle) / total) * 100,
        iowait: (delta[4]! / total) * 100,
        steal: (delta[7]! / total) * 100
      }
    }
  }
}
