#!/usr/bin/env bash
# Leases renewed while their owner works (renew => true) and the view
# fenced_lock_holders, against a real redis-server and a server with the
# library preloaded (the renewer is a background worker started there):
#
#  - a 1 s lease is held across a 5 s statement and across a 5 s
#    transaction: another session cannot take it meanwhile;
#  - a client that stops sending after BEGIN; fenced_acquire_xact(ttl =>
#    '1 s', renew => true) loses the lock within about 2 s, another takes
#    it, and the paused client's later write is rejected by the guard;
#  - renewal stops at commit, abort, exit and DISCARD ALL, and when the
#    session goes idle outside a transaction; a lock found under another
#    owner is not extended;
#  - the renewer terminated (pg_terminate_backend) mid-lease is started
#    again and the lease stays held;
#  - Redis stopped for 5 s under a renewed lease: at most a few WARNINGs
#    and about one connection attempt a second (the back-off), a LOG line
#    and the lease renewed again once Redis is back; SCRIPT FLUSH under
#    a renewed lease (EVALSHA answered NOSCRIPT: EVAL);
#  - fenced_lock_holders: a role without pg_read_all_stats sees its own
#    rows and only that the others exist; pg_read_all_stats sees all; the
#    doc/redis.md's query finding a holder idle in a transaction with a mark
#    locked finds it;
#  - a session whose Redis settings are not the server's configuration
#    the renewer uses (ALTER DATABASE ... SET fencing.redis_port, a
#    superuser's SET) is refused renew => true with TF108, no lock taken,
#    while its plain acquisitions go to its own Redis; the same settings
#    again, or the other server given to the renewer too by ALTER SYSTEM
#    and a reload, and renew => true is accepted and renewed;
#  - a full table (fencing.max_leases): renew => true fails with TF109, a
#    plain acquisition goes on unlisted; track_activities off and a server
#    without preloading refuse renew => true with TF108.
#
# Usage: bash test/scripts/redis_renew.sh   (prints ok/not ok lines; exit 0 = pass)
# test/run: quick
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../lib/redis_lib.sh"
source "$(dirname "${BASH_SOURCE[0]}")/../lib/snippet.sh"

harness_start_redis || harness_start_redis || exit 1
redis_start_pg || exit 1
harness_tmpdir workdir


# contender RESOURCE SECONDS: try to take RESOURCE from another session
# every 0.2 s for SECONDS; prints how many attempts got it (0 = held
# throughout by its owner).
contender() {
	local got=0 end=$(($(now_ms) + $2 * 1000))
	while [ "$(now_ms)" -lt "$end" ]; do
		if [ "$(sql -c "SELECT fenced_acquire('$1', ttl => '100 ms') IS NOT NULL")" = t ]; then
			got=$((got + 1))
		fi
		sleep 0.2
	done
	echo "$got"
}

# wait_gone RESOURCE: ms until its lock key is gone (polled every 50 ms,
# up to 10 s).
wait_gone() {
	local t0
	t0=$(now_ms)
	for _ in $(seq 200); do
		[ "$(held "$1")" = 0 ] && break
		sleep 0.05
	done
	echo $(($(now_ms) - t0))
}

sql -c "CREATE TABLE items (id int PRIMARY KEY, tok fence_token, val text)" \
	-c "CREATE TRIGGER fence BEFORE INSERT OR UPDATE OR DELETE ON items
		FOR EACH ROW EXECUTE FUNCTION fence_guard('tok', 'order:{id}')" \
	-c "INSERT INTO items VALUES (1, 1, 'a')" >/dev/null

renewer_pid() { sql -c "SELECT pid FROM pg_stat_activity WHERE backend_type = 'fencing lease renewer'"; }
expect_match "the renewer runs as a background worker" "$(renewer_pid)" '^[0-9]+$'

# ------------------------------------------------ held while working

sql -c "SELECT fenced_acquire('r:stmt', ttl => '1 s', renew => true) IS NOT NULL, pg_sleep(5)" \
	>"$workdir/stmt.out" 2>&1 &
stmt=$!
sleep 0.3
expect "a 1 s lease is held across a 5 s statement" "$(contender r:stmt 4)" "0"
wait "$stmt"
expect "the statement took the lock" "$(cat "$workdir/stmt.out")" "t|"

