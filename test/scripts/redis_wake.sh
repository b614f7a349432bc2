#!/usr/bin/env bash
# Waiters woken on release (fencing.lock_wait_wakeup), against a real
# redis-server, a Sentinel topology and a Redis Cluster
# (test/lib/topology.sh).
#
# A fenced_acquire() waiting for a busy lock holds it within a few ms of
# its release: the release script announces it (PUBLISH, SPUBLISH in
# Cluster mode) and the waiter, subscribed on a second connection, tries
# again at once.  Latency is the PostgreSQL server's clock from just
# before fenced_release() to just after the waiter's fenced_acquire(),
# released at a random moment 0.3 to 0.6 s into the wait (its statement
# seen running in pg_stat_activity), over 9 trials, printed as figures
# (median and worst).  The checks are that every waiter gets the lock,
# each within 1 s: not left to the lock's expiry (30 s).  How fast
# (release against 1.1's polling, whose back-off of 4 to 128 ms holds it
# about 45 ms after at the median) is measured by test/bench/acquire,
# which prints p50 and p99 of both: a time threshold here failed on a
# machine loaded by other jobs.  That the waiter waits on its
# subscription and does not poll is checked by the commands it sends.
#
# Also: over TLS; a Sentinel failover and a Cluster slot moved in the
# middle of a wait (the waiter subscribes again where the lock now is); a
# waiter sends at most a few commands per second while the lock is held,
# and notices that pile up wake it once (INFO commandstats); its subscriber connection is gone after the wait,
# taken, timed out or cancelled (CLIENT LIST); an ACL user without
# channel rights still releases, and waits by polling; 'poll' subscribes
# to nothing.
#
# Usage: bash test/scripts/redis_wake.sh   (prints ok/not ok lines; exit 0 = pass)
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../lib/redis_lib.sh"
source "$(dirname "${BASH_SOURCE[0]}")/../lib/topology.sh"

# the suite's server speaks TLS on a second port, for a waiter over TLS
harness_tmpdir CERTS
topology_tls_certs "$CERTS" || { echo "not ok - openssl made the certificates"; exit 1; }
TLS_PORT=$(harness_free_port)
harness_start_redis --tls-port "$TLS_PORT" --tls-cert-file "$CERTS/server.crt" \
	--tls-key-file "$CERTS/server.key" --tls-ca-cert-file "$CERTS/ca.crt" --tls-auth-clients no || exit 1
redis_start_pg || exit 1

TRIALS=${TRIALS:-9}

# waiter_start RESOURCE: session $HOLDER holds RESOURCE; a waiter (psql
# with PGOPTIONS, in the background) starts waiting for it.
waiter_start() {
	WAITER_OUT=$SESS_DIR/waiter.out
	sess "$HOLDER" "SELECT fenced_acquire('$1', ttl => '30s') IS NOT NULL;"
	[ "$S|$R" = "00000|t" ] || { WAITER_PID=; WAITER_FAILED="holder: $S $R"; return; }
	WAITER_FAILED=
	PGAPPNAME=fenced_waiter psql -X -q -A -t -v ON_ERROR_STOP=1 \
		-c "SELECT fenced_acquire('$1', ttl => '30s', wait => '25s') IS NOT NULL, (extract(epoch FROM clock_timestamp()) * 1000)::numeric(20, 3)" \
		-c "SELECT fenced_release('$1')" >"$WAITER_OUT" 2>&1 &
	WAITER_PID=$!
	# its statement has started (psql may be slow to, on a busy machine)
	for _ in $(seq 250); do
		[ "$(sql -c "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'fenced_waiter' AND state = 'active'")" = 1 ] && break
		sleep 0.02
	done
}

# waiter_release RESOURCE: $HOLDER releases it; prints the ms from just
# before the release to the waiter holding the lock, or "failed: ...".
waiter_release() {
	local t0 t1
	[ -n "$WAITER_PID" ] || { echo "failed: $WAITER_FAILED"; return; }
	sess "$HOLDER" "SELECT (extract(epoch FROM clock_timestamp()) * 1000)::numeric(20, 3) || '|' || fenced_release('$1');"
	t0=${R%%|*}
	wait "$WAITER_PID"
	t1=$(sed -n 's/^t|//p' "$WAITER_OUT")
	[ -n "$t1" ] && [ "$R" = "$t0|true" ] || { echo "failed: $R / $(tr '\n' ' ' <"$WAITER_OUT")"; return; }
	awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f\n", b - a }'
}

# wake_trial RESOURCE: a waiter, released 0.3 to 0.6 s into its wait.
wake_trial() {
	waiter_start "$1"
	sleep "0.$((3 + RANDOM % 4))"
	waiter_release "$1"
}

