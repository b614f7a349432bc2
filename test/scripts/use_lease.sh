#!/usr/bin/env bash
# test/scripts/use_lease.sh: leases for tokens from any lock service
# (issue 31, part 4): fence_use(resource, token, lease => ...) lets a
# newer holder take over from a holder stalled past its lease, as
# fenced_acquire's leases do, without Redis.
#
# With the library preloaded.  The stalled holder ("victim", a psql
# session) declares token 10 with fence_use and a lease of 1 s, writes one
# row of an account and stalls inside its transaction; the newer holder
# declares 11 and writes another row of that account (they meet on the
# mark only) under a statement_timeout of 3 s: a write that waits for the
# victim fails with 57014, one that takes over commits.
#
# - a victim idle in its transaction past its lease: the newer holder's
#   write ends it (terminated, FATAL TF110 in psql), its write is undone,
#   the newer holder commits; logged;
# - a victim inside a statement (pg_sleep) past its lease: canceled with
#   TF110, its session lives on;
# - a victim whose lease is still valid by our clock: waited for, not
#   ended, and it commits;
# - a victim without a lease (fence_use as in 1.2): waited for;
# - a newer holder whose token was not declared (only in the row): waits;
# - fence_use again without a lease ends the lease: waited for;
# - fenced_lock_holders lists the leases (source fence_use), the
#   session's and the transaction's, until they end;
# - the arguments: a lease needs a token, and must be positive.
#
# On 8813559 (no lease argument) 12 of 21 checks failed.
#
#   bash test/scripts/use_lease.sh
# test/run: alone
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../lib/redis_lib.sh"

harness_start_pg "shared_preload_libraries = 'fencing'" || exit 1
SERVER_LOG=$(dirname "$PGDATA_DIR")/server.log
sql -c "CREATE EXTENSION fencing" \
	-c "CREATE TABLE entries (id int PRIMARY KEY, account int NOT NULL, amount int NOT NULL, tok fence_token)" \
	-c "CREATE TRIGGER fence BEFORE INSERT OR UPDATE OR DELETE ON entries
		FOR EACH ROW EXECUTE FUNCTION fence_guard('tok', 'acct:{account}')" \
	-c "INSERT INTO entries SELECT a, a, 100, 1 FROM generate_series(1, 9) a" >/dev/null || exit 1

sess_open n
sess n "SET statement_timeout = '3 s';"

# victim NAME ACCOUNT LEASE: session NAME declares 10 for acct:ACCOUNT
# (with "lease => LEASE" unless LEASE is empty) and updates its row.
victim() {
	local lease=
	[ -z "$3" ] || lease=", lease => '$3'"
	sess_open "$1"
	sess "$1" "\\set VERBOSITY verbose"
	sess "$1" "BEGIN; SELECT fence_use('acct:$2', 10$lease); UPDATE entries SET amount = 50 WHERE id = $2;"
}
# newer ACCOUNT [TOKEN]: the newer holder declares 11 (or, with TOKEN
# given, none: the row carries TOKEN) and inserts a row of acct:ACCOUNT.
newer() {
	if [ -n "${2:-}" ]; then
		sess n "BEGIN; INSERT INTO entries VALUES (100 + $1, $1, 1, $2);"
	else
		sess n "BEGIN; SELECT fence_use('acct:$1', 11, is_local => true); INSERT INTO entries VALUES (100 + $1, $1, 1);"
	fi
	NS=$S
	sess n "COMMIT;"
	NC=$S
}
amount() { sql -c "SELECT amount FROM entries WHERE id = $1"; }

# ------------------------------------------- idle in transaction, past its lease
victim v1 1 '1 s'
expect "the victim declares a lease and writes" "$S|$R" "00000|"
sleep 1.5
newer 1
expect "the newer holder's write does not wait for the idle victim past its lease" "$NS|$NC" "00000|00000"
# psql exits on the lost connection: no completion marker to wait for
# (in a subshell: a write to the FIFO of a psql already gone is SIGPIPE)
(printf 'SELECT 1;\n' >&"${SESS_FD[v1]}") 2>/dev/null
for _ in $(seq 100); do kill -0 "${SESS_PID[v1]}" 2>/dev/null || break; sleep 0.1; done
expect_match "the idle victim's next statement shows FATAL TF110" \
	"$(cat "$SESS_DIR/v1.out")" "FATAL: +TF110: the lock on resource \"acct:1\" was taken over"
