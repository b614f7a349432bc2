# Shared by the test/scripts/redis_*.sh suites: sourced, not run.
#
# Each suite starts its own redis-server and PostgreSQL cluster through the
# harness (loopback and Unix sockets only), prints "ok - ..." or
# "not ok - ..." per check (test/lib/checks.sh), and ends with
# checks_finish, which exits non-zero if any check failed.
#
# Long-lived psql sessions ("same session reconnects") are psql processes
# reading from a FIFO:
#
#   sess_open a                   start session "a"
#   sess a "SELECT 1;"            run SQL in it; sets R (output: rows and
#                                 messages) and S (SQLSTATE, 00000 on success)
#                                 and T (elapsed ms)
#   sess_send a "SELECT ...;"     send it without waiting; sess_wait a
#                                 then waits and sets R, S and T

# shellcheck source-path=SCRIPTDIR source=harness.sh
source "$(dirname "${BASH_SOURCE[0]}")/harness.sh"
# shellcheck source-path=SCRIPTDIR source=psql.sh
source "$(dirname "${BASH_SOURCE[0]}")/psql.sh"
# shellcheck source-path=SCRIPTDIR source=checks.sh
source "$(dirname "${BASH_SOURCE[0]}")/checks.sh"

# Start a replica of the suite's Redis on a free port, set REPLICA_PORT,
# and wait until it has synchronized.  The harness stops it on exit.
start_replica() {
	rcli CONFIG SET repl-diskless-sync-delay 0 >/dev/null
	REPLICA_PORT=$(harness_free_port)
	redis-server --bind 127.0.0.1 --port "$REPLICA_PORT" --dir "$REDIS_DIR" --dbfilename replica.rdb \
		--save '' --appendonly no --replicaof 127.0.0.1 "$REDIS_PORT" \
		--daemonize no --logfile "$REDIS_DIR/replica.log" &
	HARNESS_PIDS+=("$!")
	for _ in $(seq 200); do
		redis-cli -p "$REPLICA_PORT" INFO replication 2>/dev/null | grep -q 'master_link_status:up' && return 0
		sleep 0.05
	done
	return 1
}

# Start a server on a free port of 127.0.0.1 that accepts connections and
# reads them but never answers (a Redis that hangs), set SILENT_PORT, and
# wait until it listens.  The harness stops it on exit.
start_silent_server() {
	SILENT_PORT=$(harness_free_port)
	/usr/bin/python3 - "$SILENT_PORT" <<'PY' &
import socket, sys, threading
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", int(sys.argv[1])))
s.listen(4096)
def drain(c):
    while c.recv(65536):
        pass
while True:
    c, _ = s.accept()
    threading.Thread(target=drain, args=(c,), daemon=True).start()
PY
	HARNESS_PIDS+=("$!")
	for _ in $(seq 100); do
		(exec 3<>"/dev/tcp/127.0.0.1/$SILENT_PORT") 2>/dev/null && return 0
		sleep 0.05
	done
	return 1
}

# redis-cli against the harness's server, over its Unix socket.
REDIS_CLI_AUTH=()
rcli() { redis-cli -s "$REDIS_SOCKET" "${REDIS_CLI_AUTH[@]}" "$@" 2>/dev/null; }

# A resource's keys in Redis, key layout v1 (doc/redis.md): its lock, its
# token counter, a fair lock's queue and its waiters' timeouts.
lock_key() { printf 'fencing:v1:{r:%s}:lock' "$1"; }
token_key() { printf 'fencing:v1:{r:%s}:token' "$1"; }
queue_key() { printf 'fencing:v1:{r:%s}:lock:fair:queue' "$1"; }
timeouts_key() { printf 'fencing:v1:{r:%s}:lock:fair:timeouts' "$1"; }
# Whether a resource's lock is held in the harness's Redis: 1 or 0.
held() { rcli EXISTS "$(lock_key "$1")"; }

