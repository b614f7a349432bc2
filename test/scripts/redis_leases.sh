#!/usr/bin/env bash
# The session's bookkeeping of leases against real redis-servers: bounded
# in every failure mode (nothing kept for a call that never reached Redis,
# a bounded number of unknown-outcome owners, the oldest going first); the
# resource-name limit, checked before anything is sent; a failed WAIT
# gives the lock back; fenced_release without a lease answers false
# without asking Redis, except after an acquisition whose outcome is
# unknown; fenced_release of a pruned lease still ends its declaration.
#
# Usage: bash test/scripts/redis_leases.sh   (prints ok/not ok lines; exit 0 = pass)
# test/run: quick
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../lib/redis_lib.sh"

harness_start_redis || harness_start_redis || exit 1
redis_start_pg || exit 1

sess_open a
sess_open b

# Bytes of memory in all of session a's memory contexts, into MEM.
a_mem() {
	sess a "SELECT sum(total_bytes) FROM pg_backend_memory_contexts;"
	MEM=$R
}

# ----------------------------------------------------- the name limit

sess a "SELECT fenced_acquire(repeat('n', 2000)) IS NOT NULL;"
expect "a resource name of 2000 bytes is accepted" "$S|$R" "00000|t"
keys=$(rcli DBSIZE)
sess a "SELECT fenced_acquire(repeat('n', 2001));"
expect "fenced_acquire refuses a name of 2001 bytes (54000)" "$S" "54000"
sess a "SELECT fenced_extend(repeat('n', 2001));"
expect "so does fenced_extend" "$S" "54000"
sess a "SELECT fenced_release(repeat('n', 2001));"
expect "and fenced_release" "$S" "54000"
sess a "SELECT fenced_acquire(repeat('n', 100000000));"
expect "a name of 100 MB is refused the same way" "$S" "54000"
expect "and nothing reached Redis" "$(rcli DBSIZE)" "$keys"

# -------------------- release without a lease, after a failed acquisition

sess a "SELECT fenced_release('never:acquired');"
expect "fenced_release of a resource this session never acquired: false" "$S|$R" "00000|f"
redis_stop
sess a "SELECT fenced_acquire('refused:1');"
expect "Redis stopped: fenced_acquire fails before sending anything (TF101)" "$S" "TF101"
sess a "SELECT fenced_release('refused:1');"
expect "then fenced_release says false without contacting Redis, no error" "$S|$R" "00000|f"

# 50,000 refused acquisitions of distinct resources
a_mem
mem0=$MEM
sess a "DO \$\$ BEGIN FOR i IN 1..50000 LOOP BEGIN PERFORM fenced_acquire('refused:' || i); EXCEPTION WHEN SQLSTATE 'TF101' THEN NULL; END; END LOOP; END \$\$;"
expect "50,000 refused acquisitions fail as they should" "$S" "00000"
a_mem
grown=$((MEM - mem0))
check "and the session's memory does not grow with them (grew $grown bytes)" test "$grown" -lt 1048576
harness_redis_launch || exit 1

# ------------------------------------------------- unknown outcomes

# an acquisition whose reply never came: fenced_release still asks Redis,
# and deletes the lock the late attempt took
sess a "SET fencing.redis_command_timeout = '300ms'; SELECT fenced_acquire('warm:1') IS NOT NULL;"
expect "(a connection, and the script cached in this Redis)" "$R" "t"
kill -STOP "$REDIS_PID"
sess a "SELECT fenced_acquire('late:1');"
expect "an acquisition Redis does not answer fails (TF101)" "$S" "TF101"
kill -CONT "$REDIS_PID"
for _ in $(seq 50); do [ "$(rcli EXISTS 'fencing:v1:{r:late:1}:lock')" = 1 ] && break; sleep 0.05; done
expect "the late attempt took the lock once Redis woke" "$(rcli EXISTS 'fencing:v1:{r:late:1}:lock')" "1"
sess a "SELECT fenced_release('late:1');"
expect "fenced_release after an unknown outcome asks Redis, and gives that lock back" "$S|$R" "00000|t"
expect "the lock is gone" "$(rcli EXISTS 'fencing:v1:{r:late:1}:lock')" "0"

