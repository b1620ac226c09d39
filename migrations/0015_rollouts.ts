/**
 * Assistants in production (issue 17; DECISIONS.md A12-A14):
 *
 * - `assistants.session_pinning` (A13): `none` or `session`.
 * - `assistant_rollouts` (A12): at most one per assistant, of one branch to
 *   `percent` of the new sessions. `id` names the rollout: a PUT of another
 *   branch replaces it (a new id), a PUT of the same branch changes its
 *   percent and keeps it. Deleting the branch ends the rollout.
 * - `session_assignments` (A12, A13): per session and assistant, the branch
 *   its first run took (and the rollout that chose it, null for `main` taken
 *   without one) and that run's commit, which pinned sessions keep.
 * - `runs.branch_name` (A14): the branch every run read; with `commit_id`,
 *   what the run statistics group by.
 * - `run_rollups` (A14): the runs of each assistant, commit, branch (`''` for
 *   none) and whole hour (`parley_run_hour`, UTC), counted per duration in
 *   ms, with how many succeeded and their tokens, kept by statement triggers
 *   on `runs` in the transaction that writes (or deletes: rows may fall to
 *   0 runs, which the statistics skip) the runs, and filled here from the
 *   runs already recorded. The statistics read the whole
 *   hours of their range here and the two partial hours at its ends from
 *   `runs` (`runs_assistant_started_idx`, a range scan covering what they
 *   aggregate). Speed tactic measured by `npm run bench -- runstats`
 *   (bench/README.md "runstats: run statistics").
 */
import { Effect } from "effect"
import { SqlClient } from "effect/sql"

const statements = [
  `ALTER TABLE assistants ADD COLUMN session_pinning text NOT NULL DEFAULT 'none'
  CHECK (session_pinning IN ('none', 'session'))`,
  `CREATE TABLE assistant_rollouts (
  assistant_id uuid PRIMARY KEY REFERENCES assistants (id) ON DELETE CASCADE,
  id uuid NOT NULL,
  branch_id uuid NOT NULL REFERENCES assistant_branches (id) ON DELETE CASCADE,
  percent integer NOT NULL CHECK (percent BETWEEN 0 AND 100),
  created_at timestamptz NOT NULL,
  updated_at timestamptz NOT NULL
)`,
  `CREATE INDEX assistant_rollouts_branch_idx ON assistant_rollouts (branch_id)`,
  `CREATE TABLE session_assignments (
  session_id uuid NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
  assistant_id uuid NOT NULL REFERENCES assistants (id) ON DELETE CASCADE,
  rollout_id uuid,
  branch_name text NOT NULL,
  commit_id text NOT NULL,
  created_at timestamptz NOT NULL,
  updated_at timestamptz NOT NULL,
  PRIMARY KEY (session_id, assistant_id)
)`,
  `CREATE INDEX session_assignments_assistant_idx ON session_assignments (assistant_id)`,
  `ALTER TABLE runs ADD COLUMN branch_name text`,
  `CREATE INDEX runs_assistant_started_idx ON runs (assistant_id, started_at)
  INCLUDE (commit_id, branch_name, status, duration_ms, input_tokens, output_tokens)`,
  `-- The whole hour (UTC, whatever the session's time zone) a run started in.
CREATE FUNCTION parley_run_hour(started_at timestamptz) RETURNS timestamptz LANGUAGE sql IMMUTABLE AS $$
  SELECT date_bin('1 hour', $1, TIMESTAMPTZ '2000-01-01 00:00:00+00')
$$`,
  `CREATE TABLE run_rollups (
  assistant_id text NOT NULL,
  hour timestamptz NOT NULL,
  commit_id text NOT NULL,
  branch_name text NOT NULL,
  duration_ms integer NOT NULL,
  runs integer NOT NULL,
  succeeded integer NOT NULL,
  input_tokens bigint NOT NULL,
  output_tokens bigint NOT NULL,
  PRIMARY KEY (assistant_id, hour, commit_id, branch_name, duration_ms)
)`,
  `CREATE FUNCTION parley_roll_up_runs() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP = 'INSERT' THEN
    INSERT INTO run_rollups AS r (assistant_id, hour, commit_id, branch_name, duration_ms, runs, succeeded,
      input_tokens, output_tokens)
    SELECT assistant_id, parley_run_hour(started_at), commit_id, coalesce(branch_name, ''), duration_ms, count(*),
      count(*) FILTER (WHERE status = 'succeeded'), coalesce(sum(input_tokens), 0), coalesce(sum(output_tokens), 0)
    FROM changed_runs WHERE assistant_id IS NOT NULL AND commit_id IS NOT NULL
    GROUP BY 1, 2, 3, 4, 5
    ON CONFLICT (assistant_id, hour, commit_id, branch_name, duration_ms) DO UPDATE SET
      runs = r.runs + EXCLUDED.runs, succeeded = r.succeeded + EXCLUDED.succeeded,
      input_tokens = r.input_tokens + EXCLUDED.input_tokens, output_tokens = r.output_tokens + EXCLUDED.output_tokens;
  ELSE
    UPDATE run_rollups AS r SET runs = r.runs - d.runs, succeeded = r.succeeded - d.succeeded,
      input_tokens = r.input_tokens - d.input_tokens, output_tokens = r.output_tokens - d.output_tokens
    FROM (
      SELECT assistant_id, parley_run_hour(started_at) AS hour, commit_id, coalesce(branch_name, '') AS branch_name,
        duration_ms, count(*) AS runs, count(*) FILTER (WHERE status = 'succeeded') AS succeeded,
        coalesce(sum(input_tokens), 0) AS input_tokens, coalesce(sum(output_tokens), 0) AS output_tokens
      FROM changed_runs WHERE assistant_id IS NOT NULL AND commit_id IS NOT NULL
      GROUP BY 1, 2, 3, 4, 5
    ) d
    WHERE (r.assistant_id, r.hour, r.commit_id, r.branch_name, r.duration_ms)
      = (d.assistant_id, d.hour, d.commit_id, d.branch_name, d.duration_ms);
  END IF;
  RETURN NULL;
END
$$`,
  `CREATE TRIGGER runs_roll_up_inserted AFTER INSERT ON runs REFERENCING NEW TABLE AS changed_runs
  FOR EACH STATEMENT EXECUTE FUNCTION parley_roll_up_runs()`,
  `CREATE TRIGGER runs_roll_up_deleted AFTER DELETE ON runs REFERENCING OLD TABLE AS changed_runs
  FOR EACH STATEMENT EXECUTE FUNCTION parley_roll_up_runs()`,
  `INSERT INTO run_rollups (assistant_id, hour, commit_id, branch_name, duration_ms, runs, succeeded, input_tokens,
    output_tokens)
  SELECT assistant_id, parley_run_hour(started_at), commit_id, '', duration_ms, count(*),
    count(*) FILTER (WHERE status = 'succeeded'), coalesce(sum(input_tokens), 0), coalesce(sum(output_tokens), 0)
  FROM runs WHERE assistant_id IS NOT NULL AND commit_id IS NOT NULL
  GROUP BY 1, 2, 3, 4, 5`
]

export default Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  for (const statement of statements) yield* sql.unsafe(statement)
})
