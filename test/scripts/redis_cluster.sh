#!/usr/bin/env bash
# Cluster mode against a real Redis Cluster (test/lib/topology.sh) of three
# primaries and three replicas.
#
# Acquisition through the slot map, one connection per node used, WAIT,
# the settings' checks (a key layout whose keys are in two slots, a
# database other than 0, Sentinel and Cluster together); the redirects: a
# stale map (-MOVED after a slot moved), a slot being migrated (-ASK, with
# NOSCRIPT from the new node), -TRYAGAIN; a node frozen mid-call, every
# seed down; and the failovers: CLUSTER FAILOVER and kill -9 of a primary,
# after which the same session acquires from the new primary.  The
# randomized history through failovers is test/history/scenario.sh
# cluster-failover.
#
# Usage: bash test/scripts/redis_cluster.sh   (prints ok/not ok lines; exit 0 = pass)
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../lib/redis_lib.sh"
source "$(dirname "${BASH_SOURCE[0]}")/../lib/topology.sh"

topology_start_cluster || exit 1
DEAD_PORTS=$(topology_ports 2 | sed 's/^/127.0.0.1:/' | paste -sd, -)

# fencing.redis_host names nothing: in Cluster mode it is not used
harness_start_pg \
	"shared_preload_libraries = 'fencing'" \
	"fencing.redis_host = '127.0.0.1'" \
	"fencing.redis_port = $(harness_free_port)" \
	"fencing.redis_cluster_nodes = '$CLUSTER_SEEDS'" || exit 1
sql -c "CREATE EXTENSION fencing" >/dev/null

lock_on() { redis-cli -p "$1" EXISTS "$(lock_key "$2")" 2>/dev/null; }
slot_of() { redis-cli -p "${CLUSTER_PORTS[0]}" CLUSTER KEYSLOT "$(lock_key "$1")"; }
node_id() { redis-cli -p "$1" CLUSTER MYID; }
primaries() {
	redis-cli -p "${CLUSTER_PORTS[0]}" CLUSTER NODES |
		awk '$3 ~ /master/ && $3 !~ /fail/ && $9 != "" { split($2, a, "[:@]"); print a[2] }'
}

# ------------------------------------------------------------ acquisition

sess_open a
sess a "SELECT fenced_acquire('c:1');"
expect_match "fenced_acquire through the Cluster" "$S|$R" "^00000\|[1-9][0-9]*$"
n1=$(topology_cluster_node_of "$(lock_key c:1)")
expect "the lock is on the primary of its slot" "$(lock_on "$n1" c:1)" 1
sess a "SELECT fenced_extend('c:1'), fenced_release('c:1');"
expect "extend and release" "$S|$R" "00000|t|t"

# the renewer renews through the same Cluster client, on the slot's primary
expect "a renewed lease through the Cluster" "$(renewed_across c:renew)" "t|t|t"

sess a "SELECT count(*) FROM generate_series(1, 30) i WHERE fenced_acquire('c:many:' || i) IS NOT NULL;"
expect "thirty resources, over every primary" "$S|$R" "00000|30"
nodes_used=$(for i in $(seq 1 30); do topology_cluster_node_of "$(lock_key "c:many:$i")"; done | sort -u | wc -l)
expect "their slots are on three primaries" "$nodes_used" 3
sess a "SELECT pg_backend_pid();"
a_pid=$R
conns=$(ss -tnp 2>/dev/null | grep -c "pid=$a_pid,")
expect "one connection per node used (three)" "$conns" 3
sess a "SELECT count(*) FROM generate_series(1, 30) i WHERE fenced_release('c:many:' || i);"
expect "all released" "$R" 30

