#!/usr/bin/env bash
# test/scripts/pool_takeover.sh: a holder ended by the takeover (TF110),
# behind the real pools (doc/clients.md "When a holder is taken over:
# drivers and pools"): psycopg2's pool, SQLAlchemy's QueuePool, HikariCP with
# pgJDBC, node-postgres's Pool; each directly and through pgbouncer in
# transaction mode.
#
# The stalled holder ("victim") is the pool's client (test/lib/
# pool_victim.py, PoolVictim.java, pool_victim.js): it takes acct:N with a
# 1 s lease, writes a ledger line, and stalls 4 s, idle in its transaction
# (the takeover terminates its session) or inside pg_sleep (the takeover
# cancels its statement).  The newer holder is a psql session straight to
# the server that takes the lock once the lease is over (wait => '2 s')
# and writes another line of the account (they meet on the mark), under a
# statement_timeout of 3 s.  Per stack, route and stall:
#
# - the newer holder's write and commit go through (on a build without
#   the takeover, 1.2, they wait for the victim until 57014);
# - the victim's error is what doc/clients.md says it is (class, SQLSTATE
#   or none, connection closed or open);
# - the pool, with doc/clients.md's line, hands out a working connection
#   afterwards; node's process survives;
# - the victim's write is undone, the newer holder's kept.
#
# On 3ef157e (1.2, no takeover) 59 of the 100 checks failed: the newer
# holder's write waited for the victim until its statement_timeout, the
# victim's write was kept and it saw no error.  On 8813559, which has the
# takeover, none failed: the suite adds no code, it shows the drivers.
#
# Needs Debian's python3-sqlalchemy, pgbouncer, default-jdk-headless,
# libpostgresql-jdbc-java, libhikaricp-java (installed if missing), and
# pg@8 from npm; a stack whose library cannot be had fails its checks and
# says why.
#
#   bash test/scripts/pool_takeover.sh
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../lib/redis_lib.sh"

java_pkgs=(default-jdk-headless libpostgresql-jdbc-java libhikaricp-java libslf4j-java)
harness_install_deps python3-sqlalchemy pgbouncer "${java_pkgs[@]}" ||
	echo "# could not install some of python3-sqlalchemy pgbouncer ${java_pkgs[*]}"
command -v npm >/dev/null || harness_install_deps nodejs npm
classpath=/usr/share/java/postgresql.jar:/usr/share/java/HikariCP.jar:/usr/share/java/slf4j-api.jar:/usr/share/java/slf4j-nop.jar

harness_start_redis || harness_start_redis || exit 1
redis_start_pg "listen_addresses = '127.0.0.1'" || exit 1
harness_tmpdir workdir

sql -c "CREATE TABLE ledger (id serial PRIMARY KEY, acct int NOT NULL, amount int NOT NULL, tok fence_token)" \
	-c "CREATE TRIGGER fence BEFORE INSERT OR UPDATE OR DELETE ON ledger
		FOR EACH ROW EXECUTE FUNCTION fence_guard('tok', 'acct:{acct}')" >/dev/null

# pgbouncer in transaction mode; pgJDBC's extra_float_digits ignored
# (doc/clients.md "Behind pgbouncer")
bouncer_port=$(harness_free_port)
harness_start_pgbouncer "$workdir" "$bouncer_port" postgres \
	"app = host=127.0.0.1 port=$PGPORT dbname=postgres user=postgres" \
	"default_pool_size = 2" "max_client_conn = 20" \
	"ignore_startup_parameters = extra_float_digits" || exit 1

# the clients
java_ok=0
if command -v javac >/dev/null && mkdir -p "$workdir/classes" &&
	javac -d "$workdir/classes" -cp "$classpath" "$FENCING_TOP/test/lib/PoolVictim.java" 2>"$workdir/javac.log"; then
	java_ok=1
fi
node_ok=0
(cd "$workdir" && timeout 60 npm install --loglevel=error --no-save --no-audit --no-fund \
	--fetch-timeout=20000 --fetch-retries=1 --fetch-retry-mintimeout=2000 \
	--fetch-retry-maxtimeout=5000 pg@8 >"$workdir/npm.log" 2>&1) && node_ok=1
cp "$FENCING_TOP/test/lib/pool_victim.js" "$workdir/"

# the route's connection, per stack
dsn() { # ROUTE
	if [ "$1" = direct ]; then
		echo "host=127.0.0.1 port=$PGPORT dbname=postgres user=postgres"
	else
		echo "host=127.0.0.1 port=$bouncer_port dbname=app user=postgres"
	fi
}
victim_cmd() { # STACK ROUTE ACCT STALL
	local port=$PGPORT db=postgres
	[ "$2" = direct ] || { port=$bouncer_port db=app; }
	case $1 in
		psycopg2 | sqlalchemy)
			/usr/bin/python3 "$FENCING_TOP/test/lib/pool_victim.py" "$1" "$(dsn "$2")" "$3" "$4" ;;
		hikari)
			# through pgbouncer, prepareThreshold=0 (doc/clients.md "Behind pgbouncer")
			java -cp "$workdir/classes:$classpath" PoolVictim \
				"jdbc:postgresql://127.0.0.1:$port/$db?user=postgres&prepareThreshold=0" "$3" "$4" ;;
		node)
			cd "$workdir" && PGHOST=127.0.0.1 PGPORT=$port PGDATABASE=$db PGUSER=postgres \
				node pool_victim.js "$3" "$4" ;;
	esac
}

sess_open n
sess n "SET statement_timeout = '3 s';"
acct=0

