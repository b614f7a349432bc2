#!/usr/bin/env bash
# Tokens from fenced_acquire() never repeat and never go backwards, against
# real redis-servers: the floor is the newest mark (committed or in
# progress) whatever the caller's snapshot; tokens follow the Redis
# server's clock, so that Redis losing data (FLUSHALL, a restart without
# data or from an older snapshot, a failover to a replica that missed the
# last grants) never issues a token again, nor one below a token issued
# before; the counter key's lifetime is bounded, except in the classic
# lock:/fence: layout shared with other clients.
#
# Usage: bash test/scripts/redis_tokens.sh   (prints ok/not ok lines; exit 0 = pass)
# test/run: quick
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../lib/redis_lib.sh"

harness_start_redis || harness_start_redis || exit 1
redis_start_pg || exit 1

sql <<'SQL' >/dev/null
CREATE TABLE items (id text, tok fence_token, val text);
CREATE TRIGGER fence BEFORE INSERT OR UPDATE OR DELETE ON items
	FOR EACH ROW EXECUTE FUNCTION fence_guard('tok', '{id}');
SQL

sess_open a
sess_open b
sess_open c

# A mark far above any token the Redis clock would give, as if that clock
# were behind: only the floor from the database can put a token above it.
HIGH=9000000000000000

# ------------------------------ the floor is the newest mark, not a snapshot

for iso in "REPEATABLE READ" "SERIALIZABLE"; do
	r="snap:${iso// /_}"
	sess b "BEGIN ISOLATION LEVEL $iso; SELECT count(*) FROM items;"
	sess a "SELECT fence_advance('$r', $HIGH);"
	sess b "SELECT fence_mark('$r') IS NULL;"
	expect "$iso: the snapshot taken before does not see the new mark" "$R" "t"
	sess b "SELECT fenced_acquire('$r');"
	token=$(echo "$R" | tail -1)
	check "$iso: fenced_acquire issues a token above the mark committed after the snapshot ($token > $HIGH)" \
		test "${token:-0}" -gt "$HIGH"
	expect_match "$iso: and warns that the counter was behind the mark" "$R" \
		"WARNING: +token counter in Redis for resource \"$r\" went backwards: next token [0-9]+ is not above the high-water mark $HIGH"
	sess b "COMMIT;"
	sess b "SELECT fenced_release('$r');"
done

# (with the raise at acquisition off: without preloading, on, the
# acquisition would wait for that transaction)
r=snap:in_progress
sess a "BEGIN; SELECT fence_advance('$r', $HIGH);"
sess b "SET fencing.acquire_raises_mark = off; SELECT fenced_acquire('$r');"
token=$(echo "$R" | tail -1)
check "a mark raised by a transaction still in progress is a floor too ($token > $HIGH)" \
	test "${token:-0}" -gt "$HIGH"
sess b "RESET fencing.acquire_raises_mark; SELECT fenced_release('$r');"
sess b "SELECT fenced_acquire('$r') > $HIGH;"
expect "with the raise on, that open transaction does not make an acquisition busy (a floor, 1.3)" "$S|${R##*$'\n'}" "00000|t"
sess a "ROLLBACK;"
sess b "SELECT fenced_release('$r');"

# Preloaded, the newest mark is read first at the address the shared table
# recorded for it (the version the last acquisition wrote at its commit):
# a version there that a transaction in progress is updating is not the
# newest, and the index finds the one in progress.  The UPDATE by hand
# records no address, so the table still points at the version it updates.
r=snap:hinted
sess b "SELECT fenced_acquire_xact('$r') IS NOT NULL;"
expect "an acquisition at commit wrote the mark (and recorded its address)" "$S|$R" "00000|t"
sess a "BEGIN; UPDATE fence_high_water SET token = '$HIGH' WHERE resource = '$r';"
sess b "SELECT fenced_acquire_xact('$r');"
token=$(echo "$R" | tail -1)
check "a version at the recorded address that is being updated is not the floor: the update in progress is ($token > $HIGH)" \
	test "${token:-0}" -gt "$HIGH"
sess a "ROLLBACK;"

# READ COMMITTED, one statement waiting for a busy lock: the mark moves
# while it waits, after its snapshot was taken.
r=snap:wait
sess c "SELECT fenced_acquire('$r') IS NOT NULL;"
out=$SESS_DIR/wait.out
sql -c "SELECT fenced_acquire('$r', wait => '20 s')" >"$out" 2>&1 &
bg=$!
sleep 0.5
sess a "SELECT fence_advance('$r', $HIGH);"
sess c "SELECT fenced_release('$r');"
wait $bg
token=$(tail -1 "$out")
check "READ COMMITTED: an acquisition that waited for a busy lock issues a token above the mark committed meanwhile ($token > $HIGH)" \
	test "${token:-0}" -gt "$HIGH"

