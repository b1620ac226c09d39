#!/usr/bin/env node
// The `parley` command. Parley is TypeScript run natively by Node 24 (types
// stripped, no build step); the project pins Node 24 through its `node`
// devDependency, so this shim runs src/cli.ts with that binary when the Node
// that started it cannot strip types itself.
import { spawnSync } from "node:child_process"
import { existsSync } from "node:fs"
import { dirname, join } from "node:path"
import { fileURLToPath } from "node:url"

const root = join(dirname(fileURLToPath(import.meta.url)), "..")
const cli = join(root, "src", "cli.ts")
const [major, minor] = process.versions.node.split(".").map(Number)
const stripsTypes = major > 23 || (major === 23 && minor >= 6) || (major === 22 && minor >= 18)
if (stripsTypes) {
  process.argv.splice(1, 1, cli)
  await import(cli)
} else {
  const pinned = join(root, "node_modules", "node", "bin", "node")
  const node = existsSync(pinned) ? pinned : process.execPath
  const result = spawnSync(node, [cli, ...process.argv.slice(2)], { stdio: "inherit" })
  process.exit(result.status ?? 1)
}
