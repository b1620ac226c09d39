/** Writing a benchmark's results to bench/results/ as JSON and markdown with timestamped names. */
import { execFileSync } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { rootDirectory } from "./process.ts"

export const resultsDirectory = path.join(rootDirectory, "bench", "results")

/** ISO 8601 UTC usable in a file name on every OS: `2026-01-02T03-04-05Z`. */
export const fileTimestamp = (date = new Date()) =>
  date
    .toISOString()
    .replace(/\.\d+Z$/, "Z")
    .replace(/:/g, "-")

/** Where and on what the benchmark ran. */
export const environment = () => {
  let commit: string | undefined
  let dirty = false
  try {
    commit = execFileSync("git", ["rev-parse", "--short", "HEAD"], { cwd: rootDirectory, encoding: "utf8" }).trim()
    dirty = execFileSync("git", ["status", "--porcelain"], { cwd: rootDirectory, encoding: "utf8" }).trim() !== ""
  } catch {
    // not a git checkout
  }
  return {
    node: process.version,
    platform: `${os.type()} ${os.release()} ${os.arch()}`,
    cpus: os.cpus().length,
    cpuModel: os.cpus()[0]?.model ?? "?",
    memoryGb: Math.round(os.totalmem() / 1024 ** 3),
    commit: commit === undefined ? undefined : `${commit}${dirty ? "+dirty" : ""}`
  }
}

/** Writes `<name>-<timestamp>.json` and `.md`; returns their paths. */
export const writeResults = (name: string, json: unknown, markdown: string, date = new Date()) => {
  fs.mkdirSync(resultsDirectory, { recursive: true })
  const base = path.join(resultsDirectory, `${name}-${fileTimestamp(date)}`)
  fs.writeFileSync(`${base}.json`, `${JSON.stringify(json, null, 2)}\n`)
  fs.writeFileSync(`${base}.md`, markdown.endsWith("\n") ? markdown : `${markdown}\n`)
  return { json: `${base}.json`, markdown: `${base}.md` }
}
