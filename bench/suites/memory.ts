/**
 * `npm run bench -- memory`: the server's resident memory around a burst of
 * load (issue 38 item 6). A Parley process (with the V8 flags of `npm start`)
 * is measured idle, then under `BENCH_MEMORY_CONNECTIONS` (default 50)
 * connections of POST message for `BENCH_MEMORY_SECONDS` (default 20), then
 * every 5 s for 45 s after the load stopped: its RSS (VmRSS) in MiB. The RSS
 * some 30 s after the load is what `src/Shared/MemoryRelease.ts` gives back
 * (its check runs every 15 s once the process is quiet). Goal: back within
 * 1.25x of the idle RSS 30 s after the load.
 */
import { makeCleanup } from "../lib/cleanup.ts"
import { startDatabase } from "../lib/database.ts"
import { envInt } from "../lib/env.ts"
import { expectJson } from "../lib/http.ts"
import { runLoad } from "../lib/load.ts"
import { startParley } from "../lib/parley.ts"
import { rssBytes } from "../lib/proc.ts"
import { sleep } from "../lib/process.ts"
import { environment, writeResults } from "../lib/results.ts"
import { type Column, fixed, formatTable, markdownTable } from "../lib/table.ts"

const log = (line: string) => process.stdout.write(`${line}\n`)

const MIB = 1024 * 1024

/** Runs the benchmark; `args` are ignored. */
export const run = async (_args: ReadonlyArray<string>) => {
  const connections = envInt("BENCH_MEMORY_CONNECTIONS", 50)
  const seconds = envInt("BENCH_MEMORY_SECONDS", 20)
  const cleanup = makeCleanup()
  try {
    const database = await startDatabase("parley_bench_memory")
    cleanup.add("database", database.close)
    log(
      `memory: ${connections} connections of POST message for ${seconds} s; database ${database.name} (${database.kind}, PostgreSQL ${database.serverVersion})`
    )
    // The flags of `npm start` (package.json).
    const { server, token } = await startParley(database.url, cleanup, {}, ["--max-semi-space-size=32"])
    const session = await expectJson(201, "POST", `${server.baseUrl}/conversations/v2/api/v1/sessions`, {
      token,
      body: { contact_id: "memory", contact_name: "Memory" }
    })
    const rss = () => (rssBytes(server.pid) ?? 0) / MIB
    await sleep(5_000)
    const idle = rss()
    const load = await runLoad({
      url: `${server.baseUrl}/conversations/v2/api/v1/sessions/${session.id}/messages`,
      method: "POST",
      headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
      body: JSON.stringify({ role: "user", content: { type: "text", text: "memory" } }),
      connections,
      duration: seconds,
      serverPid: server.pid
    })
    const after: Array<[number, number]> = [[0, rss()]]
    for (let waited = 5; waited <= 45; waited += 5) {
      await sleep(5_000)
      after.push([waited, rss()])
    }
    const at30 = after.find(([waited]) => waited === 30)![1]
    const columns: ReadonlyArray<Column> = [{ header: "measure", align: "left" }, { header: "RSS MiB" }]
    const rows = [
      ["idle, before the load", fixed(idle, 0)],
      [`peak under load (${Math.round(load.requestsPerSecond)} req/s)`, fixed(load.rssMaxMb ?? 0, 0)],
      ...after.map(([waited, value]) => [`${waited} s after the load`, fixed(value, 0)]),
      ["30 s after / idle (goal <= 1.25)", fixed(at30 / idle, 2)]
    ]
    log(`\n${formatTable(columns, rows)}`)
    const markdown = [
      `# memory benchmark, ${new Date().toISOString()}`,
      "",
      `${connections} connections of POST message for ${seconds} s; server RSS (VmRSS) idle, at its peak and every 5 s after.`,
      `PostgreSQL ${database.serverVersion} (${database.kind}).`,
      "",
      markdownTable(columns, rows),
      ""
    ].join("\n")
    const written = writeResults(
      "memory",
      { environment: environment(), connections, seconds, idle, peak: load.rssMaxMb, after },
      markdown
    )
    log(`\nresults: ${written.json}, ${written.markdown}`)
  } finally {
    await cleanup.run()
  }
}
