#!/usr/bin/env bash
# Lost-lock awareness against a real redis-server, the library preloaded:
# fenced_lock_valid_until(resource) answers until when this session holds
# the lock without asking Redis (NULL when not held, released, run out or
# lost), follows the renewer's renewals from the shared table, and turns
# NULL as soon as the renewer finds the lock held by another owner, which
# fenced_lock_holders shows as lost.
#
# on_lost => 'error': once such a lease is lost (taken by another owner,
# or run out: not renewed, Redis stopped), the next statement fails with
# TF131, COMMIT included (the transaction rolled back), once per lease;
# without the option the transaction carries on and commits (1.2's
# behaviour: only the guard's check of the token stops a stale write).
#
# Usage: bash test/scripts/redis_lost.sh   (prints ok/not ok lines; exit 0 = pass)
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../lib/redis_lib.sh"

harness_start_redis || harness_start_redis || exit 1
redis_start_pg || exit 1


sess_open a

sess a "SELECT fenced_lock_valid_until('v:1') IS NULL;"
expect "a lock never taken: NULL" "$S|$R" "00000|t"

sess a "SELECT fenced_acquire('v:1', ttl => '30 s') IS NOT NULL;
SELECT fenced_lock_valid_until('v:1') BETWEEN now() + '25 s' AND clock_timestamp() + '30 s';"
expect "held for 30 s: valid until about 30 s from now" "$S|$R" $'00000|t\nt'
sess a "SELECT fenced_lock_valid_until('v:1') = expires FROM fenced_leases() WHERE resource = 'v:1';"
expect "the expiry fenced_leases() shows" "$R" "t"
calls() { rcli INFO commandstats | tr -d '\r' | awk -F'[=,]' '/^cmdstat_(evalsha|eval|pttl|get|exists):/ {n += $2} END {print n + 0}'; }
c0=$(calls)
sess a "SELECT count(fenced_lock_valid_until('v:1')) FROM generate_series(1, 100);"
c1=$(calls)
expect "100 answers without a command to Redis" "$R|$((c1 - c0))" "100|0"
sess a "SELECT fenced_release('v:1'); SELECT fenced_lock_valid_until('v:1') IS NULL;"
expect "released: NULL" "$R" $'t\nt'

sess a "SELECT fenced_acquire('v:2', ttl => '300 ms') IS NOT NULL; SELECT pg_sleep(0.5); SELECT fenced_lock_valid_until('v:2') IS NULL;"
expect "run out (not renewed): NULL" "$(printf '%s\n' "$R" | tail -1)" "t"
sess a "SELECT fenced_release('v:2');"

sess a "BEGIN; SELECT fenced_acquire_xact('v:3', ttl => '30 s') IS NOT NULL;
SELECT fenced_lock_valid_until('v:3') > now();"
expect "a transaction lease, in its transaction: held" "$R" $'t\nt'
sess a "COMMIT; SELECT fenced_lock_valid_until('v:3') IS NULL;"
expect "after COMMIT: NULL" "$R" "t"

# Renewed: the expiry moves with the renewer's renewals, read from the
# shared table.
sess a "SELECT fenced_acquire('v:4', ttl => '6 s', renew => true) IS NOT NULL;
SELECT fenced_lock_valid_until('v:4') AS first \\gset
SELECT pg_sleep(2.5);
SELECT fenced_lock_valid_until('v:4') > :'first'::timestamptz + '1 s', fenced_lock_valid_until('v:4') > clock_timestamp();"
expect "renewed: valid later than the first expiry, and still in the future" "$(printf '%s\n' "$R" | tail -1)" "t|t"
sess a "SELECT lost FROM fenced_lock_holders WHERE resource = 'v:4';"
expect "fenced_lock_holders: not lost" "$R" "f"

# Taken by another owner behind our back: the renewer's next renewal
# (every 2 s, a third of the ttl) finds it, and the lease is lost at once,
# seconds before its expiry by our clock.
rcli SET "$(lock_key v:4)" "someone-else" PX 60000 >/dev/null
sess a "SELECT pg_sleep(2.5); SELECT fenced_lock_valid_until('v:4') IS NULL, expires > clock_timestamp() FROM fenced_leases() WHERE resource = 'v:4';"
expect "the lock taken by another owner: NULL once the renewer saw it, before the expiry" "$(printf '%s\n' "$R" | tail -1)" "t|t"
sess a "SELECT lost || '|' || renewing FROM fenced_lock_holders WHERE resource = 'v:4';"
expect "fenced_lock_holders shows it lost, no longer renewed" "$R" "true|false"
sess a "SELECT fenced_release('v:4');"
expect "the release finds it was not ours" "$R" "f"
expect "and leaves the other owner's lock alone" "$(rcli GET "$(lock_key v:4)")" "someone-else"

