/**
 * The walkthroughs, run as written (issue 14 "the README walkthroughs run
 * verbatim"): "Walkthrough" in README.md, and "Admin API walkthrough",
 * "Webhooks walkthrough", "Rollouts walkthrough" (issue 17 item 4), "Channel
 * integration walkthrough" (issue 42, D24) and "Typed
 * client walkthrough" (issue 14 item 3b: openapi-typescript types and an
 * openapi-fetch program typechecked, then run) in docs/walkthroughs.md, where
 * they moved from the README (issue 37 item 5). For each, the server is
 * started as its first block says (`npm start` with the variables set there;
 * `node src/main.ts` on a free port and an embedded database of the test's
 * own), and the section's other shell blocks run in one bash, unchanged but
 * for the server's address (`localhost:8080` becomes the test server's). The
 * test checks what the walkthroughs' comments promise.
 */
import { spawn } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { describe, expect, it } from "vitest"
import { freePort, root, sleep } from "../support/Processes.ts"

/** The documents that hold walkthroughs, each read once: the README's first one and the rest in docs/. */
const documents = ["README.md", "docs/walkthroughs.md"].map((file) => ({
  file,
  text: fs.readFileSync(path.join(root, file), "utf8")
}))

/** The integrator's project (an npm workspace with TypeScript 5, openapi-typescript and openapi-fetch). */
const integrator = path.join(root, "test/integrator")
const typedClientHeading = "## Typed client walkthrough (openapi-typescript, openapi-fetch)"

/** This process's environment without DATABASE_URL: the walkthroughs use the embedded database of DATA_DIR. */
const { DATABASE_URL: _databaseUrl, ...inherited } = process.env

/** The `sh` blocks of the section under `heading` (up to the next `## ` heading), in the one document that has it. */
const shellBlocks = (heading: string): Array<string> => {
  const holders = documents.filter(({ text }) => text.includes(`\n${heading}\n`))
  if (holders.length !== 1)
    throw new Error(`${heading}: in ${holders.map(({ file }) => file).join(", ") || "no document"}, expected one`)
  const text = holders[0]!.text
  const start = text.indexOf(`\n${heading}\n`)
  const end = text.indexOf("\n## ", start + heading.length + 2)
  const section = text.slice(start, end < 0 ? undefined : end)
  return [...section.matchAll(/```sh\n([\s\S]*?)```/g)].map((match) => match[1]!)
}

/** The variables a server-start block sets (`export NAME=value`, `NAME=value npm start`). */
const serverEnv = (block: string): Record<string, string> =>
  Object.fromEntries(
    [...block.matchAll(/(?:^|\s)([A-Z_]+)=([^\s]+)(?=\s)/g)].map((match) => [match[1]!, match[2]!] as const)
  )

/** Runs `script` in bash (from the repository root unless `cwd` says); resolves with its exit code and output. */
const bash = (script: string, env: Record<string, string>, timeoutMs: number, cwd = root) =>
  new Promise<{ code: number | null; output: string }>((resolve) => {
    const child = spawn("bash", ["-e", "-o", "pipefail", "-c", script], {
      cwd,
      env: { ...inherited, ...env },
      stdio: ["ignore", "pipe", "pipe"]
    })
    let output = ""
    child.stdout.on("data", (chunk) => (output += chunk))
    child.stderr.on("data", (chunk) => (output += chunk))
    const timer = setTimeout(() => child.kill("SIGKILL"), timeoutMs)
    child.on("exit", (code) => {
      clearTimeout(timer)
      resolve({ code, output })
    })
  })

