#!/usr/bin/env bash
# test/scripts/sqlalchemy_clients.sh: doc/clients.md's SQLAlchemy snippet, run
# as written with Debian's python3-sqlalchemy and psycopg2 (doc/clients.md
# "SQLAlchemy"): a TypeDecorator for fence_token, the transaction forms
# through a QueuePool of one connection, a checkin event running DISCARD
# ALL, TF001 caught through .orig.pgcode.  Then the same snippet without
# its checkin event, to show what the event is for: the next borrower
# finds the session declaration.
#
#   bash test/scripts/sqlalchemy_clients.sh
set -euo pipefail

source "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/../lib/harness.sh"
source "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/../lib/checks.sh"
source "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/../lib/psql.sh"
source "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/../lib/snippet.sh"

if ! harness_install_deps python3-sqlalchemy; then
	not_ok "the SQLAlchemy suite did not run: could not install python3-sqlalchemy"
	checks_finish
	exit 1
fi
harness_start_pg
harness_start_redis
harness_tmpdir workdir

sql postgres >/dev/null <<SQL
ALTER DATABASE postgres SET fencing.redis_host = '127.0.0.1';
ALTER DATABASE postgres SET fencing.redis_port = $REDIS_PORT;
CREATE EXTENSION fencing;
CREATE TABLE orders (order_id int PRIMARY KEY, status text, tok fence_token);
CREATE TRIGGER fence BEFORE INSERT OR UPDATE OR DELETE ON orders
	FOR EACH ROW EXECUTE FUNCTION fence_guard('tok', 'order:{order_id}');
INSERT INTO orders VALUES (8, 'new', 1);
SQL

snippet sqlalchemy >"$workdir/snippet.py"
expect "doc/clients.md's SQLAlchemy snippet: TypeDecorator, transaction forms through a QueuePool, DISCARD ALL at checkin, TF001" \
	"$(/usr/bin/python3 -W error "$workdir/snippet.py" 2>&1)" \
	"stamped with the lock's token: True
written with a token one above: True int
declarations left behind: 0
stale token, not retried: stale fence token for resource \"order:8\""
expect "... and the lock was given back at commit" \
	"$(redis-cli -p "$REDIS_PORT" --raw GET 'fencing:v1:{r:order:8}:lock')" ""

# without the checkin event, the session declaration is handed over
sed '/^@event.listens_for(engine, "checkin")/s/^/# /' "$workdir/snippet.py" >"$workdir/no_event.py"
check "the snippet without its checkin event hands the session declaration over" \
	grep -q '^declarations left behind: 1$' <(/usr/bin/python3 "$workdir/no_event.py" 2>&1)

checks_finish
