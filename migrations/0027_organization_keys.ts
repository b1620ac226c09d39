/**
 * A Citus-ready schema (DECISIONS.md O11, issue 43 item 1): every
 * per-organization table carries `organization_id` first in its primary key,
 * in each of its unique keys and in its foreign keys to other
 * per-organization tables, so that a distribution on `organization_id` (done
 * elsewhere, when the `citus` extension is there) keeps every key enforceable
 * on one shard group. Tables of no organization are reference tables and keep
 * their keys: `organizations`, `api_keys` (looked up by token hash) and
 * `parley_migrations`. Nothing here is specific to Citus: it runs on
 * PostgreSQL 14+ and on a populated database, in the migrator's one
 * transaction, and keeps every row.
 *
 * - `organization_id` is added to the tables that had none, filled from the
 *   parent row (the assistant, the branch, the session), then NOT NULL:
 *   `assistant_files`, `assistant_commits`, `assistant_commit_files`,
 *   `assistant_branches`, `assistant_draft_files`, `assistant_rollouts`,
 *   `session_assignments`, `run_rollups`. `run_rollups` is refilled from
 *   `runs` (what its triggers keep it equal to, 0015), grouped by
 *   organization as well: its `assistant_id` is text with no key to follow,
 *   and the runs of two organizations whose agents named one assistant id
 *   shared a row (their statistics mixed); now each has its own.
 * - Primary keys on `id` alone become `(organization_id, id)` (agents, apps,
 *   assistants, conversations, deliveries, events, messages, reply_jobs, runs,
 *   session_schedules, sessions, assistant_branches); the others get
 *   `organization_id` in front (ingest_receipts, the assistant tables,
 *   session_assignments, run_rollups). No unique index on `id` alone is left.
 * - Unique keys: `assistant_branches (organization_id, assistant_id, name)`
 *   and the pending reply job of a session, `reply_jobs_pending_session_idx
 *   (organization_id, session_id) WHERE status = 'pending'` (the upsert's
 *   conflict target, `src/Replies/Repo.ts`).
 * - Foreign keys between per-organization tables become composite, e.g.
 *   `(organization_id, session_id) REFERENCES sessions (organization_id,
 *   id)`, with the actions they had. `organization_settings.default_agent_id`
 *   had `ON DELETE SET NULL`, which on a composite key would null
 *   `organization_id` too (PostgreSQL 14 has no column list for SET NULL):
 *   it takes no action now. Agents are never deleted but with their
 *   organization (DELETE marks them, 0022), which takes the settings along.
 * - The triggers' functions filter by the changed row's organization
 *   (`parley_session_closed`, `parley_app_deleted`) and the run roll-ups
 *   write and match it (`parley_roll_up_runs`).
 *
 * `runs_assistant_started_idx` (the run statistics' covering range scan, 0015)
 * leads with `organization_id` now, as the statistics filter by it.
 * `messages_id_idx` (non-unique, on `id`) serves the one lookup that cannot
 * know the organization: whether a message the request's organization has
 * not is another's (D1: 403 rather than 404; `src/Messages/Repo.ts` `find`,
 * read only when the organization's own lookup found none).
 * Secondary indexes that lead with another column (`messages_session_idx`,
 * `deliveries_app_idx`, ...) stay: the statements that use them name that
 * column, and the composite keys' checks find their rows by it.
 * test/Database/OrganizationKeys.test.ts migrates a populated 0026 database
 * and checks the catalog.
 */
import { Effect } from "effect"
import { SqlClient } from "effect/sql"

/** Adds `organization_id` to `table`, filled by `fill` (an UPDATE), then NOT NULL. */
const addOrganization = (table: string, fill: string) => [
  `ALTER TABLE ${table} ADD COLUMN organization_id uuid`,
  fill,
  `ALTER TABLE ${table} ALTER COLUMN organization_id SET NOT NULL`
]

