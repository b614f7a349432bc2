#!/usr/bin/env bash
# Hostile and slow servers on every kind of connection the client makes
# (a data server, a Sentinel, the Sentinel watch, a Cluster node), played
# by test/lib/fake_redis.py:
#
#   caps       a "*2147483647" array header is refused at once, memory
#              bounded, on each kind of connection;
#   redirects  an address a server hands out (-MOVED, -ASK, CLUSTER
#              SLOTS, a Sentinel's answer) is checked like a setting: no
#              Unix socket path, no host name unless
#              fencing.redis_discovered_host_names allows it; a refused
#              one is TF105 and nothing is sent to it;
#   deadlines  a release after commit ends within
#              fencing.redis_release_timeout, slow AUTH and SELECT
#              included, in each mode, and its NOSCRIPT resend too;
#              Sentinel discovery and ROLE share one deadline; a waiter's
#              subscription ends by the waiter's deadline, and one that
#              fails is tried 3 times per acquisition, not every 200 ms;
#   codes      a Sentinel that does not speak RESP is TF105; a redirect
#              to port 0 or 65536 is an address refused (TF105);
#   counter    tokens at or below the mark are TF121 at once;
#   sent       an attempt cancelled before its command was sent leaves no
#              owner behind that may hold the lock.
#
# Only the processes this script started are ever signalled.
#
# Usage: bash test/scripts/redis_hostile.sh   (prints ok/not ok lines; exit 0 = pass)
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../lib/redis_lib.sh"

FAKE_PY=$FENCING_TOP/test/lib/fake_redis.py

harness_start_redis || exit 1
redis_start_pg || exit 1

sess_open a
sess a "SET statement_timeout = '500ms'; SELECT pg_backend_pid();"
a_pid=$R
sess a "SELECT fenced_acquire('warm:1'); SELECT fenced_release('warm:1');"

