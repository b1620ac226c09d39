/**
 * Stoplight Prism (`@stoplight/prism-cli`, pinned in package.json) as a
 * validation proxy: a child process that forwards each request to an upstream
 * server and checks the request and the upstream's response against an
 * OpenAPI document. Prism reports what does not conform in the
 * `sl-violations` response header (a JSON array; prism-http-server's
 * `addViolationHeader`), and without `--errors` it forwards invalid requests
 * too, so the upstream's answer to them is checked as well. Prism sends no
 * telemetry and needs no network beyond the loopback interface. Its packages
 * depend on `@scarf/scarf`, whose install script reports installs unless the
 * root package opts out: package.json's `scarfSettings.enabled: false` does.
 */
import { spawn } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { Effect } from "effect"
import { freePort, root } from "./Processes.ts"

/** Prism's command-line entry point (what `node_modules/.bin/prism` links to). */
const PRISM_CLI = path.join(root, "node_modules/@stoplight/prism-cli/dist/index.js")

/** One violation as Prism reports it: where (`["request", "body", ...]` or `["response", ...]`), how bad, what. */
export interface Violation {
  readonly location: ReadonlyArray<string>
  readonly severity: string
  readonly code?: string | number
  readonly message: string
}

/** The violations of a response through Prism (none when it has no `sl-violations` header). */
export const violationsOf = (headers: Headers): ReadonlyArray<Violation> => {
  const header = headers.get("sl-violations")
  if (header === null) return []
  // Prism cuts a header past 8 KB and says so; what remains is not JSON.
  if (header.startsWith("Too many violations!")) {
    return [{ location: ["response"], severity: "Error", message: header.slice(0, 2000) }]
  }
  return JSON.parse(header) as ReadonlyArray<Violation>
}

/**
 * `document` with every object schema closed: `additionalProperties: false`
 * added where a schema names its `properties` and says nothing of others (no
 * `additionalProperties`, no `allOf`/`anyOf`/`oneOf` beside them: the
 * documented open objects, `metadata` or a content's extra fields, keep
 * theirs). OpenAPI leaves such an object open, so Prism would let a response
 * carry a field the document never names; closed, a field the server sends
 * and the document lacks is a violation, and so is a field a test's request
 * sends that the document does not name (a misspelt one the server would
 * ignore). The argument is not changed.
 */
export const closeObjects = (document: unknown): unknown => {
  /** Keys whose values are data, not schemas: left as they are. */
  const VALUES = new Set(["example", "examples", "default", "enum", "const"])
  const close = (node: unknown): unknown => {
    if (Array.isArray(node)) return node.map(close)
    if (node === null || typeof node !== "object") return node
    const schema = node as Record<string, unknown>
    const out = Object.fromEntries(
      Object.entries(schema).map(([key, value]) => [
        key,
        // Under `properties` the keys are field names (one may be `properties`), the values schemas.
        VALUES.has(key)
          ? value
          : key === "properties" && value !== null && typeof value === "object"
            ? Object.fromEntries(Object.entries(value).map(([name, field]) => [name, close(field)]))
            : close(value)
      ])
    )
    const open = ["additionalProperties", "allOf", "anyOf", "oneOf"].some((key) => schema[key] !== undefined)
    if (schema.properties !== undefined && !open) out.additionalProperties = false
    return out
  }
  return close(document)
}

/** A running Prism proxy. */
export interface PrismProxy {
  /** Where Prism listens: `http://127.0.0.1:<port>`. */
  readonly url: string
  /** Prism's version (`prism --version`). */
  readonly version: string
  /** What Prism printed so far (its last 50,000 characters). */
  readonly output: () => string
}

/**
 * Starts `prism proxy <document> <upstream>` on a free loopback port, with the
 * Node that runs the tests (the project's pinned Node 24 under `npm test`),
 * `document` with its objects closed ({@link closeObjects}) written to a
 * temporary file; waits up to 60 seconds until it
 * answers. The process is stopped (SIGTERM, SIGKILL after 5 seconds) and the
 * file removed when the scope closes. Fails with a defect if Prism exits or
 * does not answer in time.
 */
export const prismProxy = (document: unknown, upstream: string) =>
  Effect.acquireRelease(
    Effect.promise(async () => {
      const dir = fs.mkdtempSync(path.join(os.tmpdir(), "parley-prism-"))
      const file = path.join(dir, "openapi.json")
      fs.writeFileSync(file, JSON.stringify(closeObjects(document)))
      const version = await new Promise<string>((resolve) => {
        const child = spawn(process.execPath, [PRISM_CLI, "--version"])
        let out = ""
        child.stdout.on("data", (chunk) => (out += chunk))
        child.on("exit", () => resolve(out.trim()))
      })
      const port = await freePort()
      const child = spawn(
        process.execPath,
        [PRISM_CLI, "proxy", file, upstream, "--host", "127.0.0.1", "--port", String(port), "--multiprocess=false"],
        { cwd: dir, env: { ...process.env, NO_COLOR: "1", FORCE_COLOR: "0" } }
      )
      let output = ""
      const keep = (chunk: Buffer) => {
        output = (output + chunk.toString()).slice(-50_000)
      }
      child.stdout.on("data", keep)
      child.stderr.on("data", keep)
      const exited = new Promise<void>((resolve) => child.on("exit", () => resolve()))
      const stop = async () => {
        if (child.exitCode === null && child.signalCode === null) {
          child.kill("SIGTERM")
          const timer = setTimeout(() => child.kill("SIGKILL"), 5000)
          await exited
          clearTimeout(timer)
        }
        fs.rmSync(dir, { recursive: true, force: true })
      }
      const url = `http://127.0.0.1:${port}`
      const deadline = Date.now() + 60_000
      for (;;) {
        if (child.exitCode !== null) {
          await stop()
          throw new Error(`prism exited with ${child.exitCode}:\n${output}`)
        }
        if (/Prism is listening/.test(output)) break
        if (Date.now() > deadline) {
          await stop()
          throw new Error(`prism did not start in 60 s:\n${output}`)
        }
        await new Promise((resolve) => setTimeout(resolve, 50))
      }
      return { proxy: { url, version, output: () => output } satisfies PrismProxy, stop }
    }),
    ({ stop }) => Effect.promise(stop)
  ).pipe(Effect.map(({ proxy }) => proxy))