# Start PostgreSQL with fencing preloaded, pointed at the harness's Redis
# (which must be started first), and create the extension.
redis_start_pg() {
	harness_start_pg \
		"shared_preload_libraries = 'fencing'" \
		"fencing.redis_host = '127.0.0.1'" \
		"fencing.redis_port = $REDIS_PORT" \
		"$@" || return 1
	sql -c "CREATE EXTENSION fencing" >/dev/null
}

# Stop the harness's redis-server (only the PID it started) and wait.
redis_stop() {
	kill -CONT "$REDIS_PID" 2>/dev/null
	kill -TERM "$REDIS_PID" 2>/dev/null
	for _ in $(seq 100); do
		kill -0 "$REDIS_PID" 2>/dev/null || return 0
		sleep 0.05
	done
	kill -KILL "$REDIS_PID" 2>/dev/null
}

# Milliseconds since the epoch.
now_ms() { echo $(($(date +%s%N) / 1000000)); }

SESS_DIR=
declare -A SESS_FD SESS_PID

# sess_open NAME [psql options]
sess_open() {
	local name=$1 fd
	shift
	[ -n "$SESS_DIR" ] || harness_tmpdir SESS_DIR
	mkfifo "$SESS_DIR/$name.in"
	: >"$SESS_DIR/$name.out"
	psql -X -q -A -t -v ON_ERROR_STOP=0 "$@" <"$SESS_DIR/$name.in" >"$SESS_DIR/$name.out" 2>&1 &
	SESS_PID[$name]=$!
	HARNESS_PIDS+=("$!")
	exec {fd}>"$SESS_DIR/$name.in"
	SESS_FD[$name]=$fd
	sess "$name" "\\set SHOW_CONTEXT never"
}

# sess NAME SQL: see the header.  Gives up after 60 s.
sess() {
	sess_send "$1" "$2"
	sess_wait "$1"
}

# sess_send NAME SQL: send SQL to session NAME without waiting for it;
# sess_wait NAME then waits for it and sets R, S and T as sess does.
declare -A SESS_MARK SESS_START SESS_T0
sess_send() {
	local name=$1
	SESS_MARK[$name]="__sess_done_${RANDOM}${RANDOM}__"
	SESS_START[$name]=$(stat -c %s "$SESS_DIR/$name.out")
	SESS_T0[$name]=$(now_ms)
	printf '%s\n\\echo %s :SQLSTATE\n' "$2" "${SESS_MARK[$name]}" >&"${SESS_FD[$name]}"
}

sess_wait() {
	local name=$1 out=$SESS_DIR/$1.out mark=${SESS_MARK[$1]} start=${SESS_START[$1]} i
	for ((i = 0; i < 6000; i++)); do
		grep -q "^$mark" "$out" && break
		sleep 0.01
	done
	T=$(($(now_ms) - SESS_T0[$name]))
	R=$(tail -c +$((start + 1)) "$out" | sed "/^$mark/,\$d")
	S=$(tail -c +$((start + 1)) "$out" | sed -n "s/^$mark //p")
	[ -n "$S" ] || S=timeout
}

# sess_close NAME
sess_close() {
	local fd=${SESS_FD[$1]}
	# \q rather than end of file: later children inherited the FIFO's
	# write end, so closing ours alone does not end psql's input
	# in a subshell: a psql already gone (its backend terminated) leaves
	# the FIFO without a reader, and the SIGPIPE ends the subshell only
	( printf '\\q\n' >&"$fd" ) 2>/dev/null || true
	exec {fd}>&-
	wait "${SESS_PID[$1]}" 2>/dev/null
}

# kill_mid_call PORT RESOURCE: session a's fenced_acquire(RESOURCE) is in
# the middle of its call when the node on PORT (a topology node, see
# test/lib/topology.sh) gets SIGKILL: the node holds every client (CLIENT
# PAUSE), the call waits for its reply, and the error must be TF101, a
# lost connection.  Sets KILLED to PORT.
kill_mid_call() {
	local killer
	KILLED=$1
	redis-cli -p "$KILLED" CLIENT PAUSE 5000 ALL >/dev/null
	(sleep 0.3 && kill -KILL "${NODE_PID[$KILLED]}") &
	killer=$!
	sess a "SELECT fenced_acquire('$2', ttl => '500ms');"
	expect "the primary killed mid-call: TF101" "$S" "TF101"
	expect_match "the connection was lost" "$R" "lost connection to Redis server at \"127\.0\.0\.1:$KILLED\""
	wait "$killer"
	topology_node_kill "$KILLED"
}