# -------------------------------------------- Redis losing data: no repeats

# write VIA_SESSION RESOURCE: a plain write with the declared token
write() { sess "$1" "INSERT INTO items (id, val) VALUES ('$2', '$1');"; }

# (a) a restart from an older RDB snapshot: S2's grant is not in it
r=loss:rdb
sess a "SELECT fenced_acquire('$r');"
write a "$r"
sess a "SELECT fenced_release('$r');"
rcli SAVE >/dev/null
sess b "SELECT fenced_acquire('$r', ttl => '60 s');"
t2=$R
redis_stop
harness_redis_launch || exit 1
check "(a) Redis restarted from the snapshot taken before S2's grant" \
	test "$(rcli EXISTS "fencing:v1:{r:$r}:lock")" = 0
sess c "SELECT fenced_acquire('$r');"
t3=$R
check "(a) after a restart from an older snapshot, S3's token is above S2's unwritten one ($t3 > $t2)" \
	test "${t3:-0}" -gt "${t2:-0}" 2>/dev/null
write c "$r"
expect "(a) S3 writes" "$S" "00000"
write b "$r"
expect "(a) S2's stale write after S3's is rejected" "$S" "TF001"
rm -f "$REDIS_DIR/dump.rdb"

# (b) a restart without data, on a resource with no mark
r=loss:empty
sess b "SELECT fenced_acquire('$r', ttl => '60 s');"
t2=$R
redis_stop
harness_redis_launch || exit 1
check "(b) Redis restarted without data" test "$(rcli DBSIZE)" = 0
sess c "SELECT fenced_acquire('$r');"
t3=$R
check "(b) after a restart without data, S3's token is above S2's unwritten one, with no mark to go by ($t3 > $t2)" \
	test "${t3:-0}" -gt "${t2:-0}" 2>/dev/null
write c "$r"
expect "(b) S3 writes" "$S" "00000"
write b "$r"
expect "(b) S2's stale write after S3's is rejected" "$S" "TF001"

# (c) FLUSHALL while S2 holds an unwritten token
r=loss:flush
sess b "SELECT fenced_acquire('$r', ttl => '60 s');"
t2=$R
rcli FLUSHALL >/dev/null
sess c "SELECT fenced_acquire('$r');"
t3=$R
check "(c) after FLUSHALL, S3's token is above S2's unwritten one ($t3 > $t2)" \
	test "${t3:-0}" -gt "${t2:-0}" 2>/dev/null

# (d) failover to a replica that missed the last grants: the replica is
# promoted (REPLICAOF NO ONE) while S2 is granted tokens on the old
# primary, which then dies; the sessions are pointed at the new primary by
# a configuration reload.
r=loss:failover
start_replica || exit 1
sess a "SELECT fenced_acquire('$r');"
write a "$r"
sess a "SELECT fenced_release('$r');"
want=$(rcli GET "fencing:v1:{r:$r}:token")
for _ in $(seq 100); do
	[ "$(redis-cli -p "$REPLICA_PORT" GET "fencing:v1:{r:$r}:token")" = "$want" ] && break
	sleep 0.05
done
expect "(d) the replica has the first grant" \
	"$(redis-cli -p "$REPLICA_PORT" GET "fencing:v1:{r:$r}:token")" "$(rcli GET "fencing:v1:{r:$r}:token")"
redis-cli -p "$REPLICA_PORT" REPLICAOF NO ONE >/dev/null
sess b "SELECT fenced_acquire('$r', ttl => '60 ms'); SELECT pg_sleep(0.1); SELECT fenced_acquire('$r', ttl => '60 s');"
t2=$(echo "$R" | tail -1)
check "(d) the replica missed S2's grants" \
	test "$(redis-cli -p "$REPLICA_PORT" GET "fencing:v1:{r:$r}:token")" != "$t2"
redis_stop
sql -c "ALTER SYSTEM SET fencing.redis_port = $REPLICA_PORT" -c "SELECT pg_reload_conf()" >/dev/null
sleep 0.3
sess c "SELECT fenced_acquire('$r');"
t3=$R
check "(d) after failover to the lagging replica, S3's token is above S2's ($t3 > $t2)" \
	test "${t3:-0}" -gt "${t2:-0}" 2>/dev/null
write c "$r"
expect "(d) S3 writes" "$S" "00000"
write b "$r"
expect "(d) S2's stale write after S3's is rejected" "$S" "TF001"

sess_close a
sess_close b
sess_close c
checks_finish
