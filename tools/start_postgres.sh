#!/usr/bin/env bash
# Start a throwaway PostgreSQL server on 127.0.0.1:PORT for the tests (installing Debian's
# package first if it is missing) and print its SQLAlchemy URL. Idempotent: a running server on
# that port is reused. Usage: tools/start_postgres.sh [PORT]
set -euo pipefail
port=${1:-54329}
if ! ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then
  echo "start_postgres: installing Debian's postgresql" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >&2 && apt-get install -y -qq postgresql >&2
fi
bin=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -n 1)
dir=/tmp/autorec-pg-$port
if ! "$bin/pg_isready" -h 127.0.0.1 -p "$port" -q; then
  as=()
  if [ "$(id -u)" = 0 ]; then as=(runuser -u postgres --); fi  # initdb refuses to run as root
  rm -rf "$dir"
  mkdir -p "$dir"
  [ "$(id -u)" = 0 ] && chown postgres "$dir"
  "${as[@]}" "$bin/initdb" -D "$dir/data" -A trust -U postgres >/dev/null
  "${as[@]}" "$bin/pg_ctl" -D "$dir/data" -o "-h 127.0.0.1 -p $port -k $dir" -l "$dir/log" -w start >/dev/null
fi
echo "postgresql+psycopg2://postgres@127.0.0.1:$port/postgres"
