#!/usr/bin/env bash
# test/scripts/guidance.sh: doc/clients.md's guidance where users get hurt,
# each example run as written:
#
#  - "Fenced writers and timeouts": a writer waits behind a holder idle in
#    its transaction for as long as the holder likes; with doc/clients.md's
#    role settings the idle holder is ended (25P03) and the writer goes
#    through, and a writer behind a busy holder fails with 55P03;
#  - "Mixing token sources": after a fenced_acquire_xact() write, the
#    doc/clients.md's redis-py worker (Lock + INCR + fence_use) is fenced out with
#    the TF001 hint that names the two sources, with the default key
#    layout, and ships with doc/clients.md's classic-layout settings;
#  - "How long a failed fenced_acquire_xact takes": with Redis stopped
#    (SIGSTOP), the call fails with TF101, and the abort of its
#    transaction, at the error, warns that the attempt could not be given
#    back; the times are printed as figures (never asserted).
#
# Installs python3-redis (Debian) if missing.
#
#   bash test/scripts/guidance.sh
set -euo pipefail

source "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/../lib/harness.sh"
source "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/../lib/checks.sh"
source "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/../lib/psql.sh"
source "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/../lib/snippet.sh"

if ! harness_install_deps python3-redis; then
	not_ok "the guidance suite did not run: could not install python3-redis"
	checks_finish
	exit 1
fi
harness_start_pg
harness_start_redis
harness_tmpdir workdir
export REDIS_PORT

# Milliseconds since the epoch.
now_ms() { echo $(($(date +%s%N) / 1000000)); }

# A database with the Redis server, the extension and a guarded table.
new_db() {
	sql postgres -c "CREATE DATABASE $1"
	sql postgres >/dev/null <<SQL
ALTER DATABASE $1 SET fencing.redis_host = '127.0.0.1';
ALTER DATABASE $1 SET fencing.redis_port = $REDIS_PORT;
SQL
	sql "$1" >/dev/null <<SQL
CREATE EXTENSION fencing;
CREATE TABLE orders (order_id int PRIMARY KEY, status text, tok fence_token);
CREATE TRIGGER fence BEFORE INSERT OR UPDATE OR DELETE ON orders
	FOR EACH ROW EXECUTE FUNCTION fence_guard('tok', 'order:{order_id}');
INSERT INTO orders VALUES (1, 'new', 1), (9, 'new', 1);
GRANT ALL ON orders TO PUBLIC;
SQL
}

# Wait until a session of role $1 waits for a lock; its PID and the PIDs
# blocking it, or nothing after 10 s.
waiting_of() {
	local row
	for _ in $(seq 200); do
		row=$(sql postgres -c "SELECT pid || ' ' || array_to_string(pg_blocking_pids(pid), ',')
			FROM pg_stat_activity WHERE usename = '$1' AND wait_event_type = 'Lock'")
		[ -n "$row" ] && { echo "$row"; return 0; }
		sleep 0.05
	done
}

# --- Fenced writers and timeouts ---------------------------------------
new_db app
sql postgres -c "CREATE ROLE app LOGIN" -c "CREATE ROLE plain LOGIN"

# Without the timeouts: holder "plain" idles in its transaction for 3 s
# after writing order:1; a second writer waits behind it all along.
psql -X -q -U plain -d app >"$workdir/holder_plain.log" 2>&1 <<'SQL' &
BEGIN;
UPDATE orders SET status = 'held', tok = 10 WHERE order_id = 1;
\! sleep 3
COMMIT;
SQL
holder=$!
for _ in $(seq 200); do
	[ -n "$(sql postgres -c "SELECT 1 FROM pg_stat_activity WHERE usename = 'plain' AND state = 'idle in transaction'")" ] && break
	sleep 0.05
done
psql -X -q -U plain -d app -c "UPDATE orders SET status = 'next', tok = 11 WHERE order_id = 1" >"$workdir/waiter_plain.log" 2>&1 &
waiter=$!
blocked=$(waiting_of plain)
check "without the timeouts, a writer waits behind the holder idle in its transaction" \
	test -n "$blocked"
wait $holder $waiter || true
expect "... until the holder commits: the writer then writes" \
	"$(sql app -c "SELECT tok FROM orders WHERE order_id = 1")" "11"

# With doc/clients.md's settings for role app: the idle holder is ended.
snippet timeouts | sql app
psql -X -q -U app -d app >"$workdir/holder_app.log" 2>&1 <<'SQL' &
BEGIN;
UPDATE orders SET status = 'held', tok = 20 WHERE order_id = 1;
\! sleep 3
COMMIT;
SQL
holder=$!
for _ in $(seq 200); do
	[ -n "$(sql postgres -c "SELECT 1 FROM pg_stat_activity WHERE usename = 'app' AND state = 'idle in transaction'")" ] && break
	sleep 0.05
done
waiter_out=$(psql -X -q -A -t -U app -d app -c "UPDATE orders SET status = 'next', tok = 21 WHERE order_id = 1 RETURNING tok" 2>&1)
wait $holder || true
expect "with idle_in_transaction_session_timeout, the writer behind the idle holder goes through" "$waiter_out" "21"
check "... and the idle holder's session was ended" \
	grep -q 'FATAL:  terminating connection due to idle-in-transaction timeout' "$workdir/holder_app.log"

# lock_timeout: a writer behind a busy holder (a long statement in its
# transaction, which the idle timeout does not end) fails with 55P03.
psql -X -q -U app -d app >"$workdir/holder_busy.log" 2>&1 <<'SQL' &
BEGIN;
UPDATE orders SET status = 'held', tok = 30 WHERE order_id = 1;
SELECT pg_sleep(4);
COMMIT;
SQL
holder=$!
for _ in $(seq 200); do
	[ -n "$(sql postgres -c "SELECT 1 FROM pg_stat_activity WHERE usename = 'app' AND query LIKE 'SELECT pg_sleep%'")" ] && break
	sleep 0.05
done
expect "with lock_timeout, a writer behind a busy holder fails with 55P03 instead of piling up" \
	"$(printf "UPDATE orders SET status = 'next', tok = 31 WHERE order_id = 1;\n\\\\echo :SQLSTATE\n" |
		psql -X -q -A -t -U app -d app 2>/dev/null)" \
	"55P03"
