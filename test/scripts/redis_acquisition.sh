#!/usr/bin/env bash
# Fencing from the acquisition on, against a real redis-server:
# fenced_acquire() and fenced_acquire_xact() raise the resource's mark to
# the token they return, in the calling transaction, so that an older
# holder is fenced out before the new holder writes anything.
#
# - the lost-update story (README): A reads, stalls past its lease; B takes
#   the lock and reads; A's late write is rejected at once; B's commits.
#   With fenced_acquire in autocommit and with fenced_acquire_xact inside
#   B's transaction.  On 1.1 (commit 4e4bfab) A's write was accepted.
# - fencing.acquire_raises_mark = off: no mark is made;
# - read-only transactions refuse the acquisition (25006) before Redis is
#   asked; under REPEATABLE READ and SERIALIZABLE the raise never fails
#   with 40001, even on a mark moved after the snapshot;
# - an acquiring transaction that aborts takes the raise back and gives the
#   lock back, a session lease's too; PREPARE TRANSACTION after a session
#   acquisition is refused;
# - a mark already above the issued token (raised between the script's
#   read and the raise) makes the acquisition give the lock back and try
#   again, and the token it returns is above the mark;
# - an older writer open during the acquisition is not waited for, and
#   its next write is rejected;
# - the isolation specs of test/isolation_redis (two sessions fighting
#   over one resource: an older writer open during the acquisition, one
#   updating a row the new holder then updates, a holder stalled before
#   its first write), run by
#   pg_isolation_regress against this server.
#
# Usage: bash test/scripts/redis_acquisition.sh   (ok/not ok lines; exit 0 = pass)
# test/run: quick
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../lib/redis_lib.sh"

harness_start_redis || harness_start_redis || exit 1
redis_start_pg || exit 1


sql -c "CREATE TABLE accounts (id int PRIMARY KEY, balance int NOT NULL, tok fence_token)" \
	-c "CREATE TRIGGER fence BEFORE INSERT OR UPDATE OR DELETE ON accounts
		FOR EACH ROW EXECUTE FUNCTION fence_guard('tok', 'acct:{id}')" \
	-c "INSERT INTO accounts VALUES (1, 1000, 1), (2, 1000, 1)" >/dev/null

sess_open a
sess_open b

# ------------------------------------------- the lost-update story

# A takes acct:1 and reads; its lease (1 s) runs out while it stalls.
sess a "SELECT fenced_acquire('acct:1', ttl => '1 s') IS NOT NULL;"
expect "A acquires acct:1" "$S|$R" "00000|t"
sess a "SELECT balance FROM accounts WHERE id = 1;"
expect "A reads the balance" "$R" "1000"
sess a "SELECT token FROM fenced_leases();"
tok_a=$R
expect "A's acquisition raised the mark to its token" "$(sql -c "SELECT fence_mark('acct:1')")" "$tok_a"
sleep 1.2
# B takes the lock in autocommit and reads, before writing anything.
sess b "SELECT fenced_acquire('acct:1') IS NOT NULL;"
expect "B acquires acct:1 after A's lease expired" "$S|$R" "00000|t"
sess b "SELECT token FROM fenced_leases();"
tok_b=$R
expect "B's token is above A's" "$(sql -c "SELECT '$tok_b'::fence_token > '$tok_a'::fence_token")" "t"
expect "the acquisition itself raised the mark to B's token" "$(sql -c "SELECT fence_mark('acct:1')")" "$tok_b"
sess b "SELECT balance FROM accounts WHERE id = 1;"
expect "B reads the same balance" "$R" "1000"
# A wakes and writes 1001 with its token: rejected, though B has not written.
sess a "UPDATE accounts SET balance = 1001 WHERE id = 1;"
expect "A's late write, before B's first write, is rejected (TF001)" "$S" "TF001"
sess b "UPDATE accounts SET balance = balance + 10 WHERE id = 1;"
expect "B's write is accepted" "$S" "00000"
expect "no update is lost: the balance is B's" "$(sql -c "SELECT balance || '|' || tok FROM accounts WHERE id = 1")" "1010|$tok_b"
sess b "SELECT fenced_release('acct:1');"
sess a "SELECT fenced_release('acct:1');"

