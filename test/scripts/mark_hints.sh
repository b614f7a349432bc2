#!/usr/bin/env bash
# test/scripts/mark_hints.sh: with the library in shared_preload_libraries,
# first writes of a resource try the address of its mark that the shared
# table of hints recorded (marks_cache.c), and a wrong address must only
# cost a lookup.
#
# Starts a throwaway cluster preloading fencing with a small hint table
# (1024 entries, so that entries collide and are overwritten), runs the
# regression (but fence_stat) and isolation suites against it, then makes the recorded
# addresses wrong in every way a table allows and checks that the guard
# still finds, raises and rejects the right marks:
#
# - fence_forget, and new marks of the same names elsewhere;
# - VACUUM FULL of the marks table (every version moves), and TRUNCATE;
# - VACUUM truncating the table below recorded addresses;
# - line pointers of pruned versions reused by other resources' marks.
#
# Prints one "ok - ..." or "not ok - ..." line per assertion and exits
# non-zero if any failed.
#
#   bash test/scripts/mark_hints.sh
# test/run: alone
set -euo pipefail

source "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/../lib/harness.sh"
source "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/../lib/checks.sh"
source "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/../lib/psql.sh"

harness_start_pg "shared_preload_libraries = 'fencing'" \
	"fencing.mark_hint_slots = 1024" "autovacuum = off"
cd "$FENCING_TOP"

harness_tmpdir logdir
# fence_stat shows the counters of a backend, as without preloading
tests=$(cd sql && ls -- *.sql | grep -v -e '^fencing--' -e '^fence_stat\.sql$' | sed 's/\.sql$//')
if make -s installcheck REGRESS="$(echo $tests)" >"$logdir/installcheck.log" 2>&1; then
	ok "the regression and isolation suites pass with the hint table"
else
	cat "$logdir/installcheck.log"
	[ -f regression.diffs ] && cat regression.diffs
	[ -f output_iso/regression.diffs ] && cat output_iso/regression.diffs
	not_ok "the regression and isolation suites pass with the hint table"
fi

sql postgres >/dev/null <<'SQL'
CREATE EXTENSION IF NOT EXISTS fencing;
CREATE TABLE h_rows (id int, tok fence_token);
CREATE TRIGGER fence BEFORE INSERT OR UPDATE ON h_rows
	FOR EACH ROW EXECUTE FUNCTION fence_guard('tok', 'h:{id}');
INSERT INTO h_rows SELECT g, 10 FROM generate_series(1, 3000) g;
SQL

# The number of the marks of h:1 .. h:$2 not at token $1.
marks_off() {
	sql postgres -c "SELECT count(*) FROM generate_series(1, ${2:-3000}) g
		WHERE fence_mark('h:' || g) IS DISTINCT FROM $1::fence_token"
}
# The number of rows whose write at token $1, one transaction each, is
# rejected with TF001.
stale_rejected() {
	sql postgres -c "DO \$\$ DECLARE i int; n int := 0; BEGIN
		FOR i IN 1..3000 LOOP
			BEGIN UPDATE h_rows SET tok = $1 WHERE id = i;
			EXCEPTION WHEN SQLSTATE 'TF001' THEN n := n + 1; END;
		END LOOP;
		RAISE NOTICE 'rejected %', n; END \$\$" 2>&1 | sed -n 's/.*rejected //p'
}

sql postgres -c "UPDATE h_rows SET tok = 11" >/dev/null
expect "raises through recorded addresses" "$(marks_off 11)" 0

sql postgres -c "SELECT count(fence_forget('h:' || g)) FROM generate_series(1, 3000) g" \
	-c "SELECT count(fence_advance('h:' || g, 12)) FROM generate_series(3000, 1, -1) g" >/dev/null
sql postgres -c "UPDATE h_rows SET tok = 13" >/dev/null
expect "raises after the marks were forgotten and made again" "$(marks_off 13)" 0
expect "a stale write after that is rejected on every row" "$(stale_rejected 12)" 3000

sql postgres -c "VACUUM FULL fence_high_water" -c "UPDATE h_rows SET tok = 14" >/dev/null
expect "raises after VACUUM FULL of the marks table" "$(marks_off 14)" 0
expect "stale writes after VACUUM FULL are rejected" "$(stale_rejected 13)" 3000

# Marks at the end of the table forgotten and the table truncated by
# VACUUM below the addresses recorded for them.
sql postgres -c "SELECT count(fence_forget('h:' || g)) FROM generate_series(1, 3000) g" \
	-c "VACUUM fence_high_water" \
	-c "SELECT count(fence_advance('h:' || g, 20)) FROM generate_series(1, 3000) g" \
	-c "SELECT count(fence_forget('h:' || g)) FROM generate_series(101, 3000) g" \
	-c "VACUUM fence_high_water" >/dev/null
expect "VACUUM truncated the marks table" \
	"$(sql postgres -c "SELECT (pg_relation_size('fence_high_water') < 8192 * 10)::int")" 1
sql postgres -c "UPDATE h_rows SET tok = 21" >/dev/null
expect "first writes after the truncation find or create their marks" "$(marks_off 21)" 0
expect "stale writes after the truncation are rejected" "$(stale_rejected 20)" 3000

# Every other mark forgotten, pruned, and its line pointer reused by
# another resource's mark.
sql postgres -c "SELECT count(fence_forget('h:' || g)) FROM generate_series(1, 3000, 2) g" \
	-c "VACUUM fence_high_water" \
	-c "SELECT count(fence_advance('other:' || g, 5)) FROM generate_series(1, 3000) g" >/dev/null
sql postgres -c "UPDATE h_rows SET tok = 30" >/dev/null
expect "raises when recorded addresses hold other resources' marks" "$(marks_off 30)" 0
expect "the other resources' marks are untouched" \
	"$(sql postgres -c "SELECT count(*) FROM fence_marks WHERE resource LIKE 'other:%' AND token <> 5")" 0
expect "one mark row per resource" \
	"$(sql postgres -c "SELECT count(*) - count(DISTINCT resource) FROM fence_high_water")" 0

sql postgres -c "SET session_replication_role = replica" -c "TRUNCATE fence_high_water" \
	-c "RESET session_replication_role" -c "UPDATE h_rows SET tok = 31" >/dev/null
expect "after TRUNCATE of the marks table first writes create the marks" "$(marks_off 31)" 0

# TRUNCATE in the transaction that already read the table's size.
sql postgres -c "BEGIN" -c "UPDATE h_rows SET tok = 32 WHERE id = 1" \
	-c "SET LOCAL session_replication_role = replica" -c "TRUNCATE fence_high_water" \
	-c "SET LOCAL session_replication_role = origin" -c "UPDATE h_rows SET tok = 33" -c "COMMIT" >/dev/null
expect "writes after a TRUNCATE of the marks table in their transaction" "$(marks_off 33)" 0

checks_finish