# fake_start ARGS...: a fake server (test/lib/fake_redis.py ARGS) on a
# free TCP port; sets FAKE_PORT, and FAKE_LOG, the file it logs
# connections and commands to.
FAKE_PIDS=()
fake_start() {
	local try
	FAKE_LOG=$SESS_DIR/fake-${#FAKE_PIDS[@]}.log
	for try in 1 2 3 4 5; do
		FAKE_PORT=$(harness_free_port)
		python3 "$FAKE_PY" "$FAKE_PORT" --log "$FAKE_LOG" "$@" 2>>"$SESS_DIR/fake.err" &
		FAKE_PIDS+=("$!")
		HARNESS_PIDS+=("$!")
		for _ in $(seq 100); do
			kill -0 "$!" 2>/dev/null || break
			if (exec 3<>"/dev/tcp/127.0.0.1/$FAKE_PORT") 2>/dev/null; then
				sleep 0.1
				: >"$FAKE_LOG"	# the probe's connection
				return 0
			fi
			sleep 0.05
		done
	done
	return 1
}

# fake_stop_all: stop every fake server started so far.
fake_stop_all() {
	local pid
	for pid in "${FAKE_PIDS[@]}"; do kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null; done
	FAKE_PIDS=()
}

# vm_peak: the most virtual memory session a's backend ever had, in kB.
vm_peak() { awk '/^VmPeak/ {print $2}' "/proc/$a_pid/status"; }

# ------------------------------------------------------------------- caps

# refused_at_once DESCRIPTION SETTINGS: with SETTINGS, fenced_acquire()
# gets a "*2147483647" header on the connection under test: TF105 within
# 500 ms (well before the 1 s command timeout), and the backend's VmPeak grows by less than 100 MB.
refused_at_once() {
	local peak0
	peak0=$(vm_peak)
	sess a "$2"
	sess a "SELECT fenced_acquire('cap:1');"
	expect "$1: SQLSTATE TF105" "$S" "TF105"
	expect_match "$1: named as too large" "$R" "too large.*The reply has more than 1048576 array elements"
	check "$1: refused within 500 ms ($T ms)" test "$T" -lt 500
	check "$1: memory bounded (VmPeak grew by $(($(vm_peak) - peak0)) kB)" \
		test $(($(vm_peak) - peak0)) -lt 102400
	sess a "RESET fencing.redis_port; RESET fencing.redis_sentinels; RESET fencing.redis_sentinel_master; RESET fencing.redis_cluster_nodes;"
	sess a "SELECT fenced_acquire('cap:2'); SELECT fenced_release('cap:2');"
	expect_match "$1: the session works again" "$S|$R" '^00000\|'
}

fake_start --eval '*2147483647'
refused_at_once "a data server" "SET fencing.redis_port = $FAKE_PORT;"

fake_start --sentinel huge
refused_at_once "a Sentinel" \
	"SET fencing.redis_sentinels = '127.0.0.1:$FAKE_PORT'; SET fencing.redis_sentinel_master = 'm';"

fake_start --sentinel "127.0.0.1:$REDIS_PORT" --subscribe huge
refused_at_once "the Sentinel watch" \
	"SET fencing.redis_sentinels = '127.0.0.1:$FAKE_PORT'; SET fencing.redis_sentinel_master = 'm';"

fake_start --slots huge
refused_at_once "a Cluster node" "SET fencing.redis_cluster_nodes = '127.0.0.1:$FAKE_PORT';"
fake_stop_all

# -------------------------------------------------------------- redirects

# A Unix socket that logs whatever connects to it.
TRAP_SOCKET=$SESS_DIR/x.sock
TRAP_LOG=$SESS_DIR/trap.log
: >"$TRAP_LOG"
python3 "$FAKE_PY" "$TRAP_SOCKET" --log "$TRAP_LOG" 2>>"$SESS_DIR/fake.err" &
FAKE_PIDS+=("$!")
HARNESS_PIDS+=("$!")
for _ in $(seq 100); do [ -S "$TRAP_SOCKET" ] && break; sleep 0.05; done

# redirected DESCRIPTION FAKE-ARGS...: a Cluster node answers the script
# with a redirect (or its map) named by FAKE-ARGS; the acquisition is
# TF105, and nothing reaches the trap.
redirected() {
	local desc=$1
	shift
	fake_start --slots self "$@"
	sess a "SET fencing.redis_cluster_nodes = '127.0.0.1:$FAKE_PORT'; SET fencing.redis_password = 'node-secret'; SELECT fenced_acquire('redir:1');"
	expect "$desc: SQLSTATE TF105" "$S" "TF105"
	expect_match "$desc: the message names the address" "$R" "$REFUSED_TEXT"
	expect "$desc: nothing connected to the Unix socket" "$(cat "$TRAP_LOG")" ""
	sess a "RESET fencing.redis_cluster_nodes; RESET fencing.redis_password;"
}

REFUSED_TEXT="Redis server at \"127\.0\.0\.1:[0-9]+\" redirected to \"$TRAP_SOCKET:1\".*DETAIL: +A Unix socket"
redirected "-MOVED to a Unix socket" --eval "-MOVED 1 $TRAP_SOCKET:1"
redirected "-ASK to a Unix socket" --eval "-ASK 1 $TRAP_SOCKET:1"
REFUSED_TEXT="unexpected reply from Redis server at \"127\.0\.0\.1:[0-9]+\".*DETAIL: +CLUSTER SLOTS names \"$TRAP_SOCKET\".*A Unix socket"
redirected "CLUSTER SLOTS naming a Unix socket" --slots "$TRAP_SOCKET:1"

REFUSED_TEXT="redirected to \"localhost:$REDIS_PORT\".*DETAIL: +A host name.*HINT: +.*fencing.redis_discovered_host_names"
redirected "-MOVED to a host name" --eval "-MOVED 1 localhost:$REDIS_PORT"
sess a "SET fencing.redis_discovered_host_names = on;"
expect "a superuser's setting" "$(sql -c "SELECT context FROM pg_settings WHERE name = 'fencing.redis_discovered_host_names'")" "superuser"
sess a "SET fencing.redis_cluster_nodes = '127.0.0.1:$FAKE_PORT'; SELECT fenced_acquire('redir:2');"
expect_match "with fencing.redis_discovered_host_names on, the redirect is followed" "$S|$R" '^00000\|[1-9][0-9]*$'
sess a "RESET fencing.redis_cluster_nodes; RESET fencing.redis_discovered_host_names;"

# A port out of range is an address refused (TF105) like the others, not
# a refusal of the script by the server (TF103, 1.2).
for port in 0 65536; do
	REFUSED_TEXT="redirected to \"127\.0\.0\.1:$port\", which fencing refuses.*DETAIL: +A port must be a number from 1 to 65535"
	redirected "-MOVED to port $port" --eval "-MOVED 1 127.0.0.1:$port"
done

# sentinel_names DESCRIPTION ADDRESS REGEX: a Sentinel names ADDRESS as
# the primary: TF105, with a detail matching REGEX.
sentinel_names() {
	fake_start --sentinel "$2"
	sess a "SET fencing.redis_sentinels = '127.0.0.1:$FAKE_PORT'; SET fencing.redis_sentinel_master = 'm'; SELECT fenced_acquire('redir:3');"
	expect "$1: SQLSTATE TF105" "$S" "TF105"
	expect_match "$1: the detail says why" "$R" "$3"
}
sentinel_names "a Sentinel naming a host name" "localhost:$REDIS_PORT" \
	"DETAIL: +127\.0\.0\.1:[0-9]+ named \"localhost:$REDIS_PORT\": A host name"
sess a "SET fencing.redis_discovered_host_names = on; SELECT fenced_acquire('redir:3');"
expect_match "with fencing.redis_discovered_host_names on, the Sentinel's host name is used" "$S|$R" '^00000\|[1-9][0-9]*$'
sess a "RESET fencing.redis_discovered_host_names;"
sentinel_names "a Sentinel naming a Unix socket" "$TRAP_SOCKET:1" "answered with a malformed host"
expect "nothing connected to the Unix socket" "$(cat "$TRAP_LOG")" ""

# ------------------------------------------------------------------ codes

sentinel_names "a Sentinel answering HTTP" garbage \
	"could not get the address of master \"m\" from any Redis Sentinel.*DETAIL: +127\.0\.0\.1:[0-9]+ protocol error"
sess a "RESET fencing.redis_sentinels; RESET fencing.redis_sentinel_master;"
fake_stop_all

# -------------------------------------------------------------- deadlines

# A release after commit, on a new connection (the server closed the one
# the acquisition used) to a server whose AUTH and SELECT take 1.9 s each
# and which never answers the release: COMMIT within
# fencing.redis_release_timeout (2 s) + 250 ms, with a WARNING.
sess_open b
# release_bounded DESCRIPTION SETTINGS
release_bounded() {
	sess b "SET fencing.redis_command_timeout = '5s'; SET fencing.redis_password = 'pw'; $2"
	sess b "BEGIN; SELECT fenced_acquire_xact('rel:1');"
	expect_match "$1: the acquisition, slow as it is" "$S|$R" '^00000\|[1-9][0-9]*$'
	sess b "COMMIT;"
	expect "$1: COMMIT succeeds" "$S" "00000"
	expect_match "$1: with a WARNING" "$R" "WARNING: +could not release the Redis lock on resource \"rel:1\""
	check "$1: within fencing.redis_release_timeout + 250 ms ($T ms)" test "$T" -lt 2250
	sess b "RESET ALL;"
}

fake_start --delay-auth 1.9 --delay-select 1.9 --close-after-acquire
release_bounded "one server" "SET fencing.redis_port = $FAKE_PORT; SET fencing.redis_database = 1;"
fake_stop_all
fake_start --delay-auth 1.9 --delay-select 1.9 --close-after-acquire
DATA_PORT=$FAKE_PORT
fake_start --sentinel "127.0.0.1:$DATA_PORT"
release_bounded "Sentinel mode" \
	"SET fencing.redis_sentinels = '127.0.0.1:$FAKE_PORT'; SET fencing.redis_sentinel_master = 'm'; SET fencing.redis_database = 1;"
fake_stop_all
fake_start --slots self --delay-auth 1.9 --close-after-acquire
release_bounded "Cluster mode" "SET fencing.redis_cluster_nodes = '127.0.0.1:$FAKE_PORT';"
fake_stop_all
# the release meets NOSCRIPT after 1.5 s; its EVAL resend gets what is
# left of the 2 s, not 2 s more (1.1: about 3.5 s).  The release at
# commit on the acquisition's open connection is sent with EVAL and not
# awaited (1.3): a savepoint's rollback sends its release by SHA1 and
# waits for it
fake_start --release-noscript 1.5
sess b "SET fencing.redis_command_timeout = '5s'; SET fencing.redis_port = $FAKE_PORT;"
sess b "BEGIN; SAVEPOINT s; SELECT fenced_acquire_xact('rel:1');"
expect_match "a NOSCRIPT resend: the acquisition" "$S|$R" '^00000\|[1-9][0-9]*$'
sess b "ROLLBACK TO SAVEPOINT s;"
expect "a NOSCRIPT resend: ROLLBACK TO SAVEPOINT succeeds" "$S" "00000"
expect_match "a NOSCRIPT resend: with a WARNING" "$R" "WARNING: +could not release the Redis lock on resource \"rel:1\""
check "a NOSCRIPT resend: within fencing.redis_release_timeout + 250 ms ($T ms)" test "$T" -lt 2250
sess b "COMMIT; RESET ALL;"
fake_stop_all

# A lease is counted from when its acquisition was sent, not from the
# reply: Redis set the key's expiry between the two.  An acquire answered
# 0.8 s late with a 2 s ttl leaves about 1.2 s by our clock once the reply
# is in (counted from the reply, as 1.3's first cut did: about 2 s).
fake_start --delay-acquire 0.8
sess b "SET fencing.redis_port = $FAKE_PORT; BEGIN; SELECT fenced_acquire_xact('valid:1', ttl => '2 s') IS NOT NULL;"
expect "an acquisition answered 0.8 s late" "$S|$R" "00000|t"
sess b "SELECT fenced_lock_valid_until('valid:1') - clock_timestamp() < interval '1.5 s'; COMMIT;"
expect "its lease is counted from the sending: under 1.5 s of the 2 s left after the reply" "$S|$R" "00000|t"
sess b "RESET ALL;"
fake_stop_all

# Sentinel discovery, the connect to the primary, AUTH, SELECT and ROLE
# share one deadline: the connect + command timeouts (1 s + 2 s), though
# AUTH and SELECT (1.9 s each) each stay within the command timeout.
fake_start --delay-auth 1.9 --delay-select 1.9
DATA_PORT=$FAKE_PORT
fake_start --sentinel "127.0.0.1:$DATA_PORT"
sess b "SET fencing.redis_connect_timeout = '1s'; SET fencing.redis_command_timeout = '2s'; SET fencing.redis_password = 'pw'; SET fencing.redis_database = 1;"
sess b "SET fencing.redis_sentinels = '127.0.0.1:$FAKE_PORT'; SET fencing.redis_sentinel_master = 'm'; SELECT fenced_acquire('disc:1');"
expect "discovery past its deadline: TF101" "$S" "TF101"
expect_match "a time out" "$R" "timed out waiting for a reply"
check "within the connect + command timeouts (3 s) + 250 ms ($T ms)" test "$T" -lt 3250
sess b "RESET ALL;"
fake_stop_all

# An attempt cancelled before its command reached the socket (here in a
# slow AUTH) cannot have taken the lock: its owner is not remembered, and
# the next attempt passes the script no owner to take over (the transport's
# sent flag; 1.1 judged by the SQLSTATE and remembered it).
fake_start --delay-auth 0.6
sess b "SET fencing.redis_port = $FAKE_PORT; SET fencing.redis_password = 'pw'; SET statement_timeout = '300ms'; SELECT fenced_acquire('sent:1');"
expect "cancelled in AUTH" "$S" "57014"
sess b "RESET statement_timeout; SELECT fenced_acquire('sent:1');"
expect_match "the next attempt" "$S|$R" '^00000\|[1-9][0-9]*$'
expect "its script gets no owner to take over (EVALSHA sha 2 keys + 5 arguments)" \
	"$(grep '^EVALSHA' "$FAKE_LOG")" "EVALSHA 10"
sess b "RESET ALL;"
fake_stop_all

# A waiter on a busy lock whose subscription is never answered returns
# by its deadline, not after the command timeout (1 s); one whose
# subscriptions fail at once tries 3 of them, not one every 200 ms.
fake_start --eval busy --subscribe hang
sess b "SET fencing.redis_port = $FAKE_PORT; SELECT fenced_acquire('sub:1', wait => '200 ms') IS NULL;"
expect "a waiter whose SUBSCRIBE hangs gets NULL" "$S|$R" "00000|t"
check "within its wait (200 ms) + 700 ms, before the 1 s command timeout ($T ms)" test "$T" -lt 900
sess b "RESET ALL;"
fake_stop_all
fake_start --eval busy --subscribe close
sess b "SET fencing.redis_port = $FAKE_PORT; SELECT fenced_acquire('sub:2', wait => '3s') IS NULL;"
expect "a waiter whose SUBSCRIBE is hung up on gets NULL" "$S|$R" "00000|t"
n=$(grep -c '^SUBSCRIBE' "$FAKE_LOG")
check "3 s of wait subscribe at most 3 times ($n)" test "$n" -le 3
n=$(grep -c '^EVALSHA' "$FAKE_LOG")
check "and poll meanwhile ($n attempts)" test "$n" -gt 5
sess b "RESET ALL;"
fake_stop_all

# ---------------------------------------------------------------- counter

# A server whose acquire script answers tokens at or below the mark it was
# given as the floor (its clock, below a mark set above it), and never
# answers a give-back: an error naming the counter problem (TF121) within
# the one command timeout of the acquisition, not NULL (read as "busy")
# after three rounds each waiting for a give-back (1.2).
fake_start --release-hang
sql -c "SELECT fence_advance('low:1', 9000000000000000)" >/dev/null
sess b "SET fencing.redis_port = $FAKE_PORT; SET fencing.redis_command_timeout = '2s'; SELECT fenced_acquire('low:1');"
expect "tokens at or below the mark: TF121" "$S" "TF121"
expect_match "the error names the token, the mark and the resource" "$R" \
	'ERROR: +Redis server .* issued token [0-9]+ for resource "low:1", not above its high-water mark 9000000000000000'
check "within the command timeout (2 s) ($T ms)" test "$T" -lt 2000
sess b "RESET ALL;"
fake_stop_all

sess_close a
sess_close b
checks_finish
