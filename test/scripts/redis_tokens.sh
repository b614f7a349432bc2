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
# Usage: test/scripts/redis_tokens.sh   (prints ok/not ok lines; exit 0 = pass)
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/redis_lib.sh"

harness_start_redis || harness_start_redis || exit 1
redis_start_pg || exit 1

q <<'SQL' >/dev/null
CREATE TABLE items (id text, tok fence_token, val text);
CREATE TRIGGER fence BEFORE INSERT OR UPDATE OR DELETE ON items
	FOR EACH ROW EXECUTE FUNCTION fence_guard('tok', 'r:{id}');
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

r=snap:in_progress
sess a "BEGIN; SELECT fence_advance('$r', $HIGH);"
sess b "SELECT fenced_acquire('$r');"
token=$(echo "$R" | tail -1)
check "a mark raised by a transaction still in progress is a floor too ($token > $HIGH)" \
	test "${token:-0}" -gt "$HIGH"
sess a "ROLLBACK;"
sess b "SELECT fenced_release('$r');"

# READ COMMITTED, one statement waiting for a busy lock: the mark moves
# while it waits, after its snapshot was taken.
r=snap:wait
sess c "SELECT fenced_acquire('$r') IS NOT NULL;"
out=$SESS_DIR/wait.out
q -c "SELECT fenced_acquire('$r', wait => '20 s')" >"$out" 2>&1 &
bg=$!
sleep 0.5
sess a "SELECT fence_advance('$r', $HIGH);"
sess c "SELECT fenced_release('$r');"
wait $bg
token=$(tail -1 "$out")
check "READ COMMITTED: an acquisition that waited for a busy lock issues a token above the mark committed meanwhile ($token > $HIGH)" \
	test "${token:-0}" -gt "$HIGH"

sess_close a
sess_close b
sess_close c
redis_finish
