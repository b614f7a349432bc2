#!/usr/bin/env bash
# Fair mode (fair => true) against a real redis-server: first come, first
# served among fair waiters, through the queue the fair acquire script
# keeps beside the lock (src/lock/lock_scripts.h, doc/redis.md "Key
# layout").
#
# - three fair waiters that arrive in order hold the lock in that order;
# - a hog that releases and at once takes the lock again while a waiter
#   is in line: the waiter is served first, every time (never loses twice
#   in a row, not even once, to a client that came after it); and a hog
#   looping freely against a waiter that comes back: both served, the
#   hog's grants between the waiter's call and its grant printed;
# - a waiter that gives up does not block the queue: one whose wait ends
#   leaves it, as does one cancelled (before its error is reported); one
#   whose backend is terminated loses its place at its timeout and the
#   next in line gets the lock; a waiter that stopped asking (planted in
#   the queue) is passed over once its timeout is past;
# - mixed: a fair acquisition waits its turn behind a waiter, an unfair
#   one takes a free lock whoever is in line (documented);
# - the set form and the classic key layout (the queue in braces, in the
#   lock key's slot); bad on_lost values.
#
# Usage: bash test/scripts/redis_fair.sh   (prints ok/not ok lines; exit 0 = pass)
# test/run: quick
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../lib/redis_lib.sh"

harness_start_redis || harness_start_redis || exit 1
redis_start_pg || exit 1


# wait_queued RESOURCE N: until N waiters are in RESOURCE's queue (10 s)
wait_queued() {
	for _ in $(seq 500); do
		[ "$(rcli LLEN "$(queue_key "$1")")" = "$2" ] && return 0
		sleep 0.02
	done
	return 1
}

sql -c "CREATE TABLE got (seq bigserial PRIMARY KEY, who text NOT NULL, arrived bigint)" >/dev/null
sql -c "CREATE SEQUENCE waiter_done" >/dev/null

sess_open h
sess_open w1
sess_open w2
sess_open w3

# a fair acquisition of a free lock, nothing left in the queue
sess h "SELECT fenced_acquire('f:free', ttl => '30 s', fair => true) IS NOT NULL; SELECT fenced_release('f:free');"
expect "fair => true takes a free lock" "$S|$R" $'00000|t\nt'
expect "and leaves no queue behind" "$(rcli EXISTS "$(queue_key f:free)" "$(timeouts_key f:free)")" "0"

# three waiters arriving in order hold the lock in that order
sess h "SELECT fenced_acquire('f:order', ttl => '30 s') IS NOT NULL;"
n=0
for w in w1 w2 w3; do
	sess_send "$w" "SELECT fenced_acquire('f:order', ttl => '30 s', wait => '30 s', fair => true) IS NOT NULL;
INSERT INTO got (who) VALUES ('$w'); SELECT pg_sleep(0.05); SELECT fenced_release('f:order');"
	n=$((n + 1))
	wait_queued f:order "$n" || break
done
expect "the three are in the queue, in order of arrival" \
	"$(rcli LLEN "$(queue_key f:order)")" "3"
sess h "SELECT fenced_release('f:order');"
for w in w1 w2 w3; do sess_wait "$w"; done
expect "they held the lock in the order they arrived" \
	"$(sql -c "SELECT string_agg(who, ',' ORDER BY seq) FROM got")" "w1,w2,w3"
expect "the queue is empty after them" "$(rcli EXISTS "$(queue_key f:order)" "$(timeouts_key f:order)")" "0"

# a waiter whose wait ends leaves the queue; the next arrival is served
sess h "SELECT fenced_acquire('f:gone', ttl => '30 s') IS NOT NULL;"
sess w1 "SELECT fenced_acquire('f:gone', ttl => '30 s', wait => '300 ms', fair => true) IS NULL;"
expect "a fair waiter whose wait ends gets NULL" "$S|$R" "00000|t"
expect "and has left the queue" "$(rcli LLEN "$(queue_key f:gone)")|$(rcli ZCARD "$(timeouts_key f:gone)")" "0|0"
sess_send w2 "SELECT fenced_acquire('f:gone', ttl => '30 s', wait => '30 s', fair => true) IS NOT NULL; SELECT fenced_release('f:gone');"
wait_queued f:gone 1
sess h "SELECT fenced_release('f:gone');"
sess_wait w2
expect "the next waiter gets the lock" "$S|$R" $'00000|t\nt'

# a fair waiter cancelled (here by statement_timeout) leaves the queue
# before its error is reported: those behind need not wait for its timeout
sess h "SELECT fenced_acquire('f:cancel', ttl => '30 s') IS NOT NULL;"
sess w1 "SET statement_timeout = '300ms';"
sess w1 "SELECT fenced_acquire('f:cancel', ttl => '30 s', wait => '30 s', fair => true);"
expect "a fair waiter cancelled by statement_timeout gets 57014" "$S" "57014"
expect "and has left the queue when its error is reported" \
	"$(rcli LLEN "$(queue_key f:cancel)")|$(rcli ZCARD "$(timeouts_key f:cancel)")" "0|0"
