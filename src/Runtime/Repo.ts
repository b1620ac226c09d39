/**
 * SQL of the AI runtime (R2): the run records (`runs`), the one table the
 * runtime owns. What a run reads and writes of sessions and messages goes
 * through the Sessions and Messages services.
 */
import { PgClient } from "@effect/sql-pg"
import { Context, Effect, Layer } from "effect"
import type { SqlError } from "effect/sql"
import type { WithTransaction } from "../Database/Database.ts"
import type { CommitRunStats } from "../Domain/Assistant.ts"
import type { ToolCallRecord } from "./Records.ts"

/** A finished run, as recorded (issue 5 "Runs"). */
export interface RunRecord {
  readonly id: string
  readonly organizationId: string
  readonly sessionId: string
  readonly trigger: "reply" | "schedule"
  readonly jobId: string | null
  readonly assistantId: string | null
  readonly commitId: string | null
  /** The branch the commit was read through (A14); null for a legacy assistant. */
  readonly branchName: string | null
  readonly nodes: ReadonlyArray<string>
  /** The tool calls it made, in order (A15). */
  readonly toolCalls: ReadonlyArray<ToolCallRecord>
  readonly model: string | null
  readonly inputTokens: number | null
  readonly outputTokens: number | null
  readonly status: "succeeded" | "failed"
  readonly error: string | null
  /** R2/A13: the session's current node the published version no longer had; the run started at the initial node. */
  readonly missingNodeId: string | null
  readonly startedAt: Date
  readonly durationMs: number
}

const makeRepo = Effect.gen(function* () {
  const sql = yield* PgClient.PgClient

  const insertRun = (run: RunRecord) =>
    sql`INSERT INTO runs (id, organization_id, session_id, trigger, job_id, assistant_id, commit_id, branch_name, nodes,
          tool_calls, model, input_tokens, output_tokens, status, error, missing_node_id, started_at, finished_at, duration_ms)
        VALUES (${run.id}, ${run.organizationId}, ${run.sessionId}, ${run.trigger}, ${run.jobId}, ${run.assistantId},
          ${run.commitId}, ${run.branchName}, ${sql.json(run.nodes)}, ${sql.json(run.toolCalls)}, ${run.model}, ${run.inputTokens}, ${run.outputTokens}, ${run.status},
          ${run.error}, ${run.missingNodeId}, ${run.startedAt}, ${new Date(run.startedAt.getTime() + run.durationMs)}, ${run.durationMs})`.pipe(
      Effect.asVoid
    )

  /**
   * Speed tactic measured by `npm run bench -- runstats` (bench/README.md
   * "runstats: run statistics"): `percentile_disc` over the runs sorts every duration of the
   * range (1.27 s for 1,000,000 runs), and even a histogram of them reads
   * every run (0.54 s). Here the whole hours of the range come from
   * `run_rollups` (runs counted per duration, kept by triggers on `runs`,
   * migrations/0015_rollouts.ts) and only the partial hours at its two ends
   * from `runs`; the nearest ranks are read off the running sums of the
   * merged histogram, so the values are those of `percentile_disc`.
   */
  const runStats = (organizationId: string, assistantId: string, since: string, until: string) =>
    sql<StatsRow>`WITH b AS (
        SELECT since, until, full_until,
          CASE WHEN parley_run_hour(since) = since THEN since ELSE parley_run_hour(since) + interval '1 hour' END
            AS full_from
        FROM (SELECT ${since}::timestamptz AS since, ${until}::timestamptz AS until,
          parley_run_hour(${until}::timestamptz) AS full_until) x
      ), partial AS (
        SELECT since AS lo, CASE WHEN full_from < full_until THEN full_from ELSE until END AS hi FROM b
        UNION ALL
        SELECT full_until, until FROM b WHERE full_from < full_until
      ), h AS (
        SELECT commit_id, branch_name, duration_ms, sum(n) AS n, sum(succeeded) AS succeeded,
          sum(input_tokens) AS input_tokens, sum(output_tokens) AS output_tokens
        FROM (
          SELECT r.commit_id, coalesce(r.branch_name, '') AS branch_name, r.duration_ms, count(*) AS n,
            count(*) FILTER (WHERE r.status = 'succeeded') AS succeeded, sum(r.input_tokens) AS input_tokens,
            sum(r.output_tokens) AS output_tokens
          FROM partial p JOIN runs r ON r.organization_id = ${organizationId} AND r.assistant_id = ${assistantId}
            AND r.started_at >= p.lo AND r.started_at < p.hi
          WHERE r.commit_id IS NOT NULL
          GROUP BY 1, 2, 3
          UNION ALL
          SELECT u.commit_id, u.branch_name, u.duration_ms, sum(u.runs), sum(u.succeeded), sum(u.input_tokens),
            sum(u.output_tokens)
          FROM b JOIN run_rollups u ON u.organization_id = ${organizationId} AND u.assistant_id = ${assistantId}
            AND u.hour >= b.full_from AND u.hour < b.full_until
          WHERE u.runs > 0
          GROUP BY 1, 2, 3
        ) parts
        GROUP BY 1, 2, 3
      ), ranked AS (
        SELECT h.*, sum(n) OVER (PARTITION BY commit_id, branch_name ORDER BY duration_ms) AS below,
          sum(n) OVER (PARTITION BY commit_id, branch_name) AS total
        FROM h
      ), s AS (
        SELECT commit_id, nullif(branch_name, '') AS branch_name, total::int AS runs, sum(succeeded)::int AS succeeded,
          (total - sum(succeeded))::int AS failed,
          min(duration_ms) FILTER (WHERE below >= ceil(0.5 * total)) AS p50,
          min(duration_ms) FILTER (WHERE below >= ceil(0.95 * total)) AS p95,
          coalesce(sum(input_tokens), 0)::float8 AS input_tokens,
          coalesce(sum(output_tokens), 0)::float8 AS output_tokens
        FROM ranked GROUP BY commit_id, branch_name, total
      )
      SELECT s.* FROM s LEFT JOIN assistant_commits c
        ON c.organization_id = ${organizationId} AND c.assistant_id = ${assistantId}::uuid AND c.id = s.commit_id
      ORDER BY c.seq DESC NULLS LAST, s.commit_id, s.branch_name NULLS LAST`.pipe(
      Effect.map((rows) => rows.map(statsOf))
    )

  return RuntimeRepo.of({ withTransaction: (self) => sql.withTransaction(self), insertRun, runStats })
})