wait $holder || true

# --- Mixing token sources ----------------------------------------------
# The default layout: fenced_acquire_xact() writes order:9 at the Redis
# clock, the redis-py worker's INCR counter starts at 1.
snippet redis-py >"$workdir/worker.py"
new_db mixed
token=$(sql mixed -c "BEGIN" -c "SELECT fenced_acquire_xact('order:9')" \
	-c "UPDATE orders SET status = 'acquired' WHERE order_id = 9" -c "COMMIT")
out=$(PGDATABASE=mixed /usr/bin/python3 "$workdir/worker.py" 2>&1)
expect "default layout: after a fenced_acquire_xact() write the INCR worker is fenced out, and the hint names the two sources" \
	"$out" \
	"fenced out: Token and mark are $((${#token} - 1)) orders of magnitude apart: the resource seems to take tokens from two sources, such as fenced_acquire() and a counter of another client's. Take every token of a resource from one counter: set fencing.redis_token_key to the other clients' counter key (doc/clients.md, \"Mixing token sources\")."
check "... and doc/clients.md shows that hint" grep -qF "HINT:  ${out#fenced out: }" "$FENCING_TOP/doc/clients.md"
expect "a stale token a little below the mark keeps the usual hint" \
	"$(sql mixed -c "UPDATE orders SET tok = $((token - 1)) WHERE order_id = 9" 2>&1 | grep HINT)" \
	"HINT:  A newer lock holder has written to this resource; acquire the lock again for a new token."

# The classic layout: both sides share lock:order:9 and fence:order:9.
new_db classic
snippet classic-layout | sed 's/DATABASE app/DATABASE classic/' | sql postgres
token=$(sql classic -c "BEGIN" -c "SELECT fenced_acquire_xact('order:9')" \
	-c "UPDATE orders SET status = 'acquired' WHERE order_id = 9" -c "COMMIT")
expect "classic layout: the same worker ships after the fenced_acquire_xact() write" \
	"$(PGDATABASE=classic /usr/bin/python3 "$workdir/worker.py" 2>&1)" "shipped order:9"
expect "... with the token after fenced_acquire_xact()'s" \
	"$(sql classic -c "SELECT tok FROM orders WHERE order_id = 9")" "$((token + 1))"

# --- How long a failed fenced_acquire_xact takes -----------------------
kill -STOP "$REDIS_PID"
start=$(now_ms)
state=$(sqlstate_of app "SELECT fenced_acquire_xact('order:1')")
autocommit_ms=$(($(now_ms) - start))
expect "Redis frozen: fenced_acquire_xact() in autocommit mode fails with TF101" "$state" "TF101"
{
	echo "SET fencing.redis_command_timeout = '300ms';"
	echo "BEGIN;"
	echo "\\set t0 \`date +%s%N\`"
	echo "SELECT fenced_acquire_xact('order:1');"
	echo "\\set t1 \`date +%s%N\`"
	echo "ROLLBACK;"
	echo "\\set t2 \`date +%s%N\`"
	echo "\\echo TIMES :t0 :t1 :t2"
} | psql -X -q -A -t -d app >"$workdir/frozen.log" 2>&1 || true
kill -CONT "$REDIS_PID"
expect "... in a transaction block with a 300 ms command timeout: the statement fails, the abort at the error warns that the attempt could not be given back" \
	"$(grep -E '^(ERROR|WARNING):' "$workdir/frozen.log")" \
	"ERROR:  timed out waiting for a reply from Redis server at \"127.0.0.1:$REDIS_PORT\"
WARNING:  could not release the Redis lock on resource \"order:1\""
read -r _ t0 t1 t2 < <(grep '^TIMES' "$workdir/frozen.log")
echo "# figures, Redis frozen: autocommit call with the default 1 s command timeout: ${autocommit_ms} ms;" \
	"300 ms command timeout: statement $(((t1 - t0) / 1000000)) ms, ROLLBACK $(((t2 - t1) / 1000000)) ms"

checks_finish
