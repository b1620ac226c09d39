#!/usr/bin/env bash
# Makes a fresh Citus database MECH_DB (default mech) on a cluster started by
# `CITUS_PORT=5450 scripts/citus.sh start DIR`: the database on the coordinator and
# both workers, `CREATE EXTENSION citus` in each, the coordinator and workers added in
# it, then schema.sql (citus.shard_count from SHARDS, default 32) and, unless
# NO_TRIGGERS is set, triggers.sql. Prints how long each step took.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
. "$here/lib.sh"
shards=${SHARDS:-32}
t() { local s; s=$(date +%s.%N); "$@"; echo "  $(echo "$(date +%s.%N) - $s" | bc) s" >&2; }
for i in 0 1 2; do
  psql_at $((port + i)) -d postgres -qc "DROP DATABASE IF EXISTS $db WITH (FORCE)" 2>/dev/null
done
echo "create database x3 + extension x3:" >&2
t bash -c "for i in 0 1 2; do $pg_bin/psql -X -q -h 127.0.0.1 -U postgres -p \$(($port + i)) -d postgres -c 'CREATE DATABASE $db' 2>/dev/null; \
  $pg_bin/psql -X -q -h 127.0.0.1 -U postgres -p \$(($port + i)) -d $db -c 'CREATE EXTENSION citus'; done"
echo "add nodes:" >&2
t c -q -v ON_ERROR_STOP=1 -c "SELECT citus_set_coordinator_host('127.0.0.1', $port)" \
  -c "SELECT citus_add_node('127.0.0.1', $((port + 1)))" -c "SELECT citus_add_node('127.0.0.1', $((port + 2)))" >/dev/null
echo "schema ($shards shards):" >&2
t c -q -v ON_ERROR_STOP=1 -c "SET citus.shard_count = $shards" -f <(sed "s/SET citus.shard_count = 32;//" "$here/schema.sql") >/dev/null
if [ -z "${NO_TRIGGERS:-}" ]; then
  echo "triggers:" >&2
  t c -q -v ON_ERROR_STOP=1 -f "$here/triggers.sql" >/dev/null
fi
