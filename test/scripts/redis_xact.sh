#!/usr/bin/env bash
# Transaction leases and the end of a session's leases, against a real
# redis-server: fenced_acquire_xact() declares its token for the
# transaction only and gives the lock back when the transaction ends
# (commit, rollback, error; outside a block at the end of the statement);
# a resource is held for the session or for a transaction, not both;
# fenced_extend and fenced_release work on a transaction lease; a
# savepoint rollback ends the leases taken inside it (1.3), not the
# others; PREPARE TRANSACTION is refused while one, or a
# transaction-local declaration, exists; DISCARD ALL ends every
# declaration and lease of the session; a backend that exits
# (pg_terminate_backend, disconnect) gives its locks back; a release that
# fails at DISCARD ALL or at exit is a WARNING, bounded by the command
# timeout; the release at a transaction's end is sent before COMMIT
# returns, its reply read at the session's next Redis call (a refusal a
# WARNING then).  Every "the lock key is gone" is read from Redis.
#
# Usage: bash test/scripts/redis_xact.sh   (prints ok/not ok lines; exit 0 = pass)
# test/run: quick
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../lib/redis_lib.sh"

harness_start_redis || harness_start_redis || exit 1
redis_start_pg || exit 1

# Wait up to 5 s for the lock keys of the resources given to be gone;
# prints how many are left.
wait_gone() {
	local left r
	for _ in $(seq 100); do
		left=0
		for r in "$@"; do
			left=$((left + $(held "$r")))
		done
		[ "$left" -eq 0 ] && break
		sleep 0.05
	done
	echo "$left"
}

sql -c "CREATE TABLE items (id int PRIMARY KEY, tok fence_token, val text)" \
	-c "CREATE TRIGGER fence BEFORE INSERT OR UPDATE OR DELETE ON items
		FOR EACH ROW EXECUTE FUNCTION fence_guard('tok', 'order:{id}')" \
	-c "INSERT INTO items VALUES (1, 1, 'a'), (2, 1, 'b')" >/dev/null

sess_open a
COUNTS="SELECT (SELECT count(*) FROM fenced_leases()) || '|' || (SELECT count(*) FROM fence_declared());"

# ------------------------------------------------ the transaction's end

sess a "BEGIN; SELECT fenced_acquire_xact('x:1') IS NOT NULL;"
expect "fenced_acquire_xact in a transaction returns a token" "$S|$R" "00000|t"
sess a "SELECT owner FROM fenced_leases();"
expect "the lock is held in Redis under the lease's owner" "$(rcli GET "$(lock_key x:1)")" "$R"
sess a "SELECT resource || '|' || is_local FROM fence_declared();"
expect "its token is declared for the transaction only" "$R" "x:1|true"
sess a "COMMIT;"
expect "COMMIT succeeds without a warning" "$S|$R" "00000|"
expect "after COMMIT the lock key is gone from Redis" "$(held x:1)" "0"
sess a "$COUNTS"
expect "and neither the lease nor the declaration is left" "$R" "0|0"

sess a "BEGIN; SELECT fenced_acquire_xact('x:2') IS NOT NULL; ROLLBACK;"
expect "after ROLLBACK the lock key is gone" "$S|$(held x:2)" "00000|0"

sess a "BEGIN; SELECT fenced_acquire_xact('x:3') IS NOT NULL; SELECT 1 / 0;"
expect "a transaction that fails ..." "$S" "22012"
expect "... gives the lock back at once, before its ROLLBACK" "$(held x:3)" "0"
sess a "ROLLBACK; $COUNTS"
expect "and keeps nothing" "$R" "0|0"

sess a "SELECT fenced_acquire_xact('x:4') IS NOT NULL;"
expect "outside a transaction block it returns a token ..." "$S|$R" "00000|t"
expect "... and gives the lock back at the end of the statement" "$(held x:4)" "0"
sess a "SELECT fenced_acquire_xact('order:1') AS tok \\; UPDATE items SET val = 'one string' WHERE id = 1 RETURNING tok;"
expect_match "statements sent as one query string share the lease: the UPDATE carries its token" \
	"$R" '^([0-9]+) \1$'