# transaction leases over several nodes, given back at commit: the
# releases, sent where interrupts are held, each go to their own node
sess a "BEGIN; SELECT count(*) FROM generate_series(1, 10) i WHERE fenced_acquire_xact('c:x:' || i) IS NOT NULL;"
expect "ten transaction leases" "$S|$R" "00000|10"
nodes_used=$(for i in $(seq 1 10); do topology_cluster_node_of "$(lock_key "c:x:$i")"; done | sort -u | wc -l)
held=$(for i in $(seq 1 10); do lock_on "$(topology_cluster_node_of "$(lock_key "c:x:$i")")" "c:x:$i"; done | grep -c 1)
expect "held on their nodes ($nodes_used primaries)" "$held" 10
sess a "COMMIT;"
left=$(for i in $(seq 1 10); do lock_on "$(topology_cluster_node_of "$(lock_key "c:x:$i")")" "c:x:$i"; done | grep -c 1)
expect "all given back at commit" "$S|$left" "00000|0"

# a set of resources over several nodes (fenced_acquire_xact(text[])):
# each taken on its slot's primary, one by one in byte order, all or none
set_held() { for i in $(seq 1 10); do [ "$i" = "${1:-}" ] && continue; lock_on "$(topology_cluster_node_of "$(lock_key "c:set:$i")")" "c:set:$i"; done | grep -c 1; }
SET10="ARRAY(SELECT 'c:set:' || i FROM generate_series(1, 10) i)"
sess a "BEGIN; SELECT array_length(fenced_acquire_xact($SET10), 1);"
expect "a set of ten resources in one call" "$S|$R" "00000|10"
expect "held on their slots' primaries" "$(set_held)" 10
sess a "COMMIT;"
expect "all given back at commit" "$S|$(set_held)" "00000|0"
sess_open b
sess b "SELECT fenced_acquire('c:set:5') IS NOT NULL;"
sess a "BEGIN; SELECT fenced_acquire_xact($SET10, wait => '100ms') IS NULL;"
expect "one of them busy on its node: NULL" "$S|$R" "00000|t"
expect "and none of the others is held, before the transaction ends" "$(set_held 5)" 0
sess a "COMMIT;"
sess b "SELECT fenced_release('c:set:5');"
sess_close b

# fair mode: the waiters' queue in the lock key's slot, on its primary;
# the waiter woken by the release's SPUBLISH; a fair set over the nodes
sess_open b
sess a "SELECT fenced_acquire('c:fair', ttl => '30 s') IS NOT NULL;"
sess_send b "SELECT fenced_acquire('c:fair', ttl => '30 s', wait => '30 s', fair => true) IS NOT NULL; SELECT fenced_release('c:fair');"
nf=$(topology_cluster_node_of "$(lock_key c:fair)")
for _ in $(seq 500); do [ "$(redis-cli -p "$nf" LLEN "$(lock_key c:fair):fair:queue" 2>/dev/null)" = 1 ] && break; sleep 0.02; done
expect "fair: the waiter is queued on the lock key's primary" "$(redis-cli -p "$nf" LLEN "$(lock_key c:fair):fair:queue")" 1
expect "its timeout too, in the lock key's slot" "$(redis-cli -p "$nf" ZCARD "$(lock_key c:fair):fair:timeouts")" 1
sess a "SELECT fenced_release('c:fair');"
sess_wait b
expect "fair: the waiter gets the lock at the release" "$S|$R" $'00000|t\nt'
sess b "BEGIN; SELECT array_length(fenced_acquire_xact($SET10, fair => true), 1); COMMIT;"
expect "fair: a set of ten over the nodes" "$S|$R" "00000|10"
sess_close b

sess a "SET fencing.redis_wait_replicas = 1; SELECT fenced_acquire('c:2');"
expect_match "fencing.redis_wait_replicas = 1: the slot's replica acknowledges" "$S|$R" "^00000\|[1-9][0-9]*$"
sess a "SET fencing.redis_wait_replicas = 2; SET fencing.redis_wait_timeout = '200ms'; SELECT fenced_acquire('c:2');"
expect "two replicas required of one: TF106" "$S" "TF106"
sess a "RESET fencing.redis_wait_replicas; RESET fencing.redis_wait_timeout; SELECT fenced_release('c:2');"

# ------------------------------------------------------------ settings

sess a "SET fencing.redis_cluster_nodes = '127.0.0.1';"
expect "a seed without a port is refused" "$S" "22023"