sess w1 "RESET statement_timeout;"
sess h "SELECT fenced_release('f:cancel');"

# a waiter whose backend is terminated: the next in line gets the lock
# once its place has timed out
sess h "SELECT fenced_acquire('f:kill', ttl => '30 s') IS NOT NULL;"
sess_open k
sess k "SELECT pg_backend_pid();"
kpid=$R
sess_send k "SELECT fenced_acquire('f:kill', ttl => '30 s', wait => '60 s', fair => true);"
wait_queued f:kill 1
sess_send w3 "SELECT fenced_acquire('f:kill', ttl => '30 s', wait => '40 s', fair => true) IS NOT NULL; SELECT fenced_release('f:kill');"
wait_queued f:kill 2
expect "the doomed waiter is first in line" "$(rcli LINDEX "$(queue_key f:kill)" 0 | cut -d: -f3)" "$kpid"
sql -c "SELECT pg_terminate_backend($kpid)" >/dev/null
sess_close k
sess h "SELECT fenced_release('f:kill');"
sess_wait w3
expect "the next in line holds the lock after the terminated one's timeout" "$S|$R" $'00000|t\nt'
expect "and nobody is left in line" "$(rcli EXISTS "$(queue_key f:kill)" "$(timeouts_key f:kill)")" "0"

# a waiter that stopped asking, planted first in line with a timeout 4 to
# 5 s ahead: a fair acquisition waits its turn, and is served after it
now=$(rcli TIME | head -1)
rcli RPUSH "$(queue_key f:ghost)" ghost >/dev/null
rcli ZADD "$(timeouts_key f:ghost)" $(((now + 5) * 1000)) ghost >/dev/null
sess w1 "SELECT fenced_acquire('f:ghost', ttl => '30 s', wait => '0', fair => true) IS NULL;"
expect "the lock free but another's turn: a fair acquisition without wait gets NULL" "$S|$R" "00000|t"
expect "and leaves the queue when its wait ends: the first in line remains alone" "$(rcli LRANGE "$(queue_key f:ghost)" 0 -1 | paste -sd,)" "ghost"
sess w1 "SELECT fenced_acquire('f:ghost', ttl => '30 s', wait => '20 s', fair => true) IS NOT NULL;"
expect "a waiter that stopped asking is passed over at its timeout" "$S|$R" "00000|t"
expect "and is gone from the queue" "$(rcli LLEN "$(queue_key f:ghost)")" "0"
sess w1 "SELECT fenced_release('f:ghost');"

# mixed: an unfair acquisition takes a free lock whoever is in line
now=$(rcli TIME | head -1)
rcli RPUSH "$(queue_key f:mixed)" ghost >/dev/null
rcli ZADD "$(timeouts_key f:mixed)" $(((now + 60) * 1000)) ghost >/dev/null
sess w1 "SELECT fenced_acquire('f:mixed', ttl => '30 s', wait => '0', fair => true) IS NULL;"
expect "mixed: the fair acquisition waits its turn" "$S|$R" "00000|t"
sess w2 "SELECT fenced_acquire('f:mixed', ttl => '30 s', wait => '0') IS NOT NULL; SELECT fenced_release('f:mixed');"
expect "mixed: the unfair one takes the free lock past the queue" "$S|$R" $'00000|t\nt'
expect "mixed: the unfair one touched no queue" "$(rcli LRANGE "$(queue_key f:mixed)" 0 -1 | paste -sd,)" "ghost"
rcli DEL "$(queue_key f:mixed)" "$(timeouts_key f:mixed)" >/dev/null

# the set form: fair for each resource of the set
now=$(rcli TIME | head -1)
rcli RPUSH "$(queue_key f:set2)" ghost >/dev/null
rcli ZADD "$(timeouts_key f:set2)" $(((now + 60) * 1000)) ghost >/dev/null
sess w1 "BEGIN; SELECT fenced_acquire_xact(ARRAY['f:set1', 'f:set2'], wait => '0', fair => true) IS NULL; SELECT count(*) FROM fenced_leases(); COMMIT;"
expect "the set form, fair: a resource with another first in line makes it NULL, holding none" "$S|$R" $'00000|t\n0'
sess w1 "BEGIN; SELECT cardinality(fenced_acquire_xact(ARRAY['f:set1', 'f:set2'], wait => '0')); COMMIT;"
expect "the set form, unfair: taken" "$S|$R" "00000|2"
rcli DEL "$(queue_key f:set2)" "$(timeouts_key f:set2)" >/dev/null

