#!/usr/bin/env bash
# test/scripts/job_shapes.sh: the fenced job in one or two round trips
# (doc/clients.md "The fenced job in one or two round trips").
#
# First with psql: why the read is a statement of its own.  A previous
# holder of acct:1 adds 100 and commits while the next acquisition waits
# for the lock; a read in the acquisition's own statement misses that
# commit (its snapshot was taken before the lock was held), a read in the
# next statement of the same query string sees it.  A write-only string
# whose acquisition finds the lock busy is rejected by the guard (TF002)
# and writes nothing.
#
# Then the doc's shapes, run as written with the real clients: psycopg2,
# psycopg 3 (Debian's python3-psycopg), SQLAlchemy (python3-sqlalchemy),
# node-postgres (pg@8 from npm); each during such a previous holder's
# transaction: its read must return the holder's committed balance, and
# the balance must end 100 + 2 above where it started (no update lost).
# pgJDBC's shape is run by test/scripts/java_clients.sh.
#
#   bash test/scripts/job_shapes.sh
set -euo pipefail

source "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/../lib/harness.sh"
source "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/../lib/checks.sh"
source "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/../lib/psql.sh"
source "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/../lib/snippet.sh"
source "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/../lib/job_holder.sh"

harness_install_deps python3-sqlalchemy python3-psycopg
command -v npm >/dev/null || harness_install_deps nodejs npm
harness_start_pg
harness_start_redis
harness_tmpdir workdir

sql postgres >/dev/null <<SQL
ALTER DATABASE postgres SET fencing.redis_host = '127.0.0.1';
ALTER DATABASE postgres SET fencing.redis_port = $REDIS_PORT;
CREATE EXTENSION fencing;
CREATE TABLE accounts (id int PRIMARY KEY, balance bigint NOT NULL, tok fence_token);
CREATE TRIGGER fence BEFORE INSERT OR UPDATE OR DELETE ON accounts
	FOR EACH ROW EXECUTE FUNCTION fence_guard('tok', 'acct:{id}');
INSERT INTO accounts VALUES (1, 0, 1);
SQL

balance() { sql -c "SELECT balance FROM accounts WHERE id = 1"; }

# the read in the acquisition's statement: the snapshot before the lock
before=$(balance)
hold waiter
got=$(sql -c "SELECT fenced_acquire_xact('acct:1', wait => '10s') IS NOT NULL,
	(SELECT balance FROM accounts WHERE id = 1)")
check "... the previous holder committed" holder_done
expect "a read in the acquisition's own statement misses the previous holder's commit made during the wait" \
	"$got" "t|$before"

# the read in a statement of its own, in the same query string
before=$(balance)
hold waiter
got=$(sql -c "BEGIN; SELECT fenced_acquire_xact('acct:1', wait => '10s') IS NOT NULL;
	SELECT balance FROM accounts WHERE id = 1; COMMIT")
check "... the previous holder committed" holder_done
expect "a read in the next statement of the same query string sees it" "$got" "t
$((before + 100))"

# write-only, the lock busy: the guard rejects the tokenless write
before=$(balance)
hold 5
got=$(sqlstate_of postgres "SELECT fenced_acquire_xact('acct:1'); UPDATE accounts SET balance = balance + 1 WHERE id = 1")
check "... the previous holder committed" holder_done
expect "the write-only string, its lock busy: TF002, nothing written" "$got|$(balance)" "TF002|$((before + 100))"

# Run a shape during a previous holder's transaction: its read sees the
# holder's commit, and both its jobs add 1.
run_shape() {
	local name=$1 out before
	shift
	before=$(balance)
	hold waiter
	out=$("$@" 2>&1) || true
	check "... the previous holder committed" holder_done
	expect "doc/clients.md's $name shapes: the read sees the previous holder's commit" \
		"$out" "read-then-write read $((before + 100))
write-only done"
	expect "... and no update is lost" "$(balance)" "$((before + 102))"
	expect "... and the lock was given back" "$(redis-cli -p "$REDIS_PORT" EXISTS "$hold_lock_key")" 0
}

snippet job-psycopg2 >"$workdir/psycopg2_job.py"
run_shape psycopg2 /usr/bin/python3 "$workdir/psycopg2_job.py"
snippet job-psycopg3 >"$workdir/psycopg3_job.py"
run_shape "psycopg 3" /usr/bin/python3 "$workdir/psycopg3_job.py"
snippet job-sqlalchemy >"$workdir/sqlalchemy_job.py"
run_shape SQLAlchemy /usr/bin/python3 -W error "$workdir/sqlalchemy_job.py"

# node-postgres, from npm (as test/scripts/app_clients.sh)
npm_rc=0
(cd "$workdir" && timeout 60 npm install --loglevel=error --no-save --no-audit --no-fund \
	--fetch-timeout=20000 --fetch-retries=1 --fetch-retry-mintimeout=2000 \
	--fetch-retry-maxtimeout=5000 pg@8 >"$workdir/npm.log" 2>&1) || npm_rc=$?
if [ "$npm_rc" -eq 0 ]; then
	snippet job-node >"$workdir/job.js"
	run_shape node-postgres node "$workdir/job.js"
else
	not_ok "the node-postgres shapes did not run: could not install pg@8 (npm exit $npm_rc; no network access?)"
fi

checks_finish
