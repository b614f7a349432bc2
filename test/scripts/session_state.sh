#!/usr/bin/env bash
# test/scripts/session_state.sh: fencing.allow_session_state = off for a
# role makes the session forms an error, and the role cannot turn it back
# on (doc/clients.md "Pools made safe by configuration").
#
# A superuser runs ALTER ROLE app SET fencing.allow_session_state = off.
# Then, for role app:
#
#  - fence_use() without is_local and fenced_acquire() fail with TF005,
#    whose hint names the transaction forms; those still work, and so does
#    withdrawing a session declaration;
#  - behind pgbouncer in transaction mode with one server connection, what
#    app's first client tried leaves nothing for the next client (the old
#    code, without the setting, handed the declaration over);
#  - SET, SET LOCAL, RESET, set_config() and a startup option (PGOPTIONS)
#    cannot turn it on: after the library is loaded they fail with 42501;
#    before (a placeholder setting, without preloading) PostgreSQL takes
#    the value and drops it with a WARNING when the library loads, also
#    when the load happens inside a function whose SET clause set it;
#  - the same with the library in shared_preload_libraries, on a second
#    cluster, where a startup option is refused at connection time.
#
#   bash test/scripts/session_state.sh
set -euo pipefail

source "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/../lib/harness.sh"
source "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/../lib/checks.sh"
source "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/../lib/psql.sh"

harness_install_deps pgbouncer
harness_start_redis
harness_tmpdir workdir

# The SQLSTATE the last statement of $2 ends with, for role app (00000 on
# success); its messages (notices and warnings included) go to $workdir/err.
app_state() {
	: >"$workdir/err"
	PGUSER=app STATEMENTS_LOG=$workdir/err sqlstate_of "$1" "$2"
}

# What role app gets from one query.
app_sql() { sql -U app "$@" 2>"$workdir/err"; }

# A cluster for the checks: role app with the setting off, a guarded
# table, the Redis server, and the grants of the Redis functions.
setup_cluster() {
	sql postgres >/dev/null <<EOF
CREATE ROLE app LOGIN;
ALTER ROLE app SET fencing.allow_session_state = off;
ALTER DATABASE postgres SET fencing.redis_host = '127.0.0.1';
ALTER DATABASE postgres SET fencing.redis_port = $REDIS_PORT;
CREATE EXTENSION fencing;
CREATE TABLE orders (order_id int PRIMARY KEY, status text, tok fence_token);
CREATE TRIGGER fence BEFORE INSERT OR UPDATE ON orders
	FOR EACH ROW EXECUTE FUNCTION fence_guard('tok', 'order:{order_id}');
INSERT INTO orders VALUES (1, 'new', 5);
GRANT ALL ON orders TO app;
GRANT EXECUTE ON FUNCTION fenced_acquire(text, interval, interval, boolean, interval, boolean, text),
	fenced_acquire_xact(text, interval, interval, boolean, interval, boolean, text), fenced_release(text),
	fenced_leases() TO app;
EOF
}

# The checks that hold with and without preloading; $1 says which.
common_checks() {
	local how=$1 state
	expect "$how: the role's setting is off" "$(app_sql -c "SHOW fencing.allow_session_state")" "off"
	expect "$how: fence_use() without is_local is refused (TF005)" \
		"$(app_state postgres "SELECT fence_use('order:1', 6)")" "TF005"
	check "$how: ... and its hint names the transaction forms" \
		grep -q 'HINT:  Use the transaction forms inside the transaction that writes: fence_use(..., is_local => true) or fenced_acquire_xact().' "$workdir/err"
	expect "$how: fenced_acquire() is refused (TF005)" \
		"$(app_state postgres "SELECT fenced_acquire('order:1')")" "TF005"
	expect "$how: ... and took no lock" "$(redis-cli -p "$REDIS_PORT" --raw GET 'fencing:v1:{r:order:1}:lock')" ""
	expect "$how: withdrawing a session declaration still works" \
		"$(app_state postgres "SELECT fence_use('order:1', NULL)")" "00000"
	expect "$how: fence_use(..., is_local => true) works" \
		"$(app_sql -c "BEGIN" -c "SELECT fence_use('order:1', 7, is_local => true)" \
			-c "UPDATE orders SET status = 'paid' WHERE order_id = 1 RETURNING tok" -c "COMMIT" | grep -v '^$')" \
		"7"
	expect "$how: fenced_acquire_xact() works" \
		"$(app_sql -c "BEGIN" -c "SELECT fenced_acquire_xact('order:1') IS NOT NULL" -c "COMMIT" | grep -v '^$')" \
		"t"

	# after the library is loaded in the session
	for stmt in "SET fencing.allow_session_state = on" \
		"SET LOCAL fencing.allow_session_state = on" \
		"RESET fencing.allow_session_state" \
		"SELECT set_config('fencing.allow_session_state', 'on', false)" \
		"SELECT set_config('fencing.allow_session_state', 'on', true)"; do
		state=$(app_state postgres "SELECT fence_mark('x'); BEGIN; $stmt")
		expect "$how: after the load, \"$stmt\" is refused (42501)" "$state" "42501"
	done
}