# within_1s LABEL LATENCY: the waiter got the lock within 1 s (not at the
# lock's expiry).
within_1s() {
	expect "$1 ($2 ms)" "$(awk -v m="$2" 'BEGIN {print (m != "" && m !~ /failed/ && m <= 1000)}')" 1
}

# wake_latency LABEL RESOURCE-PREFIX: TRIALS trials; checks that each
# waiter got the lock within 1 s, and prints the median and the worst.
wake_latency() {
	local label=$1 i l all=() failed=
	for ((i = 1; i <= TRIALS; i++)); do
		l=$(wake_trial "$2:$i")
		case "$l" in failed*) failed=$l ;; *) all+=("$l") ;; esac
	done
	expect "$label: every waiter got the lock" "${failed:-none}" none
	read -r med _ max < <(printf '%s\n' "${all[@]}" | sort -n |
		awk '{v[NR] = $1} END {print v[int((NR + 1) / 2)], v[NR - 1], v[NR]}')
	echo "# $label: release -> waiter holds the lock: median $med ms, worst $max ms (${all[*]})"
	expect "$label: every trial within 1 s, not at the lock's expiry" "$(awk -v m="$max" 'BEGIN {print (m != "" && m <= 1000)}')" 1
}

# subscribers PORT: how many clients of the node on PORT are subscribed
# to a channel, but for the Sentinels' own.
subscribers() {
	redis-cli -p "$1" CLIENT LIST 2>/dev/null | grep -v 'name=sentinel-' | grep -Ec ' (sub|ssub)=[1-9]'
}

# sent_commands: the commands clients sent the suite's server since its
# statistics were reset (the commands the scripts run are not counted).
sent_commands() {
	rcli INFO commandstats | tr -d '\r' |
		awk -F'[:=,]' '$1 ~ /^cmdstat_(evalsha|eval|subscribe|ssubscribe|auth|select|ping)$/ {n += $3} END {print n + 0}'
}

sess_open a
HOLDER=a

# ------------------------------------------------------- one server

wake_latency "single server" w
export PGOPTIONS="-c fencing.lock_wait_wakeup=poll"
l=$(wake_trial wpoll:1)
echo "# forced polling: $l ms"
unset PGOPTIONS

# while the lock is held, the waiter sleeps until its PTTL, the longest
# sleep (1 s) or its deadline: a few commands per second at most
sess a "SELECT fenced_acquire('w:held', ttl => '30s') IS NOT NULL;"
rcli CONFIG RESETSTAT >/dev/null
psql -X -q -A -t -c "SELECT fenced_acquire('w:held', wait => '3s') IS NULL" >"$SESS_DIR/w.out" 2>&1 &
wpid=$!
sleep 1.5
expect "during the wait, one subscriber connection" "$(subscribers "$REDIS_PORT")" 1
wait "$wpid"
expect "a waiter that does not get the lock returns NULL" "$(cat "$SESS_DIR/w.out")" t
n=$(sent_commands)
echo "# a 3 s wait on a held lock sent $n commands ($(rcli INFO commandstats | grep -Eo '^cmdstat_(evalsha|eval|subscribe):calls=[0-9]+' | paste -sd' '))"
expect "a 3 s wait sends at most 10 commands (polling: about 25)" "$(( n <= 10 ))" 1
expect "after the wait, no subscriber connection" "$(subscribers "$REDIS_PORT")" 0

# notices that pile up while the waiter tries make one wake, not one
# each: 500 published at once (the lock still held) cost a few attempts
# (1.1 of this feature: one attempt per notice, about 500)
psql -X -q -A -t -c "SELECT fenced_acquire('w:held', wait => '2s') IS NULL" >"$SESS_DIR/w.out" 2>&1 &
wpid=$!
for _ in $(seq 100); do
	[ "$(subscribers "$REDIS_PORT")" = 1 ] && break
	sleep 0.02
done
rcli CONFIG RESETSTAT >/dev/null
for _ in $(seq 500); do
	printf 'PUBLISH fencing:v1:{r:w:held}:lock:released 1\n'
done | rcli --pipe >/dev/null
wait "$wpid"
expect "a waiter woken by a burst of notices returns NULL" "$(cat "$SESS_DIR/w.out")" t
n=$(rcli INFO commandstats | tr -d '\r' | awk -F'[:=,]' '$1 == "cmdstat_evalsha" {print $3}')
echo "# 500 notices at once, then the rest of a 2 s wait: ${n:-0} attempts"
expect "500 notices at once wake the waiter a few times, not 500 (at most 20)" "$(( ${n:-0} <= 20 ))" 1