# renewed_across_topology: in a Sentinel topology, each data node's role
# and the Sentinels' last events, for a failed renewed_across.
renewed_across_topology() {
	local p f
	[ -n "${TOPOLOGY_DIR:-}" ] && [ -n "${DATA_PORTS:-}" ] || return 0
	for p in "${DATA_PORTS[@]}"; do
		echo "# redis at $p: $(redis-cli -p "$p" ROLE 2>/dev/null | head -1)"
	done
	for f in "$TOPOLOGY_DIR"/sentinel-*.log "$TOPOLOGY_DIR"/stale.log; do
		[ -f "$f" ] && grep ' [#*] [+-]' "$f" | tail -3 | sed "s|^|# ${f##*/}: |"
	done
}

# pause_watch FILE: until killed, sleep 50 ms again and again and keep in
# FILE the longest time one took, in ms, by the wall clock: a machine
# that stalls (a VM's vCPUs taken away, the clock stepped) shows there, and
# a lease shorter than the stall is lost, as it should be.
pause_watch() {
	local t0 t1 gap longest=0
	echo 0 >"$1"
	while :; do
		t0=${EPOCHREALTIME/./}
		sleep 0.05
		t1=${EPOCHREALTIME/./}
		gap=$(((t1 - t0) / 1000))
		if [ "$gap" -gt "$longest" ]; then
			longest=$gap
			echo "$longest" >"$1"
		fi
	done
}

# renewed_across RESOURCE: take RESOURCE for 2 s with renew => true in a
# 3 s statement; prints "t|t|t" when the renewer (a background worker,
# with the library preloaded) renewed it throughout: its expires_at moved
# on to more than 4 s after the acquisition (a renewal 2 s in or later,
# past the first lease's end), and it is still renewing.  2 s, not 1: a
# renewal is due every third of the ttl, so a 1 s lease is lost to any
# stall of the machine over 0.67 s (a 1 s lease found lost after two
# renewals, nothing failed, was seen in three runs).  Otherwise also says
# on stderr, as comments, whether the lease was found lost, the longest
# stall meanwhile (pause_watch) and what the server logged about Redis,
# so that a failure tells a lease taken away from a renewer that stopped.
renewed_across() {
	local out stall watcher
	stall=$(mktemp)
	pause_watch "$stall" >/dev/null &
	watcher=$!
	out=$(sql -c "SELECT fenced_acquire('$1', ttl => '2 s', renew => true) IS NOT NULL, pg_sleep(3)::text = '',
		(SELECT expires_at - acquired_at > interval '4 s' AND renewing
		 FROM fenced_lock_holders WHERE resource = '$1'),
		(SELECT format('expires_at - acquired_at %s, renewing %s, lost %s', expires_at - acquired_at, renewing, lost)
		 FROM fenced_lock_holders WHERE resource = '$1')" 2>&1)
	kill "$watcher" 2>/dev/null
	wait "$watcher" 2>/dev/null
	if [[ "$out" =~ ^([tf]?\|[tf]?\|[tf]?)\|(.*)$ ]]; then
		[ "${BASH_REMATCH[1]}" = "t|t|t" ] || {
			echo "# renewed_across $1: ${BASH_REMATCH[2]}; the longest pause of this shell's 50 ms sleeps meanwhile: $(cat "$stall") ms; the server's log on Redis:"
			grep -i 'redis\|lease' "$(dirname "$PGDATA_DIR")/server.log" 2>/dev/null | tail -6 | sed 's/^/#   /'
			renewed_across_topology
		} >&2
		out=${BASH_REMATCH[1]}
	fi
	rm -f "$stall"
	printf '%s\n' "$out"
}
