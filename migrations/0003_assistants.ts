/**
 * Assistants under version control (issue 3; assistants.md, DECISIONS.md A1-A11):
 * content-addressed files (stored once per assistant by content hash), commits
 * with a parent and a merge parent, commit files, branches with their HEAD, and
 * per-branch drafts (path -> content hash). Legacy assistants keep their
 * snapshot in `assistants.legacy_snapshot` until migrated.
 */
import { Effect } from "effect"
import { SqlClient } from "effect/sql"

const statements = [
  `CREATE TABLE assistants (
  id uuid PRIMARY KEY,
  organization_id uuid NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
  name text NOT NULL,
  description text,
  versioned boolean NOT NULL,
  legacy_snapshot jsonb,
  created_at timestamptz NOT NULL,
  updated_at timestamptz
)`,
  `CREATE INDEX assistants_organization_idx ON assistants (organization_id, created_at, id)`,
  `CREATE TABLE assistant_files (
  assistant_id uuid NOT NULL REFERENCES assistants (id) ON DELETE CASCADE,
  content_hash text NOT NULL,
  content jsonb NOT NULL,
  PRIMARY KEY (assistant_id, content_hash)
)`,
  `CREATE TABLE assistant_commits (
  assistant_id uuid NOT NULL REFERENCES assistants (id) ON DELETE CASCADE,
  id text NOT NULL,
  parent_commit_id text,
  merge_parent_commit_id text,
  message text,
  author_type text NOT NULL CHECK (author_type IN ('human', 'agent', 'system')),
  author_id text,
  created_at timestamptz NOT NULL,
  seq bigint GENERATED ALWAYS AS IDENTITY,
  PRIMARY KEY (assistant_id, id)
)`,
  `CREATE INDEX assistant_commits_order_idx ON assistant_commits (assistant_id, seq DESC)`,
  `CREATE TABLE assistant_commit_files (
  assistant_id uuid NOT NULL,
  commit_id text NOT NULL,
  path text NOT NULL,
  content_hash text NOT NULL,
  PRIMARY KEY (assistant_id, commit_id, path),
  FOREIGN KEY (assistant_id, commit_id) REFERENCES assistant_commits (assistant_id, id) ON DELETE CASCADE
)`,
  `CREATE TABLE assistant_branches (
  id uuid PRIMARY KEY,
  assistant_id uuid NOT NULL REFERENCES assistants (id) ON DELETE CASCADE,
  name text NOT NULL,
  head_commit_id text,
  created_at timestamptz NOT NULL,
  updated_at timestamptz NOT NULL,
  UNIQUE (assistant_id, name)
)`,
  `CREATE TABLE assistant_draft_files (
  branch_id uuid NOT NULL REFERENCES assistant_branches (id) ON DELETE CASCADE,
  path text NOT NULL,
  content_hash text NOT NULL,
  PRIMARY KEY (branch_id, path)
)`
]

export default Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  for (const statement of statements) yield* sql.unsafe(statement)
})
