#!/usr/bin/env bash
# test/scripts/progress.sh: fence_attach_concurrently() and
# fence_check_coverage() show their progress while they run (issue 37;
# doc/guard.md "Progress").
#
# With the library preloaded, on a table of 20,000 rows, one resource each:
# a second session holds the mark of a resource in the middle of the table
# (FOR UPDATE), so that the run stops there, part way, for as long as the
# test reads the view fence_progress from a third session: the table, the
# phase, the pages and rows read of the estimate, the batches, a rate and a
# time left; what a role without privileges sees of another's run; the
# NOTICEs, with the interval at 0 (every batch); the row gone when the run
# ends, and when it fails (cancelled) in a backend that lives on, also when
# an exception block catches the error.
#
# Prints one "ok - ..." or "not ok - ..." line per assertion.
#
#   bash test/scripts/progress.sh
set -euo pipefail

source "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/../lib/redis_lib.sh"

ROWS=20000
harness_start_pg "shared_preload_libraries = 'fencing'"
harness_tmpdir workdir
STATEMENTS_LOG=$workdir/statements.log

sql postgres >/dev/null <<EOF
CREATE EXTENSION fencing;
CREATE TABLE big (id int, tok fence_token);
INSERT INTO big SELECT g, 10 FROM generate_series(1, $ROWS) g;
ANALYZE big;
-- a mark below its row's token, which the seeding raises: held, it stops the run there
SELECT fence_advance('big:15000', 1);
CREATE ROLE watcher LOGIN;
CREATE ROLE stats_reader LOGIN IN ROLE pg_read_all_stats;
EOF

expect "fencing.progress_notice_interval is 5 s by default" \
	"$(sql postgres -c 'SHOW fencing.progress_notice_interval')" "5s"
expect "fence_progress is empty while nothing runs" \
	"$(sql postgres -c 'SELECT count(*) FROM fence_progress')" "0"

# wait_blocked: the run of psql $1 (its application_name) waits for a lock
wait_blocked() {
	local i
	for i in $(seq 600); do
		[ "$(sql postgres -c "SELECT count(*) FROM pg_stat_activity WHERE application_name = '$1' AND wait_event_type = 'Lock'")" = 1 ] && return 0
		sleep 0.1
	done
	return 1
}

harness_log "fence_attach_concurrently, stopped part way"
sess_open blocker postgres
sess blocker "BEGIN; SELECT token FROM fence_high_water WHERE resource = 'big:15000' FOR UPDATE;"
PGAPPNAME=attacher psql -X -q -v ON_ERROR_STOP=1 postgres >"$workdir/attach.log" 2>&1 <<'EOF' &
SET fencing.progress_notice_interval = 0;
CALL fence_attach_concurrently('big', 'tok', 'big:{id}', batch_rows => 1000);
EOF
attacher=$!
HARNESS_PIDS+=("$attacher")
check "the attach waits for the held mark" wait_blocked attacher