# cancelled in the middle of its wait: the subscriber goes with it
psql -X -q -A -t -c "SET statement_timeout = '700ms'" \
	-c "SELECT fenced_acquire('w:held', wait => '10s')" >"$SESS_DIR/w.out" 2>&1
expect_match "a wait cut short by statement_timeout" "$(cat "$SESS_DIR/w.out")" "canceling statement due to statement timeout"
expect "after the cancel, no subscriber connection" "$(subscribers "$REDIS_PORT")" 0

# forced polling subscribes to nothing
psql -X -q -A -t -c "SET fencing.lock_wait_wakeup = poll" \
	-c "SELECT fenced_acquire('w:held', wait => '1500ms')" >"$SESS_DIR/w.out" 2>&1 &
wpid=$!
sleep 0.8
expect "fencing.lock_wait_wakeup = poll: no subscriber connection" "$(subscribers "$REDIS_PORT")" 0
wait "$wpid"
sess a "SELECT fenced_release('w:held');"

# published_on CHANNEL SQL: run SQL in session a while a redis-cli
# subscribes to CHANNEL; prints the message it got ("message CHANNEL 1").
published_on() {
	local spid
	redis-cli -s "$REDIS_SOCKET" SUBSCRIBE "$1" >"$SESS_DIR/chan.out" 2>&1 &
	spid=$!
	sleep 0.3
	sess a "$2"
	sleep 0.3
	kill "$spid" 2>/dev/null
	wait "$spid" 2>/dev/null
	sed -n 4,6p "$SESS_DIR/chan.out" | paste -sd' '
}

# the release announces itself on the lock key's channel
expect "the release is published on <lock key>:released" \
	"$(published_on 'fencing:v1:{r:w:chan}:lock:released' "SELECT fenced_acquire('w:chan') IS NOT NULL, fenced_release('w:chan');")" \
	"message fencing:v1:{r:w:chan}:lock:released 1"

# a lock key template without a {tag}: the channel is {<lock key>}:released,
# in the lock key's hash slot (SPUBLISH would fail in another's)
expect "without a {tag}, the release is published on {<lock key>}:released" \
	"$(published_on '{lock:w:plain}:released' "SET fencing.redis_lock_key = 'lock:<resource>'; SET fencing.redis_token_key = 'fence:<resource>'; SELECT fenced_acquire('w:plain') IS NOT NULL, fenced_release('w:plain'); RESET fencing.redis_lock_key; RESET fencing.redis_token_key;")" \
	"message {lock:w:plain}:released 1"

# an ACL user without channel rights (Redis 7 grants none by default)
rcli ACL SETUSER nochan on '>nochan-pw' '~*' '+@all' resetchannels >/dev/null
export PGOPTIONS="-c fencing.redis_username=nochan -c fencing.redis_password=nochan-pw"
sess_open u
unset PGOPTIONS
sess u "SELECT fenced_acquire('w:acl', ttl => '30s') IS NOT NULL;"
expect "an ACL user without channels acquires" "$S|$R" "00000|t"
sess u "SELECT fenced_release('w:acl');"
expect "and still releases (the PUBLISH refused is ignored)" "$S|$R" "00000|t"
expect "the lock key is gone" "$(rcli EXISTS 'fencing:v1:{r:w:acl}:lock')" 0
sess a "SELECT fenced_acquire('w:acl', ttl => '30s') IS NOT NULL;"
PGOPTIONS="-c fencing.redis_username=nochan -c fencing.redis_password=nochan-pw" \
	psql -X -q -A -t -c "SELECT fenced_acquire('w:acl', wait => '10s') IS NOT NULL" >"$SESS_DIR/w.out" 2>&1 &
wpid=$!
sleep 0.5
expect "its waiter has no subscription (SUBSCRIBE refused)" "$(subscribers "$REDIS_PORT")" 0
sess a "SELECT fenced_release('w:acl');"
wait "$wpid"
expect "and gets the lock by polling, without an error" "$(cat "$SESS_DIR/w.out")" t
sess_close u

# over TLS, the subscriber connection speaks TLS as the first one does
TLS_OPTS="-c fencing.redis_port=$TLS_PORT -c fencing.redis_tls=verify-full -c fencing.redis_tls_ca_file=$CERTS/ca.crt"
PGOPTIONS=$TLS_OPTS sess_open ta
HOLDER=ta
export PGOPTIONS=$TLS_OPTS
waiter_start wt:tls
sleep 0.5
expect "TLS: the waiter is subscribed" "$(subscribers "$REDIS_PORT")" 1
within_1s "TLS: release -> waiter holds the lock" "$(waiter_release wt:tls)"
unset PGOPTIONS
sess_close ta
HOLDER=a

