/**
 * Replies and the AI runtime (issue 5; DECISIONS.md R1-R3, D15, D16):
 *
 * - `reply_jobs`: durable, debounced reply jobs (R1). At most one `pending` job
 *   per session (a partial unique index); a trigger inside the window moves its
 *   `due_at` (trailing debounce). A claimed job is `running` under a lease; a
 *   trigger arriving meanwhile makes a new pending job that runs after it.
 * - `runs`: one row per runtime run (reply job or schedule), with the assistant
 *   commit, the nodes visited, model, token usage, status, error and duration.
 * - `session_schedules`: D15 schedules (`message` or `node` at a moment).
 * - A trigger that cancels a session's schedules and pending reply job when it closes.
 * - An index for the D16 expiry sweep over open sessions.
 */
import { Effect } from "effect"
import { SqlClient } from "effect/sql"

const statements = [
  `CREATE TABLE reply_jobs (
  id uuid PRIMARY KEY,
  organization_id uuid NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
  session_id uuid NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
  status text NOT NULL CHECK (status IN ('pending', 'running')),
  due_at timestamptz NOT NULL,
  starting_node_id text,
  metadata jsonb NOT NULL DEFAULT '{}',
  triggers integer NOT NULL DEFAULT 1,
  trace_context jsonb,
  leased_by uuid,
  lease_until timestamptz,
  created_at timestamptz NOT NULL,
  updated_at timestamptz
)`,
  `-- R1: one pending job per session; triggers upsert on this index.
CREATE UNIQUE INDEX reply_jobs_pending_session_idx ON reply_jobs (session_id) WHERE status = 'pending'`,
  `CREATE INDEX reply_jobs_due_idx ON reply_jobs (due_at) WHERE status = 'pending'`,
  `CREATE INDEX reply_jobs_running_idx ON reply_jobs (session_id, lease_until) WHERE status = 'running'`,
  `CREATE TABLE runs (
  id uuid PRIMARY KEY,
  organization_id uuid NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
  session_id uuid NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
  trigger text NOT NULL CHECK (trigger IN ('reply', 'schedule')),
  job_id uuid,
  assistant_id text,
  commit_id text,
  nodes jsonb NOT NULL DEFAULT '[]',
  model text,
  input_tokens integer,
  output_tokens integer,
  status text NOT NULL CHECK (status IN ('succeeded', 'failed')),
  error text,
  started_at timestamptz NOT NULL,
  finished_at timestamptz NOT NULL,
  duration_ms integer NOT NULL
)`,
  `CREATE INDEX runs_session_idx ON runs (session_id, started_at)`,
  `CREATE TABLE session_schedules (
  id uuid PRIMARY KEY,
  organization_id uuid NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
  session_id uuid NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
  scheduled_for timestamptz NOT NULL,
  config jsonb NOT NULL,
  status text NOT NULL CHECK (status IN ('pending', 'running', 'done', 'failed', 'canceled')),
  error text,
  trace_context jsonb,
  leased_by uuid,
  lease_until timestamptz,
  created_at timestamptz NOT NULL,
  executed_at timestamptz
)`,
  `CREATE INDEX session_schedules_session_idx ON session_schedules (session_id, created_at, id)`,
  `CREATE INDEX session_schedules_due_idx ON session_schedules (scheduled_for) WHERE status = 'pending'`,
  `-- D15, R1: closing a session (finish, PATCH, ingest, expiry, should_close) cancels its
-- pending schedules and drops its pending reply job, whichever path closed it.
CREATE FUNCTION parley_session_closed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  UPDATE session_schedules SET status = 'canceled', error = 'Session closed'
    WHERE session_id = NEW.id AND status = 'pending';
  DELETE FROM reply_jobs WHERE session_id = NEW.id AND status = 'pending';
  RETURN NULL;
END
$$`,
  `CREATE TRIGGER sessions_closed AFTER UPDATE OF status ON sessions
  FOR EACH ROW WHEN (OLD.status = 'open' AND NEW.status = 'closed') EXECUTE FUNCTION parley_session_closed()`,
  `-- D16: the expiry sweep walks the open sessions of organizations with an idle timeout.
CREATE INDEX sessions_open_idx ON sessions (organization_id, created_at) WHERE status = 'open'`
]

export default Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  for (const statement of statements) yield* sql.unsafe(statement)
})
