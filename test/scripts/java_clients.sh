#!/usr/bin/env bash
# test/scripts/java_clients.sh: doc/clients.md's Java snippets with the real
# pgJDBC and HikariCP, compiled and run as written (doc/clients.md "Java (JDBC,
# HikariCP)"), and every binding of its table (test/lib/JdbcBindings.java).
#
# Needs Debian's default-jdk-headless, libpostgresql-jdbc-java and
# libhikaricp-java, installed if missing; if they cannot be, the suite
# fails and says so.  PostgreSQL listens on 127.0.0.1 as well (pgJDBC has
# no Unix sockets).  The "java" snippet runs with Redis up: the
# transaction forms through a pool of one connection, the bindings,
# TF001; the "java-outage" snippet with Redis stopped: TF101, and the pool
# keeps its connection.
#
#   bash test/scripts/java_clients.sh
set -euo pipefail

source "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/../lib/harness.sh"
source "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/../lib/checks.sh"
source "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/../lib/psql.sh"
source "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/../lib/snippet.sh"
source "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/../lib/job_holder.sh"

java_pkgs=(default-jdk-headless libpostgresql-jdbc-java libhikaricp-java libslf4j-java)
if ! harness_install_deps "${java_pkgs[@]}" || ! command -v javac >/dev/null; then
	not_ok "the Java suite did not run: could not install ${java_pkgs[*]}"
	checks_finish
	exit 1
fi
classpath=/usr/share/java/postgresql.jar:/usr/share/java/HikariCP.jar:/usr/share/java/slf4j-api.jar:/usr/share/java/slf4j-nop.jar

harness_start_pg "listen_addresses = '127.0.0.1'"
harness_start_redis
harness_tmpdir workdir
export JDBC_URL="jdbc:postgresql://127.0.0.1:$PGPORT/postgres?user=postgres"

sql postgres >/dev/null <<SQL
ALTER DATABASE postgres SET fencing.redis_host = '127.0.0.1';
ALTER DATABASE postgres SET fencing.redis_port = $REDIS_PORT;
CREATE EXTENSION fencing;
CREATE TABLE orders (order_id int PRIMARY KEY, status text, tok fence_token);
CREATE TRIGGER fence BEFORE INSERT OR UPDATE OR DELETE ON orders
	FOR EACH ROW EXECUTE FUNCTION fence_guard('tok', 'order:{order_id}');
INSERT INTO orders VALUES (42, 'paid', 1), (7, 'new', 33);
CREATE TABLE bind_orders (order_id int PRIMARY KEY, tok fence_token);
CREATE TRIGGER fence BEFORE INSERT OR UPDATE ON bind_orders
	FOR EACH ROW EXECUTE FUNCTION fence_guard('tok', 'bind:1');
INSERT INTO bind_orders VALUES (1, 1);
CREATE TABLE accounts (id int PRIMARY KEY, balance bigint NOT NULL, tok fence_token);
CREATE TRIGGER fence BEFORE INSERT OR UPDATE OR DELETE ON accounts
	FOR EACH ROW EXECUTE FUNCTION fence_guard('tok', 'acct:{id}');
INSERT INTO accounts VALUES (1, 0, 1);
SQL

