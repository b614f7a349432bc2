#!/usr/bin/env bash
# test/scripts/attach_online.sh: adopting a table while it is written
# (doc/guard.md "Adopting an existing table").
#
# On a table of 100,000 rows, one resource each:
#   - fence_attach_concurrently() seeds every mark while a writer in a
#     second session (pgbench) keeps committing: writes land between the
#     guard's creation and the end of the seeding, and are fenced;
#   - its lock is taken with lock_timeout and tried again: a transaction
#     holding the table makes it give up after lock_attempts, leaving no
#     guard; when it ends, the attach goes through;
#   - fence_attach() runs in bounded memory: seeding 300,000 resources
#     grows its backend's peak resident size by far less than the 290
#     bytes per resource it took when SPI kept the memory of every
#     fence_advance() call (with shared_buffers small, so that the pages it
#     reads count little).
#
# Prints one "ok - ..." or "not ok - ..." line per assertion.
#
#   bash test/scripts/attach_online.sh
set -euo pipefail

source "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/../lib/harness.sh"
source "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/../lib/checks.sh"
source "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/../lib/psql.sh"

ROWS=100000
MEM_ROWS=300000
harness_start_pg "shared_buffers = 16MB"
harness_tmpdir workdir
STATEMENTS_LOG=$workdir/statements.log

sql postgres >/dev/null <<EOF
CREATE EXTENSION fencing;
CREATE TABLE accounts (id int, tok fence_token, balance int);
INSERT INTO accounts SELECT g, g, 0 FROM generate_series(1, $ROWS) g;
-- the writer's log, unguarded: when each of its transactions committed
CREATE TABLE writes (at timestamptz NOT NULL);
EOF

# The writer: updates an existing row with a newer token (above every
# seeded mark) and inserts a row of a new resource, one transaction each.
cat >"$workdir/writer.sql" <<EOF
\\set id random(1, $ROWS)
BEGIN;
UPDATE accounts SET balance = balance + 1, tok = (extract(epoch FROM clock_timestamp()) * 1000)::bigint::text WHERE id = :id;
INSERT INTO writes VALUES (clock_timestamp());
END;
EOF

harness_log "fence_attach_concurrently with a writer committing alongside"
pgbench -n -c 1 -T 600 -f "$workdir/writer.sql" postgres >"$workdir/pgbench.log" 2>&1 &
writer=$!
HARNESS_PIDS+=("$writer")
# let the writer get going
for _ in $(seq 100); do
	[ "$(sql postgres -c 'SELECT count(*) > 20 FROM writes')" = t ] && break
	sleep 0.1
done
sql postgres >"$workdir/call.log" 2>&1 <<'EOF'
CREATE TABLE span AS SELECT clock_timestamp() AS started;
CALL fence_attach_concurrently('accounts', 'tok', 'acct:{id}', batch_rows => 5000);
ALTER TABLE span ADD COLUMN ended timestamptz;
UPDATE span SET ended = clock_timestamp();
EOF
# (a background job ignores SIGINT)
kill -TERM "$writer" 2>/dev/null || true
wait "$writer" 2>/dev/null || true

expect "the procedure seeded every resource" \
	"$(sql postgres -c "SELECT count(*) FROM fence_marks WHERE resource LIKE 'acct:%'")" "$ROWS"
expect "the procedure reported its batches" \
	"$(grep -c "seeded [0-9]* resources from [0-9]* rows in [0-9]* batches" "$workdir/call.log" || true)" "1"
during=$(sql postgres -c "SELECT count(*) FROM writes, span WHERE at > started AND at < ended")
if [ "$during" -gt 10 ]; then
	ok "the writer kept committing while the marks were seeded ($during transactions)"
else
	not_ok "the writer kept committing while the marks were seeded ($during transactions)"
	sed 's/^/#   /' "$workdir/pgbench.log" "$workdir/call.log"
fi
expect "the writer's writes were all accepted" \
	"$(grep -c 'ERROR\|aborted' "$workdir/pgbench.log" || true)" "0"
