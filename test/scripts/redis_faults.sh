#!/usr/bin/env bash
# fenced_acquire() when Redis misbehaves: stopped, frozen (SIGSTOP),
# restarted on the same port, answering garbage, answering the wrong thing,
# answering more than fencing accepts (a huge bulk string, array or line),
# silent, refusing (OOM, READONLY); cancel and statement_timeout while
# waiting; and no hiredis memory or descriptors leaked on any of those
# paths.  Every error must come within the configured timeout, with a
# SQLSTATE of class TF (TF101 for connection trouble), and leave the
# backend able to work as soon as Redis is back.
#
# Only the redis-server PIDs this script started are ever signalled.
#
# Usage: bash test/scripts/redis_faults.sh   (prints ok/not ok lines; exit 0 = pass)
# test/run: quick
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../lib/redis_lib.sh"

harness_start_redis || exit 1
redis_start_pg "max_files_per_process = 64" || exit 1
sql <<'SQL' >/dev/null
CREATE TABLE items (id int, tok fence_token, val text);
CREATE TRIGGER fence BEFORE INSERT OR UPDATE OR DELETE ON items
	FOR EACH ROW EXECUTE FUNCTION fence_guard('tok', 'order:{id}');
SQL

sess_open a
sess a "SET fencing.redis_command_timeout = '500ms'; SET fencing.redis_connect_timeout = '500ms';"
sess a "SELECT pg_backend_pid();"
a_pid=$R

# backend_rss_kb / backend_fds: memory and open descriptors of session a
backend_rss_kb() { awk '/^VmRSS/ {print $2}' "/proc/$a_pid/status"; }
backend_fds() { ls "/proc/$a_pid/fd" | wc -l; }

# leak_loop CONDITION: 2000 failing acquisitions, caught; run once to warm
# up, then again measured.  Sets S, and LEAK_KB / LEAK_FDS to the growth of
# the measured run.
leak_loop() {
	local sql="DO \$\$ BEGIN FOR i IN 1..2000 LOOP BEGIN PERFORM fenced_acquire('leak'); EXCEPTION WHEN $1 THEN NULL; END; END LOOP; END \$\$;"
	local rss0 fds0
	sess a "$sql"
	rss0=$(backend_rss_kb)
	fds0=$(backend_fds)
	sess a "$sql"
	LEAK_KB=$(($(backend_rss_kb) - rss0))
	LEAK_FDS=$(($(backend_fds) - fds0))
}

# --------------------------------------------------------------- stopped

# (a resource of its own: the acquisition raises its mark, and the stale
# check of the write below must not be what fails)
sess a "SELECT fenced_acquire('probe:1');"
expect_match "with Redis up the session connects" "$R" '^[0-9]+$'
sess a "SELECT fenced_release('probe:1');"
redis_stop
sess a "BEGIN; INSERT INTO items VALUES (1, 5, 'must not stay'); SELECT fenced_acquire('order:1');"
expect "Redis stopped: SQLSTATE TF101" "$S" "TF101"
expect_match "the message names host and port" "$R" \
	"ERROR: +could not connect to Redis server at \"127.0.0.1:$REDIS_PORT\": Connection refused"
check "the error comes at once (${T} ms)" test "$T" -lt 1000
sess a "INSERT INTO items VALUES (1, 6, 'nor this');"
expect "the transaction is aborted" "$S" "25P02"
sess a "COMMIT;"
sess a "SELECT count(*), fence_mark('order:1') IS NULL FROM items;"
expect "nothing was written, no mark moved" "$R" "0|t"

sess a "SET fencing.redis_host = '$REDIS_SOCKET'; SELECT fenced_acquire('order:1');"
expect "Redis stopped, Unix socket: SQLSTATE TF101" "$S" "TF101"
expect_match "the message names the socket" "$R" \
	"could not connect to Redis server at \"$REDIS_SOCKET\": (No such file or directory|Connection refused)"
sess a "RESET fencing.redis_host;"

# ------------------------------------------------ restarted on the same port

harness_redis_launch || exit 1
sess a "SELECT fenced_acquire('order:2');"
expect_match "once Redis is back the same session connects again" "$R" '^[0-9]+$'
redis_stop
harness_redis_launch || exit 1
sess a "SELECT fenced_acquire('order:3');"
expect_match "a connection the restart closed is replaced without an error" "$S|$R" '^00000\|[0-9]+$'

