#!/usr/bin/env bash
# (h) How long a fresh Citus database takes to set up, and how long a clone of it
# (clone-db.sh) takes, with ~30 distributed tables of 3 indexes each and a reference
# table, at citus.shard_count SHARDS (default: 32 then 4); beside the same on the
# coordinator's PostgreSQL without distribution.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
. "$here/lib.sh"
ms() { echo "$(( ($(date +%s%N) - $1) / 1000000 )) ms"; }
tables_sql() { # $1: distribute (1) or not (0); $2: name prefix (default t)
  local t=${2:-t}
  echo "CREATE TABLE ${t}organizations (id uuid PRIMARY KEY, name text NOT NULL);"
  [ "$1" = 1 ] && echo "SELECT create_reference_table('${t}organizations');"
  for i in $(seq 1 30); do
    cat <<SQL
CREATE TABLE $t$i (organization_id uuid NOT NULL REFERENCES ${t}organizations (id) ON DELETE CASCADE, id uuid NOT NULL,
  a text, b int, c jsonb NOT NULL DEFAULT '{}', created_at timestamptz NOT NULL, PRIMARY KEY (organization_id, id));
CREATE INDEX $t${i}_a ON $t$i (organization_id, a, created_at);
CREATE INDEX $t${i}_c ON $t$i (created_at) WHERE b IS NULL;
SQL
    [ "$1" = 1 ] && echo "SELECT create_distributed_table('$t$i', 'organization_id', colocate_with => $([ $i = 1 ] && echo "'none'" || echo "'${t}1'"));"
  done
  true
}
for p in "$port" $((port + 1)) $((port + 2)); do
  for d in tim tim_clone plain plain_clone; do psql_at "$p" -d postgres -qc "DROP DATABASE IF EXISTS $d WITH (FORCE)" 2>/dev/null; done
done
echo "== plain PostgreSQL (the coordinator's server, no citus extension in the database)"
s=$(date +%s%N); psql_at "$port" -d postgres -qc "CREATE DATABASE plain"; echo "  CREATE DATABASE: $(ms $s)"
s=$(date +%s%N); tables_sql 0 | psql_at "$port" -d plain -q -v ON_ERROR_STOP=1 >/dev/null; echo "  31 tables: $(ms $s)"
s=$(date +%s%N); psql_at "$port" -d postgres -qc "CREATE DATABASE plain_clone TEMPLATE plain"; echo "  clone (CREATE DATABASE TEMPLATE): $(ms $s)"
for shards in ${SHARDS:-32 4}; do
  echo "== Citus, citus.shard_count = $shards"
  s=$(date +%s%N)
  for p in "$port" $((port + 1)) $((port + 2)); do psql_at "$p" -d postgres -qc "CREATE DATABASE tim"; done
  echo "  CREATE DATABASE on 3 nodes: $(ms $s)"
  s=$(date +%s%N)
  for p in "$port" $((port + 1)) $((port + 2)); do psql_at "$p" -d tim -qc "CREATE EXTENSION citus"; done
  echo "  CREATE EXTENSION citus on 3 nodes: $(ms $s)"
  s=$(date +%s%N)
  psql_at "$port" -d tim -q -v ON_ERROR_STOP=1 -c "SELECT citus_set_coordinator_host('127.0.0.1', $port)" \
    -c "SELECT citus_add_node('127.0.0.1', $((port + 1)))" -c "SELECT citus_add_node('127.0.0.1', $((port + 2)))" >/dev/null
  echo "  citus_set_coordinator_host + 2 x citus_add_node: $(ms $s)"
  s=$(date +%s%N)
  (echo "SET citus.shard_count = $shards;"; tables_sql 1) | psql_at "$port" -d tim -q -v ON_ERROR_STOP=1 >/dev/null
  echo "  31 tables (30 distributed, 1 reference): $(ms $s)"
  s=$(date +%s%N)
  (echo "BEGIN; SET LOCAL citus.multi_shard_modify_mode = sequential; SET LOCAL citus.shard_count = $shards;"; tables_sql 1 x; echo "COMMIT;") \
    | psql_at "$port" -d tim -q -v ON_ERROR_STOP=1 >/dev/null
  echo "  the same 31 tables in one transaction (sequential mode): $(ms $s)"
  for p in "$port" $((port + 1)) $((port + 2)); do
    echo "  sessions of tim on port $p: $(psql_at "$p" -d postgres -tA -c "SELECT coalesce(string_agg(coalesce(nullif(backend_type, 'client backend'), 'client backend: ' || application_name), '; '), 'none') FROM pg_stat_activity WHERE datname = 'tim'")"
  done
  echo "  a plain CREATE DATABASE TEMPLATE on the coordinator: $(psql_at "$port" -d postgres -tA -c "CREATE DATABASE tim_plain TEMPLATE tim" 2>&1 | tr '\n' ' ')"
  psql_at "$port" -d postgres -qc "DROP DATABASE IF EXISTS tim_plain" 2>/dev/null
  s=$(date +%s%N); "$here/clone-db.sh" tim tim_clone; echo "  clone on 3 nodes (clone-db.sh): $(ms $s)"
  MECH_DB=tim_clone bash -c ". '$here/lib.sh'; c -tA -c \"INSERT INTO torganizations VALUES ('00000000-0000-0000-0000-00000000000a', 'A')\" -c \"INSERT INTO t5 (organization_id, id, created_at) VALUES ('00000000-0000-0000-0000-00000000000a', gen_random_uuid(), now())\" -c 'SELECT count(*) FROM t5' -c 'SELECT count(*) FROM pg_dist_shard'" | sed 's/^/  clone works: /'
  s=$(date +%s%N); "$here/clone-db.sh" --drop tim_clone; echo "  drop the clone on 3 nodes: $(ms $s)"
  for p in "$port" $((port + 1)) $((port + 2)); do psql_at "$p" -d postgres -qc "DROP DATABASE IF EXISTS tim WITH (FORCE)"; done
done
for d in plain plain_clone; do psql_at "$port" -d postgres -qc "DROP DATABASE IF EXISTS $d WITH (FORCE)"; done