sess a "SET fencing.redis_lock_key = 'lock:<resource>'; SET fencing.redis_token_key = 'fence:<resource>'; SELECT fenced_acquire('c:3');"
expect "a key layout with the two keys in two slots: TF104" "$S" "TF104"
expect_match "the message names the keys and their slots" "$R" \
	"Redis keys \"lock:c:3\" and \"fence:c:3\" are in different Redis Cluster hash slots \([0-9]+ and [0-9]+\)"
expect_match "the hint names the settings" "$R" "HINT: +Give fencing.redis_lock_key and fencing.redis_token_key the same \{hash tag\}"
sess a "SET fencing.redis_lock_key = 'lock:{<resource>}'; SET fencing.redis_token_key = 'fence:{<resource>}'; SELECT fenced_acquire('c:3');"
expect_match "the classic layout with a hash tag works" "$S|$R" "^00000\|[1-9][0-9]*$"
sess a "SELECT fenced_release('c:3'); RESET fencing.redis_lock_key; RESET fencing.redis_token_key;"

sess a "SET fencing.redis_database = 1; SELECT fenced_acquire('c:4');"
expect "a database other than 0: TF104" "$S" "TF104"
expect_match "the message says why" "$R" "fencing.redis_database is 1, but a Redis Cluster has only database 0"
sess a "RESET fencing.redis_database;"

sess a "SET fencing.redis_sentinels = '127.0.0.1:1'; SELECT fenced_acquire('c:4');"
expect "Sentinel and Cluster settings together: TF104" "$S" "TF104"
expect_match "the message names both" "$R" "fencing.redis_sentinels and fencing.redis_cluster_nodes are both set"
sess a "RESET fencing.redis_sentinels;"

# one session, from one server to Cluster mode and back: the connection
# made under the old settings is closed, not kept as a node's
sess_open m
n1=$(topology_cluster_node_of "$(lock_key c:1)")
sess m "SET fencing.redis_cluster_nodes = ''; SET fencing.redis_port = $n1; SELECT fenced_acquire('c:1');"
expect_match "one server (a primary of the cluster)" "$S|$R" "^00000\|[1-9][0-9]*$"
sess m "RESET fencing.redis_cluster_nodes; SELECT fenced_release('c:1'), fenced_acquire('c:many:1') IS NOT NULL, fenced_release('c:many:1');"
expect "then Cluster mode in the same session" "$S|$R" "00000|t|t|t"
sess m "SET fencing.redis_cluster_nodes = ''; SELECT fenced_acquire('c:1') IS NOT NULL, fenced_release('c:1');"
expect "and back to one server" "$S|$R" "00000|t|t"
sess_close m

sql -c "CREATE ROLE regress_app LOGIN" -c "GRANT EXECUTE ON FUNCTION fenced_acquire(text, interval, interval, boolean, interval, boolean, text) TO regress_app" >/dev/null
sess_open u -U regress_app
sess u "SET fencing.redis_cluster_nodes = '127.0.0.1:1';"
expect "a non-superuser cannot point the backend at another cluster" "$S" "42501"
sess u "SELECT fenced_acquire('c:u');"
expect_match "but acquires through the configured one" "$S|$R" "^00000\|[1-9][0-9]*$"
sess_close u

# ------------------------------------------------------------ redirects

# move_slot SLOT FROM TO: migrate a slot and its keys between primaries
move_slot() {
	local slot=$1 from=$2 to=$3 keys p
	redis-cli -p "$to" CLUSTER SETSLOT "$slot" IMPORTING "$(node_id "$from")" >/dev/null
	redis-cli -p "$from" CLUSTER SETSLOT "$slot" MIGRATING "$(node_id "$to")" >/dev/null
	keys=$(redis-cli -p "$from" CLUSTER GETKEYSINSLOT "$slot" 100 | tr '\n' ' ')
	# shellcheck disable=SC2086
	[ -z "$keys" ] || redis-cli -p "$from" MIGRATE 127.0.0.1 "$to" "" 0 5000 KEYS $keys >/dev/null
	for p in $(primaries); do
		redis-cli -p "$p" CLUSTER SETSLOT "$slot" NODE "$(node_id "$to")" >/dev/null
	done
}
other_primary() { primaries | grep -vx "$1" | head -1; }

