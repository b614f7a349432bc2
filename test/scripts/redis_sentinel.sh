#!/usr/bin/env bash
# Sentinel mode against a real topology (test/lib/topology.sh): a primary,
# two replicas and three redis-sentinel processes with requirepass.
#
# Acquisition through the Sentinels, WAIT for replicas, the settings'
# checks and privileges; the failure paths: every Sentinel down, silent
# Sentinels (the time bound is the connect and command timeouts in total,
# not per Sentinel), a master name no Sentinel knows, a wrong or missing
# Sentinel password, a Sentinel that names a replica (ROLE); and the
# failovers: SENTINEL FAILOVER and kill -9 of the primary, after which the
# same session acquires from the new primary with tokens above the old
# ones.  The randomized history through failovers is
# test/history/scenario.sh sentinel-failover.
#
# Fair mode: the waiters' queue lives on the primary with the lock.
#
# Usage: bash test/scripts/redis_sentinel.sh   (prints ok/not ok lines; exit 0 = pass)
# (alone: beside two other suites on a loaded machine, the failovers
# counter once stayed 0 after SENTINEL FAILOVER)
# test/run: alone
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../lib/redis_lib.sh"
source "$(dirname "${BASH_SOURCE[0]}")/../lib/topology.sh"

topology_start_sentinel || exit 1
DEAD_PORTS=$(topology_ports 3 | sed 's/^/127.0.0.1:/' | paste -sd, -)

# fencing.redis_host names nothing: in Sentinel mode it is not used
harness_start_pg \
	"shared_preload_libraries = 'fencing'" \
	"fencing.redis_host = '127.0.0.1'" \
	"fencing.redis_port = $(harness_free_port)" \
	"fencing.redis_sentinels = '$SENTINEL_LIST'" \
	"fencing.redis_sentinel_master = '$SENTINEL_MASTER'" \
	"fencing.redis_sentinel_password_file = '$SENTINEL_PASSWORD_FILE'" || exit 1
sql -c "CREATE EXTENSION fencing" >/dev/null

# the token counter on a data node, and whether it holds the lock
counter_on() { redis-cli -p "$1" GET 'fencing:v1:{r:'"$2"'}:token' 2>/dev/null; }
lock_on() { redis-cli -p "$1" EXISTS 'fencing:v1:{r:'"$2"'}:lock' 2>/dev/null; }

# ------------------------------------------------------------ acquisition

sess_open a
sess a "SELECT fenced_acquire('s:1');"
expect_match "fenced_acquire through the Sentinels" "$S|$R" "^00000\|[1-9][0-9]*$"
expect "the lock is on the primary the Sentinels name" "$(lock_on "$SENTINEL_PRIMARY" s:1)" 1
sess a "SELECT fenced_extend('s:1'), fenced_release('s:1');"
expect "extend and release on the same connection" "$S|$R" "00000|t|t"

# fair mode: the queue on the primary the Sentinels name, beside the lock
sess_open b
sess a "SELECT fenced_acquire('s:fair', ttl => '30 s') IS NOT NULL;"
sess_send b "SELECT fenced_acquire('s:fair', ttl => '30 s', wait => '30 s', fair => true) IS NOT NULL; SELECT fenced_release('s:fair');"
for _ in $(seq 500); do [ "$(redis-cli -p "$SENTINEL_PRIMARY" LLEN 'fencing:v1:{r:s:fair}:lock:fair:queue' 2>/dev/null)" = 1 ] && break; sleep 0.02; done
expect "fair: the waiter is in line on the primary" "$(redis-cli -p "$SENTINEL_PRIMARY" LLEN 'fencing:v1:{r:s:fair}:lock:fair:queue')" 1
sess a "SELECT fenced_release('s:fair');"
sess_wait b
expect "fair: the waiter gets the lock at the release" "$S|$R" $'00000|t\nt'
sess_close b