mkdir "$workdir/classes"
snippet java >"$workdir/FencedWrites.java"
snippet java-outage >"$workdir/RedisOutage.java"
snippet job-java >"$workdir/FencedJob.java"
cp "$FENCING_TOP/test/lib/JdbcBindings.java" "$FENCING_TOP/test/lib/JdbcPooler.java" "$workdir/"
if javac -d "$workdir/classes" -cp "$classpath" "$workdir"/*.java 2>"$workdir/javac.log"; then
	ok "doc/clients.md's Java snippets and JdbcBindings.java compile"
else
	not_ok "doc/clients.md's Java snippets and JdbcBindings.java compile"
	sed 's/^/#   /' "$workdir/javac.log"
fi
run_java() { java -cp "$workdir/classes:$classpath" "$@" 2>&1; }

expect "doc/clients.md's Java snippet through HikariCP: transaction forms, setLong, setString, TF001" \
	"$(run_java FencedWrites)" \
	"stamped with the lock's token: true
declarations and leases left behind: 0
written with token 34 (getObject: PGobject)
stale token, not retried: Token 33 is below the current mark 34."
expect "... and it gave the lock back at commit" \
	"$(redis-cli -p "$REDIS_PORT" --raw GET 'fencing:v1:{r:order:42}:lock')" ""

# one line per binding
if run_java JdbcBindings >"$workdir/bindings.log"; then
	ok "every binding of doc/clients.md's table behaves as it says"
else
	not_ok "every binding of doc/clients.md's table behaves as it says"
fi
sed 's/^/#   /' "$workdir/bindings.log"

# The job's shapes (doc/clients.md "pgJDBC and HikariCP"), during a previous
# holder's transaction of acct:1 that adds 100 and commits while the
# shape's acquisition waits: the read sees it, no update is lost.
balance() { sql -c "SELECT balance FROM accounts WHERE id = 1"; }
run_shape() {
	local where=$1 url=$2 out before
	before=$(balance)
	hold waiter
	out=$(JDBC_URL=$url run_java FencedJob)
	check "... the previous holder committed" holder_done
	expect "doc/clients.md's pgJDBC shapes $where: the read sees the previous holder's commit" \
		"$out" "read-then-write read $((before + 100))
write-only done"
	expect "... and no update is lost" "$(balance)" "$((before + 102))"
	expect "... and the lock was given back" "$(redis-cli -p "$REDIS_PORT" EXISTS "$hold_lock_key")" 0
}
run_shape directly "$JDBC_URL"
# a COMMIT that commit() sent after the write's would find no transaction
# shellcheck disable=SC2016
check "... and commit() sends no COMMIT of its own after the write's" \
	bash -c '! grep -q "there is no transaction in progress" "$1"' _ "$PGHOST/server.log"

# Behind pgbouncer in transaction mode (doc/clients.md "Behind pgbouncer"):
# two server connections for three clients.  pgJDBC sends
# extra_float_digits at startup, which pgbouncer refuses unless told to
# ignore it: first without ignore_startup_parameters, then with it
# (reloaded on SIGHUP).
harness_install_deps pgbouncer
bouncer_dir=
harness_tmpdir bouncer_dir
bouncer_port=$(harness_free_port)
harness_start_pgbouncer "$bouncer_dir" "$bouncer_port" postgres \
	"app = host=$PGHOST port=$PGPORT dbname=postgres user=postgres" \
	"default_pool_size = 2" "max_client_conn = 20" "admin_users = postgres" || exit 1
bouncer_url="jdbc:postgresql://127.0.0.1:$bouncer_port/app?user=postgres"
expect_match "pgbouncer refuses pgJDBC's connection without ignore_startup_parameters" \
	"$(run_java JdbcPooler "$bouncer_url" 1 1)" "unsupported startup parameter: extra_float_digits"
sed -i 's/^pidfile = /ignore_startup_parameters = extra_float_digits\npidfile = /' "$bouncer_dir/pgbouncer.ini"
kill -HUP "$(cat "$bouncer_dir/pgbouncer.pid")"
for _ in $(seq 100); do
	grep -q 'ignore_startup_parameters|extra_float_digits' <(psql -X -A -t -h 127.0.0.1 -p "$bouncer_port" -U postgres pgbouncer -c 'SHOW CONFIG' 2>/dev/null) && break
	sleep 0.05
done

sql -c "CREATE TABLE pooled (id int PRIMARY KEY, balance bigint NOT NULL, tok fence_token);
	CREATE TRIGGER fence BEFORE INSERT OR UPDATE OR DELETE ON pooled
		FOR EACH ROW EXECUTE FUNCTION fence_guard('tok', 'pool:{id}');
	INSERT INTO pooled VALUES (1, 0, 1), (2, 0, 1)" >/dev/null
pooled_sum() { sql -c "SELECT sum(balance) FROM pooled"; }
before=$(pooled_sum)
out=$(run_java JdbcPooler "$bouncer_url" 3 40)
echo "$out" | sed 's/^/# with defaults: /'
expect_match "through pgbouncer in transaction mode, pgJDBC's defaults fail jobs with 42P05 or 26000 (its prepared statements)" \
	"$out" "^jobs [0-9]+ of 120 sqlstates .*(42P05|26000)"
check "... and fewer than all jobs commit" test "$(sed -n 's/^jobs \([0-9]*\) of.*/\1/p' <<<"$out")" -lt 120
# what the failed jobs left on pgbouncer's server connections (their
# transactions, and the locks those hold) ends with the backends
sql -c "SELECT count(pg_terminate_backend(pid)) >= 0 FROM pg_stat_activity
	WHERE backend_type = 'client backend' AND pid <> pg_backend_pid()" >/dev/null
before=$(pooled_sum)
out=$(run_java JdbcPooler "$bouncer_url&prepareThreshold=0" 3 40)
expect "with prepareThreshold=0 every job commits" "$out" "jobs 120 of 120
sqlstates -"
expect "... and no update is lost" "$(pooled_sum)" "$((before + 120))"
run_shape "through pgbouncer with prepareThreshold=0" "$bouncer_url&prepareThreshold=0"

kill "$REDIS_PID"
wait "$REDIS_PID" 2>/dev/null || true
expect "doc/clients.md's Java snippet with Redis down: TF101, and the pool keeps its connection" \
	"$(run_java RedisOutage)" \
	"Redis unavailable (TF101): retry later
the pool kept its connection: true"

checks_finish