expect "every row's resource has a mark at its token or above" \
	"$(sql postgres -c "SELECT uncovered FROM fence_check_coverage('accounts')")" "0"
expect "a stale write after the seeding is rejected (TF001)" \
	"$(sqlstate_of postgres "UPDATE accounts SET tok = 49999 WHERE id = 50000")" "TF001"
expect "a stale new row of a seeded resource is rejected (TF001)" \
	"$(sqlstate_of postgres "INSERT INTO accounts VALUES (7, 6, 0)")" "TF001"

harness_log "the short lock: given up after lock_attempts, then taken"
sql postgres >/dev/null <<'EOF'
CREATE TABLE busy (id int, tok fence_token);
INSERT INTO busy VALUES (1, 3), (2, 4);
EOF
# a transaction writing the table holds ROW EXCLUSIVE until it ends
{
	echo "BEGIN; INSERT INTO busy VALUES (3, 5);"
	echo "SELECT pg_sleep(30);"
} | psql -X -q -d postgres >/dev/null 2>&1 &
holder=$!
HARNESS_PIDS+=("$holder")
for _ in $(seq 100); do
	[ "$(sql postgres -c "SELECT count(*) FROM pg_locks l JOIN pg_class c ON c.oid = l.relation WHERE c.relname = 'busy' AND l.mode = 'RowExclusiveLock' AND l.granted")" = 1 ] && break
	sleep 0.1
done
expect "with the table held, the procedure gives up after its attempts (55P03)" \
	"$(sqlstate_of postgres "CALL fence_attach_concurrently('busy', 'tok', 'b:{id}', lock_timeout => '20ms', lock_attempts => 3)")" \
	"55P03"
expect "its message counts the attempts" \
	"$(grep -c 'could not lock table "busy" to guard it in 3 attempts of 00:00:00.02 each' "$STATEMENTS_LOG" || true)" \
	"1"
expect "and it left no guard" \
	"$(sql postgres -c "SELECT count(*) FROM pg_trigger WHERE tgrelid = 'busy'::regclass")" "0"
kill "$holder" 2>/dev/null || true
wait "$holder" 2>/dev/null || true
sql postgres -c "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE query LIKE '%pg_sleep(30)%' AND pid <> pg_backend_pid()" >/dev/null
expect "once it is free, the procedure guards it" \
	"$(sqlstate_of postgres "CALL fence_attach_concurrently('busy', 'tok', 'b:{id}', lock_timeout => '20ms', lock_attempts => 50)")" \
	"00000"
expect "and seeded its marks" \
	"$(sql postgres -c "SELECT fence_mark('b:1'), fence_mark('b:2')")" "3|4"

harness_log "fence_attach in bounded memory"
sql postgres >/dev/null <<EOF
CREATE TABLE mem (id int, tok fence_token);
INSERT INTO mem SELECT g, g FROM generate_series(1, $MEM_ROWS) g;
EOF
# VmHWM of the backend before and after, in kB, in one session
sql postgres >"$workdir/mem.log" <<'EOF'
SELECT 'before ' || substring(pg_read_file('/proc/self/status') FROM 'VmHWM:\s*(\d+) kB');
SELECT fence_attach('mem', 'tok', 'mem:{id}');
SELECT 'after ' || substring(pg_read_file('/proc/self/status') FROM 'VmHWM:\s*(\d+) kB');
EOF
before=$(sed -n 's/^before //p' "$workdir/mem.log")
after=$(sed -n 's/^after //p' "$workdir/mem.log")
grown=$(((after - before) / 1024))
# 290 bytes a resource would be 83 MB; shared_buffers is 16 MB
if [ -n "$before" ] && [ "$grown" -lt 60 ]; then
	ok "fence_attach of $MEM_ROWS resources grew its backend's peak by $grown MB"
else
	not_ok "fence_attach of $MEM_ROWS resources grew its backend's peak by $grown MB"
	sed 's/^/#   /' "$workdir/mem.log"
fi
expect "fence_attach seeded them all" \
	"$(sql postgres -c "SELECT count(*) FROM fence_marks WHERE resource LIKE 'mem:%'")" "$MEM_ROWS"

checks_finish