sess a "SET fencing.redis_wait_replicas = 2; SELECT fenced_acquire('s:2');"
expect_match "fencing.redis_wait_replicas = 2: both replicas acknowledge" "$S|$R" "^00000\|[1-9][0-9]*$"
sess a "SET fencing.redis_wait_replicas = 3; SET fencing.redis_wait_timeout = '200ms'; SELECT fenced_acquire('s:2', wait => '0');"
expect "three replicas required of two: TF106" "$S" "TF106"
sess a "RESET fencing.redis_wait_replicas; RESET fencing.redis_wait_timeout; SELECT fenced_release('s:2');"

# ------------------------------------------------------------ settings

sess a "SET fencing.redis_sentinels = '127.0.0.1';"
expect "a Sentinel without a port is refused" "$S" "22023"
expect_match "with a detail" "$R" "DETAIL: +Each entry must be host:port"
sess a "SET fencing.redis_sentinels = '127.0.0.1:0';"
expect "port 0 is refused" "$S" "22023"
sess a "SET fencing.redis_sentinels = '127.0.0.1:1 127.0.0.1:2';"
expect "entries without a comma are refused" "$S" "22023"
sess a "SET fencing.redis_sentinel_master = 'two words';"
expect "a master name with white space is refused" "$S" "22023"

sql -c "CREATE ROLE regress_app LOGIN" -c "GRANT EXECUTE ON FUNCTION fenced_acquire(text, interval, interval, boolean, interval, boolean, text) TO regress_app" >/dev/null
sess_open u -U regress_app
sess u "SET fencing.redis_sentinels = '127.0.0.1:1';"
expect "a non-superuser cannot point the backend at other Sentinels" "$S" "42501"
sess u "SET fencing.redis_sentinel_master = 'other';"
expect "nor at another master" "$S" "42501"
sess u "SET fencing.redis_sentinel_password_file = '/tmp/x';"
expect "nor at another password file" "$S" "42501"
sess u "SELECT fenced_acquire('s:u');"
expect_match "but acquires through the configured Sentinels" "$S|$R" "^00000\|[1-9][0-9]*$"
sess_close u

# ------------------------------------------------------------ failure paths

sess_open f
sess f "SET fencing.redis_connect_timeout = '400ms'; SET fencing.redis_command_timeout = '400ms';"

sess f "SET fencing.redis_sentinels = '$DEAD_PORTS'; SELECT fenced_acquire('s:f');"
expect "every Sentinel down: TF101" "$S" "TF101"
expect_match "the message names the master" "$R" \
	"could not get the address of master \"$SENTINEL_MASTER\" from any Redis Sentinel"
expect_match "the detail says what each Sentinel did" "$R" \
	"DETAIL: +127\.0\.0\.1:[0-9]+ Connection refused; 127\.0\.0\.1:[0-9]+ Connection refused; 127\.0\.0\.1:[0-9]+ Connection refused\."
check "at once (${T} ms)" test "$T" -lt 400

sess f "SET fencing.redis_sentinels = '${DEAD_PORTS%%,*},$SENTINEL_LIST'; SELECT fenced_acquire('s:f');"
expect_match "a dead Sentinel first: the next one answers" "$S|$R" "^00000\|[1-9][0-9]*$"
sess f "SELECT fenced_release('s:f');"

# silent Sentinels (SIGSTOP): each gets the timeouts, all together no more
for p in "${SENTINEL_PORTS[@]}"; do kill -STOP "${NODE_PID[$p]}"; done
sess f "RESET fencing.redis_sentinels; SELECT fenced_acquire('s:f');"
expect "every Sentinel silent: TF101" "$S" "TF101"
expect_match "the detail shows the time out and the Sentinels not asked" "$R" \
	"timed out waiting for a reply.*not asked: out of time"
check "within the connect + command timeouts in total (800 ms + slack), not per Sentinel (2400 ms): ${T} ms" \
	test "$T" -lt 1800
