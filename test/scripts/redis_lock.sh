#!/usr/bin/env bash
# fenced_acquire() and friends against a real redis-server: the lock
# protocol, the key layout, the declared token, counter repair, the script
# cache, precision above 2^53, sharing keys with the classic lock:/fence:
# recipe, other databases and sockets, and WAIT for replicas.
#
# Usage: bash test/scripts/redis_lock.sh   (prints ok/not ok lines; exit 0 = pass)
# test/run: quick
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../lib/redis_lib.sh"

harness_start_redis || exit 1
redis_start_pg || exit 1

sql <<'SQL' >/dev/null
CREATE TABLE items (id int, tok fence_token, val text);
CREATE TRIGGER fence BEFORE INSERT OR UPDATE OR DELETE ON items
	FOR EACH ROW EXECUTE FUNCTION fence_guard('tok', 'order:{id}');
SQL

sess_open a
sess_open b

# Microseconds since the epoch by the Redis server's clock.
redis_now_us() { rcli TIME | tr '\n' ' ' | awk '{ printf "%d%06d", $1, $2 }'; }

# -------------------------------------------------------------- acquire, busy

before=$(redis_now_us)
sess a "SELECT fenced_acquire('order:1');"
t1=$R
after=$(redis_now_us)
check "a first acquisition's token is the Redis server's clock in microseconds ($before <= $t1 <= $after)" \
	test "${t1:-0}" -ge "$before" -a "${t1:-0}" -le "$after"
sess b "SELECT fenced_acquire('order:1') IS NULL;"
expect "a second session gets NULL while the lock is held" "$R" "t"
check "a busy lock answers at once when wait is 0 (${T} ms)" test "$T" -lt 1000