sess a "SELECT fenced_acquire('c:moved');"
before=$R
from=$(topology_cluster_node_of "$(lock_key c:moved)")
to=$(other_primary "$from")
move_slot "$(slot_of c:moved)" "$from" "$to"
sess a "SELECT fenced_release('c:moved');"
expect "a stale map: -MOVED is followed (release on the new node)" "$S|$R" "00000|t"
sess a "SELECT redirects FROM fence_stat_redis;"
redirects=$R
check "and counted in fence_stat_redis.redirects ($redirects)" test "${redirects:-0}" -ge 1
sess a "SELECT fenced_acquire('c:moved');"
expect "and the next acquisition goes there" "$S" "00000"
check "with a token above the one before ($R > $before)" test "${R:-0}" -gt "$before"
expect "the lock is on the new node" "$(lock_on "$to" c:moved)" 1

# -ASK: a slot half-way to another node, the lock key already moved, the
# token key not yet.  The scripts of fenced_extend and fenced_release take
# the lock key alone: the old node answers -ASK, the new one ASKING +
# EVALSHA, with NOSCRIPT first (its script cache is flushed), then EVAL,
# sent again through the old node, which answers -ASK again.  (The acquire
# script takes both keys: during a migration it gets -TRYAGAIN, below.)
sess a "SELECT fenced_acquire('c:ask', ttl => '10s');"
before=$R
from=$(topology_cluster_node_of "$(lock_key c:ask)")
to=$(other_primary "$from")
slot=$(slot_of c:ask)
redis-cli -p "$to" CLUSTER SETSLOT "$slot" IMPORTING "$(node_id "$from")" >/dev/null
redis-cli -p "$from" CLUSTER SETSLOT "$slot" MIGRATING "$(node_id "$to")" >/dev/null
redis-cli -p "$from" MIGRATE 127.0.0.1 "$to" "$(lock_key c:ask)" 0 5000 >/dev/null
redis-cli -p "$to" SCRIPT FLUSH >/dev/null
sess a "SELECT fenced_extend('c:ask', ttl => '60s');"
expect "a migrating slot: -ASK, ASKING, NOSCRIPT, EVAL: extended" "$S|$R" "00000|t"
sess a "SELECT redirects FROM fence_stat_redis;"
check "and counted in fence_stat_redis.redirects ($R > $redirects)" test "${R:-0}" -gt "$redirects"
ttl=$(printf 'ASKING\nPTTL %s\n' "$(lock_key c:ask)" | redis-cli -p "$to" | tail -1)
check "on the importing node (PTTL $ttl ms > 10 s)" test "$ttl" -gt 10000
sess a "SELECT fenced_release('c:ask');"
expect "and released there" "$S|$R" "00000|t"
redis-cli -p "$from" MIGRATE 127.0.0.1 "$to" "$(token_key c:ask)" 0 5000 >/dev/null
for p in $(primaries); do redis-cli -p "$p" CLUSTER SETSLOT "$slot" NODE "$(node_id "$to")" >/dev/null; done
sess a "SELECT fenced_acquire('c:ask');"
expect "the migration done: acquired from the new node" "$S" "00000"
check "with a token above the one before ($R > $before)" test "${R:-0}" -gt "$before"
expect "the lock is there" "$(lock_on "$to" c:ask)" 1

# -TRYAGAIN: the old node holds one of the two keys (the token counter
# of a resource acquired and released before the migration began)
from=$(topology_cluster_node_of "$(lock_key c:try)")
sess a "SELECT fenced_acquire('c:try');"
before=$R
sess a "SELECT fenced_release('c:try');"
to=$(other_primary "$from")
slot=$(slot_of c:try)
redis-cli -p "$to" CLUSTER SETSLOT "$slot" IMPORTING "$(node_id "$from")" >/dev/null
redis-cli -p "$from" CLUSTER SETSLOT "$slot" MIGRATING "$(node_id "$to")" >/dev/null
sess a "SELECT fenced_acquire('c:try');"
expect "one key migrated, the other not: TRYAGAIN is TF103" "$S" "TF103"
expect_match "Redis's text in the detail" "$R" "DETAIL: +TRYAGAIN"
for p in "$from" "$to"; do redis-cli -p "$p" CLUSTER SETSLOT "$slot" STABLE >/dev/null; done
sess a "SELECT fenced_acquire('c:try');"
expect "the migration given up: acquired again" "$S" "00000"
check "with a token above the one before ($R > $before)" test "${R:-0}" -gt "$before"