expect "and the lock is given back after them" "$(held order:1)" "0"
sess a "$COUNTS"
expect "nothing is left in the session" "$R" "0|0"

sess a "BEGIN; SELECT fenced_acquire_xact('x:5') IS NOT NULL, fenced_acquire_xact('x:6') IS NOT NULL, fenced_acquire_xact('x:7') IS NOT NULL;"
sess a "SELECT fenced_acquire_xact('x:5') IS NOT NULL; SELECT count(*) FROM fenced_leases();"
expect "taking a transaction lease again in the same transaction keeps one lease" "$R" $'t\n3'
sess a "COMMIT;"
expect "three transaction leases are given back together at COMMIT" \
	"$S|$R|$(held x:5)$(held x:6)$(held x:7)" "00000||000"

# The release at commit is sent by its SHA1; a server whose script cache
# was emptied meanwhile answers NOSCRIPT, and the release goes again with
# the script's text.
sess a "BEGIN; SELECT fenced_acquire_xact('x:5') IS NOT NULL, fenced_acquire_xact('x:6') IS NOT NULL;"
rcli SCRIPT FLUSH >/dev/null
sess a "COMMIT;"
expect "after SCRIPT FLUSH, COMMIT still gives both locks back, without a warning" \
	"$S|$R|$(held x:5)$(held x:6)" "00000||00"

# ---------------------------------------------- session or transaction

sess a "SELECT fenced_acquire('x:8') IS NOT NULL;"
sess a "SELECT owner FROM fenced_leases() WHERE resource = 'x:8';"
owner8=$R
sess a "BEGIN; SELECT fenced_acquire_xact('x:8');"
expect "fenced_acquire_xact of a resource the session holds with fenced_acquire: 55000" "$S" "55000"
expect_match "the message says so" "$R" \
	'resource "x:8" is already locked by this session with fenced_acquire\(\)'
sess a "ROLLBACK; SELECT count(*) FROM fence_declared() WHERE NOT is_local;"
expect "the session lease and its declaration are untouched" \
	"$(rcli GET "$(lock_key x:8)")|$R" "$owner8|1"
sess a "SELECT fenced_release('x:8');"
sess a "BEGIN; SELECT fenced_acquire_xact('x:9') IS NOT NULL; SELECT fenced_acquire('x:9');"
expect "fenced_acquire of a resource the transaction holds with fenced_acquire_xact: 55000" "$S" "55000"
expect_match "the message says so" "$R" \
	'resource "x:9" is already locked by this transaction with fenced_acquire_xact\(\)'
sess a "ROLLBACK;"
expect "and the transaction's lock is given back by its ROLLBACK" "$(held x:9)" "0"

# ---------------------------------- fenced_extend, fenced_release, savepoints

sess a "BEGIN; SELECT fenced_acquire_xact('x:10', ttl => '5 s') IS NOT NULL;"
sess a "SELECT fenced_extend('x:10', ttl => '60 s');"
expect "fenced_extend of a transaction lease: true" "$S|$R" "00000|t"
pttl=$(rcli PTTL "$(lock_key x:10)")
check "and the lock's TTL in Redis is the new one ($pttl ms)" test "$pttl" -gt 10000
sess a "SELECT fenced_release('x:10');"
expect "fenced_release of a transaction lease: true" "$S|$R" "00000|t"
sess a "$COUNTS"
expect "the lock key is gone, the lease and the declaration too" "$(held x:10)|$R" "0|0|0"
sess a "COMMIT;"
expect "and COMMIT has nothing left to give back (no warning)" "$S|$R" "00000|"

sess a "BEGIN; SELECT fenced_acquire_xact('order:1') IS NOT NULL; SAVEPOINT s; SELECT fenced_acquire_xact('order:2') IS NOT NULL; SELECT 1 / 0;"
sess a "ROLLBACK TO SAVEPOINT s;"
expect "ROLLBACK TO SAVEPOINT ends the lease taken after it (1.3), not the one taken before it" \
	"$S|$(held order:1)$(held order:2)" "00000|10"