# The same with fenced_acquire_xact inside B's transaction: B's raise is in
# progress while A writes, and A is rejected at once, without waiting.
sess a "SELECT fenced_acquire('acct:2', ttl => '1 s') IS NOT NULL;"
expect "A acquires acct:2" "$S|$R" "00000|t"
sleep 1.2
sess b "BEGIN; SELECT fenced_acquire_xact('acct:2') IS NOT NULL;"
expect "B acquires acct:2 for its transaction" "$S|$R" "00000|t"
sess b "SELECT balance FROM accounts WHERE id = 2;"
sess a "UPDATE accounts SET balance = 1001 WHERE id = 2;"
expect "A's write is rejected at once while B's raise is in progress (TF001)" "$S" "TF001"
expect_match "... within a second, not after B's transaction" "$T" '^[0-9]{1,3}$'
sess b "UPDATE accounts SET balance = balance + 10 WHERE id = 2; COMMIT;"
expect "B's transaction commits" "$S" "00000"
expect "the balance is B's" "$(sql -c "SELECT balance FROM accounts WHERE id = 2")" "1010"
expect "B's lock was given back at commit" "$(held acct:2)" "0"
sess a "SELECT fenced_release('acct:2');"

# ------------------------------------------------- turning it off

sess a "SET fencing.acquire_raises_mark = off; SELECT fenced_acquire_xact('job:7f3a') IS NOT NULL;"
expect "with fencing.acquire_raises_mark off an acquisition works" "$S|$R" "00000|t"
expect "... and makes no mark" "$(sql -c "SELECT count(*) FROM fence_high_water WHERE resource = 'job:7f3a'")" "0"
sess a "RESET fencing.acquire_raises_mark;"

# ------------------------------------------- read-only and snapshots

sess a "BEGIN READ ONLY; SELECT fenced_acquire_xact('ro:1');"
expect "a read-only transaction refuses the acquisition (25006)" "$S" "25006"
sess a "ROLLBACK;"
expect "... before Redis was asked: no lock key" "$(held ro:1)" "0"

for level in "REPEATABLE READ" "SERIALIZABLE"; do
	r="rr:${level// /_}"
	sql -c "SELECT fence_advance('$r', 5)" >/dev/null
	sess a "BEGIN ISOLATION LEVEL $level; SELECT count(*) FROM accounts;"
	# the mark moves after A's snapshot was taken
	sql -c "SELECT fence_advance('$r', 7)" >/dev/null
	sess a "SELECT fenced_acquire_xact('$r') > 7;"
	expect "$level: the raise acts on a mark moved after the snapshot, no 40001" "$S|$R" "00000|t"
	sess a "COMMIT;"
	expect "$level: the transaction commits" "$S" "00000"
	expect "$level: the mark is the acquisition's token" \
		"$(sql -c "SELECT fence_mark('$r') > 7")" "t"
done

# ---------------------------------------------------- aborted acquisitions

sess a "BEGIN; SELECT fenced_acquire('ab:1') IS NOT NULL;"
expect "a session acquisition inside a transaction" "$S|$R" "00000|t"
expect "... holds the lock" "$(held ab:1)" "1"
sess a "ROLLBACK;"
expect "ROLLBACK takes the raise back" "$(sql -c "SELECT count(*) FROM fence_high_water WHERE resource = 'ab:1'")" "0"
expect "... and gives the session lease's lock back" "$(held ab:1)" "0"
sess a "SELECT count(*) FROM fenced_leases() WHERE resource = 'ab:1';"
expect "... and forgets the lease" "$R" "0"
sess a "SELECT count(*) FROM fence_declared() WHERE resource = 'ab:1';"
expect "... and its declaration" "$R" "0"

