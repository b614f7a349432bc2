#!/usr/bin/env bash
# test/scripts/app_clients.sh: the application snippets of doc/clients.md,
# run as written, and a real ORM session (doc/clients.md "Using it from
# applications").
#
# Extracts each code block that follows a "<!-- snippet: NAME ... -->"
# line in README.md or doc/*.md and runs it against a throwaway cluster: the psycopg2
# and node-postgres examples (pg installed from npm into a private
# directory), and the configuration example.  Then runs a SQLAlchemy
# session (Debian's python3-sqlalchemy) that writes every loaded column
# back (test/lib/orm_sqlalchemy.py).
#
#   bash test/scripts/app_clients.sh
set -euo pipefail

source "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/../lib/harness.sh"
source "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/../lib/psql.sh"
source "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/../lib/checks.sh"
source "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/../lib/snippet.sh"

harness_install_deps python3-sqlalchemy
command -v npm >/dev/null || harness_install_deps nodejs npm
harness_start_pg
harness_tmpdir workdir

# a table for the snippets: order 42 written at 33
sql -c "CREATE EXTENSION fencing" -c "
	CREATE TABLE orders (order_id int PRIMARY KEY, status text, tok fence_token);
	CREATE TRIGGER fence BEFORE INSERT OR UPDATE OR DELETE ON orders
		FOR EACH ROW EXECUTE FUNCTION fence_guard('tok', 'order:{order_id}');
	INSERT INTO orders VALUES (42, 'paid', 33);"

# psycopg2
snippet python >"$workdir/snippet.py"
expect "doc/clients.md's psycopg2 snippet: tokens as int, TF001 caught" \
	"$(/usr/bin/python3 "$workdir/snippet.py" 2>&1)" \
	"written with token 34
stale token, not retried: Token 33 is below the current mark 34."

# node-postgres, from npm.  Offline, npm would retry for many minutes: one
# retry, 20 s a request and 60 s in all, then the check fails saying why.
npm_registry=$(npm config get registry 2>/dev/null || echo "the npm registry")
npm_rc=0
(cd "$workdir" && timeout 60 npm install --loglevel=error --no-save --no-audit --no-fund \
	--fetch-timeout=20000 --fetch-retries=1 --fetch-retry-mintimeout=2000 \
	--fetch-retry-maxtimeout=5000 pg@8 >"$workdir/npm.log" 2>&1) || npm_rc=$?
if [ "$npm_rc" -eq 0 ]; then
	snippet node >"$workdir/snippet.js"
	expect "doc/clients.md's node-postgres snippet: tokens as BigInt, TF001 caught" \
		"$(cd "$workdir" && node snippet.js 2>&1)" \
		"written with token bigint 35
stale token, not retried: Token 34 is below the current mark 35."
else
	if [ "$npm_rc" -eq 124 ]; then why="no answer within 60 s"; else why="npm failed"; fi
	not_ok "the node-postgres snippet did not run: could not install pg@8 from $npm_registry ($why; no network access?)"
	{ grep -m1 'FetchError' "$workdir/npm.log" || grep -m1 -E 'npm (ERR|error)' "$workdir/npm.log"; } | sed 's/^/#   /' || true
fi

# the configuration example, for a database "app"; a new session sees it
# before and after the library is loaded
sql -c "CREATE DATABASE app" -c "CREATE ROLE app_user LOGIN"
sql -d app -c "CREATE EXTENSION fencing"
snippet config | sql
load="SELECT fence_mark('any') IS NULL AS loaded"
settings="SELECT current_setting('fencing.redis_host') || '|' || current_setting('fencing.redis_port')"
expect "doc/clients.md's configuration: the database's Redis server, before the library loads" \
	"$(sql -d app -U app_user -c "$settings")" "10.1.2.3|6380"
expect "... and after it loads" \
	"$(sql -d app -U app_user -c "$load" -c "$settings" | tail -1)" "10.1.2.3|6380"
expect "an ordinary user's SET before the load is discarded when it loads" \
	"$(sql -d app -U app_user -c "SET fencing.redis_host = 'evil.example'" -c "$load" -c "SHOW fencing.redis_host" 2>/dev/null | tail -1)" \
	"10.1.2.3"
expect "an ordinary user's SET after the load is refused" \
	"$(printf "%s;\nSET fencing.redis_host = 'evil.example';\n\\\\echo :LAST_ERROR_SQLSTATE\n" "$load" | psql -X -q -A -t -d app -U app_user 2>/dev/null | tail -1)" \
	"42501"

# a real ORM session
checks_from /usr/bin/python3 "$FENCING_TOP/test/lib/orm_sqlalchemy.py" ||
	not_ok "the SQLAlchemy session (test/lib/orm_sqlalchemy.py) passes its checks"

checks_finish
