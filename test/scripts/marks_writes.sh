#!/usr/bin/env bash
# test/scripts/marks_writes.sh: a transaction writes each mark at most
# twice, however many times it raises it, and never in place (issue 33).
#
# Counted on a throwaway cluster: the row versions the marks table
# receives (pg_stat_xact_user_tables, read in the writing transaction
# before its commit, plus one for the write at commit) and the WAL records
# of the table (pg_walinspect): no heap in-place update record, no record
# the executor's own UPDATE would not write.  For:
#
# - one INSERT raising one mark 2,000 times;
# - a PL/pgSQL loop raising one mark in 2,000 subtransactions;
# - fence_advance 2,000 times in one statement;
# - 300 marks raised in turn in 3,000 subtransactions, their names
#   colliding in the per-transaction cache;
#
# and that the committed marks are the last raises; and that a transaction
# holding raises in memory may drop the extension.  Prints one "ok - ..."
# or "not ok - ..." line per check.
#
#   bash test/scripts/marks_writes.sh
set -euo pipefail

source "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/../lib/harness.sh"
source "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/../lib/checks.sh"
source "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/../lib/psql.sh"

harness_start_pg "wal_level = replica"

sql >/dev/null <<'SQL'
CREATE EXTENSION fencing;
CREATE EXTENSION pg_walinspect;
CREATE TABLE w_rows (res text, i int, tok fence_token);
CREATE TRIGGER fence BEFORE INSERT ON w_rows
	FOR EACH ROW EXECUTE FUNCTION fence_guard('tok', 'w:{res}');
-- n rows of names[1 + i % length] at token i, a subtransaction each
CREATE FUNCTION w_loop(names text[], n int) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
	i int;
BEGIN
	FOR i IN 1..n LOOP
		BEGIN
			INSERT INTO w_rows VALUES (names[1 + i % array_length(names, 1)], i, i);
		EXCEPTION WHEN division_by_zero THEN
			NULL;
		END;
	END LOOP;
END
$$;
-- k names whose resources 'w:' || name share a slot of the cache
CREATE FUNCTION w_colliding(k int) RETURNS text[] LANGUAGE sql AS $$
	SELECT array_agg(g::text) FROM (SELECT g FROM generate_series(1, 1000000) g
		WHERE hashtext('w:' || g) & 255 = 0 LIMIT k) s
$$;
SQL

# Run statement $2 in a transaction, after creating the marks of $3 (a
# SQL array of names) at token 0 in one before; print "V W" where V is
# the number of mark versions the transaction wrote before its commit, W
# the number of its WAL records of the marks table other than inserts,
# updates (HOT or not) and locks, and T the number of all of them.
writes() {
	local name=$1 stmt=$2 names=$3 lsn out
	sql -c "INSERT INTO w_rows SELECT n, 0, 0 FROM unnest($names) n" >/dev/null
	lsn=$(sql -c "SELECT pg_current_wal_insert_lsn()")
	out=$(sql -c "BEGIN" -c "$stmt" \
		-c "SELECT n_tup_ins + n_tup_upd + n_tup_del FROM pg_stat_xact_user_tables WHERE relname = 'fence_high_water'" \
		-c "COMMIT" | tail -1)
	sql -c "SELECT count(*) FILTER (WHERE NOT (resource_manager = 'Heap'
				AND record_type ~ '^(INSERT|UPDATE|HOT_UPDATE|LOCK)(\+INIT)?\$')
			AND NOT (resource_manager = 'Heap2' AND record_type ~ '^(PRUNE|VISIBLE|LOCK_UPDATED)')),
		count(*)
		FROM pg_get_wal_records_info('$lsn', pg_current_wal_flush_lsn())
		WHERE block_ref LIKE '%/' || pg_relation_filenode('fence_high_water') || ' %'" |
		tr '|' ' ' | sed "s/^/$out /"
}

check_case() {
	local name=$1 stmt=$2 names=$3 nmarks=$4 want_marks=$5 v w t
	read -r v w t < <(writes "$name" "$stmt" "$names")
	check "$name: the marks table's WAL records are found ($t)" [ "${t:-0}" -gt 0 ]
	# one version each before the commit, one more at the commit
	if [ "$v" -le "$nmarks" ]; then
		ok "$name: $v mark versions written before the commit, for $nmarks marks"
	else
		not_ok "$name: $v mark versions written before the commit, for $nmarks marks (at most $nmarks)"
	fi
	expect "$name: no WAL record of the marks table but heap inserts, updates and locks" "$w" "0"
	expect "$name: the committed marks are the last raises" \
		"$(sql -c "SELECT string_agg(token::text, ',' ORDER BY resource) FROM fence_marks
			WHERE resource = ANY (SELECT 'w:' || n FROM unnest($names) n)")" "$want_marks"
}

check_case "one INSERT, 2,000 raises" \
	"INSERT INTO w_rows SELECT 'ins', g, g FROM generate_series(1, 2000) g" \
	"ARRAY['ins']" 1 2000
check_case "2,000 subtransactions, one mark" \
	"SELECT w_loop(ARRAY['sub'], 2000)" "ARRAY['sub']" 1 2000
check_case "fence_advance 2,000 times" \
	"SELECT count(fence_advance('w:adv', g::text::fence_token)) FROM generate_series(1, 2000) g" \
	"ARRAY['adv']" 1 2000
names=$(sql -c "SELECT quote_literal(w_colliding(300)::text) || '::text[]'")
want=$(sql -c "SELECT string_agg(m::text, ',' ORDER BY 'w:' || n)
	FROM (SELECT n, max(i) AS m FROM unnest($names) WITH ORDINALITY AS u(n, o),
		generate_series(1, 3000) i WHERE 1 + i % 300 = o GROUP BY n) s")
check_case "300 colliding marks in 3,000 subtransactions" \
	"SELECT w_loop($names, 3000)" "$names" 300 "$want"

# The raises kept in memory of a transaction that then drops the extension
# have nowhere to go, and must not keep it from committing.
sql >/dev/null <<'SQL'
CREATE DATABASE w_drop;
SQL
sql w_drop >/dev/null <<'SQL'
CREATE EXTENSION fencing;
CREATE TABLE d_rows (res text, tok fence_token);
CREATE TRIGGER fence BEFORE INSERT ON d_rows
	FOR EACH ROW EXECUTE FUNCTION fence_guard('tok', '{res}');
SQL
expect "a transaction raising marks in memory, then dropping the extension, commits" \
	"$(sql w_drop -c "BEGIN" -c "INSERT INTO d_rows VALUES ('a', 1), ('a', 2), ('a', 3)" \
		-c "DROP TABLE d_rows" -c "DROP EXTENSION fencing" -c "COMMIT" \
		-c "SELECT count(*) FROM pg_extension WHERE extname = 'fencing'" 2>&1)" "0"

checks_finish