/** A row of the run statistics statement. */
interface StatsRow {
  readonly commit_id: string
  readonly branch_name: string | null
  readonly runs: number
  readonly succeeded: number
  readonly failed: number
  readonly p50: number
  readonly p95: number
  readonly input_tokens: number
  readonly output_tokens: number
}

/** The wire form of a statistics row (A14). */
const statsOf = (row: StatsRow): CommitRunStats => ({
  commit_id: row.commit_id,
  branch_name: row.branch_name,
  runs: row.runs,
  succeeded: row.succeeded,
  failed: row.failed,
  duration_ms: { p50: row.p50, p95: row.p95 },
  input_tokens: row.input_tokens,
  output_tokens: row.output_tokens
})

/**
 * The runtime repository (SQL only). Every method may fail with `SqlError`.
 */
export class RuntimeRepo extends Context.Service<
  RuntimeRepo,
  {
    /**
     * Runs `self` in one transaction (a savepoint inside another): a run's
     * turn, its messages, session changes, the caller's completion and the run
     * record commit together or not at all (R2 "never half a reply").
     */
    readonly withTransaction: WithTransaction
    /** Records a finished run (`runs`); `finished_at` is `startedAt + durationMs`. */
    readonly insertRun: (run: RunRecord) => Effect.Effect<void, SqlError.SqlError>
    /**
     * Run statistics of an assistant (A14): the runs started in [`since`,
     * `until`) (ISO 8601) that recorded a commit, grouped by commit and
     * branch: counts by status, the nearest-rank p50 and p95 of `duration_ms`,
     * tokens summed; newest commit first (then by commit id and branch).
     * Whole hours are read from `run_rollups`, the rest from `runs`.
     */
    readonly runStats: (
      organizationId: string,
      assistantId: string,
      since: string,
      until: string
    ) => Effect.Effect<ReadonlyArray<CommitRunStats>, SqlError.SqlError>
  }
>()("parley/Runtime/RuntimeRepo") {
  /** Over PostgreSQL. Requires `PgClient`. */
  static readonly layer = Layer.effect(RuntimeRepo, makeRepo)
}