sess a "$COUNTS"
expect "one lease and one declaration remain" "$R" "1|1"
sess a "UPDATE items SET val = 'after savepoint' WHERE id = 1;"
expect "the remaining declaration still stamps the transaction's tokenless writes" "$S" "00000"
sess a "UPDATE items SET val = 'after savepoint' WHERE id = 2;"
expect "the rolled-back one's resource has no token any more (TF002)" "$S" "TF002"
sess a "ROLLBACK;"
expect "ROLLBACK gives the other back" "$S|$(held order:1)$(held order:2)" "00000|00"

# ------------------------------------------------- PREPARE TRANSACTION

sess a "BEGIN; SELECT fenced_acquire_xact('x:13') IS NOT NULL; PREPARE TRANSACTION 'fx1';"
expect "PREPARE TRANSACTION while a transaction lease is held: 25000" "$S" "25000"
expect_match "the message says why" "$R" \
	'cannot PREPARE a transaction that holds a Redis lock taken by fenced_acquire_xact\(\).*resource "x:13"'
expect "the transaction is rolled back and its lock given back" \
	"$(held x:13)|$(sql -c "SELECT count(*) FROM pg_prepared_xacts")" "0|0"
sess a "BEGIN; SELECT fence_use('x:14', 5, is_local => true); PREPARE TRANSACTION 'fx2';"
expect "PREPARE TRANSACTION with a transaction-local declaration: 25000" "$S" "25000"
expect_match "the message says why" "$R" \
	'cannot PREPARE a transaction that has declared transaction-local tokens'
sess a "BEGIN; SELECT fenced_acquire_xact('x:15') IS NOT NULL; SELECT fenced_release('x:15'); SELECT fence_use('x:16', 5); PREPARE TRANSACTION 'fx3';"
expect "once the lease is released, and with session declarations only, PREPARE works" "$S" "00000"
sess a "COMMIT PREPARED 'fx3'; SELECT fence_use('x:16', NULL);"

# ------------------------------------------------------------ DISCARD ALL

sess a "SELECT fenced_acquire('x:17') IS NOT NULL, fenced_acquire('x:18') IS NOT NULL, fence_use('x:19', 7) IS NULL;"
sess a "BEGIN; DISCARD ALL;"
expect "DISCARD ALL in a transaction block is refused as before (25001)" "$S" "25001"
sess a "ROLLBACK; $COUNTS"
expect "and gives nothing back" "$R|$(held x:17)$(held x:18)" "2|3|11"
sess a "DISCARD ALL;"
expect "DISCARD ALL succeeds without a warning" "$S|$R" "00000|"
expect "it gives back the session's locks" "$(held x:17)$(held x:18)" "00"
sess a "$COUNTS"
expect "and ends every lease and declaration of the session" "$R" "0|0"
sess a "SELECT fenced_release('x:17');"
expect "fenced_release afterwards: false, nothing left" "$S|$R" "00000|f"

sess a "SELECT fenced_acquire('x:20') IS NOT NULL;"
redis_stop
sess a "DISCARD ALL;"
expect "DISCARD ALL with Redis stopped still succeeds" "$S" "00000"
expect_match "with a WARNING naming the lock and the failure" "$R" \
	'WARNING:  could not release the Redis lock on resource "x:20" DETAIL:  could not connect'
sess a "$COUNTS"
expect "and the session is clean" "$R" "0|0"
harness_redis_launch || exit 1

# -------------------------- the release at commit, its reply read later
#
# The releases of a transaction's end are sent, whole, before COMMIT
# returns, without waiting for the reply: the server runs them before any
# later command (the next holder's included), and their replies are read
# before the session's next Redis command, where a refusal is a WARNING.

sess_open b
taken=0
for _ in $(seq 20); do
	sess a "BEGIN; SELECT fenced_acquire_xact('x:40', wait => '0') IS NOT NULL; COMMIT;"
	[ "$R" = t ] && taken=$((taken + 1))
	sess b "SELECT fenced_acquire_xact('x:40', wait => '0') IS NOT NULL;"
	[ "$R" = t ] && taken=$((taken + 1))
done
expect "the next holder takes the lock at once after each COMMIT (40 takes, no wait)" "$taken" "40"

