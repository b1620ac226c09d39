-- A toy schema mimicking Parley's (migrations 0001-0026), made Citus-ready the way
-- issue 43 item 1 asks: organization_id in every per-organization table's primary
-- key, unique keys and foreign keys; organizations a reference table. Used by
-- scripts/citus-mech/*.sql (docs/citus-notes.md). Each table is distributed right after its
-- CREATE TABLE: a table made with a foreign key to a reference table is turned into a
-- Citus local table at once, and a later create_distributed_table of tables so chained
-- fails ("foreign keys from reference tables and local tables to distributed tables are
-- not supported"). Run on the coordinator of a
-- database with `CREATE EXTENSION citus` and its workers added.
SET citus.shard_count = 32;

CREATE FUNCTION parley_uuid_v7() RETURNS uuid LANGUAGE sql VOLATILE AS $$
  SELECT encode(set_bit(set_bit(overlay(uuid_send(gen_random_uuid())
    PLACING substring(int8send(floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint) FROM 3) FROM 1 FOR 6),
    52, 1), 53, 1), 'hex')::uuid
$$;

CREATE TABLE organizations (id uuid PRIMARY KEY, name text NOT NULL, created_at timestamptz NOT NULL DEFAULT now());
SELECT create_reference_table('organizations');

CREATE TABLE organization_settings (
  organization_id uuid PRIMARY KEY REFERENCES organizations (id) ON DELETE CASCADE,
  reply_debounce_seconds int NOT NULL DEFAULT 3,
  rate_limit_per_second int4, rate_limit_burst int4
);
SELECT create_distributed_table('organization_settings', 'organization_id');
CREATE TABLE apps (
  organization_id uuid NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
  id uuid NOT NULL,
  events text[] NOT NULL,
  enabled boolean NOT NULL DEFAULT true,
  disabled_reason text,
  ordering text NOT NULL DEFAULT 'none',
  PRIMARY KEY (organization_id, id)
);
SELECT create_distributed_table('apps', 'organization_id', colocate_with => 'organization_settings');
CREATE TABLE conversations (
  organization_id uuid NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
  id uuid NOT NULL,
  contact_id text NOT NULL,
  channel_type text NOT NULL DEFAULT '',
  channel_to text NOT NULL DEFAULT '',
  created_at timestamptz NOT NULL,
  PRIMARY KEY (organization_id, id),
  UNIQUE (organization_id, contact_id, channel_type, channel_to)
);
SELECT create_distributed_table('conversations', 'organization_id', colocate_with => 'organization_settings');
CREATE TABLE sessions (
  organization_id uuid NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
  id uuid NOT NULL,
  conversation_id uuid NOT NULL,
  status text NOT NULL,
  created_at timestamptz NOT NULL,
  PRIMARY KEY (organization_id, id)
);
SELECT create_distributed_table('sessions', 'organization_id', colocate_with => 'organization_settings');
-- Written in CREATE TABLE, this key fails: the new (local) table is first made a Citus local
-- table for its key to the reference table, which then cannot reference a distributed table.
ALTER TABLE sessions ADD FOREIGN KEY (organization_id, conversation_id) REFERENCES conversations (organization_id, id);
CREATE TABLE events (
  organization_id uuid NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
  id uuid NOT NULL,
  type text NOT NULL,
  body text NOT NULL,
  conversation_id uuid,
  app_id uuid,
  created_at timestamptz NOT NULL,
  PRIMARY KEY (organization_id, id)
);
SELECT create_distributed_table('events', 'organization_id', colocate_with => 'organization_settings');
CREATE SEQUENCE deliveries_sequence_number_seq AS bigint;
CREATE TABLE deliveries (
  organization_id uuid NOT NULL,
  id uuid NOT NULL,
  app_id uuid NOT NULL,
  event_id uuid NOT NULL,
  event_type text NOT NULL,
  status text NOT NULL DEFAULT 'pending',
  attempts int NOT NULL DEFAULT 0,
  next_attempt_at timestamptz,
  leased_by uuid,
  lease_until timestamptz,
  ordering_key uuid,
  sequence_number bigint,
  created_at timestamptz NOT NULL,
  PRIMARY KEY (organization_id, id)
);
SELECT create_distributed_table('deliveries', 'organization_id', colocate_with => 'organization_settings');
CREATE INDEX deliveries_due_idx ON deliveries (next_attempt_at) WHERE status = 'pending' AND ordering_key IS NULL;
CREATE TABLE reply_jobs (
  organization_id uuid NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
  id uuid NOT NULL,
  session_id uuid NOT NULL,
  status text NOT NULL,
  due_at timestamptz NOT NULL,
  triggers int NOT NULL DEFAULT 1,
  leased_by uuid, lease_until timestamptz,
  created_at timestamptz NOT NULL,
  PRIMARY KEY (organization_id, id)
);
SELECT create_distributed_table('reply_jobs', 'organization_id', colocate_with => 'organization_settings');
-- Parley's is ON (session_id) WHERE status = 'pending': Citus needs the distribution column in it.
CREATE UNIQUE INDEX reply_jobs_pending_session_idx ON reply_jobs (organization_id, session_id) WHERE status = 'pending';
CREATE TABLE session_schedules (
  organization_id uuid NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
  id uuid NOT NULL,
  session_id uuid NOT NULL,
  scheduled_for timestamptz NOT NULL,
  status text NOT NULL,
  error text,
  leased_by uuid, lease_until timestamptz,
  PRIMARY KEY (organization_id, id)
);
SELECT create_distributed_table('session_schedules', 'organization_id', colocate_with => 'organization_settings');
CREATE TABLE runs (
  organization_id uuid NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
  id uuid NOT NULL,
  session_id uuid NOT NULL,
  assistant_id text, commit_id text, branch_name text,
  status text NOT NULL, started_at timestamptz NOT NULL, duration_ms int NOT NULL,
  input_tokens int, output_tokens int,
  PRIMARY KEY (organization_id, id)
);
SELECT create_distributed_table('runs', 'organization_id', colocate_with => 'organization_settings');
CREATE FUNCTION parley_run_hour(started_at timestamptz) RETURNS timestamptz LANGUAGE sql IMMUTABLE AS $$
  SELECT date_bin('1 hour', $1, TIMESTAMPTZ '2000-01-01 00:00:00+00')
$$;
CREATE TABLE run_rollups (
  organization_id uuid NOT NULL,
  assistant_id text NOT NULL, hour timestamptz NOT NULL, commit_id text NOT NULL, branch_name text NOT NULL,
  duration_ms int NOT NULL, runs int NOT NULL, succeeded int NOT NULL, input_tokens bigint NOT NULL, output_tokens bigint NOT NULL,
  PRIMARY KEY (organization_id, assistant_id, hour, commit_id, branch_name, duration_ms)
);
SELECT create_distributed_table('run_rollups', 'organization_id', colocate_with => 'organization_settings');
CREATE TABLE idempotency_keys (
  organization_id uuid NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
  key text NOT NULL, fingerprint bytea NOT NULL, status int4 NOT NULL, body bytea NOT NULL,
  created_at timestamptz NOT NULL DEFAULT statement_timestamp(), expires_at timestamptz NOT NULL,
  PRIMARY KEY (organization_id, key)
);
SELECT create_distributed_table('idempotency_keys', 'organization_id', colocate_with => 'organization_settings');
CREATE TABLE rate_limit_buckets (
  organization_id uuid PRIMARY KEY REFERENCES organizations (id) ON DELETE CASCADE,
  rate int4 NOT NULL, burst int4 NOT NULL, tokens double precision NOT NULL, granted int4 NOT NULL, updated_at timestamptz NOT NULL
);
SELECT create_distributed_table('rate_limit_buckets', 'organization_id', colocate_with => 'organization_settings');
CREATE TABLE erasures (
  organization_id uuid NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
  id uuid NOT NULL, status text NOT NULL, requested_at timestamptz NOT NULL,
  leased_by uuid, lease_until timestamptz, attempts int NOT NULL DEFAULT 0,
  PRIMARY KEY (organization_id, id)
);
SELECT create_distributed_table('erasures', 'organization_id', colocate_with => 'organization_settings');


CREATE FUNCTION parley_app_subscribed(app apps, organization_id uuid, event_type text)
RETURNS boolean LANGUAGE sql IMMUTABLE AS $$
  SELECT $1.organization_id = $2 AND ($1.enabled OR $1.disabled_reason = 'failing') AND $3 = ANY ($1.events)
$$;
