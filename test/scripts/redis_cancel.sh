#!/usr/bin/env bash
# A Redis call answers to pg_cancel_backend, statement_timeout and
# pg_terminate_backend well before its Redis timeouts (60 s here) in every
# phase of the exchange, and shows as an Extension wait event while it
# waits (FencingRedisIO on PostgreSQL 17 and later):
#
#   connect  a listener whose backlog is full (a frozen redis-server with
#            tcp-backlog 0 and one connection already queued): the SYN
#            goes unanswered;
#   send     a command larger than the socket buffers (AUTH with a 1 MB
#            password, of an ACL user) to a frozen redis-server over its
#            Unix socket;
#   receive  a small command to a frozen redis-server.
#
# And a configuration reload (pg_reload_conf(), SIGHUP to every backend)
# in the middle of each phase does not break the call: it completes once
# Redis wakes up.
#
# Only the redis-server PIDs this script started are ever signalled.
#
# Usage: bash test/scripts/redis_cancel.sh   (prints ok/not ok lines; exit 0 = pass)
# test/run: quick
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../lib/redis_lib.sh"

# The bound every interrupt must beat, in ms, against Redis timeouts of 60 s.
PROMPT_MS=2000

harness_start_redis || exit 1
redis_start_pg || exit 1
harness_tmpdir WORK

# A second redis-server whose listen backlog holds one connection.
BL_PORT=$(harness_free_port)
redis-server --bind 127.0.0.1 --port "$BL_PORT" --tcp-backlog 0 --dir "$REDIS_DIR" \
	--dbfilename backlog.rdb --save '' --appendonly no --daemonize no \
	--logfile "$REDIS_DIR/backlog.log" &
BL_PID=$!
HARNESS_PIDS+=("$BL_PID")
for _ in $(seq 100); do
	redis-cli -p "$BL_PORT" ping >/dev/null 2>&1 && break
	sleep 0.05
done

# backlog_is_full: a new TCP connection to it stays unanswered for 300 ms
backlog_is_full() {
	python3 - "$BL_PORT" <<'PY'
import select, socket, sys
s = socket.socket()
s.setblocking(False)
try:
    s.connect(("127.0.0.1", int(sys.argv[1])))
except BlockingIOError:
    pass
_, w, _ = select.select([], [s], [], 0.3)
sys.exit(0 if not w else 1)
PY
}

# Freeze it and fill its backlog with one connection that nobody accepts.
kill -STOP "$BL_PID"
exec {filler}<>"/dev/tcp/127.0.0.1/$BL_PORT"
check "the listener's backlog is full (connects hang)" backlog_is_full

# A password larger than any socket buffer between the backend and Redis.
LONG_PW_LEN=1048576
LONG_PW_SQL="SELECT set_config('fencing.redis_password', repeat('p', $LONG_PW_LEN), false) IS NOT NULL;"

# phase_sql PHASE: what points a session at the server of that phase
phase_sql() {
	case $1 in
		connect) echo "SET fencing.redis_port = $BL_PORT;" ;;
		send) printf '%s\n' "SET fencing.redis_host = '$REDIS_SOCKET';" \
			"SET fencing.redis_username = 'big';" "$LONG_PW_SQL" ;;
		receive) echo "SELECT 1;" ;;
	esac
}

# start_call NAME SQL...: run the statements, one per argument, in a new
# background session named NAME, the Redis timeouts at 60 s; sets BG (the
# psql PID), OUT (its output file) and T0 (start, ms).
start_call() {
	local name=$1
	shift
	OUT=$WORK/$name.out
	T0=$(now_ms)
	printf '%s\n' "\\set SHOW_CONTEXT never" \
		"SET fencing.redis_connect_timeout = '60s';" \
		"SET fencing.redis_command_timeout = '60s';" "$@" |
		PGAPPNAME=$name psql -X -q -A -t -v ON_ERROR_STOP=1 >"$OUT" 2>&1 &
	BG=$!
	HARNESS_PIDS+=("$BG")
}

# await_wait NAME: wait until session NAME is waiting on its Redis socket,
# and set WAIT_EVENT to its wait event as pg_stat_activity shows it: on
# PostgreSQL 17 and later the extension's own FencingRedisIO
# (src/core/pg_compat.h), before 17 the generic Extension.
await_wait() {
	local i want=Extension:Extension
	[ "$(sql -c 'SHOW server_version_num')" -ge 170000 ] && want=Extension:FencingRedisIO
	for i in $(seq 200); do
		WAIT_EVENT=$(sql -c "SELECT wait_event_type || ':' || wait_event FROM pg_stat_activity WHERE application_name = '$1' AND query LIKE '%fenced_acquire%'")
		[ "$WAIT_EVENT" = "$want" ] && return 0
		sleep 0.05
	done
	return 1
}

