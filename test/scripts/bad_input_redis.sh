#!/usr/bin/env bash
# test/scripts/bad_input_redis.sh: odd resource names through fenced_acquire,
# fenced_extend and fenced_release against a real redis-server (the SQL-only
# bad input is the pg_regress test sql/fence_bad_input.sql).
#
#   bash test/scripts/bad_input_redis.sh
# test/run: quick
set -uo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
source "$here/../lib/harness.sh"
source "$here/../lib/checks.sh"

harness_start_redis || harness_start_redis || exit 1
extra=()
# FENCING_SABOTAGE=1: another key layout than the one the checks expect
[ "${FENCING_SABOTAGE:-0}" = 1 ] && extra=("fencing.redis_lock_key = 'lock:<resource>'")
harness_start_pg "shared_preload_libraries = 'fencing'" \
	"fencing.redis_host = '127.0.0.1'" "fencing.redis_port = $REDIS_PORT" "${extra[@]}" || exit 1
psql -X -q -c "CREATE EXTENSION fencing" || exit 1
rc=0
checks_from env REDIS_SOCKET="$REDIS_SOCKET" /usr/bin/python3 "$here/../lib/bad_input_redis.py" || rc=$?
checks_finish || rc=1
exit $rc