/** Runs a section: its server as its first block says, then its other blocks; returns their output. */
const runSection = async (heading: string) => {
  const blocks = shellBlocks(heading)
  const startBlock = blocks.find((block) => /\bnpm start\b/.test(block) && block.split("\n").length <= 4)
  const steps = blocks.filter((block) => block !== startBlock && !/^npm install && npm start/m.test(block))
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "parley-walkthrough-"))
  const port = await freePort()
  const env = {
    ...(startBlock === undefined ? {} : serverEnv(startBlock)),
    DATA_DIR: path.join(dataDir, "data"),
    PORT: String(port)
  }
  const server = spawn(process.execPath, ["src/main.ts"], {
    cwd: root,
    env: { ...inherited, ...env },
    stdio: ["ignore", "pipe", "pipe"],
    detached: true
  })
  let serverLog = ""
  server.stdout!.on("data", (chunk) => (serverLog += chunk))
  server.stderr!.on("data", (chunk) => (serverLog += chunk))
  try {
    for (let i = 0; ; i++) {
      const ready = await fetch(`http://127.0.0.1:${port}/readyz`).then(
        (response) => response.status === 200,
        () => false
      )
      if (ready) break
      if (i > 300) throw new Error(`server not ready:\n${serverLog}`)
      await sleep(100)
    }
    const script = steps.join("\n").replaceAll("localhost:8080", `127.0.0.1:${port}`)
    const run = await bash(
      script,
      { ...env, PATH: `${path.join(root, "node_modules/.bin")}:${inherited.PATH}` },
      120_000
    )
    return { ...run, serverLog }
  } finally {
    try {
      process.kill(-server.pid!, "SIGTERM")
    } catch {}
    await new Promise((resolve) => server.once("exit", resolve))
    fs.rmSync(dataDir, { recursive: true, force: true })
  }
}