sess_open a
sess a "BEGIN; SELECT fenced_acquire_xact('r:xact', ttl => '1 s', renew => true) IS NOT NULL;"
expect "fenced_acquire_xact with renew" "$S|$R" "00000|t"
contender r:xact 5 >"$workdir/xact.out" &
cont=$!
# statements and short pauses (idle in transaction for less than the ttl)
sess a "SELECT pg_sleep(1.5);"
sleep 0.4
sess a "SELECT pg_sleep(1.5);"
sleep 0.4
sess a "SELECT pg_sleep(1.2);"
wait "$cont"
expect "a 1 s lease is held across a 5 s transaction" "$(cat "$workdir/xact.out")" "0"
sess a "SELECT renewing FROM fenced_lock_holders WHERE resource = 'r:xact';"
expect "fenced_lock_holders says it is renewed" "$R" "t"
sess a "COMMIT;"
expect "commit gives it back" "$(held r:xact)" "0"
sess a "SELECT count(*) FROM fenced_lock_holders WHERE resource = 'r:xact';"
expect "and takes it out of fenced_lock_holders" "$R" "0"

# ------------------------------------------------ a client that pauses

# (without the raise at acquisition: a raised mark stays locked by the
# paused transaction, and the next holder's raise would wait for it)
sess a "SET fencing.acquire_raises_mark = off;"
sess a "BEGIN; SELECT fenced_acquire_xact('order:1', ttl => '1 s', renew => true) IS NOT NULL;"
expect "the paused client's acquisition" "$S|$R" "00000|t"
ms=$(wait_gone order:1)
if [ "$ms" -le 2200 ] && [ "$ms" -ge 700 ]; then
	ok "a client paused after acquiring loses its 1 s lock in about 1 s (${ms} ms)"
else
	not_ok "a client paused after acquiring loses its 1 s lock in about 1 s (${ms} ms)"
fi
expect "another session takes it" "$(sql -c "SELECT fenced_acquire('order:1', ttl => '10 s') IS NOT NULL")" "t"
sess a "UPDATE items SET val = 'late' WHERE id = 1;"
expect "the paused client's later write is rejected by the guard" "$S" "TF001"
sess a "ROLLBACK; RESET fencing.acquire_raises_mark;"
sql -c "SELECT fenced_release('order:1')" >/dev/null

# ------------------------------------------------ when renewal stops

# idle outside a transaction: a session lease is no longer renewed
sess a "SELECT fenced_acquire('r:idle', ttl => '1 s', renew => true) IS NOT NULL;"
ms=$(wait_gone r:idle)
expect_match "a session lease of an idle session expires (${ms} ms)" "$ms" '^(([0-9]{1,3})|(1[0-9]{3}))$'
sess a "SELECT renewing FROM fenced_lock_holders WHERE resource = 'r:idle';"
expect "its row says it is no longer renewed" "$R" "f"
sess a "SELECT fenced_release('r:idle');"

# commit: a session lease taken in a transaction stops with the session idle
sess a "BEGIN; SELECT fenced_acquire('r:commit', ttl => '1 s', renew => true) IS NOT NULL; SELECT pg_sleep(1.5);"
expect "renewed while the transaction runs" "$(held r:commit)" "1"
sess a "COMMIT;"
ms=$(wait_gone r:commit)
expect_match "and no longer once it committed (${ms} ms)" "$ms" '^(([0-9]{1,3})|(1[0-9]{3}))$'
sess a "SELECT fenced_release('r:commit');"

# abort: the transaction lease goes back, and out of the table
sess a "BEGIN; SELECT fenced_acquire_xact('r:abort', ttl => '1 s', renew => true) IS NOT NULL; SELECT pg_sleep(1.5);"
expect "renewed until the abort" "$(held r:abort)" "1"
sess a "ROLLBACK;"
expect "abort gives it back" "$(held r:abort)" "0"
expect "and no row is left" "$(sql -c "SELECT count(*) FROM fenced_lock_holders WHERE resource = 'r:abort'")" "0"

# DISCARD ALL
sess a "SELECT fenced_acquire('r:discard', ttl => '30 s', renew => true) IS NOT NULL;"
sess a "DISCARD ALL;"
expect "DISCARD ALL gives a renewed lease back" "$(held r:discard)" "0"
expect "and takes it out of the table" "$(sql -c "SELECT count(*) FROM fenced_lock_holders WHERE resource = 'r:discard'")" "0"