# ----------------------------------------------------- frozen with SIGSTOP

sess a "SELECT fenced_acquire('order:4', ttl => '2 s');"
t_before=$R
sess a "SELECT pg_backend_pid();"
pid_a=$R
counter_before=$(rcli GET 'fencing:v1:{r:order:5}:token')
kill -STOP "$REDIS_PID"
sess a "SELECT fenced_acquire('order:5', ttl => '2 s');"
expect "Redis frozen: SQLSTATE TF101" "$S" "TF101"
expect_match "timed out, naming host and port" "$R" \
	"timed out waiting for a reply from Redis server at \"127.0.0.1:$REDIS_PORT\""
check "within the command timeout of 500 ms (${T} ms)" test "$T" -ge 450 -a "$T" -lt 1500
sess a "SELECT fenced_acquire('order:5', ttl => '2 s');"
expect "still frozen: a new connection times out too" "$S" "TF101"
kill -CONT "$REDIS_PID"
# the attempts sent while Redis was frozen run when it wakes; read what
# they left before the session's next call can change it
for _ in $(seq 40); do
	late_counter=$(rcli GET 'fencing:v1:{r:order:5}:token')
	[ -n "$late_counter" ] && break
	sleep 0.05
done
late_owner=$(rcli GET 'fencing:v1:{r:order:5}:lock')
expect "before the freeze no token of order:5 had been issued" "$counter_before" ""
check "the late attempts did run when Redis woke: they issued a token (counter ${late_counter:-absent})" \
	test -n "$late_counter"
expect_match "and one of them took the lock, under an owner of this session" "$late_owner" \
	"^pg:[0-9]+:$pid_a:"
sess a "SELECT fenced_acquire('order:5', ttl => '2 s');"
token=$R
counter=$(rcli GET 'fencing:v1:{r:order:5}:token')
expect "after SIGCONT the same session gets a token" "$S" "00000"
expect "the token is the counter's latest value" "$token" "$counter"
check "above the late attempts' token ($token > ${late_counter:-absent})" \
	test "$token" -gt "${late_counter:-0}"
sess a "SELECT owner FROM fenced_leases() WHERE resource = 'order:5';"
expect "and the lock is the session's, taken over from its own late attempts" \
	"$(rcli GET 'fencing:v1:{r:order:5}:lock')" "$R"
sess a "SELECT fenced_acquire('order:4') > $t_before;"
expect "the backend is healthy: its other leases still work" "$R" "t"

# ------------------------------------------- interrupts while waiting on Redis

sess a "SET fencing.redis_command_timeout = '10s'; SET statement_timeout = '300ms';"
kill -STOP "$REDIS_PID"
sess a "SELECT fenced_acquire('order:6');"
kill -CONT "$REDIS_PID"
expect "statement_timeout interrupts a command Redis does not answer" "$S" "57014"
check "at statement_timeout, not at the command timeout (${T} ms)" test "$T" -lt 1500
sess a "RESET statement_timeout; SET fencing.redis_command_timeout = '500ms'; SELECT fenced_acquire('order:7');"
expect "and the next call works on a new connection" "$S" "00000"

rcli SET 'fencing:v1:{r:busy}:lock' someone-else PX 60000 >/dev/null
sess a "SET statement_timeout = '300ms'; SELECT fenced_acquire('busy', wait => '30 s');"
expect "statement_timeout cancels a wait for a busy lock" "$S" "57014"
check "promptly (${T} ms)" test "$T" -lt 1500
sess a "RESET statement_timeout;"

out=$SESS_DIR/cancel.out
PGAPPNAME=fenced_waiter sql -c "SELECT fenced_acquire('busy', wait => '30 s')" >"$out" 2>&1 &
bg=$!
sleep 0.5
# PostgreSQL 17 and later name the extension's waits (src/core/pg_compat.h):
# the waiter is mostly in its pause, between short Redis round trips
# (FencingRedisIO), so a few samples are taken.
if [ "$(sql -c 'SHOW server_version_num')" -ge 170000 ]; then want=FencingLockBusy; else want=Extension; fi
for _ in $(seq 40); do
	wait_event=$(sql -c "SELECT wait_event_type || ':' || wait_event FROM pg_stat_activity WHERE application_name = 'fenced_waiter'")
	[ "$wait_event" = "Extension:$want" ] && break
	sleep 0.025
