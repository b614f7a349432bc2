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
SQL

mkdir "$workdir/classes"
snippet java >"$workdir/FencedWrites.java"
snippet java-outage >"$workdir/RedisOutage.java"
cp "$FENCING_TOP/test/lib/JdbcBindings.java" "$workdir/"
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

kill "$REDIS_PID"
wait "$REDIS_PID" 2>/dev/null || true
expect "doc/clients.md's Java snippet with Redis down: TF101, and the pool keeps its connection" \
	"$(run_java RedisOutage)" \
	"Redis unavailable (TF101): retry later
the pool kept its connection: true"

checks_finish
