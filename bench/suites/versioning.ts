/**
 * `npm run bench -- versioning`: assistant version control at size (issue 3
 * item 8). On an assistant with 2,000 nodes: the changeset of 2,000 upserts,
 * the first publish, a changeset of 200 modifications and the second publish,
 * the diff of the two commits, and the merge of two branches with 100 changes
 * each. Every operation is an HTTP request to a Parley process; each is run
 * `BENCH_REPEAT` times (default 5, on fresh assistants) and the median and
 * maximum are reported. Goals: publish <= 150 ms, diff <= 100 ms.
 */
import { makeCleanup } from "../lib/cleanup.ts"
import { startDatabase } from "../lib/database.ts"
import { envInt } from "../lib/env.ts"
import { expectJson } from "../lib/http.ts"
import { startParley } from "../lib/parley.ts"
import { environment, writeResults } from "../lib/results.ts"
import { median } from "../lib/stats.ts"
import { type Column, fixed, formatTable, markdownTable } from "../lib/table.ts"

const log = (line: string) => process.stdout.write(`${line}\n`)

const node = (id: number, version = 0) => ({
  id: `n${id}`,
  name: `Node ${id}${version > 0 ? ` v${version}` : ""}`,
  type: "llm",
  config: { instructions: `Step ${id}: answer politely. ${"x".repeat(200)}`, next_node: `n${(id + 1) % 2000}` },
  position: { x: id % 50, y: Math.floor(id / 50) }
})

/** Runs the benchmark; `args` are ignored. */
export const run = async (_args: ReadonlyArray<string>) => {
  const repeat = envInt("BENCH_REPEAT", 5)
  const cleanup = makeCleanup()
  try {
    const database = await startDatabase("parley_bench_versioning")
    cleanup.add("database", database.close)
    log(
      `versioning: database ${database.name} (${database.kind}, PostgreSQL ${database.serverVersion}), ${repeat} repetitions`
    )
    const {
      server: parley,
      organizationId,
      token,
      admin: adminCall
    } = await startParley(database.url, cleanup, {
      MAX_BODY_BYTES: String(16 * 1024 * 1024)
    })
    const admin = (method: string, path: string, body?: unknown) => adminCall(201, method, path, body)
    const organization = { id: organizationId }
    const key = { token }
    const timings: Record<string, Array<number>> = {}
    const timed = async <A>(name: string, f: () => Promise<A>): Promise<A> => {
      const start = performance.now()
      const result = await f()
      const list = timings[name] ?? []
      list.push(performance.now() - start)
      timings[name] = list
      return result
    }
    for (let round = 0; round < repeat; round++) {
      const assistant = await admin("POST", `/organizations/${organization.id}/assistants`, { name: `bench ${round}` })
      const base = `${parley.baseUrl}/assistants/api/v2/assistants/${assistant.id}`
      const call = (expected: number, method: string, path: string, body?: unknown) =>
        expectJson(expected, method, `${base}${path}`, { token: key.token, body })
      const draft = (branch: string) => `/branches/${branch}/draft`
      await timed("changeset: 2,000 upserts", () =>
        call(200, "PATCH", draft("main"), {
          config: { initial_node_id: "n0" },
          nodes: { upsert: Array.from({ length: 2000 }, (_, i) => node(i)) }
        })
      )
      const first = await timed("publish: 2,000 files", () => call(200, "POST", "/branches/main/publish", {}))
      await timed("changeset: 200 modifications", () =>
        call(200, "PATCH", draft("main"), { nodes: { upsert: Array.from({ length: 200 }, (_, i) => node(i * 10, 1)) } })
      )
      const second = await timed("publish: 200 modified", () => call(200, "POST", "/branches/main/publish", {}))
      const diff = await timed("diff of the two commits", () =>
        call(200, "GET", `/versions/diff?commit_a=${first.commit.id}&commit_b=${second.commit.id}`)
      )
      if (diff.diffs.length !== 200) throw new Error(`diff has ${diff.diffs.length} entries, expected 200`)
      await call(201, "POST", "/branches", { name: "left" })
      await call(201, "POST", "/branches", { name: "right" })
      await call(200, "PATCH", draft("left"), {
        nodes: { upsert: Array.from({ length: 100 }, (_, i) => node(i * 2 + 1, 2)) }
      })
      await call(200, "POST", "/branches/left/publish", {})
      await call(200, "PATCH", draft("right"), {
        nodes: { upsert: Array.from({ length: 100 }, (_, i) => node(1000 + i * 2, 3)) }
      })
      await call(200, "POST", "/branches/right/publish", {})
      await timed("merge: left into main (fast-forward)", () =>
        call(200, "POST", "/branches/main/merge", { source_branch_name: "left", commit: true })
      )
      const merged = await timed("merge: right into main (3-way, commit)", () =>
        call(200, "POST", "/branches/main/merge", { source_branch_name: "right", commit: true })
      )
      if (merged?.merge_parent_commit_id === undefined) throw new Error("the merge created no commit")
    }
    const goals: Record<string, number> = {
      "publish: 2,000 files": 150,
      "publish: 200 modified": 150,
      "diff of the two commits": 100
    }
    const columns: ReadonlyArray<Column> = [
      { header: "operation", align: "left" },
      { header: "median ms" },
      { header: "max ms" },
      { header: "goal ms" }
    ]
    const rows = Object.entries(timings).map(([name, values]) => [
      name,
      fixed(median(values), 1),
      fixed(Math.max(...values), 1),
      goals[name] ?? "-"
    ])
    log(`\n${formatTable(columns, rows)}`)
    const env = environment()
    const markdown = [
      `# versioning benchmark, ${new Date().toISOString()}`,
      "",
      `An assistant with 2,000 nodes; ${repeat} repetitions on fresh assistants; each operation is one HTTP request to Parley.`,
      `PostgreSQL ${database.serverVersion} (${database.kind}).`,
      "",
      markdownTable(columns, rows),
      ""
    ].join("\n")
    const written = writeResults("versioning", { environment: env, repeat, timings }, markdown)
    log(`\nresults: ${written.json}, ${written.markdown}`)
  } finally {
    await cleanup.run()
  }
}