# end_call: wait (at most 70 s) for the background session to end; sets
# T1 (end, ms) and OUTPUT.
end_call() {
	local i
	for i in $(seq 7000); do
		kill -0 "$BG" 2>/dev/null || break
		sleep 0.01
	done
	wait "$BG" 2>/dev/null
	T1=$(now_ms)
	OUTPUT=$(cat "$OUT")
}

LATENCIES=()

# interrupt PHASE HOW: start a call in PHASE, interrupt it with HOW, and
# check that it ends at once with the interrupt's own error.
interrupt() {
	local phase=$1 how=$2 name="${1}_$2" extra=() want elapsed
	[ "$how" = statement_timeout ] && extra=("SET statement_timeout = '500ms';")
	start_call "$name" "$(phase_sql "$phase")" "${extra[@]}" "SELECT fenced_acquire('$name');"
	case $how in
		cancel | terminate)
			if await_wait "$name"; then ok "$phase: the waiting call shows as an Extension wait event ($WAIT_EVENT)"; else
				not_ok "$phase: the waiting call shows as an Extension wait event (saw '$WAIT_EVENT')"
			fi
			sleep 0.2
			T0=$(now_ms)
			sql -c "SELECT pg_${how}_backend(pid) FROM pg_stat_activity WHERE application_name = '$name'" >/dev/null
			;;
	esac
	end_call
	elapsed=$((T1 - T0))
	case $how in
		cancel) want="canceling statement due to user request" ;;
		terminate) want="terminating connection due to administrator command" ;;
		statement_timeout) want="canceling statement due to statement timeout" ;;
	esac
	expect_match "$phase: $how ends the call with its own error" "$OUTPUT" "ERROR: +$want|FATAL: +$want"
	check "$phase: $how ends it well before the 60 s timeout ($elapsed ms after the $([ "$how" = statement_timeout ] && echo "call began, at a statement_timeout of 500 ms" || echo signal))" \
		test "$elapsed" -lt "$PROMPT_MS"
	LATENCIES+=("$phase/$how=${elapsed}ms")
}

kill -STOP "$REDIS_PID"
for phase in connect send receive; do
	for how in cancel statement_timeout terminate; do
		interrupt "$phase" "$how"
	done
done
echo "# latencies: ${LATENCIES[*]}"

# ------------------------------------------------------ reload mid-call

# reload_during NAME: once session NAME waits, reload the configuration
# (SIGHUP to every backend) and give the signal time to arrive.
reload_during() {
	await_wait "$1"
	sql -c "SELECT pg_reload_conf()" >/dev/null
	sleep 0.3
}

# receive: Redis wakes after the reload and answers
start_call reload_receive "SELECT fenced_acquire('reload:receive');"
reload_during reload_receive
kill -CONT "$REDIS_PID"
end_call
expect_match "receive: a reload does not break the call, which gets its token once Redis wakes" "$OUTPUT" "^[1-9][0-9]*$"

# connect: the backlog drains after the reload, and the SYN sent again
# (1 s, then 3 s after the first) is answered
start_call reload_connect "$(phase_sql connect)" "SELECT fenced_acquire('reload:connect');"
reload_during reload_connect
kill -CONT "$BL_PID"
end_call
expect_match "connect: a reload does not break the connect, which completes once the backlog drains" "$OUTPUT" "^[1-9][0-9]*$"
exec {filler}>&-

# send: an ACL user has the long password (a client that has not
# authenticated may not send Redis more than 16 kB at once, so the default
# user would not do); the server reads it after the reload
python3 - "$REDIS_SOCKET" "$LONG_PW_LEN" <<'PY'
import socket, sys
s = socket.socket(socket.AF_UNIX)
s.connect(sys.argv[1])
args = [b"ACL", b"SETUSER", b"big", b"on", b">" + b"p" * int(sys.argv[2]), b"~*", b"+@all"]
s.sendall(b"*%d\r\n" % len(args) + b"".join(b"$%d\r\n%s\r\n" % (len(a), a) for a in args))
assert s.recv(100).startswith(b"+OK")
PY
kill -STOP "$REDIS_PID"
start_call reload_send "$(phase_sql send)" "SELECT fenced_acquire('reload:send');"
reload_during reload_send
kill -CONT "$REDIS_PID"
end_call
expect_match "send: a reload does not break a send in progress, which completes once Redis reads" "$OUTPUT" "^t [1-9][0-9]*$"

checks_finish