# the classic layout: the queue in braces, in the lock key's hash slot
sess h "SET fencing.redis_lock_key = 'lock:<resource>'; SET fencing.redis_token_key = 'fence:<resource>';
SELECT fenced_acquire('f:classic', ttl => '30 s') IS NOT NULL;"
sess_send w1 "SET fencing.redis_lock_key = 'lock:<resource>'; SET fencing.redis_token_key = 'fence:<resource>';
SELECT fenced_acquire('f:classic', ttl => '30 s', wait => '30 s', fair => true) IS NOT NULL; SELECT fenced_release('f:classic');"
for _ in $(seq 500); do [ "$(rcli LLEN '{lock:f:classic}:fair:queue')" = 1 ] && break; sleep 0.02; done
expect "classic layout: the waiter is queued in {lock:f:classic}:fair:queue" "$(rcli LLEN '{lock:f:classic}:fair:queue')" "1"
sess h "SELECT fenced_release('f:classic'); RESET fencing.redis_lock_key; RESET fencing.redis_token_key;"
sess_wait w1
expect "classic layout: it gets the lock" "$S|$R" $'00000|t\nt'
sess w1 "RESET fencing.redis_lock_key; RESET fencing.redis_token_key;"

# a hog that releases and at once takes the lock again, five times, each
# time with the waiter in line (seen in the queue): the waiter is served
# first every time (unfair, the hog's next attempt beats the waiter's
# wake-up)
sql -c "TRUNCATE got" >/dev/null
sess h "SELECT fenced_acquire('f:cycle', ttl => '30 s', fair => true) IS NOT NULL;"
for i in 1 2 3 4 5; do
	sess_send w1 "SELECT fenced_acquire('f:cycle', ttl => '30 s', wait => '5 s', fair => true) IS NOT NULL;
INSERT INTO got (who) VALUES ('waiter'); SELECT fenced_release('f:cycle');"
	wait_queued f:cycle 1 || break
	sess h "SELECT fenced_release('f:cycle'); SELECT fenced_acquire('f:cycle', ttl => '30 s', wait => '10 s', fair => true) IS NOT NULL;
INSERT INTO got (who) VALUES ('hog');"
	sess_wait w1
done
sess h "SELECT fenced_release('f:cycle');"
expect "a hog re-taking at once: the waiter in line is served first, five times out of five" \
	"$(sql -c "SELECT string_agg(who, ',' ORDER BY seq) FROM got")" "waiter,hog,waiter,hog,waiter,hog,waiter,hog,waiter,hog"

# a hog releasing and re-taking in a loop (until the waiter is done)
# against a waiter coming back, every grant numbered by one sequence,
# taken under the lock: both are served every time, and the hog's grants
# between each call of the waiter and its grant are printed (at most one
# but for those slipping in before its first attempt reaches Redis, on a
# machine that delays it: test/bench/acquire --starvation measures them)
sql -c "TRUNCATE got" >/dev/null
HOG_ROUNDS=${HOG_ROUNDS:-20000}
sess_send h "DO \$\$
BEGIN
	FOR i IN 1..$HOG_ROUNDS LOOP
		EXIT WHEN (SELECT is_called FROM waiter_done);
		IF fenced_acquire('f:hog', ttl => '10 s', wait => '30 s', fair => true) IS NULL THEN
			RAISE EXCEPTION 'hog: not served in 30 s';
		END IF;
		INSERT INTO got (who) VALUES ('hog');
		PERFORM pg_sleep(0.002);
		PERFORM fenced_release('f:hog');
	END LOOP;
END
\$\$;"
sess w2 "DO \$\$
DECLARE
	a bigint;
BEGIN
	PERFORM pg_sleep(0.2);
	FOR i IN 1..15 LOOP
		a := nextval('got_seq_seq');
		IF fenced_acquire('f:hog', ttl => '10 s', wait => '30 s', fair => true) IS NULL THEN
			RAISE EXCEPTION 'waiter: not served in 30 s';
		END IF;
		INSERT INTO got (who, arrived) VALUES ('waiter', a);
		PERFORM fenced_release('f:hog');
		PERFORM pg_sleep(0.03);
	END LOOP;
	PERFORM nextval('waiter_done');
END
\$\$;"
expect "the waiter was served each time" "$S" "00000"
sess_wait h
expect "the hog was served each time" "$S" "00000"
echo "# hog grants and waiter grants: $(sql -c "SELECT count(*) FILTER (WHERE who = 'hog') || ' / ' || count(*) FILTER (WHERE who = 'waiter') FROM got")"
echo "# hog grants between each waiter's arrival and its grant: $(sql -c "SELECT string_agg(n::text, ' ' ORDER BY w.seq) FROM (SELECT w.seq, (SELECT count(*) FROM got h WHERE h.who = 'hog' AND h.seq > w.arrived AND h.seq < w.seq) AS n FROM got w WHERE w.who = 'waiter') w")"
expect "the waiter was granted 15 times, the hog meanwhile" \
	"$(sql -c "SELECT count(*) FILTER (WHERE who = 'waiter') || '|' || (count(*) FILTER (WHERE who = 'hog') > 15) FROM got")" "15|true"

# arguments
sess w1 "SELECT fenced_acquire('f:arg', on_lost => 'panic');"
expect "on_lost other than ignore or error: 22023" "$S" "22023"
sess w1 "SELECT fenced_acquire('f:arg', fair => NULL, on_lost => NULL) IS NOT NULL; SELECT fenced_release('f:arg');"
expect "NULL fair and on_lost: the defaults" "$S|$R" $'00000|t\nt'

for s in h w1 w2 w3; do sess_close "$s"; done
checks_finish