done
expect "a waiting acquisition shows as an Extension wait, $want" "$wait_event" "Extension:$want"
t0=$(now_ms)
sql -c "SELECT pg_cancel_backend(pid) FROM pg_stat_activity WHERE application_name = 'fenced_waiter'" >/dev/null
wait $bg
elapsed=$(($(now_ms) - t0))
expect_match "pg_cancel_backend ends the wait" "$(cat "$out")" "canceling statement due to user request"
check "promptly (${elapsed} ms)" test "$elapsed" -lt 1500
rcli DEL 'fencing:v1:{r:busy}:lock' >/dev/null

# ------------------------------------------------------------ refusals

rcli CONFIG SET maxmemory-policy noeviction >/dev/null
rcli CONFIG SET maxmemory 1 >/dev/null
sess a "SELECT fenced_acquire('order:8');"
rcli CONFIG SET maxmemory 0 >/dev/null
expect "Redis out of memory: SQLSTATE TF104" "$S" "TF104"
expect_match "naming host, port and Redis's reason" "$R" \
	"Redis server at \"127.0.0.1:$REDIS_PORT\" refused fencing acquire script.*DETAIL: +OOM"
sess a "SELECT fenced_acquire('order:8');"
expect_match "the next call works once Redis has room" "$S|$R" '^00000\|[0-9]+$'

start_replica
sess a "SET fencing.redis_port = $REPLICA_PORT; SELECT fenced_acquire('order:9');"
expect "a read-only replica: SQLSTATE TF102" "$S" "TF102"
expect_match "with the reason" "$R" "DETAIL: +READONLY"
sess a "RESET fencing.redis_port; SELECT fenced_acquire('order:9');"
expect_match "pointed back at the primary the session works" "$S|$R" '^00000\|[0-9]+$'

# Redis at maxclients greets a new connection with an error and closes it;
# one connection kept open (h) holds the last slot and lifts the limit.
exec {h}<>"/dev/tcp/127.0.0.1/$REDIS_PORT"
rcli CONFIG SET maxclients 1 >/dev/null
sess a "SET fencing.redis_port = $REDIS_PORT; SELECT fenced_acquire('order:12');"
printf 'CONFIG SET maxclients 10000\r\n' >&"$h"
read -r -t 5 lifted <&"$h"
exec {h}>&-
expect "Redis at maxclients: SQLSTATE TF102 (retry soon)" "$S" "TF102"
expect_match "with the reason and a hint" "$R" "DETAIL: +ERR max number of clients reached.*HINT: +Redis has reached its maxclients limit"
expect "the limit is lifted" "${lifted%$'\r'}" "+OK"
sess a "SELECT fenced_acquire('order:12');"
expect_match "and the session works again" "$S|$R" "^00000\|[1-9][0-9]*$"

# --------------------------------------- garbage, wrong answers, silence

FAKE=$SESS_DIR/fake_redis.py
cat >"$FAKE" <<'PY'
# A server on 127.0.0.1 or a Unix socket that answers every read like a
# broken Redis.
import os, socket, sys, threading
mode, where = sys.argv[1], sys.argv[2]
if where.startswith("/"):
    srv = socket.socket(socket.AF_UNIX)
    srv.bind(where)
    os.chmod(where, 0o777)
else:
    srv = socket.socket()
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind(("127.0.0.1", int(where)))
srv.listen(64)
# Replies at and over fencing's caps (32 MB, 1,048,576 array elements,
# lines of 64 kB); "stream" ones go on until the client hangs up.
answer = {"garbage": lambda: b"HTTP/1.1 400 Bad Request\r\n\r\n", "status": lambda: b"+OK\r\n",
          "resp3": lambda: b"*2\r\n:1\r\n,1.5\r\n",
          "silent": lambda: b"",
          "hugearray": lambda: b"*2147483647\r\n", "overarray": lambda: b"*1048577\r\n",
          "bigarray": lambda: b"*1048576\r\n" + b":1\r\n" * 1048576,
          "bigbulk": lambda: b"$31457280\r\n" + b"x" * 31457280 + b"\r\n"}.get(mode, lambda: b"")()