const statements = [
  // 1. The column where it was missing, from the parent row.
  ...addOrganization(
    "assistant_files",
    `UPDATE assistant_files t SET organization_id = a.organization_id FROM assistants a WHERE a.id = t.assistant_id`
  ),
  ...addOrganization(
    "assistant_commits",
    `UPDATE assistant_commits t SET organization_id = a.organization_id FROM assistants a WHERE a.id = t.assistant_id`
  ),
  ...addOrganization(
    "assistant_commit_files",
    `UPDATE assistant_commit_files t SET organization_id = a.organization_id FROM assistants a
    WHERE a.id = t.assistant_id`
  ),
  ...addOrganization(
    "assistant_branches",
    `UPDATE assistant_branches t SET organization_id = a.organization_id FROM assistants a WHERE a.id = t.assistant_id`
  ),
  ...addOrganization(
    "assistant_draft_files",
    `UPDATE assistant_draft_files t SET organization_id = b.organization_id FROM assistant_branches b
    WHERE b.id = t.branch_id`
  ),
  ...addOrganization(
    "assistant_rollouts",
    `UPDATE assistant_rollouts t SET organization_id = a.organization_id FROM assistants a WHERE a.id = t.assistant_id`
  ),
  ...addOrganization(
    "session_assignments",
    `UPDATE session_assignments t SET organization_id = s.organization_id FROM sessions s WHERE s.id = t.session_id`
  ),
  // Refilled under its new key: under the old one, the runs of two organizations naming one assistant id
  // (text, an agent's `assistant_id`) shared a row.
  `ALTER TABLE run_rollups ADD COLUMN organization_id uuid, DROP CONSTRAINT run_rollups_pkey`,
  `DELETE FROM run_rollups`,
  `INSERT INTO run_rollups (organization_id, assistant_id, hour, commit_id, branch_name, duration_ms, runs, succeeded,
    input_tokens, output_tokens)
  SELECT organization_id, assistant_id, parley_run_hour(started_at), commit_id, coalesce(branch_name, ''), duration_ms,
    count(*), count(*) FILTER (WHERE status = 'succeeded'), coalesce(sum(input_tokens), 0),
    coalesce(sum(output_tokens), 0)
  FROM runs WHERE assistant_id IS NOT NULL AND commit_id IS NOT NULL
  GROUP BY 1, 2, 3, 4, 5, 6`,
  `ALTER TABLE run_rollups ALTER COLUMN organization_id SET NOT NULL, ADD CONSTRAINT run_rollups_pkey
    PRIMARY KEY (organization_id, assistant_id, hour, commit_id, branch_name, duration_ms)`,

  // 2. The foreign keys onto keys that change go first.
  `ALTER TABLE organization_settings DROP CONSTRAINT organization_settings_default_agent_id_fkey`,
  `ALTER TABLE sessions DROP CONSTRAINT sessions_conversation_id_fkey, DROP CONSTRAINT sessions_agent_id_fkey`,
  `ALTER TABLE messages DROP CONSTRAINT messages_session_id_fkey`,
  `ALTER TABLE reply_jobs DROP CONSTRAINT reply_jobs_session_id_fkey`,
  `ALTER TABLE runs DROP CONSTRAINT runs_session_id_fkey`,
  `ALTER TABLE session_schedules DROP CONSTRAINT session_schedules_session_id_fkey`,
  `ALTER TABLE ingest_receipts DROP CONSTRAINT ingest_receipts_conversation_id_fkey`,
  `ALTER TABLE evaluation_turns DROP CONSTRAINT evaluation_turns_session_id_fkey`,
  `ALTER TABLE assistant_files DROP CONSTRAINT assistant_files_assistant_id_fkey`,
  `ALTER TABLE assistant_commit_files DROP CONSTRAINT assistant_commit_files_assistant_id_commit_id_fkey`,
  `ALTER TABLE assistant_commits DROP CONSTRAINT assistant_commits_assistant_id_fkey`,
  `ALTER TABLE assistant_draft_files DROP CONSTRAINT assistant_draft_files_branch_id_fkey`,
  `ALTER TABLE assistant_rollouts DROP CONSTRAINT assistant_rollouts_assistant_id_fkey,
    DROP CONSTRAINT assistant_rollouts_branch_id_fkey`,
  `ALTER TABLE assistant_branches DROP CONSTRAINT assistant_branches_assistant_id_fkey`,
  `ALTER TABLE session_assignments DROP CONSTRAINT session_assignments_session_id_fkey,
    DROP CONSTRAINT session_assignments_assistant_id_fkey`,

  // 3. Primary and unique keys with organization_id first.
  ...[
    "agents",
    "apps",
    "assistants",
    "conversations",
    "deliveries",
    "events",
    "messages",
    "reply_jobs",
    "runs",
    "session_schedules",
    "sessions",
    "assistant_branches"
  ].map(
    (table) => `ALTER TABLE ${table} DROP CONSTRAINT ${table}_pkey, ADD CONSTRAINT ${table}_pkey
    PRIMARY KEY (organization_id, id)`
  ),
  `ALTER TABLE ingest_receipts DROP CONSTRAINT ingest_receipts_pkey, ADD CONSTRAINT ingest_receipts_pkey
    PRIMARY KEY (organization_id, conversation_id, provider_message_id)`,
  `ALTER TABLE assistant_files DROP CONSTRAINT assistant_files_pkey, ADD CONSTRAINT assistant_files_pkey
    PRIMARY KEY (organization_id, assistant_id, content_hash)`,
  `ALTER TABLE assistant_commits DROP CONSTRAINT assistant_commits_pkey, ADD CONSTRAINT assistant_commits_pkey
    PRIMARY KEY (organization_id, assistant_id, id)`,
  `ALTER TABLE assistant_commit_files DROP CONSTRAINT assistant_commit_files_pkey,
    ADD CONSTRAINT assistant_commit_files_pkey PRIMARY KEY (organization_id, assistant_id, commit_id, path)`,
  `ALTER TABLE assistant_draft_files DROP CONSTRAINT assistant_draft_files_pkey,
    ADD CONSTRAINT assistant_draft_files_pkey PRIMARY KEY (organization_id, branch_id, path)`,
  `ALTER TABLE assistant_rollouts DROP CONSTRAINT assistant_rollouts_pkey, ADD CONSTRAINT assistant_rollouts_pkey
    PRIMARY KEY (organization_id, assistant_id)`,
  `ALTER TABLE session_assignments DROP CONSTRAINT session_assignments_pkey,
    ADD CONSTRAINT session_assignments_pkey PRIMARY KEY (organization_id, session_id, assistant_id)`,
  `ALTER TABLE assistant_branches DROP CONSTRAINT assistant_branches_assistant_id_name_key,
    ADD CONSTRAINT assistant_branches_assistant_id_name_key UNIQUE (organization_id, assistant_id, name)`,
  `DROP INDEX reply_jobs_pending_session_idx`,
  `-- R1: one pending job per session; triggers upsert on this index.
CREATE UNIQUE INDEX reply_jobs_pending_session_idx ON reply_jobs (organization_id, session_id) WHERE status = 'pending'`,

  // D1: whether a message id the request's organization has not is another organization's (403, not 404).
  `CREATE INDEX messages_id_idx ON messages (id)`,
  // A14: the run statistics read the runs of an assistant of the organization by time, covered (0015).
  `DROP INDEX runs_assistant_started_idx`,
  `CREATE INDEX runs_assistant_started_idx ON runs (organization_id, assistant_id, started_at)
  INCLUDE (commit_id, branch_name, status, duration_ms, input_tokens, output_tokens)`,

  // 4. Composite foreign keys, with the actions they had.
  `ALTER TABLE organization_settings ADD CONSTRAINT organization_settings_default_agent_id_fkey
    FOREIGN KEY (organization_id, default_agent_id) REFERENCES agents (organization_id, id)`,
  `ALTER TABLE sessions
    ADD CONSTRAINT sessions_conversation_id_fkey
      FOREIGN KEY (organization_id, conversation_id) REFERENCES conversations (organization_id, id),
    ADD CONSTRAINT sessions_agent_id_fkey FOREIGN KEY (organization_id, agent_id) REFERENCES agents (organization_id, id)`,
  ...["messages", "reply_jobs", "runs", "session_schedules", "evaluation_turns", "session_assignments"].map(
    (table) => `ALTER TABLE ${table} ADD CONSTRAINT ${table}_session_id_fkey
    FOREIGN KEY (organization_id, session_id) REFERENCES sessions (organization_id, id)${
      table === "messages" ? "" : " ON DELETE CASCADE"
    }`
  ),
  `ALTER TABLE ingest_receipts ADD CONSTRAINT ingest_receipts_conversation_id_fkey
    FOREIGN KEY (organization_id, conversation_id) REFERENCES conversations (organization_id, id) ON DELETE CASCADE`,
  ...["assistant_files", "assistant_commits", "assistant_branches", "assistant_rollouts", "session_assignments"].map(
    (table) => `ALTER TABLE ${table} ADD CONSTRAINT ${table}_assistant_id_fkey
    FOREIGN KEY (organization_id, assistant_id) REFERENCES assistants (organization_id, id) ON DELETE CASCADE`
  ),
  `ALTER TABLE assistant_commit_files ADD CONSTRAINT assistant_commit_files_assistant_id_commit_id_fkey
    FOREIGN KEY (organization_id, assistant_id, commit_id) REFERENCES assistant_commits (organization_id, assistant_id, id)
    ON DELETE CASCADE`,
  ...["assistant_draft_files", "assistant_rollouts"].map(
    (table) => `ALTER TABLE ${table} ADD CONSTRAINT ${table}_branch_id_fkey
    FOREIGN KEY (organization_id, branch_id) REFERENCES assistant_branches (organization_id, id) ON DELETE CASCADE`
  ),

  // 5. The triggers' functions, within the changed row's organization.
  `CREATE OR REPLACE FUNCTION parley_session_closed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  UPDATE session_schedules SET status = 'canceled', error = 'Session closed'
    WHERE organization_id = NEW.organization_id AND session_id = NEW.id AND status = 'pending';
  DELETE FROM reply_jobs WHERE organization_id = NEW.organization_id AND session_id = NEW.id AND status = 'pending';
  RETURN NULL;
END
$$`,
  `CREATE OR REPLACE FUNCTION parley_app_deleted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  DELETE FROM deliveries WHERE organization_id = OLD.organization_id AND app_id = OLD.id;
  RETURN NULL;
END
$$`,
  `CREATE OR REPLACE FUNCTION parley_roll_up_runs() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP = 'INSERT' THEN
    INSERT INTO run_rollups AS r (organization_id, assistant_id, hour, commit_id, branch_name, duration_ms, runs,
      succeeded, input_tokens, output_tokens)
    SELECT organization_id, assistant_id, parley_run_hour(started_at), commit_id, coalesce(branch_name, ''),
      duration_ms, count(*), count(*) FILTER (WHERE status = 'succeeded'), coalesce(sum(input_tokens), 0),
      coalesce(sum(output_tokens), 0)
    FROM changed_runs WHERE assistant_id IS NOT NULL AND commit_id IS NOT NULL
    GROUP BY 1, 2, 3, 4, 5, 6
    ON CONFLICT (organization_id, assistant_id, hour, commit_id, branch_name, duration_ms) DO UPDATE SET
      runs = r.runs + EXCLUDED.runs, succeeded = r.succeeded + EXCLUDED.succeeded,
      input_tokens = r.input_tokens + EXCLUDED.input_tokens, output_tokens = r.output_tokens + EXCLUDED.output_tokens;
  ELSE
    UPDATE run_rollups AS r SET runs = r.runs - d.runs, succeeded = r.succeeded - d.succeeded,
      input_tokens = r.input_tokens - d.input_tokens, output_tokens = r.output_tokens - d.output_tokens
    FROM (
      SELECT organization_id, assistant_id, parley_run_hour(started_at) AS hour, commit_id,
        coalesce(branch_name, '') AS branch_name, duration_ms, count(*) AS runs,
        count(*) FILTER (WHERE status = 'succeeded') AS succeeded,
        coalesce(sum(input_tokens), 0) AS input_tokens, coalesce(sum(output_tokens), 0) AS output_tokens
      FROM changed_runs WHERE assistant_id IS NOT NULL AND commit_id IS NOT NULL
      GROUP BY 1, 2, 3, 4, 5, 6
    ) d
    WHERE (r.organization_id, r.assistant_id, r.hour, r.commit_id, r.branch_name, r.duration_ms)
      = (d.organization_id, d.assistant_id, d.hour, d.commit_id, d.branch_name, d.duration_ms);
  END IF;
  RETURN NULL;
END
$$`
]

export default Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  for (const statement of statements) yield* sql.unsafe(statement)
})
