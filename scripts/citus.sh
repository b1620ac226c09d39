#!/usr/bin/env bash
# Citus for Parley's tests and benchmarks (O11; issue 43): builds the extension from
# ../shared/vendor when PostgreSQL 15 lacks it, and runs a coordinator and two workers as
# three local PostgreSQL 15 servers.
#
#   scripts/citus.sh tarball          print the path of the vendored source (exit 1 when absent)
#   scripts/citus.sh build            install the Debian packages it needs, build, make install
#   scripts/citus.sh start [DIR]      initdb (first time) and start the three servers under DIR
#                                     (default /tmp/parley-citus); prints the coordinator's URL
#   scripts/citus.sh stop [DIR]       stop them
#
# Ports: CITUS_PORT (coordinator, default 5440), the workers on the next two. Needs root for
# build (apt-get, make install) and runs the servers as the `postgres` user. The tarball and
# the one header line PostgreSQL 15.20 needs removed are described in ../shared/vendor/README.md.
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
pg_bin=/usr/lib/postgresql/15/bin
port=${CITUS_PORT:-5440}
command=${1:-}
dir=${2:-/tmp/parley-citus}

tarball() {
  for candidate in "$here/../shared/vendor/citus-13.2.2.tar.gz" /work/shared/vendor/citus-13.2.2.tar.gz; do
    [ -f "$candidate" ] && { echo "$candidate"; return; }
  done
  echo "citus-13.2.2.tar.gz not found in ../shared/vendor" >&2
  exit 1
}

build() {
  if [ -f /usr/lib/postgresql/15/lib/citus.so ]; then echo "citus is installed"; return; fi
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq postgresql-server-dev-15 libkrb5-dev libselinux1-dev libpam0g-dev libxslt1-dev \
    libssl-dev libreadline-dev libcurl4-openssl-dev liblz4-dev libzstd-dev build-essential >/dev/null
  local work
  work=$(mktemp -d /tmp/citus-build-XXXXXX)
  tar -xzf "$(tarball)" -C "$work"
  local src
  src=$(find "$work" -maxdepth 1 -mindepth 1 -type d | head -1)
  # PostgreSQL 15.20's headers declare have_createdb_privilege already (vendor/README.md).
  perl -0pi -e 's/static inline bool\s*\nhave_createdb_privilege\(void\)\s*\{.*?\n\}\n//s' \
    "$src/src/include/pg_version_compat.h"
  (cd "$src" && ./configure PG_CONFIG=$pg_bin/pg_config >/dev/null && make -j"$(nproc)" >/dev/null && make install >/dev/null)
  rm -rf "$work"
  echo "citus built and installed"
}

as_postgres() { if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi; }

start() {
  mkdir -p "$dir"
  [ "$(id -u)" = 0 ] && chown postgres "$dir"
  for i in 0 1 2; do
    local data="$dir/node$i" p=$((port + i))
    if [ ! -f "$data/PG_VERSION" ]; then
      as_postgres $pg_bin/initdb -D "$data" -U postgres --auth=trust >/dev/null
      cat >>"$data/postgresql.conf" <<CONF
shared_preload_libraries = 'citus'
port = $p
listen_addresses = '127.0.0.1'
unix_socket_directories = '$dir'
max_connections = 300
# Citus runs a maintenance daemon (2PC recovery, distributed deadlock detection) per database
# with the extension, as a background worker: a test run keeps a database per test file.
max_worker_processes = 64
# 4 shards per table (Citus' default is 32): a test run's many small databases are created,
# cloned and dropped faster; every shard is still a shard (docs/citus-notes.md).
citus.shard_count = 4
fsync = off
synchronous_commit = off
full_page_writes = off
CONF
    fi
    as_postgres $pg_bin/pg_ctl -D "$data" -l "$dir/node$i.log" -w start >/dev/null
  done
  local psql="$pg_bin/psql -X -q -h 127.0.0.1 -U postgres -v ON_ERROR_STOP=1"
  for i in 0 1 2; do $psql -p $((port + i)) -d postgres -c "CREATE EXTENSION IF NOT EXISTS citus" >/dev/null; done
  if [ "$($psql -p "$port" -d postgres -tAc "SELECT count(*) FROM pg_dist_node")" = "0" ]; then
    $psql -p "$port" -d postgres -c "SELECT citus_set_coordinator_host('127.0.0.1', $port)" >/dev/null
    for i in 1 2; do $psql -p "$port" -d postgres -c "SELECT citus_add_node('127.0.0.1', $((port + i)))" >/dev/null; done
  fi
  echo "postgres://postgres@127.0.0.1:$port/postgres"
}

stop() {
  for i in 0 1 2; do
    [ -f "$dir/node$i/postmaster.pid" ] && as_postgres $pg_bin/pg_ctl -D "$dir/node$i" -m fast -w stop >/dev/null || true
  done
}

case "$command" in
  tarball) tarball ;;
  build) build ;;
  start) start ;;
  stop) stop ;;
  *) echo "usage: scripts/citus.sh tarball|build|start|stop [DIR]" >&2; exit 2 ;;
esac
