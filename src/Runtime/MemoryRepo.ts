/**
 * The runtime repository in memory (`RuntimeRepo.layerTest`, issue 13 item
 * 8): run records in the `runs` table of a {@link MemoryDatabase}, and its
 * transactions, so a fast test of the `Runtime` service sees a turn's
 * messages, session changes and run record commit together or roll back
 * together, as over PostgreSQL.
 */
import { type MemoryDatabase, memoryStatement, memoryTransaction } from "../Database/Memory.ts"
import type { CommitRunStats } from "../Domain/Assistant.ts"
import type { RunRecord, RuntimeRepo } from "./Repo.ts"

/** The nearest-rank percentile `p` (0-1) of ascending `sorted`, as `percentile_disc` answers it. */
const nearestRank = (sorted: ReadonlyArray<number>, p: number): number =>
  sorted[Math.max(0, Math.ceil(p * sorted.length) - 1)]!

/**
 * Run statistics as `Repo.ts` computes them (A14), over `runs`. The commits'
 * order is not in this database: groups come newest first by their first run
 * in the range instead (the SQL orders by commit age; both agree whenever
 * commits are run in the order they were made).
 */
const runStats = (runs: ReadonlyArray<RunRecord>, assistantId: string, since: string, until: string) => {
  const from = Date.parse(since)
  const to = Date.parse(until)
  const groups = new Map<string, Array<RunRecord>>()
  for (const run of runs) {
    const at = run.startedAt.getTime()
    if (run.assistantId !== assistantId || run.commitId === null || at < from || at >= to) continue
    getOrPush(groups, `${run.commitId}\u0000${run.branchName ?? ""}`, run)
  }
  return [...groups.values()]
    .map((group) => {
      const durations = group.map((run) => run.durationMs).sort((a, b) => a - b)
      const first = Math.min(...group.map((run) => run.startedAt.getTime()))
      const stats: CommitRunStats = {
        commit_id: group[0]!.commitId!,
        branch_name: group[0]!.branchName,
        runs: group.length,
        succeeded: group.filter((run) => run.status === "succeeded").length,
        failed: group.filter((run) => run.status === "failed").length,
        duration_ms: { p50: nearestRank(durations, 0.5), p95: nearestRank(durations, 0.95) },
        input_tokens: group.reduce((sum, run) => sum + (run.inputTokens ?? 0), 0),
        output_tokens: group.reduce((sum, run) => sum + (run.outputTokens ?? 0), 0)
      }
      return { stats, first }
    })
    .sort((a, b) => b.first - a.first)
    .map(({ stats }) => stats)
}

const getOrPush = <K, V>(map: Map<K, Array<V>>, key: K, value: V) => {
  const found = map.get(key)
  if (found === undefined) map.set(key, [value])
  else found.push(value)
}

/** The repository over `db` (see module docs). */
export const makeMemoryRepo = (db: MemoryDatabase): RuntimeRepo["Service"] => ({
  withTransaction: memoryTransaction(db),
  insertRun: (run) =>
    memoryStatement(db, () => {
      db.runs.push(structuredClone(run))
    }),
  runStats: (assistantId, since, until) => memoryStatement(db, () => runStats(db.runs, assistantId, since, until))
})
