#!/usr/bin/env bash
# Never a token twice after a repair, and renewal that cannot outlive a
# stuck owner (issue 38, sections 1 and 2), against real redis-servers and
# a server with the library preloaded:
#
#  - loss sequences after a repair: a resource's mark is set by
#    fence_advance above the Redis clock, so its first acquisition repairs
#    the counter past the mark, and the counter is no longer the clock's;
#    grants follow, then Redis loses the last of them -- a failover to a
#    replica that stopped replicating after the first grant (REPLICAOF NO
#    ONE), or a restart from a snapshot taken then (SAVE) -- and more
#    grants follow.  With fencing.acquire_raises_mark on (the default) and
#    off: no token is ever issued twice.  On, every token is above the
#    ones before and a stale holder's write is rejected; off, a token
#    counted on from a repaired counter is refused with TF120 naming the
#    resource (only Redis would record it, and Redis can lose it);
#  - a renewed lease (renew => true) whose owner backend is stopped
#    (SIGSTOP) in the middle of its statement: renewal stops (the backend
#    is in state T in /proc), and a waiter gets the lock after the ttl;
#  - a longest hold per acquisition: max_hold, or fencing.lease_max_hold
#    (10 min by default), ends renewal, and a waiter gets the lock, while
#    the owner's statement is still running.
#
# On the old code (3ef157e), with the raise off, the token issued after
# either loss equals one issued before it; renewal goes on under a stopped
# owner; max_hold and fencing.lease_max_hold do not exist.
#
# Usage: bash test/scripts/redis_repair.sh   (prints ok/not ok lines; exit 0 = pass)
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../lib/redis_lib.sh"

harness_start_redis || harness_start_redis || exit 1
redis_start_pg || exit 1
harness_tmpdir workdir

sql <<'SQL' >/dev/null
CREATE TABLE items (id text, tok fence_token, val text);
CREATE TRIGGER fence BEFORE INSERT OR UPDATE OR DELETE ON items
	FOR EACH ROW EXECUTE FUNCTION fence_guard('tok', '{id}');
SQL

sess_open a

# A mark far above any token the Redis clock gives, as a token from
# another lock service or from a clock that was ahead: the first
# acquisition repairs the counter past it.
HIGH=9000000000000000

counter() { echo "fencing:v1:{r:$1}:token"; }

# ------------------------------------------------- loss sequences

# grant RESOURCE: session a acquires RESOURCE (and releases it); appends
# its token, or its SQLSTATE where it failed, to GRANTS, and keeps the
# last message in MSG.
grant() {
	sess a "SELECT fenced_acquire('$1', ttl => '1 s');"
	if [ "$S" = 00000 ]; then
		GRANTS+=("$(echo "$R" | tail -1)")
		sess a "SELECT fenced_release('$1');"
	else
		GRANTS+=("$S")
		MSG=$R
	fi
}

# no_twice DESCRIPTION: no token appears twice in GRANTS.
no_twice() {
	local dup
	dup=$(printf '%s\n' "${GRANTS[@]}" | grep -E '^[0-9]+$' | sort | uniq -d | tr '\n' ' ')
	expect "$1: no token issued twice (${GRANTS[*]})" "$dup" ""
}

# increasing DESCRIPTION: every entry of GRANTS is a token above the one
# before.
increasing() {
	local i ok=0
	for ((i = 0; i < ${#GRANTS[@]}; i++)); do
		[[ ${GRANTS[$i]} =~ ^[0-9]+$ ]] || ok=1
		if [ "$i" -gt 0 ] && [ "$ok" = 0 ]; then
			[ "${GRANTS[$i]}" -gt "${GRANTS[$((i - 1))]}" ] || ok=1
		fi
	done
	check "$1: every acquisition got a token above the one before (${GRANTS[*]})" test "$ok" = 0
}

# lose KIND: Redis loses the grants since the point that begin_loss KIND
# marked.  failover: the replica, which stopped replicating then, becomes
# the server; snapshot: the server restarts from the snapshot taken then.
begin_loss() {
	case $1 in
		failover)
			for _ in $(seq 100); do
				[ "$(redis-cli -p "$REPLICA_PORT" GET "$(counter "$2")")" = "${GRANTS[0]}" ] && break
				sleep 0.05
			done
			redis-cli -p "$REPLICA_PORT" REPLICAOF NO ONE >/dev/null
			;;
		snapshot) rcli SAVE >/dev/null ;;
	esac
}
lose() {
	case $1 in
		failover) sess a "SET fencing.redis_port = $REPLICA_PORT;" ;;
		snapshot)
			redis_stop
			harness_redis_launch
			;;
	esac
}

