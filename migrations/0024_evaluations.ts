/**
 * Evaluations (DECISIONS.md A16, A17; issue 41 item 2).
 *
 * - `evaluations`: one row per evaluation, a durable job leased like reply
 *   jobs and erasures (`leased_by`, `lease_until`: a crashed worker's
 *   evaluation is taken up again when its lease expires). `baseline` and
 *   `candidate` are the sides as requested; `*_snapshot` the runtime
 *   snapshots they resolved to when the evaluation was created (a draft keeps
 *   changing; the evaluation answers from the copy). `summary` once
 *   completed. `organization_id` leads every key (O11).
 * - `evaluation_turns`: one row per recorded run of a selected session, made
 *   with the evaluation: what the run recorded (`recorded`: `{text, nodes,
 *   tool_calls, error}`), where it started and when (`started_at`: the
 *   history is cut there); `position` orders the turns (sessions in the
 *   order selected, each one's runs oldest first) and pages them (keyset).
 *   The answer columns stay null until the worker
 *   answers the turn; the statement that writes them requires them null, so a
 *   turn is answered once. A turn goes with its session (retention D21,
 *   erasure D22: the recorded text is the contact's data).
 */
import { Effect } from "effect"
import { SqlClient } from "effect/sql"

const statements = [
  `CREATE TABLE evaluations (
  organization_id uuid NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
  id uuid NOT NULL,
  assistant_id text NOT NULL,
  status text NOT NULL CHECK (status IN ('queued', 'running', 'completed', 'failed', 'cancelled')),
  baseline jsonb NOT NULL,
  candidate jsonb NOT NULL,
  baseline_commit_id text,
  candidate_commit_id text,
  baseline_snapshot jsonb NOT NULL,
  candidate_snapshot jsonb NOT NULL,
  repeats integer NOT NULL,
  judge jsonb,
  turns_total integer NOT NULL,
  turns_done integer NOT NULL DEFAULT 0,
  error text,
  summary jsonb,
  trace_context jsonb,
  leased_by uuid,
  lease_until timestamptz,
  created_at timestamptz NOT NULL,
  completed_at timestamptz,
  PRIMARY KEY (organization_id, id)
)`,
  `CREATE INDEX evaluations_assistant_idx ON evaluations (organization_id, assistant_id, created_at DESC, id DESC)`,
  `CREATE INDEX evaluations_open_idx ON evaluations (created_at) WHERE status IN ('queued', 'running')`,
  `CREATE TABLE evaluation_turns (
  organization_id uuid NOT NULL,
  evaluation_id uuid NOT NULL,
  id uuid NOT NULL,
  position integer NOT NULL,
  session_id uuid NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
  run_id uuid NOT NULL,
  node_id text NOT NULL,
  started_at timestamptz NOT NULL,
  recorded jsonb NOT NULL,
  answered_at timestamptz,
  should_close boolean,
  baseline jsonb,
  candidate jsonb,
  text_changed boolean,
  path_changed boolean,
  tools_changed boolean,
  changed boolean,
  similarity double precision,
  verdict text CHECK (verdict IN ('better', 'same', 'worse')),
  stats jsonb,
  PRIMARY KEY (organization_id, evaluation_id, id),
  FOREIGN KEY (organization_id, evaluation_id) REFERENCES evaluations (organization_id, id) ON DELETE CASCADE
)`,
  `CREATE UNIQUE INDEX evaluation_turns_position_idx ON evaluation_turns (organization_id, evaluation_id, position)`,
  `CREATE INDEX evaluation_turns_pending_idx ON evaluation_turns (organization_id, evaluation_id, position)
  WHERE answered_at IS NULL`,
  `CREATE INDEX evaluation_turns_session_idx ON evaluation_turns (session_id)`
]

export default Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  for (const statement of statements) yield* sql.unsafe(statement)
})