sess a "SELECT resource || ' ' || token || ' ' || owner FROM fenced_leases();"
lease=$R
owner=${lease##* }
expect_match "fenced_leases() lists the lease" "$lease" "^order:1 $t1 pg:"
expect "the lock key holds this lease's owner" "$(rcli GET 'fencing:v1:{r:order:1}:lock')" "$owner"
sess a "SELECT system_identifier || ':' || pg_backend_pid() FROM pg_control_system();"
expect_match "the owner names the server (system identifier) and the backend (PID)" \
	"$owner" "^pg:$R:[0-9]+:[0-9a-f]{16}\$"
pttl=$(rcli PTTL 'fencing:v1:{r:order:1}:lock')
check "the lock key expires within the default ttl of 30 s (pttl $pttl)" test "$pttl" -gt 25000 -a "$pttl" -le 30000
expect "the token key holds the token" "$(rcli GET 'fencing:v1:{r:order:1}:token')" "$t1"
pttl=$(rcli PTTL 'fencing:v1:{r:order:1}:token')
check "the token key expires a minute after the lock (pttl $pttl)" test "$pttl" -gt 85000 -a "$pttl" -le 90000
sess a "SELECT expires - acquired FROM fenced_leases();"
expect "the lease records acquired and expires" "$R" "00:00:30"

sess a "SELECT fenced_acquire('order:1b');"
sess a "SELECT count(DISTINCT owner) FROM fenced_leases();"
expect "every acquisition has its own owner string" "$R" "2"

# ------------------------------------------------- the token is declared

sess a "INSERT INTO items (id, val) VALUES (1, 'one') RETURNING tok;"
expect "a plain write after fenced_acquire is stamped with the token" "$(echo "$R" | head -1)" "$t1"
sess a "SELECT fence_mark('order:1');"
expect "and raises the resource's mark" "$R" "$t1"

# -------------------------------------------------------- extend, release

sess a "SELECT fenced_extend('order:1', ttl => '100 s');"
expect "the holder extends its lock" "$R" "t"
pttl=$(rcli PTTL 'fencing:v1:{r:order:1}:lock')
check "the extension reaches Redis (pttl $pttl)" test "$pttl" -gt 90000
sess b "SELECT fenced_release('order:1'), fenced_extend('order:1');"
expect "a session without the lease can neither release nor extend it" "$R" "f|f"
expect "and the lock is still the holder's" "$(rcli GET 'fencing:v1:{r:order:1}:lock')" "$owner"
sess a "SELECT fenced_release('order:1');"
expect "the holder releases its lock" "$R" "t"
expect "the lock key is gone" "$(rcli EXISTS 'fencing:v1:{r:order:1}:lock')" "0"
sess a "SELECT count(*) FROM fence_declared() WHERE resource = 'order:1';"
expect "releasing withdraws the declared token" "$R" "0"
sess a "INSERT INTO items (id, val) VALUES (1, 'after release');"
expect "so a plain write after release is rejected (missing token)" "$S" "TF002"
sess a "SELECT fenced_release('order:1');"
expect "a second release says false" "$R" "f"

# ---------------------------------------- expiry, a higher token, a stranger

sess a "SELECT fenced_acquire('order:2', ttl => '200 ms');"
t1=$R
sleep 0.4
sess b "SELECT fenced_acquire('order:2');"
t2=$R
check "after the ttl expires another session takes the lock with a higher token ($t1 < $t2)" \
	test -n "$t2" -a "${t2:-0}" -gt "${t1:-0}"
sess b "INSERT INTO items (id, val) VALUES (2, 'new holder');"
expect "the new holder writes" "$S" "00000"
sess a "INSERT INTO items (id, val) VALUES (2, 'stale holder');"
expect "the old holder's write, with its declared token, is rejected as stale" "$S" "TF001"
sess a "SELECT fenced_release('order:2');"
expect "the old holder's release of the taken-over lock says false" "$R" "f"
sess a "SELECT fenced_extend('order:2');"
expect "and so does its extend" "$R" "f"
check "and the new holder still has the lock" test "$(rcli EXISTS 'fencing:v1:{r:order:2}:lock')" = 1
sess b "SELECT fenced_release('order:2');"
expect "the new holder releases it" "$R" "t"

# --------------------------------------------- wait for a release; re-acquire

sess a "SELECT fenced_acquire('order:3');"
t1=$R
bg_out=$SESS_DIR/wait.out
t0=$(now_ms)
sql -c "SELECT fenced_acquire('order:3', wait => '10 s')" >"$bg_out" 2>&1 &
bg=$!
sleep 0.5
sess a "SELECT fenced_release('order:3');"
wait $bg
elapsed=$(($(now_ms) - t0))
t2=$(cat "$bg_out")
check "a waiting acquisition gets the lock once it is released, with a higher token ($t1 < $t2)" \
	test "$t2" -gt "${t1:-0}" 2>/dev/null
check "soon after the release (${elapsed} ms)" test "$elapsed" -lt 2000

sess a "SELECT fenced_acquire('order:4');"
t1=$R
sess a "SELECT fenced_acquire('order:4');"
check "acquiring a lock the session already holds takes it again with a new token" \
	test "${R:-0}" -gt "${t1:-0}"
sess a "SELECT count(*) FROM fenced_leases() WHERE resource = 'order:4';"
expect "and keeps one lease" "$R" "1"

sess a "SET fencing.default_ttl = '1500ms'; SELECT fenced_acquire('order:5');"
pttl=$(rcli PTTL 'fencing:v1:{r:order:5}:lock')
check "a NULL ttl means fencing.default_ttl (pttl $pttl)" test "$pttl" -gt 1000 -a "$pttl" -le 1500
sess a "RESET fencing.default_ttl;"

sess b "SELECT count(fenced_acquire('p:' || i, ttl => '1 ms')) FROM generate_series(1, 3000) i;"
sleep 1.2
sess b "SELECT count(fenced_acquire('q:' || i, ttl => '10 s')) FROM generate_series(1, 2000) i;"
sess b "SELECT count(*) FILTER (WHERE resource LIKE 'p:%'), count(*) FILTER (WHERE resource LIKE 'q:%') FROM fenced_leases();"
expect "leases long expired are pruned from the session's bookkeeping, live ones kept" "$R" "0|2000"

# ------------------------------------------------ counter regression repair

sess a "SELECT fenced_acquire('order:6');"
sess a "INSERT INTO items (id, val) VALUES (6, 'x');"
sess a "SELECT fenced_acquire('order:6');"
sess a "INSERT INTO items (id, val) VALUES (6, 'y');"
sess a "SELECT fence_mark('order:6');"
mark=$R
expect_no_match "an ordinary acquisition warns of nothing" "$R" "WARNING"
sess a "SELECT fenced_release('order:6');"
rcli FLUSHALL >/dev/null
sess a "SELECT fenced_acquire('order:6');"
token=$(echo "$R" | tail -1)
check "after FLUSHALL the token, from the Redis clock, is above the database's mark ($token > $mark)" \
	test "${token:-0}" -gt "${mark:-0}"
expect_no_match "with no repair needed" "$R" "WARNING"
sess a "SELECT fenced_release('order:6');"

# a mark above the Redis clock, as if that clock were behind the one that
# issued the mark's token
high=9000000000000000
sql -c "SELECT fence_advance('order:6', $high)" >/dev/null
before=$(redis_now_us)
sess a "SELECT fenced_acquire('order:6');"
after=$(redis_now_us)
token=$(echo "$R" | tail -1)
would=$(echo "$R" | sed -n 's/.*next token \([0-9]*\) is not above.*/\1/p')
expect "a token from a clock behind the mark is the mark plus a million plus the Redis clock" "$token" "$((high + 1000000 + ${would:-0}))"
check "one WARNING names the resource, the token the clock would have issued ($before <= $would <= $after) and the mark" \
	test -n "$would" -a "${would:-0}" -ge "$before" -a "${would:-0}" -le "$after"
expect_match "in these words" "$R" \
	"WARNING: +token counter in Redis for resource \"order:6\" went backwards: next token $would is not above the high-water mark $high"
expect "exactly one" "$(echo "$R" | grep -c WARNING)" "1"
expect "the Redis counter was raised past the mark" "$(rcli GET 'fencing:v1:{r:order:6}:token')" "$token"
sess a "INSERT INTO items (id, val) VALUES (6, 'after repair');"
expect "the holder of the repaired token writes" "$S" "00000"

# --------------------------------------------------------- script cache

rcli CONFIG RESETSTAT >/dev/null
rcli SCRIPT FLUSH >/dev/null
sess a "SELECT fenced_acquire('order:7') IS NOT NULL, fenced_acquire('order:8') IS NOT NULL;"
expect "after SCRIPT FLUSH acquisitions still work (NOSCRIPT falls back to EVAL)" "$R" "t|t"
stats=$(rcli INFO commandstats)
expect_match "EVAL was sent once, to load the script again" "$stats" 'cmdstat_eval:calls=1,'
expect_match "and EVALSHA is used again after it" "$stats" 'cmdstat_evalsha:calls=[2-9]'

# ------------------------------------------------------ precision above 2^53

rcli SET 'fencing:v1:{r:big}:token' 9007199254740993 >/dev/null
sess a "SELECT fenced_acquire('big');"
expect "a counter above 2^53 comes back exact (9007199254740993 + 1)" "$R" "9007199254740994"
rcli SET 'fencing:v1:{r:max}:token' 9223372036854775806 >/dev/null
sess a "SELECT fenced_acquire('max');"
expect "the largest token comes back exact" "$R" "9223372036854775807"
sess a "SELECT fenced_release('max'); SELECT fenced_acquire('max');"
expect "a counter that would overflow is an error, not a wrapped token" "$S" "TF104"
expect "and takes no lock" "$(rcli EXISTS 'fencing:v1:{r:max}:lock')" "0"
rcli SET 'fencing:v1:{r:junk}:token' 'not a number' >/dev/null
sess a "SELECT fenced_acquire('junk');"
expect "a counter that is not a number is an error" "$S" "TF104"
expect "and leaves the lock untaken" "$(rcli EXISTS 'fencing:v1:{r:junk}:lock')" "0"
expect "and the counter untouched" "$(rcli GET 'fencing:v1:{r:junk}:token')" "not a number"

# ------------------------------ sharing keys with the classic lock:/fence: recipe

CLASSIC_ACQUIRE="if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then return redis.call('INCR', KEYS[2]) end return false"
CLASSIC_RELEASE="if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0"
classic_acquire() { rcli EVAL "$CLASSIC_ACQUIRE" 2 "lock:$1" "fence:$1" "$2" 10000; }
classic_release() { rcli EVAL "$CLASSIC_RELEASE" 1 "lock:$1" "$2"; }

sess b "SET fencing.redis_lock_key = 'lock:<resource>'; SET fencing.redis_token_key = 'fence:<resource>';"
tokens=()
exclusive=ok
for i in 1 2 3; do
	sess b "SELECT fenced_acquire('shared');"
	tokens+=("$R")
	[ -z "$(classic_acquire shared "py-$i")" ] || exclusive="classic client got the lock while fencing held it"
	sess b "SELECT fenced_release('shared');"
	tokens+=("$(classic_acquire shared "py-$i")")
	sess b "SELECT fenced_acquire('shared') IS NULL;"
	[ "$R" = t ] || exclusive="fencing got the lock while the classic client held it"
	classic_release shared "py-$i" >/dev/null
done
increasing=yes
for ((i = 1; i < ${#tokens[@]}; i++)); do
	[ "${tokens[$i]:-0}" -gt "${tokens[$((i - 1))]:-0}" ] || increasing=no
done
expect "tokens strictly increase across fencing and the classic recipe (${tokens[*]})" "$increasing" "yes"
expect "and each excludes the other" "$exclusive" "ok"
expect "the classic layout's token key, shared with clients that INCR it, never expires" \
	"$(rcli PTTL 'fence:shared')" "-1"
sess b "RESET fencing.redis_lock_key; RESET fencing.redis_token_key;"

# ------------------------------------------------ Unix socket and database

sess b "SET fencing.redis_host = '$REDIS_SOCKET'; SET fencing.redis_database = 3; SELECT fenced_acquire('order:9');"
check "a host that is a path connects over the Unix socket, and SELECTs the database ($R)" \
	test "$R" -gt 0 2>/dev/null
expect "the keys are in that database" "$(rcli -n 3 EXISTS 'fencing:v1:{r:order:9}:lock')" "1"
sess b "RESET fencing.redis_database; SELECT fenced_release('order:9');"
expect "changing a connection setting reconnects: release looks in database 0 now" "$R" "f"
sess b "SET fencing.redis_database = 3; SELECT fenced_acquire('order:9') IS NULL;"
expect "and the lock is still held in database 3" "$R" "t"
sess b "RESET fencing.redis_host; RESET fencing.redis_database;"

# --------------------------------------------------------- WAIT for replicas

start_replica
sess b "SET fencing.redis_wait_replicas = 1; SELECT fenced_acquire('order:10');"
check "with one replica attached, WAIT 1 succeeds" test -n "$R" -a "$S" = 00000
expect "and the replica has the lock" "$(redis-cli -p "$REPLICA_PORT" EXISTS 'fencing:v1:{r:order:10}:lock')" "1"
sess b "SET fencing.redis_wait_replicas = 2; SET fencing.redis_wait_timeout = '200ms'; SELECT fenced_acquire('order:11');"
expect "too few replicas acknowledging is an error (TF106)" "$S" "TF106"
expect_match "naming the count" "$R" 'only 1 of 2 Redis replicas acknowledged the lock on resource "order:11"'
check "within the wait timeout (${T} ms)" test "$T" -lt 1500
expect "and the lock is given back" "$(rcli EXISTS 'fencing:v1:{r:order:11}:lock')" "0"
sess b "RESET fencing.redis_wait_replicas; SELECT fenced_acquire('order:11') IS NOT NULL;"
expect "the next acquisition without WAIT works" "$R" "t"

sess_close a
sess_close b
checks_finish