stream = {"hugebulk": b"$1181116006\r\n", "longline": b"+"}.get(mode)
def serve(conn):
    try:
        while conn.recv(65536):
            if stream:
                conn.sendall(stream)
                while True:
                    conn.sendall(b"x" * 65536)
            if answer:
                conn.sendall(answer)
    except OSError:
        pass
    finally:
        conn.close()
while True:
    conn, _ = srv.accept()
    threading.Thread(target=serve, args=(conn,), daemon=True).start()
PY
# start_fake MODE: on a free TCP port
start_fake() {
	local try
	for try in 1 2 3 4 5; do
		FAKE_PORT=$(harness_free_port)
		python3 "$FAKE" "$1" "$FAKE_PORT" 2>/dev/null &
		FAKE_PID=$!
		HARNESS_PIDS+=("$FAKE_PID")
		for _ in $(seq 100); do
			kill -0 "$FAKE_PID" 2>/dev/null || break
			(exec 3<>"/dev/tcp/127.0.0.1/$FAKE_PORT") 2>/dev/null && return 0
			sleep 0.05
		done
	done
	return 1
}
stop_fake() { kill "$FAKE_PID" 2>/dev/null; wait "$FAKE_PID" 2>/dev/null; }

# start_fake_unix MODE: on FAKE_SOCKET; the leak loops use it, since
# thousands of TCP connections would leave thousands of TIME_WAITs behind
FAKE_SOCKET=$SESS_DIR/fake.sock
start_fake_unix() {
	rm -f "$FAKE_SOCKET"
	python3 "$FAKE" "$1" "$FAKE_SOCKET" &
	FAKE_PID=$!
	HARNESS_PIDS+=("$FAKE_PID")
	for _ in $(seq 100); do
		[ -S "$FAKE_SOCKET" ] && return 0
		sleep 0.05
	done
	return 1
}

start_fake garbage
sess a "SET fencing.redis_port = $FAKE_PORT; SELECT fenced_acquire('order:10');"
expect "a server answering garbage: SQLSTATE TF105" "$S" "TF105"
expect_match "unexpected reply, naming host and port, with hiredis's reason" "$R" \
	"unexpected reply from Redis server at \"127.0.0.1:$FAKE_PORT\".*DETAIL: +Protocol error"
stop_fake

# A RESP3 type, which hiredis 1.x parses and no command asks for: a
# protocol error, as with hiredis 0.14, which does not know the type.
start_fake resp3
sess a "SET fencing.redis_port = $FAKE_PORT; SELECT fenced_acquire('order:10');"
expect "a server answering a RESP3 double inside an array: SQLSTATE TF105" "$S" "TF105"
expect_match "unexpected reply, naming host and port" "$R" \
	"unexpected reply from Redis server at \"127.0.0.1:$FAKE_PORT\""
stop_fake

# Replies over the caps are refused as soon as they cross them, before
# they are allocated whole: the old code answered a 1.1 GB bulk string with
# "invalid memory alloc request size" (XX000) and a "*2147483647" header
# with an 11 s uninterruptible calloc.  (A generous command timeout: the
# fake server takes its time to send 30 MB on a loaded machine.)
sess a "SET fencing.redis_command_timeout = '10s';"
start_fake hugebulk
sess a "SET fencing.redis_port = $FAKE_PORT; SELECT fenced_acquire('order:10');"
expect "a 1.1 GB bulk string: SQLSTATE TF105" "$S" "TF105"
expect_match "a reply too large, naming the limit" "$R" \
	"reply from Redis server at \"127.0.0.1:$FAKE_PORT\" is too large.*DETAIL: +The reply is longer than 33554432 bytes"
check "refused once 32 MB have come (${T} ms)" test "$T" -lt 5000
stop_fake

