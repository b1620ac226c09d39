#!/usr/bin/env node
// The `parley` command. Parley is TypeScript run natively by Node 24 (types
// stripped, no build step); the project pins Node 24 through its `node`
// devDependency, so this shim runs src/cli.ts with that binary when the Node
// that started it cannot strip types itself.
import { spawnSync } from "node:child_process"
import { existsSync, readFileSync } from "node:fs"
import { dirname, join } from "node:path"
import { fileURLToPath } from "node:url"

const root = join(dirname(fileURLToPath(import.meta.url)), "..")
const cli = join(root, "src", "cli.ts")
const [major, minor] = process.versions.node.split(".").map(Number)
const stripsTypes = major > 23 || (major === 23 && minor >= 6) || (major === 22 && minor >= 18)

// `parley serve` runs the server with the V8 flags of `npm start` (package.json "start", for
// example the young generation's size: bench/README.md "export"). V8 reads them when the process
// starts, so the shim starts Node again with them, unless they are given already (as arguments
// or in NODE_OPTIONS, which then win).
const startFlags = () => {
  const start = JSON.parse(readFileSync(join(root, "package.json"), "utf8")).scripts?.start ?? ""
  return start.split(/\s+/).filter((arg) => arg.startsWith("--"))
}
const given = [...process.execArgv, ...(process.env.NODE_OPTIONS ?? "").split(/\s+/)].map((arg) => arg.split("=")[0])
const flags = process.argv[2] === "serve" ? startFlags().filter((flag) => !given.includes(flag.split("=")[0])) : []

if (stripsTypes && flags.length === 0) {
  process.argv.splice(1, 1, cli)
  await import(cli)
} else {
  const pinned = join(root, "node_modules", "node", "bin", "node")
  const node = stripsTypes || !existsSync(pinned) ? process.execPath : pinned
  const args = [...flags, cli, ...process.argv.slice(2)]
  if (stripsTypes && typeof process.execve === "function" && process.platform !== "win32") {
    // Replaces this process (same pid), so signals reach the server itself (O5).
    process.execve(node, [node, ...process.execArgv, ...args])
  }
  const result = spawnSync(node, args, { stdio: "inherit" })
  process.exit(result.status ?? 1)
}
