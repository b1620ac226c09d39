#!/usr/bin/env bash
# Prototype: clones a Citus database for a test (docs/citus-notes.md, "(h) Cloning a test
# database"). `clone-db.sh TEMPLATE NEW` runs `CREATE DATABASE NEW TEMPLATE TEMPLATE` on
# the coordinator and on every worker: each node's copy keeps its own Citus metadata
# (pg_dist_* on the coordinator and, synced, on the workers) and its own shards, with the
# same names everywhere, and Citus opens its connections to workers in the database of the
# same name, so the clones make one cluster database. `clone-db.sh --drop NEW` drops them.
#
# Nobody may be connected to TEMPLATE on any node while it is copied. Besides the
# application's own sessions, Citus keeps two kinds: the maintenance daemon of TEMPLATE
# on every node (a background worker started by the first session of the database) and
# the coordinator's cached connections to TEMPLATE on the workers (the daemon's and
# every session's, citus.max_cached_conns_per_worker). Terminating the sessions of TEMPLATE
# on the coordinator first closes those cached connections; then each node's daemon is
# terminated. A terminated daemon exits cleanly and is not restarted until a session
# connects to TEMPLATE again, so nothing may connect to it afterwards ("nobody connects to
# it", as in test/support/Database.ts).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
. "$here/lib.sh"
nodes=("$port" $((port + 1)) $((port + 2)))
admin() { psql_at "$1" -d postgres -X -q -v ON_ERROR_STOP=1 -tA -c "$2"; }
if [ "${1:-}" = --drop ]; then
  for p in "${nodes[@]}"; do admin "$p" "DROP DATABASE IF EXISTS \"$2\" WITH (FORCE)"; done
  exit 0
fi
template=$1 new=$2
free() {
  admin "$1" "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE datname = '$template' AND pid <> pg_backend_pid()" >/dev/null
}
for p in "${nodes[@]}"; do free "$p"; done
for p in "${nodes[@]}"; do
  for attempt in 1 2 3 4 5 6 7 8 9 10; do
    if out=$(admin "$p" "CREATE DATABASE \"$new\" TEMPLATE \"$template\"" 2>&1); then break; fi
    if [[ "$out" != *"being accessed by other users"* || $attempt = 10 ]]; then echo "$out" >&2; exit 1; fi
    free "$p"; sleep 0.1
  done
done