# exit, in the middle of an idle transaction
sess a "BEGIN; SELECT fenced_acquire('r:exit', ttl => '30 s', renew => true) IS NOT NULL;"
sess_close a
expect "exit gives a renewed lease back" "$(wait_gone r:exit | awk '{print ($1 < 5000)}')" "1"
expect "and takes it out of the table" "$(sql -c "SELECT count(*) FROM fenced_lock_holders WHERE resource = 'r:exit'")" "0"

# a lock found under another owner (the lease lost, the key taken since):
# the renewal does not extend it, and the lease is no longer renewed
sql -c "SELECT fenced_acquire('r:other', ttl => '3 s', renew => true) IS NOT NULL, pg_sleep(3)::text = '',
	(SELECT renewing FROM fenced_lock_holders WHERE resource = 'r:other')" >"$workdir/other.out" 2>&1 &
stmt=$!
sleep 0.5
rcli SET "$(lock_key r:other)" someone-else PX 2000 >/dev/null
sleep 1.6
pttl=$(rcli PTTL "$(lock_key r:other)")
expect "another owner's lock is left to that owner" "$(rcli GET "$(lock_key r:other)")" "someone-else"
if [ "${pttl:-9999}" -lt 1500 ]; then
	ok "and is not extended by a renewal (PTTL ${pttl} ms)"
else
	not_ok "and is not extended by a renewal (PTTL ${pttl} ms)"
fi
wait "$stmt"
expect "the lease is no longer renewed" "$(cat "$workdir/other.out")" "t|t|f"
expect_match "the server log names the lease found lost and the server" \
	"$(grep -A1 'LOG:  lease of resource "r:other" found lost while renewing it' "$PGHOST/server.log")" \
	"DETAIL:  The Redis server at \"127\.0\.0\.1:$REDIS_PORT\" no longer holds the lock of backend [0-9]+ under the lease's owner"

# ------------------------------------------------ the renewer terminated

# (a 6 s lease: the new renewer starts 1 s after the old one ends, and on
# a loaded machine took more than the 1.5 s a 3 s lease left it)
old=$(renewer_pid)
sql -c "SELECT fenced_acquire('r:worker', ttl => '6 s', renew => true) IS NOT NULL, pg_sleep(8)" \
	>"$workdir/worker.out" 2>&1 &
stmt=$!
contender r:worker 7 >"$workdir/worker_cont.out" &
cont=$!
sleep 1.5
expect "pg_terminate_backend ends the renewer" "$(sql -c "SELECT pg_terminate_backend($old)")" "t"
wait "$cont"
new=$(renewer_pid)
expect_match "a new renewer runs" "$new" '^[0-9]+$'
expect_no_match "under a new PID" "x$new" "x$old"
expect "the lease stayed held throughout (renewal resumed)" "$(cat "$workdir/worker_cont.out")" "0"
wait "$stmt"

# ------------------------------------------------ Redis down

# A renewed lease held while Redis is stopped for 5 s: the renewer backs
# off (one WARNING as the failure starts, not one every 100 ms, and about
# one round a second), and says when renewals succeed again.  The lock
# key goes into an RDB file with an expiry past the outage, so that the
# restarted Redis has it to renew.
serverlog=$PGHOST/server.log
renew_warnings() { grep -c 'WARNING:  could not renew Redis locks' "$serverlog"; }
sql -c "SELECT fenced_acquire('r:outage', ttl => '3 s', renew => true) IS NOT NULL, pg_sleep(10)::text = '',
	(SELECT renewing FROM fenced_lock_holders WHERE resource = 'r:outage')" >"$workdir/outage.out" 2>&1 &
stmt=$!
sleep 0.5
rcli PEXPIRE "$(lock_key r:outage)" 60000 >/dev/null
rcli SAVE >/dev/null
before=$(renew_warnings)
redis_stop
sleep 5
warnings=$(($(renew_warnings) - before))
if [ "$warnings" -ge 1 ] && [ "$warnings" -le 3 ]; then
	ok "Redis down for 5 s: $warnings 'could not renew' WARNING(s)"
else
	not_ok "Redis down for 5 s: $warnings 'could not renew' WARNING(s), expected 1 to 3"