# losses KIND RAISE: the sequence (see the header) with the raise at
# acquisition RAISE (on/off).
losses() {
	local kind=$1 raise=$2 r="$1:$2"
	GRANTS=()
	MSG=
	[ "$kind" = failover ] && { start_replica || echo "# no replica"; }
	sql -c "SELECT fence_advance('$r', $HIGH)" >/dev/null
	sess a "SET fencing.acquire_raises_mark = $raise;"
	grant "$r"
	check "$r: the first token is a repair, above the mark (${GRANTS[0]} > $HIGH)" \
		test "${GRANTS[0]}" -gt "$HIGH" 2>/dev/null
	begin_loss "$kind" "$r"
	grant "$r"
	grant "$r"
	lose "$kind"
	grant "$r"
	grant "$r"
	no_twice "$r"
	if [ "$raise" = on ]; then
		increasing "$r"
		# the holder of the last token before the loss, stale now
		sess a "INSERT INTO items (id, tok, val) VALUES ('$r', ${GRANTS[2]:-0}, 'stale');"
		expect "$r: a write with the last token before the loss is rejected" "$S" "TF001"
	else
		expect "$r: a token counted on from the repaired counter is refused (TF120)" \
			"${GRANTS[1]}" "TF120"
		expect_match "$r: the error names the resource and the repaired counter" "$MSG" \
			"ERROR: .*resource \"$r\".*repaired"
		expect "$r: refused after the loss too" "${GRANTS[3]}" "TF120"
	fi
	sess a "RESET fencing.acquire_raises_mark; RESET fencing.redis_port;"
}

for kind in failover snapshot; do
	for raise in on off; do
		losses "$kind" "$raise"
	done
done

# Without a repair the clock still rules, raise or not: a resource whose
# mark is below the clock is never refused.
sess a "SET fencing.acquire_raises_mark = off;"
GRANTS=()
grant plain:1
grant plain:1
sess a "RESET fencing.acquire_raises_mark;"
increasing "a resource never repaired, with the raise off"

# ------------------------------------------- renewal and a stuck owner


# owner_start RESOURCE ARGS [SETTINGS]: a session takes RESOURCE with
# ttl => '1 s', renew => true and ARGS, in a 20 s statement, in the
# background; sets OWNER (its psql) and BACKEND (its backend's PID) once
# the lease is listed.  The owner's raise at acquisition is off (a lock
# that guards no table): a raised mark's row would stay locked by the
# owner's open statement, and the waiter's raise wait for it.
owner_start() {
	psql -X -q -A -t -c "SET fencing.acquire_raises_mark = off; ${3:-SELECT 1}" \
		-c "SELECT fenced_acquire('$1', ttl => '1 s', renew => true$2) IS NOT NULL, pg_sleep(20)" \
		>"$workdir/owner.out" 2>&1 &
	OWNER=$!
	HARNESS_PIDS+=("$OWNER")
	BACKEND=
	for _ in $(seq 100); do
		BACKEND=$(sql -c "SELECT pid FROM fenced_lock_holders WHERE resource = '$1'")
		[ -n "$BACKEND" ] && break
		kill -0 "$OWNER" 2>/dev/null || break
		sleep 0.05
	done
}

# owner_end: end the owner's statement and session.
owner_end() {
	[ -n "$BACKEND" ] && kill -CONT "$BACKEND" 2>/dev/null
	[ -n "$BACKEND" ] && sql -c "SELECT pg_terminate_backend($BACKEND)" >/dev/null 2>&1
	wait "$OWNER" 2>/dev/null
}

state_of() { sed 's/.*) //' "/proc/$1/stat" 2>/dev/null | cut -d' ' -f1; }

owner_start stop:1 ""
expect_match "a renewed lease is listed with its backend" "$BACKEND" '^[0-9]+$'
kill -STOP "$BACKEND" 2>/dev/null
for _ in $(seq 100); do [ "$(state_of "$BACKEND")" = T ] && break; sleep 0.02; done
expect "its backend is stopped (/proc state T)" "$(state_of "$BACKEND")" "T"
got=$(sql -c "SELECT fenced_acquire('stop:1', wait => '6 s') IS NOT NULL")
expect "a waiter gets the lock of the stopped owner" "$got" "t"
expect "its lease is no longer renewing" \
	"$(sql -c "SELECT renewing FROM fenced_lock_holders WHERE resource = 'stop:1' AND pid = ${BACKEND:-0}")" "f"
sql -c "SELECT fenced_release('stop:1')" >/dev/null 2>&1
owner_end

expect "fencing.lease_max_hold defaults to 10 min" \
	"$(sql -c "SHOW fencing.lease_max_hold" 2>&1)" "10min"

owner_start hold:1 ", max_hold => '2 s'"
expect_match "a lease with max_hold => '2 s' is listed" "$BACKEND" '^[0-9]+$'
got=$(sql -c "SELECT fenced_acquire('hold:1', wait => '6 s') IS NOT NULL")
expect "past max_hold, a waiter gets the lock while the owner still works" "$got" "t"
expect "the owner's statement is still running" \
	"$(sql -c "SELECT state FROM pg_stat_activity WHERE pid = ${BACKEND:-0}")" "active"
sql -c "SELECT fenced_release('hold:1')" >/dev/null 2>&1
owner_end

owner_start hold:2 "" "SET fencing.lease_max_hold = '2s'"
expect_match "a lease under fencing.lease_max_hold = '2s' is listed" "$BACKEND" '^[0-9]+$'
got=$(sql -c "SELECT fenced_acquire('hold:2', wait => '6 s') IS NOT NULL")
expect "past fencing.lease_max_hold, a waiter gets the lock" "$got" "t"
sql -c "SELECT fenced_release('hold:2')" >/dev/null 2>&1
owner_end

# A lease renewed within its longest hold is still held: the bound does
# not end renewal early.
owner_start hold:3 ", max_hold => '1 min'"
got=$(sql -c "SELECT fenced_acquire('hold:3', wait => '3 s') IS NULL")
expect "within max_hold, the lease is renewed and the waiter gets NULL" "$got" "t"
owner_end

sess_close a
checks_finish
