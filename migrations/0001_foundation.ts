/**
 * Foundation: organizations, API keys, settings, agents, contacts, conversations,
 * sessions, messages and the events outbox (issue 2; DECISIONS.md O6, D1-D17, W1-W3).
 * Ids are UUIDv7 made in the application (O2); SQL stays within PostgreSQL 14.
 */
import { Effect } from "effect"
import { SqlClient } from "effect/sql"

const statements = [
  `CREATE TABLE organizations (
  id uuid PRIMARY KEY,
  name text NOT NULL,
  created_at timestamptz NOT NULL
)`,
  `CREATE TABLE api_keys (
  id uuid PRIMARY KEY,
  organization_id uuid NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
  name text,
  token_hash bytea NOT NULL UNIQUE,
  created_at timestamptz NOT NULL,
  expires_at timestamptz,
  revoked_at timestamptz
)`,
  `CREATE INDEX api_keys_organization_idx ON api_keys (organization_id)`,
  `CREATE TABLE agents (
  id uuid PRIMARY KEY,
  organization_id uuid NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
  name text NOT NULL,
  type text NOT NULL CHECK (type IN ('ai', 'human')),
  assistant_id text,
  profile_id text,
  created_at timestamptz NOT NULL
)`,
  `CREATE INDEX agents_organization_idx ON agents (organization_id, created_at, id)`,
  `CREATE TABLE organization_settings (
  organization_id uuid PRIMARY KEY REFERENCES organizations (id) ON DELETE CASCADE,
  reply_debounce_seconds integer NOT NULL DEFAULT 3 CHECK (reply_debounce_seconds BETWEEN 0 AND 60),
  session_idle_timeout_seconds integer CHECK (session_idle_timeout_seconds > 0),
  default_agent_id uuid REFERENCES agents (id) ON DELETE SET NULL,
  updated_at timestamptz
)`,
  `-- D8: contacts keyed by (organization, contact_id).
CREATE TABLE contacts (
  organization_id uuid NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
  contact_id text NOT NULL,
  name text,
  phone text,
  created_at timestamptz NOT NULL,
  updated_at timestamptz,
  PRIMARY KEY (organization_id, contact_id)
)`,
  `-- D8: conversations keyed by (organization, contact_id, channel); the channel is
-- (channel_type, channel_to) for ingest and absent ('' in the key) for POST /sessions.
CREATE TABLE conversations (
  id uuid PRIMARY KEY,
  organization_id uuid NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
  contact_id text NOT NULL,
  channel_type text NOT NULL DEFAULT '',
  channel_to text NOT NULL DEFAULT '',
  created_at timestamptz NOT NULL,
  UNIQUE (organization_id, contact_id, channel_type, channel_to)
)`,
  `CREATE TABLE sessions (
  id uuid PRIMARY KEY,
  organization_id uuid NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
  conversation_id uuid NOT NULL REFERENCES conversations (id),
  contact_id text NOT NULL,
  contact_name text,
  thread_id uuid,
  status text NOT NULL CHECK (status IN ('open', 'closed')),
  agent_id uuid REFERENCES agents (id),
  metadata jsonb NOT NULL DEFAULT '{}',
  ending_survey_submission_id text,
  current_node_id text,
  created_at timestamptz NOT NULL,
  updated_at timestamptz
)`,
  `-- D2: search newest first, by contact and status, within an organization.
CREATE INDEX sessions_search_idx ON sessions (organization_id, contact_id, created_at DESC, id DESC)`,
  `CREATE INDEX sessions_org_created_idx ON sessions (organization_id, created_at DESC, id DESC)`,
  `CREATE INDEX sessions_open_conversation_idx ON sessions (conversation_id) WHERE status = 'open'`,
  `CREATE INDEX sessions_metadata_idx ON sessions USING gin (metadata jsonb_path_ops)`,
  `CREATE TABLE messages (
  id uuid PRIMARY KEY,
  organization_id uuid NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
  session_id uuid NOT NULL REFERENCES sessions (id),
  conversation_id uuid NOT NULL REFERENCES conversations (id),
  role text NOT NULL CHECK (role IN ('user', 'assistant')),
  content jsonb NOT NULL,
  provider_message_id text,
  replied_provider_message_id text,
  run_id text,
  delivery_status text NOT NULL DEFAULT 'pending'
    CHECK (delivery_status IN ('pending', 'sent', 'delivered', 'read', 'failed', 'rejected')),
  delivery_error_code integer,
  delivery_error_message text,
  delivered_at timestamptz,
  metadata jsonb NOT NULL DEFAULT '{}',
  created_at timestamptz NOT NULL,
  updated_at timestamptz
)`,
  `-- D3: search oldest first within a session.
CREATE INDEX messages_session_idx ON messages (session_id, created_at, id)`,
  `CREATE INDEX messages_provider_idx ON messages (session_id, provider_message_id) WHERE provider_message_id IS NOT NULL`,
  `-- W2/W3: the outbox. \`body\` is the serialized envelope, sent byte-identical on every attempt.
CREATE TABLE events (
  id uuid PRIMARY KEY,
  organization_id uuid NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
  type text NOT NULL,
  body text NOT NULL,
  trace_context jsonb,
  created_at timestamptz NOT NULL
)`,
  `CREATE INDEX events_organization_idx ON events (organization_id, created_at, id)`
]

export default Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  for (const statement of statements) yield* sql.unsafe(statement)
})