sess a "BEGIN; SELECT fenced_acquire_xact('x:42') IS NOT NULL;"
rcli ACL SETUSER default -eval -evalsha >/dev/null
sess a "COMMIT;"
refused_commit=$R
rcli ACL SETUSER default +eval +evalsha >/dev/null
expect "COMMIT succeeds while Redis refuses the release" "$S" "00000"
sess a "SELECT fenced_acquire_xact('x:43') IS NOT NULL;"
expect_match "the refusal is a WARNING naming the resource (at COMMIT or at the next call)" \
	"$refused_commit $R" 'WARNING:  could not release the Redis lock on resource "x:42" DETAIL:  The Redis server refused the fencing release script: NOPERM'
expect "the next call succeeds" "$S|$(printf '%s' "$R" | tail -1)" "00000|t"
expect "and the refused lock is left to its ttl" "$(held x:42)" "1"
rcli DEL "$(lock_key x:42)" >/dev/null

sess a "SET fencing.redis_command_timeout = '2s';"
sess a "BEGIN; SELECT fenced_acquire_xact('order:2') IS NOT NULL; UPDATE items SET val = 'frozen' WHERE id = 2;"
kill -STOP "$REDIS_PID"
sess a "COMMIT;"
commit_ms=$T
expect "COMMIT with Redis frozen succeeds, without a warning" "$S|$R" "00000|"
check "without waiting for Redis's reply (COMMIT took $commit_ms ms; command timeout 2 s)" \
	test "$commit_ms" -lt 1000
expect "the transaction's write is committed" \
	"$(sql -c "SELECT val FROM items WHERE id = 2")" "frozen"
kill -CONT "$REDIS_PID"
expect "the release runs when Redis wakes: the lock is gone" "$(wait_gone order:2)" "0"
sess a "$COUNTS"
expect "and the session keeps nothing of it" "$R" "0|0"

sess a "SET fencing.redis_command_timeout = '300ms';"
sess a "BEGIN; SELECT fenced_acquire_xact('x:21') IS NOT NULL;"
kill -STOP "$REDIS_PID"
sess a "SELECT 1 / 0;"
abort_ms=$T
expect "an abort with Redis frozen: the error alone, no warning" "$S|$R" "22012|ERROR:  division by zero"
check "bounded by the command timeout too ($abort_ms ms)" test "$abort_ms" -lt 1300
kill -CONT "$REDIS_PID"
expect "the release runs when Redis wakes" "$(wait_gone x:21)" "0"
sess a "ROLLBACK;"

# the next call reads the reply owed to the release at commit: with Redis
# frozen, within the command timeout, then over a new connection
sess a "BEGIN; SELECT fenced_acquire_xact('x:30') IS NOT NULL;"
kill -STOP "$REDIS_PID"
sess a "COMMIT;"
sess a "SELECT fenced_acquire_xact('x:31', wait => '0') IS NOT NULL;"
next_ms=$T
kill -CONT "$REDIS_PID"
expect "the next call with Redis frozen fails with TF101" "$S" "TF101"
check "within the command timeouts of the reply owed and of its own ($next_ms ms)" \
	test "$next_ms" -ge 250 -a "$next_ms" -lt 2500
expect "the release at commit ran when Redis woke" "$(wait_gone x:30)" "0"
sess a "SELECT fenced_acquire_xact('x:31', wait => '0') IS NOT NULL;"
expect "and the call after it, Redis awake, succeeds" "$S|$R" "00000|t"

# a user's long command timeout does not make a release where nothing may
# throw (interrupts held: no cancel, no pg_terminate_backend) last as long:
# fencing.redis_release_timeout, a superuser's setting, bounds it, the
# reply owed to the release at commit read within it
sess a "SET fencing.redis_command_timeout = '20s';"
sess a "SELECT fenced_acquire('x:32') IS NOT NULL;"
sess a "BEGIN; SELECT fenced_acquire_xact('x:29') IS NOT NULL;"
kill -STOP "$REDIS_PID"
sess a "COMMIT;"
sess a "DISCARD ALL;"
release_ms=$T
kill -CONT "$REDIS_PID"
expect_match "DISCARD ALL with Redis frozen and a 20 s command timeout: a WARNING" "$R" \
	'WARNING:  could not release the Redis lock on resource "x:32"'
