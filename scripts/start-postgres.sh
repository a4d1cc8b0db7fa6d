#!/usr/bin/env bash
# Start a throwaway PostgreSQL on loopback for the storage tests; print its URL on stdout.
# Installs the server with apt when it is missing. Usage: eval "$(scripts/start-postgres.sh DIR PORT)"
set -euo pipefail
dir=${1:-/tmp/pacer-pg}
port=${2:-55432}
bindir=""
for candidate in /usr/lib/postgresql/*/bin; do
  [ -x "$candidate/initdb" ] && bindir=$candidate
done
if [ -z "$bindir" ]; then
  echo "installing postgresql with apt" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >&2
  apt-get install -y -qq postgresql >&2
  for candidate in /usr/lib/postgresql/*/bin; do
    [ -x "$candidate/initdb" ] && bindir=$candidate
  done
fi
[ -n "$bindir" ] || { echo "no PostgreSQL server binaries found" >&2; exit 1; }
runas=()
if [ "$(id -u)" = 0 ]; then
  id postgres >/dev/null 2>&1 || useradd --system --no-create-home postgres
  runas=(runuser -u postgres --)
fi
if [ -f "$dir/data/postmaster.pid" ]; then
  "${runas[@]}" "$bindir/pg_ctl" -D "$dir/data" -m immediate stop >&2 || true
fi
rm -rf "$dir"
mkdir -p "$dir"
[ "$(id -u)" = 0 ] && chown postgres "$dir"
"${runas[@]}" "$bindir/initdb" -D "$dir/data" -U pacer --auth=trust -E UTF8 >"$dir/initdb.log" 2>&1
"${runas[@]}" "$bindir/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 \
  -o "-c listen_addresses=127.0.0.1 -p $port -k $dir -c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=200" start >&2
"${runas[@]}" "$bindir/createdb" -h 127.0.0.1 -p "$port" -U pacer pacer_test
echo "export PACER_TEST_DATABASE_URL=postgresql://pacer@127.0.0.1:$port/pacer_test"
echo "export PACER_PG_STOP='${runas[*]} $bindir/pg_ctl -D $dir/data -m fast stop'"