pages=$(sql postgres -c "SELECT relpages FROM pg_class WHERE relname = 'big'")
row=$(sql postgres -c "SELECT datname, role, command, phase, table_name, tables_done, pages_total, rows_estimate
	FROM fence_progress")
expect "fence_progress shows the run: database, role, command, phase, table, pages, the estimate" \
	"$row" "postgres|$(sql postgres -c 'SELECT current_user')|fence_attach_concurrently|seeding marks|big|0|$pages|$ROWS"
expect "it has read part of the table, in batches, at a rate, with time left" \
	"$(sql postgres -c "SELECT pages_done > 0 AND pages_done < pages_total, rows_done > 0 AND rows_done < $ROWS,
		batches > 0, percent > 0 AND percent < 100, rows_per_second > 0, time_left IS NOT NULL,
		started <= table_started
		FROM fence_progress")" "t|t|t|t|t|t|t"
expect "it is the attaching backend's" \
	"$(sql postgres -c "SELECT p.pid = a.pid FROM fence_progress p, pg_stat_activity a WHERE a.application_name = 'attacher'")" "t"
expect "another role sees whose run it is, not its table or figures" \
	"$(sql postgres -U watcher -c "SELECT command, phase IS NULL, table_name IS NULL, rows_done IS NULL, percent IS NULL FROM fence_progress")" \
	"fence_attach_concurrently|t|t|t|t"
expect "a member of pg_read_all_stats sees it all" \
	"$(sql postgres -U stats_reader -c "SELECT phase, table_name FROM fence_progress")" "seeding marks|big"
sess blocker "COMMIT;"
wait "$attacher" && ok "the attach ends when the mark is let go" || not_ok "the attach ends when the mark is let go"
expect "fence_progress is empty once it has ended" \
	"$(sql postgres -c 'SELECT count(*) FROM fence_progress')" "0"
expect "the attach seeded every mark" \
	"$(sql postgres -c "SELECT count(*) FROM fence_marks WHERE resource LIKE 'big:%'")" "$ROWS"
notices=$(grep -cE '^NOTICE:  fence_attach_concurrently: table "big" [0-9]+% read, [0-9]+ rows in [0-9]+ batches, [0-9]+ rows/s, about [0-9]+ s left$' "$workdir/attach.log" || true)
if [ "$notices" -gt 1 ]; then
	ok "with the interval at 0, a progress NOTICE after the batches ($notices)"
else
	not_ok "with the interval at 0, a progress NOTICE after the batches ($notices)"
	sed 's/^/#   /' "$workdir/attach.log"
fi
expect "the last NOTICE is the summary" \
	"$(tail -n 1 "$workdir/attach.log" | grep -c 'fence_attach_concurrently seeded' || true)" "1"

harness_log "fence_check_coverage(repair => true), stopped part way, then cancelled"
sql postgres -c "UPDATE fence_high_water SET token = 1 WHERE resource = 'big:15000'" >/dev/null
sess blocker "BEGIN; SELECT token FROM fence_high_water WHERE resource = 'big:15000' FOR UPDATE;"
sess_open checker postgres
sess checker "SET application_name = 'checker'; SET fencing.progress_notice_interval = -1;"
(sess checker "SELECT * FROM fence_check_coverage('big', repair => true);") &
checking=$!
check "the check waits for the held mark" wait_blocked checker
expect "fence_progress shows the check, repairing" \
	"$(sql postgres -c "SELECT command, phase, table_name, pages_done > 0 AND pages_done < pages_total FROM fence_progress")" \
	"fence_check_coverage|checking and repairing marks|big|t"
sql postgres -c "SELECT pg_cancel_backend(pid) FROM pg_stat_activity WHERE application_name = 'checker'" >/dev/null
wait "$checking"
expect "the cancelled check's backend lives on, its row is gone" \
	"$(sql postgres -c "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'checker'")|$(sql postgres -c 'SELECT count(*) FROM fence_progress')" \
	"1|0"
# the same, the cancel caught by an exception block: the run has ended,
# though its transaction goes on and commits
(sess checker "DO \$\$ BEGIN PERFORM * FROM fence_check_coverage('big', repair => true); EXCEPTION WHEN query_canceled THEN RAISE NOTICE 'caught'; END \$\$;") &
checking=$!
check "the check in an exception block waits for the held mark" wait_blocked checker
expect "fence_progress shows it" "$(sql postgres -c 'SELECT count(*) FROM fence_progress')" "1"
sql postgres -c "SELECT pg_cancel_backend(pid) FROM pg_stat_activity WHERE application_name = 'checker'" >/dev/null
wait "$checking"
expect "the cancel caught, the block ended well, and the run's row is gone" \
	"$(grep -c 'NOTICE:  caught' "$SESS_DIR/checker.out")|$(sql postgres -c 'SELECT count(*) FROM fence_progress')" \
	"1|0"
expect "with the interval at -1, no progress NOTICE" \
	"$(grep -c 'read, .* batches' "$SESS_DIR/checker.out" || true)" "0"
sess blocker "COMMIT;"
sess checker "SELECT uncovered, repaired FROM fence_check_coverage('big', repair => true);"
expect "run again, the check repairs the mark" "$R" "1|1"
expect "fence_progress is empty again" \
	"$(sql postgres -c 'SELECT count(*) FROM fence_progress')" "0"
sess_close checker
sess_close blocker

if [ "$CHECKS_FAILED" -ne 0 ] && [ -s "$workdir/statements.log" ]; then
	echo "# server messages of the statements run:"
	sed 's/^/#   /' "$workdir/statements.log"
fi
checks_finish