check "bounded by fencing.redis_release_timeout, 2 s by default (DISCARD ALL took $release_ms ms)" \
	test "$release_ms" -ge 1500 -a "$release_ms" -lt 5000
expect "the release at commit ran when Redis woke" "$(wait_gone x:29)" "0"
rcli DEL "$(lock_key x:32)" >/dev/null
sess a "SET fencing.redis_command_timeout = '300ms';"

# an attempt whose outcome is unknown is given back with the transaction
sess a "BEGIN;"
kill -STOP "$REDIS_PID"
sess a "DO \$\$ BEGIN PERFORM fenced_acquire_xact('x:27', ttl => '60 s'); EXCEPTION WHEN SQLSTATE 'TF101' THEN RAISE NOTICE 'no answer'; END \$\$;"
kill -CONT "$REDIS_PID"
expect_match "an attempt with Redis frozen gets no answer (caught in the transaction)" "$R" "NOTICE:  no answer"
for _ in $(seq 40); do
	[ "$(held x:27)" = 1 ] && break
	sleep 0.05
done
expect "the attempt ran when Redis woke: the lock is taken" "$(held x:27)" "1"
sess a "COMMIT;"
expect "the transaction's end gives back the lock its unanswered attempt took" "$S|$(held x:27)" "00000|0"
sess a "SELECT fenced_release('x:27');"
expect "and nothing of it is kept for the session's later calls" "$S|$R" "00000|f"
sess a "RESET fencing.redis_command_timeout;"

# fenced_release of a session lease withdraws the session's declaration
# even while a transaction-local one exists for the resource
sess a "SELECT fenced_acquire('x:28') IS NOT NULL;"
sess a "BEGIN; SELECT fence_use('x:28', 5, is_local => true); SELECT fenced_release('x:28'); SELECT count(*) FROM fence_declared() WHERE NOT is_local; COMMIT;"
expect "fenced_release ends the session declaration under a local one" "$R" $'\nt\n0'

# --------------------------------------------------------- backend exit

sess_open c
sess c "SELECT fenced_acquire('x:22') IS NOT NULL, fenced_acquire('x:23') IS NOT NULL; SELECT pg_backend_pid();"
pid_c=$(printf '%s\n' "$R" | tail -1)
sess c "BEGIN; SELECT fenced_acquire_xact('x:24') IS NOT NULL;"
expect "a session with two session leases and a transaction lease" "$(held x:22)$(held x:23)$(held x:24)" "111"
sql -c "SELECT pg_terminate_backend($pid_c, 5000)" >/dev/null
expect "pg_terminate_backend: every lock key of the backend is gone from Redis" \
	"$(wait_gone x:22 x:23 x:24)" "0"
sess_close c

sql -c "SELECT fenced_acquire('x:25') IS NOT NULL" >/dev/null
expect "a backend that disconnects normally gives its lock back" "$(wait_gone x:25)" "0"

sql -c "SELECT count(fenced_acquire('many:' || i)) FROM generate_series(1, 500) AS i" >/dev/null
for _ in $(seq 100); do
	left=$(rcli --scan --pattern 'fencing:v1:{r:many:*}:lock' | wc -l)
	[ "$left" -eq 0 ] && break
	sleep 0.05
done
expect "500 leases are all given back at exit, sent together" "$left" "0"

sess_open d
sess d "SET fencing.redis_command_timeout = '300ms'; SELECT fenced_acquire('x:26') IS NOT NULL; SELECT pg_backend_pid();"
pid_d=$(printf '%s\n' "$R" | tail -1)
kill -STOP "$REDIS_PID"
t0=$(now_ms)
sess_close d
for _ in $(seq 200); do
	[ "$(sql -c "SELECT count(*) FROM pg_stat_activity WHERE pid = $pid_d")" = 0 ] && break
	sleep 0.02
done
exit_ms=$(($(now_ms) - t0))
kill -CONT "$REDIS_PID"
check "a backend exiting with Redis frozen is gone within the command timeout ($exit_ms ms)" \
	test "$exit_ms" -lt 1300

sess_close b
sess_close a
sql -c "DROP TABLE items" >/dev/null
checks_finish