describe("The walkthroughs (README.md, docs/walkthroughs.md), as written", () => {
  it("Walkthrough: bootstrap, a session, a message, read back, ingest, the contact erased", {
    timeout: 180_000
  }, async () => {
    const run = await runSection("## Walkthrough")
    expect(run.code, run.output).toBe(0)
    expect(run.output).toMatch(/"contact_name"|"contact_id":"\+4915112345678"/)
    expect(run.output).toContain('"text":"Hello!"')
    expect(run.output).toContain('"created_conversation":true')
    // D22: the erased contact's session is gone at once; the erasure completes with its counts.
    expect(run.output).toMatch(/session: 404$/m)
    expect(run.output).toMatch(/"contact_id":"\+4915112345678","status":"completed"/)
    expect(run.output).toMatch(/"counts":\{"contacts":1,"conversations":2,"sessions":2,"messages":2,/)
  })

  it("Channel integration walkthrough: a quoted reply, a reaction and an edit through ingest (D24)", {
    timeout: 180_000
  }, async () => {
    const run = await runSection("## Channel integration walkthrough")
    expect(run.code, run.output).toBe(0)
    expect(run.output).toMatch(/^replies to: [0-9a-f-]{36}$/m)
    expect(run.output).toContain(
      '{"text":"Can I change my delivery address?","was":["Can I change my address?"],"reactions":[{"emoji":"👍","count":1}]}'
    )
  })

  it("Admin API walkthrough: organization, API key, agent, settings, and the default agent on ingest", {
    timeout: 180_000
  }, async () => {
    const run = await runSection("## Admin API walkthrough")
    expect(run.code, run.output).toBe(0)
    expect(run.output).toMatch(/"token":"prl_[A-Za-z0-9_-]{43}"/)
    expect(run.output).toContain('"session_idle_timeout_seconds":3600')
    // The last command prints the session's agent name (curl's responses before it end without a newline).
    expect(run.output.trim()).toMatch(/Grace$/)
  })

  it("Rollouts walkthrough: a branch rolled out to 10%, statistics per commit, merged, the rollout ended (A12-A14)", {
    timeout: 180_000
  }, async () => {
    const run = await runSection("## Rollouts walkthrough")
    expect(run.code, run.output).toBe(0)
    expect(run.output).toContain('"branch_name":"friendlier","percent":10')
    // The statistics: main's runs and the branch's (if the split gave it any of the 40), 40 in all, all succeeded.
    const lines = [...run.output.matchAll(/^(main|friendlier) ([0-9a-f]{12}): (\d+) runs, (\d+) succeeded/gm)]
    expect(lines.map((line) => line[1])).toContain("main")
    expect(lines.reduce((sum, line) => sum + Number(line[3]), 0)).toBe(40)
    expect(lines.every((line) => line[3] === line[4])).toBe(true)
    expect(run.output).toMatch(/^branch_name=friendlier$/m)
    expect(run.output).toMatch(/^percent=10$/m)
    expect(run.output.trim()).toMatch(/204$/)
  })

  it("Evaluations walkthrough: recorded conversations replayed against a draft, the CI gate failing then passing, the report (A16)", {
    timeout: 180_000
  }, async () => {
    const run = await runSection("## Evaluations walkthrough")
    expect(run.code, run.output).toBe(0)
    expect(run.output).toMatch(/^10\/10 turns$/m)
    expect(run.output).toMatch(/^Gate failed: changed rate could be up to 1 \(upper end of the 95% interval\) > 0\.2$/m)
    expect(run.output).toMatch(/^gate: exit 1$/m)
    expect(run.output).toMatch(/^turns=10$/m)
    expect(run.output).toMatch(/^changed=10$/m)
    expect(run.output).toMatch(/^interval_high=1$/m)
    expect(run.output).toMatch(/^gate: exit 0\nchanged=0$/m)
    expect(run.output).toContain("report: 200 text/html; charset=utf-8")
    expect(run.output).toMatch(/^Answer warmly, in one sentence. \| Question 19$/m)
  })

  it("Webhooks walkthrough: an app, a verifying receiver, signed events received, deliveries listed", {
    timeout: 180_000
  }, async () => {
    const run = await runSection("## Webhooks walkthrough")
    expect(run.code, run.output).toBe(0)
    expect(run.output).toMatch(/^401$/m)
    expect(run.output).toMatch(/received session\.created /)
    expect(run.output).toMatch(/received message\.created /)
    // W7: the app orders by conversation; each event names its conversation, the session's first.
    expect(run.output).toContain('"ordering":"conversation"')
    const received = [...run.output.matchAll(/received (\S+) \S+ of conversation (\S+)/g)]
    expect(received.map((line) => line[1])).toEqual(["session.created", "message.created", "message.created"])
    expect(new Set(received.map((line) => line[2])).size).toBe(1)
    expect(run.output).toContain("message.created: succeeded after 1 attempt(s), HTTP 204")
    expect(run.output).toContain("session.created: succeeded after 1 attempt(s), HTTP 204")
    // W8: after the rotation the receiver, still on the old secret, verifies the next event too.
    expect(run.output).toContain("signing_secret, previous_secret_expires_at")
    expect(run.output.match(/received message\.created /g)?.length).toBe(2)
    expect(fs.existsSync(path.join(root, "receiver.ts"))).toBe(false)
  })

  it("Typed client walkthrough: openapi-typescript types from /openapi.json, an openapi-fetch program typechecked and run", {
    timeout: 180_000
  }, async () => {
    const run = await runSection(typedClientHeading)
    expect(run.code, run.output).toBe(0)
    expect(run.output).toContain('session open +4915112345678 {"whatsapp_instance_id":"inst-1"}')
    expect(run.output).toContain("messages Hello!")
    expect(run.output).toMatch(/^404 Session not found$/m)
    for (const file of ["parley-api.ts", "walkthrough.ts"])
      expect(fs.existsSync(path.join(integrator, file))).toBe(false)
  })

  it("Typed client walkthrough: the same typecheck fails a program that breaks the contract", {
    timeout: 120_000
  }, async () => {
    // The walkthrough's program, against types generated from `parley openapi` (no server), as it is
    // and with a role the contract does not have: the first passes, the second fails on it.
    const program = shellBlocks(typedClientHeading)
      .join("\n")
      .match(/cat > walkthrough\.ts <<'EOF'\n([\s\S]*?)\nEOF\n/)![1]!
      .replace("./parley-api.ts", "./check-api.ts")
    const files = {
      "check-api.json": "",
      "check-good.ts": program,
      "check-bad.ts": program.replace('role: "user", content', 'role: "robot", content')
    }
    expect(files["check-bad.ts"]).not.toBe(program)
    const tsc = (file: string) =>
      `npx --no-install tsc --noEmit --strict --target es2022 --module nodenext --allowImportingTsExtensions ${file}`
    try {
      for (const [file, text] of Object.entries(files)) fs.writeFileSync(path.join(integrator, file), text)
      const script = [
        `"${process.execPath}" ../../src/cli.ts openapi > check-api.json`,
        "npx --no-install openapi-typescript check-api.json -o check-api.ts",
        tsc("check-good.ts"),
        `if ${tsc("check-bad.ts")}; then echo "check-bad.ts typechecked"; exit 1; fi`
      ].join("\n")
      const run = await bash(script, {}, 110_000, integrator)
      expect(run.code, run.output).toBe(0)
      expect(run.output).toMatch(/check-bad\.ts\(\d+,\d+\): error TS2322: Type '"robot"' is not assignable/)
      expect(run.output).not.toMatch(/check-good\.ts\(/)
    } finally {
      for (const file of [...Object.keys(files), "check-api.ts"])
        fs.rmSync(path.join(integrator, file), { force: true })
    }
  })
})