sess a "BEGIN; SELECT fenced_acquire('ab:2') IS NOT NULL; SELECT 1/0;"
sess a "ROLLBACK;"
expect "an error after the acquisition gives the lock back too" "$(held ab:2)" "0"

sess a "BEGIN; SELECT fenced_acquire('ab:3') IS NOT NULL; COMMIT;"
expect "a committed session acquisition keeps its lock" "$(held ab:3)" "1"
sess a "SELECT fenced_release('ab:3');"

sess a "BEGIN; SELECT fenced_acquire('ab:4') IS NOT NULL; PREPARE TRANSACTION 'ab4';"
expect "PREPARE TRANSACTION after a session acquisition is refused (25000)" "$S" "25000"
sess a "ROLLBACK;"
expect "... and the lock is given back" "$(held ab:4)" "0"

# ------------------------------------------------- a mark above the token

# A token recorded after the script read the mark: played by a mark far
# above the Redis clock, which the script's repair then passes.
sql -c "SELECT fence_advance('up:1', 9000000000000000)" >/dev/null
sess a "SELECT fenced_acquire_xact('up:1') > 9000000000000000;"
expect "an acquisition on a mark above the clock returns a token above the mark" "$S|${R##*$'\n'}" "00000|t"
expect_match "... repaired, with the counter's WARNING" "$R" "went backwards"
expect "... and raised the mark to it" "$(sql -c "SELECT fence_mark('up:1') > 9000000000000000")" "t"

# ------------------------------------------- an older writer still open

# An older holder's write is open, its transaction holding the mark.  The
# acquisition records its token as the resource's floor (the library is
# preloaded) and does not wait for it (issue 31); the older writer's next
# write is rejected at once, though the acquisition, in autocommit, could
# not write the mark: the floor stays with the session's lease.
sess_open o
sql -c "INSERT INTO accounts VALUES (3, 1000, 5)" >/dev/null
sess o "BEGIN; UPDATE accounts SET balance = balance + 1, tok = 6 WHERE id = 3;"
expect "an older writer's write is open" "$S" "00000"
sess a "SELECT fenced_acquire('acct:3', wait => '20 s') > 6;"
expect "an acquisition does not wait for an open older writer of the mark" "$S|$R" "00000|t"
sess o "UPDATE accounts SET balance = balance + 1, tok = 6 WHERE id = 3;"
expect "the older writer's next write is rejected at once (TF001)" "$S" "TF001"
expect_match "... below the acquisition's token" "$R" "is below the current mark"
sess o "ROLLBACK;"
sess a "UPDATE accounts SET balance = balance + 10 WHERE id = 3;"
expect "the new holder's write is accepted" "$S" "00000"
sess a "SELECT fenced_release('acct:3');"
sess_close o

# ------------------------------------------------------ two sessions

sess_close a
sess_close b

harness_tmpdir isodir
bindir=$("$PG_CONFIG" --bindir)
pgxs=$(dirname "$("$PG_CONFIG" --pgxs)")/../..
specs=$(cd "$FENCING_TOP/test/isolation_redis/specs" && ls ./*.spec | sed 's|^\./||; s/\.spec$//')
# shellcheck disable=SC2086
if "$pgxs/src/test/isolation/pg_isolation_regress" \
	--inputdir="$FENCING_TOP/test/isolation_redis" --outputdir="$isodir" --bindir="$bindir" \
	--load-extension=fencing --dbname=isolation_redis $specs >"$isodir/log" 2>&1; then
	ok "isolation specs against Redis: $specs"
else
	not_ok "isolation specs against Redis: $specs"
	sed 's/^/#   /' "$isodir/log" "$isodir/regression.diffs" 2>/dev/null
	# for a maintainer updating an expected file after reading the diff
	if [ -n "${FENCING_KEEP_RESULTS:-}" ]; then
		cp "$isodir"/results/*.out "$FENCING_KEEP_RESULTS"/
	fi
fi

checks_finish