fi
harness_redis_launch || exit 1
sleep 2
pttl=$(rcli PTTL "$(lock_key r:outage)")
if [ "${pttl:-0}" -gt 0 ] && [ "${pttl:-0}" -le 3000 ]; then
	ok "Redis back: the lease is renewed again (PTTL ${pttl} ms)"
else
	not_ok "Redis back: the lease is renewed again (PTTL ${pttl} ms)"
fi
expect_match "and the server log says so" "$(grep -A1 'LOG:  renewing Redis locks again' "$serverlog")" \
	'DETAIL:  [0-9]+ rounds of renewals failed in a row'
rounds=$(sed -n 's/.*DETAIL:  \([0-9]*\) rounds of renewals failed in a row.*/\1/p' "$serverlog" | tail -1)
if [ -n "$rounds" ] && [ "$rounds" -le 15 ]; then
	ok "about one connection attempt a second while down ($rounds failed rounds)"
else
	not_ok "about one connection attempt a second while down (${rounds:-no} failed rounds)"
fi
wait "$stmt"
expect "the lease stayed renewed" "$(cat "$workdir/outage.out")" "t|t|t"

# renewals go as EVALSHA: the script cache emptied, they go again as EVAL
renewed_across r:flush >"$workdir/flush.out" &
stmt=$!
sleep 1
rcli SCRIPT FLUSH >/dev/null
wait "$stmt"
expect "SCRIPT FLUSH mid-lease: renewed throughout (NOSCRIPT, then EVAL)" "$(cat "$workdir/flush.out")" "t|t|t"

# ------------------------------------------------ who sees what

sql -c "CREATE ROLE regress_holder_a LOGIN" -c "CREATE ROLE regress_holder_b LOGIN" \
	-c "CREATE ROLE regress_holder_stats LOGIN IN ROLE pg_read_all_stats" \
	-c "GRANT EXECUTE ON FUNCTION fenced_acquire(text, interval, interval, boolean, interval, boolean, text) TO regress_holder_a" \
	-c "GRANT ALL ON items TO regress_holder_a" >/dev/null
sess_open h -U regress_holder_a
sess h "BEGIN; SELECT fenced_acquire('order:1', ttl => '30 s', renew => true) IS NOT NULL;"
expect "a plain role acquires with renew" "$S|$R" "00000|t"
sess h "SELECT pid = pg_backend_pid(), role, database, resource, kind, renewing, source FROM fenced_lock_holders;"
expect "it sees its own row, a lease from Redis" "$R" "t|regress_holder_a|postgres|order:1|session|t|redis"
expect "another plain role sees only that a row exists" \
	"$(sql -U regress_holder_b -c "SELECT count(*), count(pid), count(resource), count(token) FROM fenced_lock_holders")" "1|0|0|0"
expect "pg_read_all_stats sees it" \
	"$(sql -U regress_holder_stats -c "SELECT role || '|' || resource FROM fenced_lock_holders")" "regress_holder_a|order:1"
sess h "UPDATE items SET val = 'held' WHERE id = 1;"
expect "the holder writes, locking the mark's row" "$S" "00000"
sleep 0.2
snippet lock-holders >"$workdir/holders.sql"
expect_match "doc/redis.md has the query" "$(cat "$workdir/holders.sql")" "fenced_lock_holders"
expect_match "doc/redis.md's query finds the holder idle in a transaction with a mark locked" \
	"$(sql -f "$workdir/holders.sql")" "^[0-9]+\|regress_holder_a\|order:1\|"
sess h "ROLLBACK;"
sess_close h

# ------------------------------------------------ refusals

sess_open t
sess t "SET track_activities = off; SELECT fenced_acquire('r:notrack', renew => true);"
expect "track_activities off: renew => true is refused" "$S" "TF108"
sess_close t

# ------------------------------------------------ a session's own Redis

# a second Redis server, which a database is given with ALTER DATABASE
OTHER_PORT=$(harness_free_port)
redis-server --bind 127.0.0.1 --port "$OTHER_PORT" --dir "$workdir" --save '' \
	--appendonly no --daemonize no --logfile "$workdir/other.log" &
HARNESS_PIDS+=("$!")
ocli() { redis-cli -p "$OTHER_PORT" "$@" 2>/dev/null; }
for _ in $(seq 100); do
	[ "$(ocli PING)" = PONG ] && break
	sleep 0.05
