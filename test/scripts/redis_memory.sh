#!/usr/bin/env bash
# Memory stays bounded whatever fails (issue 21, section 2), against a
# real redis-server and a listener that never answers:
# - failed fenced_acquire_xact calls in EXCEPTION blocks keep at most a few
#   unknown-outcome owners per resource, on a bounded number of resources,
#   and the COMMIT's WARNING counts resources, not owners;
# - a long wait on a busy lock frees each attempt's memory before the next.
#
# On the old code (4e4bfab) the transaction's context grows by about 97
# bytes per failed call, the COMMIT warns "on 2590 resources" for one, and
# the wait grows the statement's memory by about 400 bytes per attempt.
#
# Usage: bash test/scripts/redis_memory.sh   (prints ok/not ok lines; exit 0 = pass)
# test/run: quick
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../lib/redis_lib.sh"

harness_start_redis || harness_start_redis || exit 1
redis_start_pg || exit 1

sess_open a
sess_open b

# A listener that reads and never answers: every acquisition is sent and
# times out, an unknown outcome.
start_silent_server || exit 1

# Bytes in session a's contexts for the transaction's leases, into MEM.
xact_mem() {
	sess a "SELECT coalesce(sum(total_bytes), 0) FROM pg_backend_memory_contexts WHERE name LIKE 'fencing transaction%';"
	MEM=$R
}

# fail_xact N NAME_EXPR: N failed fenced_acquire_xact calls, each in an
# EXCEPTION block, on the resources NAME_EXPR names (i is the loop index).
fail_xact() {
	sess a "DO \$\$ BEGIN FOR i IN 1..$1 LOOP BEGIN PERFORM fenced_acquire_xact($2); EXCEPTION WHEN SQLSTATE 'TF101' THEN NULL; END; END LOOP; END \$\$;"
}

sess a "SET fencing.redis_port = $SILENT_PORT; SET fencing.redis_command_timeout = '2ms'; SET fencing.redis_release_timeout = '200ms';"

# ------------------------------------------- one resource, 5,000 failures

sess a "BEGIN;"
fail_xact 200 "'silent:one'"
expect "200 failed fenced_acquire_xact calls on one resource" "$S" "00000"
xact_mem
mem0=$MEM
fail_xact 5000 "'silent:one'"
expect "5,000 more" "$S" "00000"
xact_mem
grown=$((MEM - mem0))
check "the transaction's lease memory does not grow with them (grew $grown bytes)" test "$grown" -lt 8192
sess a "COMMIT;"
expect_match "the COMMIT warns about one resource" "$R" \
	'WARNING: +could not release the Redis lock on resource "silent:one"'
expect_no_match "not about thousands" "$R" "on [0-9]+ resources"

# ------------------------------------ 3,000 resources: a bounded number kept

sess a "BEGIN;"
fail_xact 3000 "'silent:d' || i"
expect "3,000 failed fenced_acquire_xact calls on distinct resources" "$S" "00000"
sess a "COMMIT;"
expect_match "the COMMIT gives back the owners of at most 1,024 resources, and counts resources" "$R" \
	'WARNING: +could not release the Redis locks on 1024 resources'
sess a "RESET fencing.redis_port; RESET fencing.redis_command_timeout; RESET fencing.redis_release_timeout;"

# ---------------------------------------------- a long wait on a busy lock

sess b "SELECT fenced_acquire('busy:1', ttl => '60 s') IS NOT NULL;"
expect "B holds the lock" "$R" "t"
probe="(SELECT sum(total_bytes) FROM pg_backend_memory_contexts)"
sess a "SELECT fenced_acquire('busy:1', wait => '0') IS NULL, $probe;"
m0=${R#*|}
sess a "SELECT fenced_acquire('busy:1', wait => '8 s') IS NULL, $probe;"
busy=${R%%|*}
m8=${R#*|}
expect "an 8 s wait on the busy lock ends without it" "$busy" "t"
grown=$((m8 - m0))
check "the statement's memory does not grow with the attempts (grew $grown bytes over 8 s)" test "$grown" -lt 8192
sess b "SELECT fenced_release('busy:1');"

checks_finish
