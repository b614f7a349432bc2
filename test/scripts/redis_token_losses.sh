#!/usr/bin/env bash
# No token twice after two losses in a row (issue 21, section 1), against a
# real redis-server.  A mark above the Redis clock makes the first
# acquisition repair its token past the mark; then Redis loses the counter
# again (its own expiry, or FLUSHALL) and a second session acquires: its
# token must be above the first one, whose only record was the lost
# counter: the first holder's transaction aborted (its raise of the mark
# rolled back), or its raise at acquisition was off.  And fenced_extend
# extends the counter key's lifetime with the lock's, so that a lock held
# longer than ttl + 60 s never outlives its counter.
#
# On the old code (4e4bfab) the second token equals the first, and the
# stale first holder's write is accepted over the second's.
#
# Usage: bash test/scripts/redis_token_losses.sh   (prints ok/not ok lines; exit 0 = pass)
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

# A mark far above any token the Redis clock gives, as if that clock were
# behind the one that issued the mark's token: every token below comes
# from a repair.
HIGH=9000000000000000

counter() { echo "fencing:v1:{r:$1}:token"; }
lock() { echo "fencing:v1:{r:$1}:lock"; }

# lose FORM RESOURCE: Redis loses the counter of RESOURCE.  "expiry" stands
# for the key's own expiry, ttl + 60 s after the last acquisition, by
# making it expire now; "flush" is FLUSHALL.
lose() {
	case $1 in
		expiry) rcli PEXPIRE "$(counter "$2")" 1 >/dev/null ;;
		flush) rcli FLUSHALL >/dev/null ;;
	esac
	sleep 0.05
}

# wait_free RESOURCE: until the lock key of RESOURCE is gone (its ttl).
wait_free() {
	local i
	for ((i = 0; i < 100; i++)); do
		[ "$(rcli EXISTS "$(lock "$1")")" = 0 ] && return 0
		sleep 0.05
	done
	return 1
}

for form in expiry flush; do
	for how in aborted raise_off; do
		r="$form:$how"
		sql -c "SELECT fence_advance('$r', $HIGH)" >/dev/null
		case $how in
			aborted)
				sess a "BEGIN;"
				sess a "SELECT fenced_acquire('$r', ttl => '1 s');"
				ta=$(echo "$R" | tail -1)
				sess a "ROLLBACK;"
				;;
			raise_off)
				# (an error on the old code, which has no raise at all)
				sess a "SET fencing.acquire_raises_mark = off;"
				sess a "SELECT fenced_acquire('$r', ttl => '1 s');"
				first=$(echo "$R" | tail -1)
				sess a "SELECT fenced_release('$r');"
				# the next token would be counted on from the repaired
				# counter, recorded by Redis alone: refused (issue 38)
				sess a "SELECT fenced_acquire('$r', ttl => '1 s');"
				expect "$r: A's second token, counted on from its repaired first one, is refused" "$S" "TF120"
				ta=$first
				sess a "RESET fencing.acquire_raises_mark;"
				;;
		esac
		check "$r: A's token is a repaired one, above the mark ($ta > $HIGH)" \
			test "${ta:-0}" -gt "$HIGH" 2>/dev/null
		check "$r: A's lock ended (its ttl or the abort)" wait_free "$r"
		lose "$form" "$r"
		check "$r: Redis lost the counter" test "$(rcli EXISTS "$(counter "$r")")" = 0
		sess b "SELECT fenced_acquire('$r');"
		tb=$(echo "$R" | tail -1)
		expect_match "$r: B's acquisition repairs again" "$R" "went backwards"
		check "$r: after the second loss, B's token is above A's ($tb > $ta)" \
			test "${tb:-0}" -gt "${ta:-0}" 2>/dev/null
		sess b "INSERT INTO items (id, val) VALUES ('$r', 'B');"
		expect "$r: B writes" "$S" "00000"
		sess a "INSERT INTO items (id, tok, val) VALUES ('$r', $ta, 'A');"
		expect "$r: stale A's write after B's is rejected" "$S" "TF001"
		sess b "SELECT fenced_release('$r');"
	done
done

# A third loss in a row, after B's repaired token was recorded by its raise
# at acquisition: the next repair goes past that mark.
r=flush:raise_off
mark=$(sql -c "SELECT fence_mark('$r')")
lose flush "$r"
sess b "SELECT fenced_acquire('$r');"
tc=$(echo "$R" | tail -1)
check "a third loss: the token is above the mark B's acquisition recorded ($tc > $mark)" \
	test "${tc:-0}" -gt "${mark:-0}" 2>/dev/null
sess b "SELECT fenced_release('$r');"

# ------------------------------------------- a lock extended past its counter

r=extended
sql -c "SELECT fence_advance('$r', $HIGH)" >/dev/null
sess a "SET fencing.acquire_raises_mark = off;"
sess a "SELECT fenced_acquire('$r', ttl => '2 s');"
ta=$(echo "$R" | tail -1)
sess a "RESET fencing.acquire_raises_mark;"
before=$(rcli PTTL "$(counter "$r")")
check "the counter key lives ttl + 60 s from the acquisition ($before <= 62000)" \
	test "${before:-0}" -gt 0 -a "${before:-0}" -le 62000
sess a "SELECT fenced_extend('$r', ttl => '300 s');"
expect "fenced_extend extends the lock" "$R" "t"
lockttl=$(rcli PTTL "$(lock "$r")")
after=$(rcli PTTL "$(counter "$r")")
check "fenced_extend extends the counter key with it, to ttl + 60 s ($after > $lockttl + 59000)" \
	test "${after:-0}" -gt "$((${lockttl:-0} + 59000))"
sess a "SELECT fenced_extend('$r', ttl => '5 s');"
after2=$(rcli PTTL "$(counter "$r")")
check "a shorter extension never shortens the counter's lifetime ($after2 > 300000)" \
	test "${after2:-0}" -gt 300000
sess a "SELECT fenced_release('$r');"
lose expiry "$r"
sess b "SELECT fenced_acquire('$r');"
tb=$(echo "$R" | tail -1)
check "after the extended lock's counter is lost, the next token is above it ($tb > $ta)" \
	test "${tb:-0}" -gt "${ta:-0}" 2>/dev/null
sess b "SELECT fenced_release('$r');"

# The classic layout's counter never expires, extended or not.
r=classic
sess a "SET fencing.redis_lock_key = 'lock:<resource>'; SET fencing.redis_token_key = 'fence:<resource>';"
sess a "SELECT fenced_acquire('$r') IS NOT NULL, fenced_extend('$r', ttl => '60 s');"
expect "classic layout: acquired and extended" "$R" "t|t"
expect "classic layout: its counter still has no expiry" "$(rcli PTTL "fence:$r")" "-1"
sess a "SELECT fenced_release('$r'); RESET fencing.redis_lock_key; RESET fencing.redis_token_key;"

checks_finish
