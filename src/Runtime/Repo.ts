/**
 * SQL of the AI runtime (R2): what a run reads about its session, the
 * session's text history, the current node, and the run records.
 */
import { PgClient } from "@effect/sql-pg"
import { Context, Effect, Layer } from "effect"
import type { JsonObject } from "../Domain/Common.ts"

/** What a run needs to know about its session and agent. */
export interface RunSession {
  readonly id: string
  readonly status: "open" | "closed"
  readonly agent_type: "ai" | "human" | null
  readonly assistant_id: string | null
  readonly current_node_id: string | null
  readonly metadata: JsonObject
}

/** One text message of the history, oldest first. */
export interface HistoryEntry {
  readonly role: "user" | "assistant"
  readonly text: string
}

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

/** Most text messages of the history a run sends to the model (the latest ones). */
export const HISTORY_LIMIT = 200

const makeRepo = Effect.gen(function* () {
  const sql = yield* PgClient.PgClient

  /** The session with its agent's type and assistant, if it exists in the organization. */
  const session = (organizationId: string, sessionId: string) =>
    sql<RunSession>`SELECT s.id, s.status, a.type AS agent_type, a.assistant_id, s.current_node_id, s.metadata
      FROM sessions s LEFT JOIN agents a ON a.id = s.agent_id
      WHERE s.id = ${sessionId} AND s.organization_id = ${organizationId}`.pipe(Effect.map((rows) => rows[0]))

  /** The latest {@link HISTORY_LIMIT} text messages of the session, oldest first (R2). */
  const history = (sessionId: string) =>
    sql<HistoryEntry>`SELECT role, text FROM (
        SELECT m.role, m.content->>'text' AS text, m.created_at, m.id FROM messages m
        WHERE m.session_id = ${sessionId} AND m.content->>'type' = 'text'
        ORDER BY m.created_at DESC, m.id DESC LIMIT ${HISTORY_LIMIT}
      ) h ORDER BY h.created_at, h.id`

  /** Sets the node the session's next turn starts from (R2 `next_node`). */
  const setCurrentNode = (sessionId: string, nodeId: string | null) =>
    sql`UPDATE sessions SET current_node_id = ${nodeId} WHERE id = ${sessionId}`.pipe(Effect.asVoid)

  /** Records a finished run. */
  const insertRun = (run: RunRecord) =>
    sql`INSERT INTO runs (id, organization_id, session_id, trigger, job_id, assistant_id, commit_id, nodes, model,
          input_tokens, output_tokens, status, error, missing_node_id, started_at, finished_at, duration_ms)
        VALUES (${run.id}, ${run.organizationId}, ${run.sessionId}, ${run.trigger}, ${run.jobId}, ${run.assistantId},
          ${run.commitId}, ${sql.json(run.nodes)}, ${run.model}, ${run.inputTokens}, ${run.outputTokens}, ${run.status},
          ${run.error}, ${run.missingNodeId}, ${run.startedAt}, ${new Date(run.startedAt.getTime() + run.durationMs)}, ${run.durationMs})`.pipe(
      Effect.asVoid
    )

  return { session, history, setCurrentNode, insertRun }
})

/** The runtime repository (SQL only). Requires `PgClient`. */
export class RuntimeRepo extends Context.Service<RuntimeRepo, Effect.Success<typeof makeRepo>>()(
  "parley/Runtime/RuntimeRepo"
) {
  static readonly layer = Layer.effect(RuntimeRepo, makeRepo)
}
