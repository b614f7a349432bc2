#!/usr/bin/env bash
# test/scripts/pgbouncer.sh: fencing behind a real pgbouncer in transaction
# mode with a pool of one server connection (doc/clients.md "Pools and poolers").
#
# Installs pgbouncer (Debian) if missing, starts PostgreSQL, redis-server
# and pgbouncer (pool_mode = transaction, default_pool_size = 1, listening
# on 127.0.0.1), and runs test/lib/pooler_clients.py: two clients through
# the one server connection, showing that the session forms (fence_use,
# fenced_acquire) leak from one client to the other and the transaction
# forms (fence_use(..., is_local => true), fenced_acquire_xact) do not;
# and, through a second pool in session mode (app_session, also of one
# server connection), that pgbouncer's reset query DISCARD ALL ends the
# session forms of a client that disconnects.
#
#   bash test/scripts/pgbouncer.sh
set -euo pipefail

source "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/../lib/harness.sh"
source "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/../lib/checks.sh"

harness_install_deps pgbouncer
harness_start_pg
harness_start_redis
harness_tmpdir bouncer_dir

# pgbouncer 1.18 passes no startup options through: the Redis server is a
# database setting.  fenced_acquire() needs a build with hiredis; the Redis
# part is skipped without it.
psql -X -q -c "ALTER DATABASE postgres SET fencing.redis_host = '127.0.0.1'" \
	-c "ALTER DATABASE postgres SET fencing.redis_port = $REDIS_PORT" \
	-c "CREATE EXTENSION fencing"
with_redis=0
if psql -X -q -c "SELECT fenced_release('probe')" >/dev/null 2>&1; then
	with_redis=1
fi

bouncer_port=$(harness_free_port)
harness_start_pgbouncer "$bouncer_dir" "$bouncer_port" postgres \
	"app = host=$PGHOST port=$PGPORT dbname=postgres user=postgres
app_session = host=$PGHOST port=$PGPORT dbname=postgres user=postgres pool_mode=session" \
	"default_pool_size = 1" "max_client_conn = 10" || exit 1

rc=0
checks_from /usr/bin/python3 "$FENCING_TOP/test/lib/pooler_clients.py" "$bouncer_port" "$with_redis" || rc=$?
if [ $rc -ne 0 ]; then
	echo "# pgbouncer log:"
	tail -20 "$bouncer_dir/pgbouncer.log" | sed 's/^/#   /'
fi
checks_finish || rc=1
exit $rc