# A listener that reads and never answers: every acquisition is sent and
# times out, an unknown outcome.  The session keeps the owners of at most
# 1,024 resources; those that expire soonest (here: the oldest) go first.
start_silent_server || exit 1
sess a "SET fencing.redis_port = $SILENT_PORT; SET fencing.redis_command_timeout = '2ms';"
a_mem
mem0=$MEM
sess a "DO \$\$ BEGIN FOR i IN 1..5000 LOOP BEGIN PERFORM fenced_acquire('silent:' || i); EXCEPTION WHEN SQLSTATE 'TF101' THEN NULL; END; END LOOP; END \$\$;"
expect "5,000 acquisitions that time out fail as they should" "$S" "00000"
a_mem
grown=$((MEM - mem0))
check "the owners kept for them take bounded memory (grew $grown bytes, at most 1,024 resources)" \
	test "$grown" -lt 2097152
sess a "SELECT fenced_release('silent:5000');"
expect "the newest unknown outcome is kept: fenced_release asks the silent server, and times out" "$S" "TF101"
sess a "SELECT fenced_release('silent:1');"
expect "the oldest is forgotten: fenced_release says false without asking" "$S|$R" "00000|f"
sess a "RESET fencing.redis_port; RESET fencing.redis_command_timeout;"

# ----------------------------------------- a failed WAIT gives the lock back

# refused: an ACL user that may not run WAIT
rcli ACL SETUSER nowait on nopass '~*' '+@all' '-wait' >/dev/null
sess b "SET fencing.redis_username = 'nowait'; SET fencing.redis_wait_replicas = 1; SELECT fenced_acquire('wait:refused');"
expect "WAIT refused by the ACL: an error (TF104)" "$S" "TF104"
expect "and the lock was given back" "$(rcli EXISTS 'fencing:v1:{r:wait:refused}:lock')" "0"
sess b "RESET fencing.redis_username;"

# the connection lost in the middle of WAIT (no replica: WAIT blocks)
sess b "SET fencing.redis_wait_timeout = '5s';"
(sleep 0.7; rcli CLIENT KILL TYPE normal SKIPME yes >/dev/null) &
killer=$!
sess b "SELECT fenced_acquire('wait:lost');"
wait $killer
expect "WAIT's connection lost: an error (TF101)" "$S" "TF101"
expect_match "saying so" "$R" "lost connection to Redis server"
expect "and the lock was given back, over a new connection" "$(rcli EXISTS 'fencing:v1:{r:wait:lost}:lock')" "0"
sess b "RESET fencing.redis_wait_replicas; RESET fencing.redis_wait_timeout;"

# -------------------------------- release of a pruned lease ends its token

sess b "SELECT count(fenced_acquire('p:' || i, ttl => '1 ms')) FROM generate_series(1, 3000) i;"
sleep 1.2
sess b "SELECT count(fenced_acquire('q:' || i, ttl => '10 s')) FROM generate_series(1, 2000) i;"
sess b "SELECT count(*) FROM fenced_leases() WHERE resource LIKE 'p:%';"
expect "expired leases were pruned" "$R" "0"
sess b "SELECT count(*) FROM fence_declared() WHERE resource = 'p:7';"
expect "their tokens are still declared" "$R" "1"
sess b "SELECT fenced_release('p:7');"
expect "fenced_release of a pruned lease says false" "$S|$R" "00000|f"
sess b "SELECT count(*) FROM fence_declared() WHERE resource = 'p:7';"
expect "and ends its declaration all the same" "$R" "0"

sess_close a
sess_close b
checks_finish