kill -CONT "${NODE_PID[${SENTINEL_PORTS[1]}]}" "${NODE_PID[${SENTINEL_PORTS[2]}]}"
sess f "SELECT fenced_acquire('s:f');"
expect_match "the first Sentinel silent: the second answers" "$S|$R" "^00000\|[0-9]+$"
check "after the command timeout of the first (${T} ms)" test "$T" -lt 1500
kill -CONT "${NODE_PID[${SENTINEL_PORTS[0]}]}"
sess f "SELECT fenced_release('s:f');"

sess f "SET fencing.redis_sentinel_master = 'nosuchmaster'; SELECT fenced_acquire('s:f');"
expect "a master name no Sentinel knows: TF104" "$S" "TF104"
expect_match "the message says so" "$R" "Redis Sentinels do not know master \"nosuchmaster\""
expect_match "with a hint" "$R" "HINT: +Check fencing.redis_sentinel_master"
sess f "RESET fencing.redis_sentinel_master;"

harness_tmpdir SECRETS
as_pg_owner sh -c "umask 077; printf 'wrong-password\n' >'$SECRETS/wrong'"
sess f "SET fencing.redis_sentinel_password_file = '$SECRETS/wrong'; SELECT fenced_acquire('s:f');"
expect "a wrong Sentinel password: TF104" "$S" "TF104"
expect_match "the message says so, per Sentinel" "$R" \
	"could not authenticate to the Redis Sentinels of master.*DETAIL: +127\.0\.0\.1:[0-9]+ refused the password"
expect_no_match "without the password" "$R" "wrong-password"
sess f "SET fencing.redis_sentinel_password_file = ''; SELECT fenced_acquire('s:f');"
expect "no Sentinel password for Sentinels that require one: TF104" "$S" "TF104"
expect_match "they require a password" "$R" "requires a password"
as_pg_owner sh -c "umask 000; printf '$SENTINEL_PASSWORD\n' >'$SECRETS/open'"
sess f "SET fencing.redis_sentinel_password_file = '$SECRETS/open'; SELECT fenced_acquire('s:f');"
expect "a world-readable Sentinel password file is refused" "$S" "F0000"
sess f "RESET fencing.redis_sentinel_password_file;"

sess f "SET fencing.redis_sentinel_master = ''; SELECT fenced_acquire('s:f');"
expect "Sentinels without a master name: TF104" "$S" "TF104"
expect_match "naming both settings" "$R" "fencing.redis_sentinels is set but fencing.redis_sentinel_master is not"
sess f "RESET fencing.redis_sentinel_master;"

# a Sentinel that names a replica as master: ROLE says so
STALE_PORT=$(harness_free_port)
cat >"$TOPOLOGY_DIR/stale.conf" <<EOF
bind 127.0.0.1
port $STALE_PORT
dir $TOPOLOGY_DIR
logfile $TOPOLOGY_DIR/stale.log
sentinel monitor stalemaster 127.0.0.1 ${DATA_PORTS[1]} 1
EOF
redis-sentinel "$TOPOLOGY_DIR/stale.conf" &
STALE_PID=$!
HARNESS_PIDS+=("$STALE_PID")
for _ in $(seq 100); do redis-cli -p "$STALE_PORT" ping >/dev/null 2>&1 && break; sleep 0.05; done
sess f "SET fencing.redis_sentinels = '127.0.0.1:$STALE_PORT'; SET fencing.redis_sentinel_master = 'stalemaster'; SET fencing.redis_sentinel_password_file = ''; SELECT fenced_acquire('s:f');"
expect "a Sentinel naming a replica: TF102 once the budget is spent" "$S" "TF102"
expect_match "ROLE was checked" "$R" \
	"Redis server at \"127\.0\.0\.1:${DATA_PORTS[1]}\" that the Sentinels name as primary of \"stalemaster\" is not a primary.*DETAIL: +ROLE says \"slave\""
check "within the connect + command timeouts (${T} ms)" test "$T" -lt 1800
# stopped now: with quorum 1 it may act on its "master", a node of the
# topology the failovers below move
kill "$STALE_PID" && wait "$STALE_PID" 2>/dev/null
sess f "RESET fencing.redis_sentinels; RESET fencing.redis_sentinel_master; RESET fencing.redis_sentinel_password_file; SELECT fenced_acquire('s:f');"
expect_match "settings back: the same session acquires again" "$S|$R" "^00000\|[0-9]+$"
sess f "SELECT fenced_release('s:f');"
sess_close f