sess a "SELECT fenced_lock_valid_until(NULL) IS NULL;"
expect "a NULL resource: NULL" "$S|$R" "00000|t"

# wait_lost RESOURCE: until fenced_lock_holders shows it lost (10 s)
wait_lost() {
	for _ in $(seq 200); do
		[ "$(sql -c "SELECT lost FROM fenced_lock_holders WHERE resource = '$1'")" = t ] && return 0
		sleep 0.05
	done
	return 1
}
sql -c "CREATE TABLE work (v text)" >/dev/null

# on_lost => 'error': taken by another owner in the middle of a transaction
sess a "BEGIN; SELECT fenced_acquire_xact('e:1', ttl => '3 s', renew => true, on_lost => 'error') IS NOT NULL;
INSERT INTO work VALUES ('e:1');"
expect "on_lost => 'error': acquired, and the transaction works" "$S|$R" "00000|t"
rcli SET "$(lock_key e:1)" "someone-else" PX 60000 >/dev/null
wait_lost e:1
sess a "SELECT 1;"
expect "the lock taken by another owner: the next statement fails with TF131" "$S" "TF131"
expect_match "naming the resource and the cause" "$R" 'lock on resource "e:1" was lost.*held by another owner'
sess a "ROLLBACK; SELECT count(*) FROM work;"
expect "nothing of the transaction stays" "$S|$R" "00000|0"

# without the option: today's behaviour, the transaction goes on
sess a "BEGIN; SELECT fenced_acquire_xact('e:2', ttl => '3 s', renew => true) IS NOT NULL;
INSERT INTO work VALUES ('e:2');"
rcli SET "$(lock_key e:2)" "someone-else" PX 60000 >/dev/null
wait_lost e:2
sess a "SELECT 1; COMMIT; SELECT count(*) FROM work;"
expect "without on_lost: the lease lost, the statement and COMMIT go on" "$S|$R" $'00000|1
1'

# a session lease run out (no renewal): one statement fails, then the
# session goes on; fenced_release says it was not ours
sess a "SELECT fenced_acquire('e:3', ttl => '300 ms', on_lost => 'error') IS NOT NULL;"
sleep 0.6
sess a "SELECT 1;"
expect "a session lease run out: the next statement fails with TF131" "$S" "TF131"
expect_match "saying it ran out" "$R" "ran out without renewal"
sess a "SELECT 2;"
expect "once: the statement after it runs" "$S|$R" "00000|2"
sess a "SELECT fenced_release('e:3');"
expect "the release finds the lock gone" "$S|$R" "00000|f"

# a utility statement is checked too (fencing.c's utility hook), before it
# runs: in a transaction block, where no commit follows it (SET: no event
# trigger, no executor); transaction control is not (it is left to the
# pre-commit check)
sess a "BEGIN; SELECT fenced_acquire_xact('e:5', ttl => '300 ms', on_lost => 'error') IS NOT NULL;"
sleep 0.6
sess a "SAVEPOINT s1;"
expect "transaction control is not checked: SAVEPOINT runs" "$S" "00000"
sess a "SET LOCAL application_name = 'lost_util';"
expect "a lease run out: the next utility statement (SET LOCAL) fails with TF131" "$S" "TF131"
sess a "ROLLBACK;"

# lost after the last statement: COMMIT fails, the transaction is rolled back
sess a "BEGIN; SELECT fenced_acquire_xact('e:4', ttl => '300 ms', on_lost => 'error') IS NOT NULL;
INSERT INTO work VALUES ('e:4');"
sleep 0.6
sess a "COMMIT;"
expect "lost before COMMIT: COMMIT fails with TF131" "$S" "TF131"
sess a "SELECT count(*) FROM work WHERE v = 'e:4';"
expect "and the transaction was rolled back" "$S|$R" "00000|0"

# Redis stopped: the renewals fail, the lease runs out, the next
# statement fails
sess a "BEGIN; SELECT fenced_acquire_xact('e:5', ttl => '1 s', renew => true, on_lost => 'error') IS NOT NULL;"
expect "acquired before Redis stops" "$S|$R" "00000|t"
redis_stop
sleep 1.5
sess a "SELECT 1;"
expect "Redis stopped: the next statement fails with TF131" "$S" "TF131"
sess a "ROLLBACK;"
harness_redis_launch || exit 1

sess_close a
checks_finish