done
db=$(sql -c "SELECT current_database()")
sql -c "ALTER DATABASE \"$db\" SET fencing.redis_port = $OTHER_PORT" >/dev/null
sess_open d
sess d "SELECT fenced_acquire('r:dbport', ttl => '1 s', renew => true);"
expect "a database given its own Redis server: renew => true is refused" "$S" "TF108"
expect_match "saying the session's settings are not the renewer's" "$R" "differ from the server's configuration"
expect "no lock is taken on the server's Redis" "$(held r:dbport)" "0"
expect "nor on the database's" "$(ocli EXISTS "$(lock_key r:dbport)")" "0"
sess d "SELECT fenced_acquire('r:dbport', ttl => '30 s') IS NOT NULL;"
expect "a plain acquisition goes to the database's Redis" "$S|$R|$(ocli EXISTS "$(lock_key r:dbport)")" "00000|t|1"
sess d "SELECT fenced_release('r:dbport');"
sess d "SET fencing.redis_port = $REDIS_PORT; SELECT fenced_acquire('r:dbport', ttl => '1 s', renew => true) IS NOT NULL, pg_sleep(2)::text = '', (SELECT renewing FROM fenced_lock_holders WHERE resource = 'r:dbport');"
expect "SET back to the server's Redis: accepted and renewed" "$S|$R" "00000|t|t|t"
sess d "SELECT fenced_release('r:dbport'); RESET fencing.redis_port;"
sess_close d
sql -c "ALTER DATABASE \"$db\" RESET fencing.redis_port" >/dev/null
sess_open e
sess e "SET fencing.redis_port = $OTHER_PORT; SELECT fenced_acquire('r:setport', renew => true);"
expect "a superuser's SET of another Redis server: renew => true is refused" "$S" "TF108"
sess_close e
expect "the database reset: renew => true is accepted and renewed" "$(renewed_across r:dbreset)" "t|t|t"

# the renewer follows ALTER SYSTEM and a reload
sql -c "ALTER SYSTEM SET fencing.redis_port = $OTHER_PORT" -c "SELECT pg_reload_conf()" >/dev/null
expect "ALTER SYSTEM to the other Redis: renewed there" "$(renewed_across r:system)" "t|t|t"
sql -c "ALTER SYSTEM RESET fencing.redis_port" -c "SELECT pg_reload_conf()" >/dev/null

redis_start_pg "fencing.max_leases = 2" || exit 1
sess_open f
sess f "SELECT fenced_acquire('full:1') IS NOT NULL, fenced_acquire('full:2') IS NOT NULL;"
sess f "SELECT fenced_acquire('full:3') IS NOT NULL;"
expect "a full table: a plain acquisition goes on" "$S|$R" "00000|t"
sess f "SELECT count(*) FROM fenced_lock_holders;"
expect "unlisted" "$R" "2"
sess f "SELECT fenced_acquire('full:4', renew => true);"
expect "a full table: renew => true fails with TF109" "$S" "TF109"
expect "without taking the lock" "$(held full:4)" "0"
sess f "SELECT fenced_release('full:1');"
sess f "SELECT fenced_acquire('full:4', ttl => '1 s', renew => true) IS NOT NULL, pg_sleep(2.5), (SELECT renewing FROM fenced_lock_holders WHERE resource = 'full:4');"
expect "a slot freed by a release takes a renewed lease" "$S|$R" "00000|t||t"
sess_close f

harness_start_pg \
	"fencing.redis_host = '127.0.0.1'" "fencing.redis_port = $REDIS_PORT" || exit 1
sql -c "CREATE EXTENSION fencing" >/dev/null
sess_open n
sess n "SELECT fenced_acquire('r:nopreload', renew => true);"
expect "without preloading renew => true is refused" "$S" "TF108"
expect "before any lock is taken" "$(held r:nopreload)" "0"
sess n "SELECT fenced_acquire('r:nopreload', ttl => '30 s') IS NOT NULL; SELECT pid = pg_backend_pid(), resource, kind, renewing FROM fenced_lock_holders;"
expect "without preloading fenced_lock_holders shows this backend's leases" "$R" "t
t|r:nopreload|session|f"
sess_close n

checks_finish