# the renewer (a background worker) renews through the Sentinels too.
# Checked before the failovers: a 1 s lease renewed right after the kill -9
# below was found lost in three runs (two renewals, then the lock gone
# where the third went, no round failed), as a stall of the machine over
# the 0.67 s left would do; renewed_across now takes 2 s and says how long
# the machine stalled, and the renewer logs which server answered.
expect "a renewed lease through the Sentinels" "$(renewed_across s:renew0)" "t|t|t"

# ------------------------------------------------------------ failovers

# failover NAME COMMAND...: the session holds a lease, COMMAND makes a
# failover; the same session acquires again and again until it gets the
# lock from the new primary, with a token above the one before; prints the
# time from the failover to that acquisition.
failover() {
	local name=$1 old=$SENTINEL_PRIMARY before t0 ms np=
	shift
	sess a "SELECT fenced_acquire('s:fo', ttl => '500ms');"
	before=$R
	t0=$(now_ms)
	"$@"
	# up to a minute: on a loaded machine an election can fail and is
	# retried after twice the failover-timeout
	while [ $(($(now_ms) - t0)) -lt 60000 ]; do
		sess a "SELECT fenced_acquire('s:fo', ttl => '500ms', wait => '1s');"
		if [ "$S" = 00000 ] && [ -n "$R" ]; then
			np=$(topology_sentinel_primary)
			[ -n "$np" ] && [ "$np" != "$old" ] && [ "$(lock_on "$np" s:fo)" = 1 ] && break
		fi
		np=
		sleep 0.02
	done
	ms=$(($(now_ms) - t0))
	if [ -n "${MOVER:-}" ]; then wait "$MOVER" || true; MOVER=; fi
	check "$name: the same session takes the lock on a new primary" test -n "$np"
	check "$name: with a token above the one before ($R > $before)" test "${R:-0}" -gt "$before"
	check "$name: every Sentinel names the new primary" topology_wait_new_primary "$old"
	echo "# $name: first acquisition from the new primary ${ms} ms after the failover began"
}

# asked in the background, the session acquiring meanwhile; asked again
# if the Sentinels abandon it (topology_sentinel_failover)
ask_failover() { topology_sentinel_failover "$SENTINEL_PRIMARY" & MOVER=$!; }
failover "SENTINEL FAILOVER" ask_failover
sess a "SELECT failovers FROM fence_stat_redis;"
check "the session's move to the new primary is counted in fence_stat_redis.failovers ($R)" test "${R:-0}" -ge 1
check "the topology settles again" topology_sentinel_settled

# the primary is killed in the middle of a call (kill_mid_call)
kill_primary() { kill_mid_call "$SENTINEL_PRIMARY" s:fo; }
failover "kill -9 of the primary" kill_primary
check "the killed node comes back" topology_node_restart "$KILLED"
check "as a replica of the new primary" topology_sentinel_settled

# the renewer follows a failover: a 5 s lease renewed across a 12 s
# statement during which the Sentinels move the primary; its renewals
# after the move find the lock on the new primary
sql -c "SELECT fenced_acquire('s:renew', ttl => '5 s', renew => true) IS NOT NULL, pg_sleep(12)::text = '',
	(SELECT expires_at - acquired_at > interval '10 s' AND renewing
	 FROM fenced_lock_holders WHERE resource = 's:renew')" >"$SESS_DIR/renew.out" 2>&1 &
renewing=$!
sleep 2
old=$(topology_sentinel_primary)
topology_sentinel_failover "$old"
check "renewal across a failover: every Sentinel names the new primary" topology_wait_new_primary "$old"
wait "$renewing"
expect "the renewer follows the failover: renewed throughout" "$(cat "$SESS_DIR/renew.out")" "t|t|t"
check "the topology settles again" topology_sentinel_settled

sess_close a
checks_finish