# ------------------------------------------------------- Sentinel

topology_start_sentinel || exit 1
SENTINEL_OPTS="-c fencing.redis_sentinels=$SENTINEL_LIST -c fencing.redis_sentinel_master=$SENTINEL_MASTER -c fencing.redis_sentinel_password_file=$SENTINEL_PASSWORD_FILE"
sess_close a
PGOPTIONS=$SENTINEL_OPTS sess_open sa
HOLDER=sa
export PGOPTIONS=$SENTINEL_OPTS
wake_latency "Sentinel" ws
expect "Sentinel: the waiters subscribed on the primary, and left" "$(subscribers "$SENTINEL_PRIMARY")" 0

# a failover in the middle of a wait: Sentinel ends the subscription on
# the demoted primary, and the waiter subscribes again on the new one
waiter_start ws:failover
sleep 0.5
old=$SENTINEL_PRIMARY
expect "Sentinel: the waiter is subscribed on the primary" "$(subscribers "$old")" 1
topology_sentinel_failover "$old" || echo "# SENTINEL FAILOVER: no new primary" >&2
topology_wait_new_primary "$old" || echo "# no new primary" >&2
for _ in $(seq 50); do
	[ "$(subscribers "$SENTINEL_PRIMARY")" = 1 ] && break
	sleep 0.1
done
expect "Sentinel: after the failover the waiter is subscribed on the new primary" "$(subscribers "$SENTINEL_PRIMARY")" 1
within_1s "Sentinel: after the failover, release -> waiter holds the lock" "$(waiter_release ws:failover)"
unset PGOPTIONS

# ------------------------------------------------------- Cluster

topology_start_cluster || exit 1
CLUSTER_OPTS="-c fencing.redis_cluster_nodes=$CLUSTER_SEEDS"
sess_close sa
PGOPTIONS=$CLUSTER_OPTS sess_open ca
HOLDER=ca
export PGOPTIONS=$CLUSTER_OPTS
wake_latency "Cluster" wc

# a slot moved in the middle of a wait: the old node ends the shard
# subscription (sunsubscribe), the waiter follows -MOVED and subscribes
# again on the new node
node_id() { redis-cli -p "$1" CLUSTER MYID; }
primaries() {
	redis-cli -p "${CLUSTER_PORTS[0]}" CLUSTER NODES |
		awk '$3 ~ /master/ && $3 !~ /fail/ && $9 != "" { split($2, a, "[:@]"); print a[2] }'
}
waiter_start wc:moved
sleep 0.5
from=$(topology_cluster_node_of "$(lock_key wc:moved)")
to=$(primaries | grep -vx "$from" | head -1)
slot=$(redis-cli -p "$from" CLUSTER KEYSLOT "$(lock_key wc:moved)")
expect "Cluster: the waiter is subscribed on the node of the slot" "$(subscribers "$from")" 1
redis-cli -p "$to" CLUSTER SETSLOT "$slot" IMPORTING "$(node_id "$from")" >/dev/null
redis-cli -p "$from" CLUSTER SETSLOT "$slot" MIGRATING "$(node_id "$to")" >/dev/null
keys=$(redis-cli -p "$from" CLUSTER GETKEYSINSLOT "$slot" 100 | tr '\n' ' ')
# shellcheck disable=SC2086
[ -z "$keys" ] || redis-cli -p "$from" MIGRATE 127.0.0.1 "$to" "" 0 5000 KEYS $keys >/dev/null
# the new owner first, as Redis advises: else the old one could redirect
# there before the new one knows it owns the slot
for p in "$to" $(primaries | grep -vx "$to"); do
	redis-cli -p "$p" CLUSTER SETSLOT "$slot" NODE "$(node_id "$to")" >/dev/null
done
for _ in $(seq 50); do
	[ "$(subscribers "$to")" = 1 ] && break
	sleep 0.1
done
expect "Cluster: after the slot moved the waiter is subscribed on its new node" "$(subscribers "$to")|$(subscribers "$from")" "1|0"
within_1s "Cluster: after the slot moved, release -> waiter holds the lock" "$(waiter_release wc:moved)"
unset PGOPTIONS

for p in "${CLUSTER_PORTS[@]}"; do
	left=$(( ${left:-0} + $(subscribers "$p") ))
done
expect "Cluster: no subscriber connection left on any node" "$left" 0

sess_close ca
checks_finish
