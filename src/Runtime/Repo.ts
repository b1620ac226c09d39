/**
 * SQL of the AI runtime (R2): the run records (`runs`), the one table the
 * runtime owns. What a run reads and writes of sessions and messages goes
 * through the Sessions and Messages services. `RuntimeRepo.layerTest` is the
 * same repository in memory (`MemoryRepo.ts`).
 */
import { PgClient } from "@effect/sql-pg"
import { Context, Effect, Layer } from "effect"
import type { SqlError } from "effect/sql"
import type { WithTransaction } from "../Database/Database.ts"
import { type MemoryDatabase, makeMemoryDatabase } from "../Database/Memory.ts"
import { makeMemoryRepo } from "./MemoryRepo.ts"

/** A finished run, as recorded (issue 5 "Runs"). */
export interface RunRecord {
  readonly id: string
  readonly organizationId: string
  readonly sessionId: string
  readonly trigger: "reply" | "schedule"
  readonly jobId: string | null
  readonly assistantId: string | null
  readonly commitId: string | null
  readonly nodes: ReadonlyArray<string>
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
    sql`INSERT INTO runs (id, organization_id, session_id, trigger, job_id, assistant_id, commit_id, nodes, model,
          input_tokens, output_tokens, status, error, missing_node_id, started_at, finished_at, duration_ms)
        VALUES (${run.id}, ${run.organizationId}, ${run.sessionId}, ${run.trigger}, ${run.jobId}, ${run.assistantId},
          ${run.commitId}, ${sql.json(run.nodes)}, ${run.model}, ${run.inputTokens}, ${run.outputTokens}, ${run.status},
          ${run.error}, ${run.missingNodeId}, ${run.startedAt}, ${new Date(run.startedAt.getTime() + run.durationMs)}, ${run.durationMs})`.pipe(
      Effect.asVoid
    )

  return RuntimeRepo.of({ withTransaction: (self) => sql.withTransaction(self), insertRun })
})

/**
 * The runtime repository (SQL only): `layer` over PostgreSQL, `layerTest` in
 * memory. Every method may fail with `SqlError`.
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
  }
>()("parley/Runtime/RuntimeRepo") {
  /** Over PostgreSQL. Requires `PgClient`. */
  static readonly layer = Layer.effect(RuntimeRepo, makeRepo)
  /** In memory over `db` (its `runs` table), for fast tests of the `Runtime` service: no database. */
  static readonly layerTest = (db: MemoryDatabase = makeMemoryDatabase()) =>
    Layer.succeed(RuntimeRepo, makeMemoryRepo(db))
}