expect "... and its write is undone" "$(amount 1)" "100"
expect_match "... the takeover is logged with pid, resource and tokens" \
	"$(grep -F '"acct:1"' "$SERVER_LOG")" "terminating the transaction of process [0-9]+, whose lease on resource \"acct:1\" \(token 10\) has ended, for the holder of token 11"

# --------------------------------------------------- inside a statement
victim v2 2 '1 s'
sess_send v2 "SELECT pg_sleep(6);"
sleep 1.5
newer 2
expect "the newer holder's write does not wait for a sleeping victim past its lease" "$NS|$NC" "00000|00000"
sess_wait v2
expect "the sleeping victim's statement is canceled with TF110" "$S" "TF110"
expect_match "... naming the resource and both tokens" "$R" 'resource "acct:2".*token 10.*token 11'
sess v2 "ROLLBACK; SELECT 1;"
expect "... and its session lives on" "$S|$R" "00000|1"
expect "... its write is undone" "$(amount 2)" "100"
sess_close v2

# --------------------------------------------------- a lease still valid
victim v3 3 '30 s'
expect "fenced_lock_holders lists the lease: fence_use, the session's, its token and length" \
	"$(sql -c "SELECT h.source, h.kind, h.token, h.expires_at - h.acquired_at, h.renewing, h.lost, a.state
		FROM fenced_lock_holders h JOIN pg_stat_activity a USING (pid) WHERE h.resource = 'acct:3'")" \
	"fence_use|session|10|00:00:30|f|f|idle in transaction"
newer 3
expect "a victim whose lease is valid is waited for (57014)" "$NS" "57014"
sess v3 "COMMIT;"
expect "... not ended, and it commits" "$S|$(amount 3)" "00000|50"
expect_match "... the decision not to end it is logged" "$(grep -F '"acct:3"' "$SERVER_LOG")" "not ending .*still valid"
sess_close v3

# --------------------------------------------------- without a lease
victim v4 4 ''
sleep 1.5
newer 4
expect "a victim without a lease is waited for, as in 1.2 (57014)" "$NS" "57014"
sess v4 "COMMIT;"
expect "... and commits" "$S|$(amount 4)" "00000|50"
sess_close v4

# ------------------------------------- a newer token not declared
victim v5 5 '1 s'
sleep 1.5
newer 5 11
expect "a newer token carried by the row alone, not declared, waits (57014)" "$NS" "57014"
sess v5 "COMMIT;"
expect "... and the victim commits" "$S" "00000"
sess_close v5

# ------------------------------------- fence_use again, without a lease
victim v6 6 '1 s'
sess v6 "SELECT fence_use('acct:6', 10);"
sleep 1.5
newer 6
expect "fence_use again without a lease ends the lease: waited for (57014)" "$NS" "57014"
sess v6 "COMMIT;"
expect "... and the victim commits" "$S" "00000"
sess_close v6

# ------------------------------------- a lease for the transaction, listed
sess n "BEGIN; SELECT fence_use('acct:8', 12, is_local => true, lease => '5 s');"
sess n "SELECT source, kind, token FROM fenced_lock_holders WHERE pid = pg_backend_pid();"
expect "a lease for the transaction is listed as such" "$S|$R" "00000|fence_use|transaction|12"
sess n "ROLLBACK; SELECT count(*) FROM fenced_lock_holders WHERE pid = pg_backend_pid();"
expect "... and is gone with its transaction" "$S|$R" "00000|0"

# --------------------------------------------------- arguments
expect "a lease without a token: 22023" \
	"$(sqlstate_of postgres "SELECT fence_use('acct:7', NULL, lease => '1 s')")" "22023"
expect "a lease of zero: 22023" \
	"$(sqlstate_of postgres "SELECT fence_use('acct:7', 5, lease => '0 s')")" "22023"
sess_close n

if [ "$CHECKS_FAILED" -gt 0 ]; then
	grep -E -A2 'the transaction of process|taken over' "$SERVER_LOG" | sed 's/^/#   /'
	[ -z "${USE_LEASE_DEBUG:-}" ] || sed 's/^/#   /' "$SERVER_LOG"
fi
checks_finish
