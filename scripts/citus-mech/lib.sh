# Helpers for the scripts of scripts/citus-mech (docs/citus-notes.md): psql on the
# coordinator (c) and the workers (w1, w2) of a cluster started by scripts/citus.sh.
# CITUS_PORT: the coordinator's port (default 5450); MECH_DB: the database (default mech).
port=${CITUS_PORT:-5450}
db=${MECH_DB:-mech}
pg_bin=/usr/lib/postgresql/15/bin
psql_at() { local p=$1; shift; "$pg_bin/psql" -X -h 127.0.0.1 -U postgres -p "$p" "$@"; }
c() { psql_at "$port" -d "$db" "$@"; }
w1() { psql_at $((port + 1)) -d "$db" "$@"; }
w2() { psql_at $((port + 2)) -d "$db" "$@"; }