# scenario STACK ROUTE STALL WANT [NEXT]: WANT is a regex for the
# victim's "error ..." line (doc/clients.md's table), NEXT the line of its
# next borrowing ("next 1": a working connection)
scenario() {
	local stack=$1 route=$2 stall=$3 want=$4 next=${5:-next 1} out label
	acct=$((acct + 1))
	label="($stack, $route, $stall)"
	[ "${NO_LINE:-0}" = 1 ] && label="($stack, $route, $stall, without the line)"
	out=$workdir/$acct.out
	case $stack in
		hikari) [ $java_ok = 1 ] || { not_ok "$label HikariCP: PoolVictim.java did not compile (javac, pgJDBC, HikariCP installed?)"; return; } ;;
		node) [ $node_ok = 1 ] || { not_ok "$label node-postgres: could not install pg@8 from npm (no network access?)"; return; } ;;
	esac
	(victim_cmd "$stack" "$route" "$acct" "$stall" >"$out" 2>&1; echo "exit $?" >>"$out") &
	local pid=$!
	for _ in $(seq 3000); do
		grep -qE '^(ready|exit )' "$out" && break
		sleep 0.01
	done
	check "$label the victim took acct:$acct through its pool and wrote" grep -qx ready "$out"
	sleep 1.5
	sess n "BEGIN; SELECT fenced_acquire_xact('acct:$acct', wait => '2 s') IS NOT NULL;"
	local got=$S\|$R
	sess n "SELECT token FROM fenced_leases() WHERE resource = 'acct:$acct';"
	local new_token=$R
	sess n "INSERT INTO ledger (acct, amount) VALUES ($acct, 10);"
	got="$got $S"
	sess n "COMMIT;"
	expect "$label the newer holder's acquisition, write and commit go through" "$got $S" "00000|t 00000 00000"
	[ "$S" = 00000 ] || sess n "ROLLBACK;"
	wait "$pid" 2>/dev/null || true
	if [ "$stack" = node ] && [ "${NO_LINE:-0}" = 1 ]; then
		expect_match "$label the node process dies of the checked-out client's unhandled 'error' event (TF110)" \
			"$(cat "$out")" "Unhandled 'error' event.*TF110.*exit [1-9]"
	else
		expect_match "$label the ended holder's error" "$(grep '^error' "$out")" "$want"
		expect "$label then the pool hands out: $next" "$(grep '^next' "$out")" "$next"
	fi
	expect "$label the victim's writes are undone, the newer holder's kept" \
		"$(sql -c "SELECT sum(amount) || '|' || bool_and(tok::text = '$new_token') FROM ledger WHERE acct = $acct")" "10|true"
	if [ "$stack" = node ] && [ "${NO_LINE:-0}" != 1 ]; then
		expect "$label the node process survives and ends normally" "$(grep -E '^(alive|exit )' "$out" | tr '\n' ' ')" "alive exit 0 "
		[ "$stall" = idle ] && expect_match "$label the checked-out client's 'error' event carries TF110" \
			"$(grep '^event' "$out" | head -1)" "^event TF110 $TF110_MSG"
	fi
	grep -vE '^(ready|next 1|alive|exit 0)$' "$out" | tail -4 | sed "s/^/# $label /"
}

TF110_MSG='the lock on resource "acct:[0-9]+" was taken over: this transaction is ended'
CLOSED_MSG='server closed the connection unexpectedly'
for route in direct pgbouncer; do
	# psycopg2 (libpq): idle, the FATAL is lost, only the closed connection
	# is reported; in a statement, the error with its SQLSTATE
	scenario psycopg2 $route idle "^error OperationalError - closed $CLOSED_MSG"
	scenario psycopg2 $route sleep "^error DatabaseError TF110 open $TF110_MSG"
	# SQLAlchemy: psycopg2's errors wrapped; "closed" is connection_invalidated
	scenario sqlalchemy $route idle "^error OperationalError - closed $CLOSED_MSG"
	scenario sqlalchemy $route sleep "^error DatabaseError TF110 open $TF110_MSG"
	# pgJDBC reads the FATAL: TF110, with the lost connection chained to
	# it (08006; through pgbouncer its "server conn crashed?", 08P01,
	# first), which makes HikariCP evict the connection
	chain=08006
	[ $route = pgbouncer ] && chain="08P01 08006"
	scenario hikari $route idle "^error PSQLException TF110 closed chained $chain FATAL: $TF110_MSG"
	scenario hikari $route sleep "^error PSQLException TF110 open chained - ERROR: $TF110_MSG"
	# node-postgres: idle, the FATAL arrives as the checked-out client's
	# 'error' event, and the next query fails
	scenario node $route idle '^error Error - Client has encountered a connection error and is not queryable'
	scenario node $route sleep "^error DatabaseError TF110 $TF110_MSG"
done

# What the pools do without doc/clients.md's line, for the idle victim
# (terminated) straight to the server: psycopg2's pool and SQLAlchemy drop
# a closed connection by themselves (HikariCP needs no line at all);
# node-postgres, without an 'error' listener on the checked-out
# client, dies of the TF110 that arrives while it is idle.
export NO_LINE=1
scenario psycopg2 direct idle '^error OperationalError - closed server closed the connection unexpectedly' "next 1"
scenario sqlalchemy direct idle '^error OperationalError - closed server closed the connection unexpectedly' "next 1"
scenario node direct idle -
unset NO_LINE
sess_close n

if [ "$CHECKS_FAILED" -gt 0 ]; then
	echo "# pgbouncer log:"
	tail -20 "$workdir/pgbouncer.log" | sed 's/^/#   /'
	echo "# server log:"
	grep -E 'taken over|FATAL|not ending' "$(dirname "$PGDATA_DIR")/server.log" | tail -30 | sed 's/^/#   /'
fi
checks_finish