for fake in hugearray overarray; do
	start_fake $fake
	sess a "SET fencing.redis_port = $FAKE_PORT; SELECT fenced_acquire('order:10');"
	expect "an array header of $(python3 -c "print({'hugearray': 2147483647, 'overarray': 1048577}['$fake'])") elements: SQLSTATE TF105" "$S" "TF105"
	expect_match "a reply too large, naming the limit" "$R" \
		"is too large.*DETAIL: +The reply has more than 1048576 array elements"
	check "refused at once (${T} ms)" test "$T" -lt 1000
	stop_fake
done

start_fake longline
sess a "SET fencing.redis_port = $FAKE_PORT; SELECT fenced_acquire('order:10');"
expect "a status line that never ends: SQLSTATE TF105" "$S" "TF105"
expect_match "a reply too large, naming the limit" "$R" \
	"is too large.*DETAIL: +A status, error, integer or length line of the reply is longer than 65536 bytes"
check "refused at once (${T} ms)" test "$T" -lt 1000
stop_fake

# Replies just under the caps are read (and then refused for their shape).
for fake in bigbulk bigarray; do
	start_fake $fake
	sess a "SET fencing.redis_port = $FAKE_PORT; SELECT fenced_acquire('order:10');"
	expect_match "$fake, under the caps, is read whole: only its shape is wrong" "$S $R" \
		"^TF105 .*fencing acquire script answered with an? (string|array) instead of"
	stop_fake
done
sess a "SET fencing.redis_command_timeout = '500ms';"

start_fake status
sess a "SET fencing.redis_port = $FAKE_PORT; SELECT fenced_acquire('order:10');"
expect "a server answering the wrong thing: SQLSTATE TF105" "$S" "TF105"
expect_match "says what came instead" "$R" "fencing acquire script answered with a status instead of"
stop_fake

start_fake_unix status
sess a "SET fencing.redis_host = '$FAKE_SOCKET';"
leak_loop "SQLSTATE 'TF105'"
expect "2000 wrong answers, caught each time" "$S" "00000"
expect "leave no descriptor open" "$LEAK_FDS" "0"
check "and no memory behind (RSS grew ${LEAK_KB} kB)" test "$LEAK_KB" -lt 512
stop_fake

start_fake silent
sess a "RESET fencing.redis_host; SET fencing.redis_port = $FAKE_PORT; SET fencing.redis_command_timeout = '300ms'; SELECT fenced_acquire('order:10');"
expect "a server that never answers: SQLSTATE TF101" "$S" "TF101"
check "within the command timeout (${T} ms)" test "$T" -lt 1500
stop_fake

start_fake_unix silent
sess a "SET fencing.redis_host = '$FAKE_SOCKET'; SET fencing.redis_command_timeout = '1ms';"
# Timed-out connections pile up in the silent server faster than it can
# take them on a loaded machine, so some attempts find its backlog full
# and fail to connect instead of timing out: both are TF101.
leak_loop "SQLSTATE 'TF101'"
expect "2000 timeouts, caught each time" "$S" "00000"
expect "leave no descriptor open" "$LEAK_FDS" "0"
check "and no memory behind (RSS grew ${LEAK_KB} kB)" test "$LEAK_KB" -lt 512
stop_fake

sess a "SET fencing.redis_host = '$SESS_DIR/no.sock'; SET fencing.redis_command_timeout = '500ms';"
leak_loop "SQLSTATE 'TF101'"
expect "2000 refused connections, caught each time (max_files_per_process = 64: a leaked reservation would end this)" "$S" "00000"
expect "leave no descriptor open" "$LEAK_FDS" "0"
check "and no memory behind (RSS grew ${LEAK_KB} kB)" test "$LEAK_KB" -lt 512

rcli CONFIG SET maxmemory 1 >/dev/null
sess a "SET fencing.redis_host = '$REDIS_SOCKET';"
leak_loop "SQLSTATE 'TF104'"
rcli CONFIG SET maxmemory 0 >/dev/null
expect "2000 refusals by Redis, caught each time" "$S" "00000"
expect "leave no descriptor open" "$LEAK_FDS" "0"
check "and no memory behind (RSS grew ${LEAK_KB} kB)" test "$LEAK_KB" -lt 512

sess a "RESET fencing.redis_host; RESET fencing.redis_port; SELECT fenced_acquire('order:11');"
expect_match "after all that the session still works" "$S|$R" '^00000\|[0-9]+$'

sess_close a
checks_finish