# ------------------------------------------------------------ failures

sess_open f
sess f "SET fencing.redis_command_timeout = '300ms'; SET fencing.redis_connect_timeout = '300ms';"
sess f "SELECT fenced_acquire('c:f');"
node=$(topology_cluster_node_of "$(lock_key c:f)")
kill -STOP "${NODE_PID[$node]}"
sess f "SELECT fenced_acquire('c:f');"
expect "the slot's node frozen mid-call: TF101" "$S" "TF101"
expect_match "naming the node" "$R" "timed out waiting for a reply from Redis server at \"127\.0\.0\.1:$node\""
check "within the command timeout (${T} ms)" test "$T" -lt 1000
kill -CONT "${NODE_PID[$node]}"
sess f "SELECT fenced_acquire('c:f');"
expect_match "the node back: the same session acquires again" "$S|$R" "^00000\|[0-9]+$"

sess f "SET fencing.redis_cluster_nodes = '$DEAD_PORTS'; SELECT fenced_acquire('c:g');"
expect "every seed down: TF101" "$S" "TF101"
expect_match "naming a seed" "$R" "could not connect to Redis server at \"127\.0\.0\.1:[0-9]+\": Connection refused"
check "within the connect + command timeouts (${T} ms)" test "$T" -lt 1000
sess_close f

# ------------------------------------------------------------ failovers

# failover NAME COMMAND...: the session holds c:fo; COMMAND fails over the
# primary of its slot; the session acquires until it gets the lock from
# the new primary, with a token above the one before
failover() {
	local name=$1 old before t0 ms np=
	shift
	old=$(topology_cluster_node_of "$(lock_key c:fo)")
	sess a "SELECT fenced_acquire('c:fo', ttl => '500ms');"
	before=$R
	FAILOVER_OLD=$old
	t0=$(now_ms)
	"$@"
	# up to a minute: on a loaded machine an election can fail and is
	# retried after twice the failover-timeout
	while [ $(($(now_ms) - t0)) -lt 60000 ]; do
		sess a "SELECT fenced_acquire('c:fo', ttl => '500ms', wait => '1s');"
		if [ "$S" = 00000 ] && [ -n "$R" ]; then
			np=$(topology_cluster_node_of "$(lock_key c:fo)")
			[ -n "$np" ] && [ "$np" != "$old" ] && [ "$(lock_on "$np" c:fo)" = 1 ] && break
		fi
		np=
		sleep 0.02
	done
	ms=$(($(now_ms) - t0))
	check "$name: the same session takes the lock on the new primary" test -n "$np"
	check "$name: with a token above the one before ($R > $before)" test "${R:-0}" -gt "$before"
	echo "# $name: first acquisition from the new primary ${ms} ms after the failover began"
}

# the replica of the primary serving c:fo
replica_of() {
	redis-cli -p "$1" CLUSTER NODES | awk -v id="$(node_id "$1")" '$4 == id { split($2, a, "[:@]"); print a[2]; exit }'
}
cluster_failover() { redis-cli -p "$(replica_of "$FAILOVER_OLD")" CLUSTER FAILOVER >/dev/null; }
failover "CLUSTER FAILOVER" cluster_failover
check "the cluster settles" topology_cluster_settled

# the primary is killed in the middle of a call (kill_mid_call)
kill_primary() { kill_mid_call "$FAILOVER_OLD" c:fo; }
failover "kill -9 of a primary" kill_primary
check "the killed node comes back" topology_node_restart "$KILLED"
check "the cluster settles" topology_cluster_settled

sess_close a
checks_finish