# The old code had no such setting: the session forms went through, and a
# pooler handed them to the next client.  pgbouncer, transaction mode, one
# server connection, role app: the first client's fence_use is refused,
# and the second client sees no declaration and cannot write without a
# token.
pool_checks() {
	local dir port
	harness_tmpdir dir
	port=$(harness_free_port)
	harness_start_pgbouncer "$dir" "$port" app "app = host=$PGHOST port=$PGPORT dbname=postgres" \
		"default_pool_size = 1" "max_client_conn = 10" || return 1

	expect "pgbouncer: the first client's fence_use() without is_local is refused (TF005)" \
		"$(app_state "host=127.0.0.1 port=$port dbname=app" "SELECT fence_use('order:1', 50)")" "TF005"
	expect "pgbouncer: the next client on that server connection sees no declaration" \
		"$(app_sql -d "host=127.0.0.1 port=$port dbname=app" -c "SELECT count(*) FROM fence_declared()")" "0"
	expect "pgbouncer: ... and its tokenless write is rejected (TF002)" \
		"$(app_state "host=127.0.0.1 port=$port dbname=app" "UPDATE orders SET status = 'x' WHERE order_id = 1")" \
		"TF002"
	expect "pgbouncer: both clients were served by one backend" \
		"$(sql postgres -c "SELECT count(*) FROM pg_stat_activity WHERE usename = 'app'")" "1"
}

# Without preloading: the setting is a placeholder until the library
# loads in the session.
harness_start_pg
setup_cluster
common_checks "loaded on first use"
for stmt in "SET fencing.allow_session_state = on" \
	"SELECT set_config('fencing.allow_session_state', 'on', false)"; do
	expect "before the load, \"$stmt\" is taken as a placeholder" \
		"$(app_state postgres "$stmt")" "00000"
	expect "... then the load drops it and fence_use() is refused (TF005)" \
		"$(app_state postgres "$stmt; SELECT fence_use('order:1', 6)")" "TF005"
	check "... with PostgreSQL's WARNING" \
		grep -q 'WARNING:  permission denied to set parameter "fencing.allow_session_state"' "$workdir/err"
done
expect "before the load, RESET goes back to the role's setting: fence_use() refused (TF005)" \
	"$(app_state postgres "RESET fencing.allow_session_state; SELECT fence_use('order:1', 6)")" "TF005"
expect "before the load, a SET inside the transaction that loads the library: refused (TF005)" \
	"$(app_state postgres "BEGIN; SET LOCAL fencing.allow_session_state = on; SELECT fence_use('order:1', 6)")" \
	"TF005"
expect "a startup option (outranking the role's setting) before the load: fence_use() refused (TF005)" \
	"$(PGOPTIONS="-c fencing.allow_session_state=on" app_state postgres "SELECT fence_use('order:1', 6)")" \
	"TF005"
check "... with PostgreSQL's WARNING" \
	grep -q 'WARNING:  permission denied to set parameter "fencing.allow_session_state"' "$workdir/err"
expect "... and the setting is off for the rest of the session" \
	"$(printf "SELECT fence_mark('x');\nSHOW fencing.allow_session_state;\nRESET fencing.allow_session_state;\n\\\\echo :SQLSTATE\n" |
		PGOPTIONS="-c fencing.allow_session_state=on" psql -X -q -A -t -U app 2>/dev/null | grep -v '^$' | paste -sd'|')" \
	"off|42501"
sql postgres -c "CREATE ROLE other LOGIN"
expect "a role without the setting: its own startup option is dropped too, and then it is off" \
	"$(PGOPTIONS="-c fencing.allow_session_state=on" psql -X -q -A -t -U other -c "SELECT fence_mark('x')" -c "SHOW fencing.allow_session_state" 2>/dev/null | grep -v '^$')" \
	"off"
expect "... without one, on" \
	"$(psql -X -q -A -t -U other -c "SELECT fence_mark('x')" -c "SHOW fencing.allow_session_state" 2>/dev/null | grep -v '^$')" \
	"on"
sql postgres -c "GRANT CREATE ON SCHEMA public TO app"
expect "a function of the role's own with SET fencing.allow_session_state = on cannot be created (42501)" \
	"$(app_state postgres "CREATE FUNCTION declare_it() RETURNS void LANGUAGE sql
		SET fencing.allow_session_state = on
		BEGIN ATOMIC SELECT fence_use('order:1', 6); END")" \
	"42501"
sql postgres -c "CREATE ROLE ops LOGIN" -c "ALTER ROLE ops SET fencing.allow_session_state = off" \
	-c "GRANT SET ON PARAMETER fencing.allow_session_state TO ops"
expect "a role granted SET on the setting may turn it on for itself" \
	"$(psql -X -q -U ops -c "SELECT fence_mark('x')" -c "SET fencing.allow_session_state = on" \
		-c "SELECT fence_use('order:1', 6)" -c '\echo SQLSTATE=:SQLSTATE' 2>/dev/null | sed -n 's/^SQLSTATE=//p')" \
	"00000"
pool_checks

# With the library preloaded, the setting is never a placeholder.
harness_start_pg "shared_preload_libraries = 'fencing'"
setup_cluster
common_checks "preloaded"
for stmt in "SET fencing.allow_session_state = on" \
	"RESET fencing.allow_session_state" \
	"SELECT set_config('fencing.allow_session_state', 'on', false)"; do
	expect "preloaded: \"$stmt\" as the session's first statement is refused (42501)" \
		"$(app_state postgres "$stmt")" "42501"
done
PGOPTIONS="-c fencing.allow_session_state=on" app_sql -c "SELECT 1" >/dev/null 2>&1 || true
check "preloaded: a startup option is refused at connection time" \
	grep -q 'FATAL:  permission denied to set parameter "fencing.allow_session_state"' "$workdir/err"

checks_finish
