#!/usr/bin/env bash
# test/scripts/stats_partitions.sh: fence_stat_tables for partitioned
# schemas (doc/operations.md "Statistics").
#
# With the library preloaded (counters in shared memory, a cluster started
# with fencing.stats_max_tables = 50): the counts of every partition of a
# two-level partitioned table show as one row of its root; the entries stay
# per partition (fence_stat_info); last_rejected_at is the time of the
# table's last rejection; the entries of dropped tables, partitions and
# databases are forgotten when the counters are read, and their room is
# used again.  Without preloading (a backend's own counters), the same
# roll-up and forgetting.  Then the update from 1.1 keeps the privileges an
# administrator gave fence_stat_tables and the function behind it, which
# the update makes again, and pg_dump still dumps them.
#
#   bash test/scripts/stats_partitions.sh
set -euo pipefail

source "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/../lib/harness.sh"
source "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/../lib/checks.sh"
source "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/../lib/psql.sh"

# A two-level partitioned table "orders", guarded by a trigger on its root
# (cloned to every partition), and a plain table "plain".
schema() {
	sql "$1" >/dev/null <<'SQL'
CREATE EXTENSION IF NOT EXISTS fencing;
CREATE TABLE orders (region text, order_id int, tok fence_token) PARTITION BY LIST (region);
CREATE TABLE orders_eu PARTITION OF orders FOR VALUES IN ('eu') PARTITION BY RANGE (order_id);
CREATE TABLE orders_eu_1 PARTITION OF orders_eu FOR VALUES FROM (0) TO (100);
CREATE TABLE orders_eu_2 PARTITION OF orders_eu FOR VALUES FROM (100) TO (200);
CREATE TABLE orders_us PARTITION OF orders FOR VALUES IN ('us');
CREATE TRIGGER fence BEFORE INSERT OR UPDATE OR DELETE ON orders
	FOR EACH ROW EXECUTE FUNCTION fence_guard('tok', 'order:{order_id}');
CREATE TABLE plain (order_id int, tok fence_token);
CREATE TRIGGER fence BEFORE INSERT OR UPDATE ON plain
	FOR EACH ROW EXECUTE FUNCTION fence_guard('tok', 'plain:{order_id}');
SQL
}

# Writes to each partition: 4 accepted, 2 stale, 1 without a token.
writes() {
	sql "$1" -c "INSERT INTO orders VALUES ('eu', 1, 5), ('eu', 150, 5), ('us', 7, 5)"
	sqlstate_of "$1" "INSERT INTO orders VALUES ('eu', 1, 4)" >/dev/null
	sqlstate_of "$1" "INSERT INTO orders VALUES ('us', 7, 3)" >/dev/null
	sqlstate_of "$1" "INSERT INTO orders VALUES ('eu', 2, NULL)" >/dev/null
	sql "$1" -c "INSERT INTO orders VALUES ('eu', 151, 6)"
}

cols="table_name, checked, accepted, rejected_stale, rejected_no_token, marks_raised"

# --- shared memory -----------------------------------------------------
harness_start_pg "shared_preload_libraries = 'fencing'" "fencing.stats_max_tables = 50"
sql postgres -c "CREATE DATABASE one" -c "CREATE DATABASE two"
schema one
schema two

expect "fence_stat_info: room for fencing.stats_max_tables tables" \
	"$(sql one -c 'SELECT mode, capacity, tables FROM fence_stat_info')" "shared|50|0"
before=$(sql one -c "SELECT clock_timestamp()")
writes one
after=$(sql one -c "SELECT clock_timestamp()")
sql one -c "INSERT INTO plain VALUES (1, 1)"
expect "the partitions of a two-level tree show as one row of its root" \
	"$(sql one -c "SELECT $cols FROM fence_stat_tables ORDER BY table_name::text")" \
	"orders|7|4|2|1|4
plain|1|1|0|0|1"
expect "... while each partition keeps an entry of its own" \
	"$(sql one -c 'SELECT tables FROM fence_stat_info')" "4"
expect "last_rejected_at: within the writes for the root, NULL for a table never rejected" \
	"$(sql one -c "SELECT bool_and(last_rejected_at BETWEEN '$before' AND '$after') FILTER (WHERE table_name = 'orders'::regclass),
		bool_and(last_rejected_at IS NULL) FILTER (WHERE table_name = 'plain'::regclass) FROM fence_stat_tables")" \
	"t|t"
sql two -c "INSERT INTO orders VALUES ('us', 7, 1)"
expect "each database rolls up its own partitions" \
	"$(sql two -c "SELECT $cols FROM fence_stat_tables")" "orders|1|1|0|0|1"
expect "fence_stat_info counts the entries of every database" \
	"$(sql one -c 'SELECT tables FROM fence_stat_info')" "5"

sql one -c "DROP TABLE orders_eu_2"
expect "a dropped partition is forgotten: its counts leave the root's" \
	"$(sql one -c "SELECT $cols FROM fence_stat_tables WHERE table_name = 'orders'::regclass")" \
	"orders|5|2|2|1|2"
expect "... and its entry is freed" \
	"$(sql one -c 'SELECT tables FROM fence_stat_info')" "4"
sql one -c "DROP TABLE plain"
expect "a dropped table is forgotten" \
	"$(sql one -c "SELECT table_name FROM fence_stat_tables")" "orders"
sql postgres -c "DROP DATABASE two"
expect "the entries of a dropped database are forgotten when another reads them" \
	"$(sql one -c 'SELECT tables FROM fence_stat_info')" "2"

# the room of dropped tables is used again
# (each table written in a transaction of its own: many_49 to many_52
# find the room full)
for i in $(seq 52); do
	echo "CREATE TABLE many_$i (tok fence_token);"
	echo "CREATE TRIGGER fence BEFORE INSERT ON many_$i FOR EACH ROW EXECUTE FUNCTION fence_guard('tok', 'many');"
	echo "INSERT INTO many_$i VALUES ($i);"
done | sql one >/dev/null
expect "50 entries of 50 (2 of orders' partitions), the 4 tables beyond counted together" \
	"$(sql one -c "SELECT (SELECT tables FROM fence_stat_info), sum(checked) FROM fence_stat_tables WHERE table_name IS NULL")" \
	"50|4"
sql one -c "DROP TABLE many_1, many_2, many_3, many_4, many_5, many_6, many_7, many_8, many_9, many_10"
expect "dropping 10 of them frees 10 entries" "$(sql one -c 'SELECT tables FROM fence_stat_info')" "40"
sql one -c "INSERT INTO many_52 VALUES (100)"
expect "... which a table beyond the room takes when it writes again" \
	"$(sql one -c "SELECT table_name, checked FROM fence_stat_tables WHERE table_name = 'many_52'::regclass")" \
	"many_52|1"

# --- a backend's own counters ------------------------------------------
harness_start_pg
schema postgres
expect "without preloading: one session's writes, rolled up, a dropped partition forgotten" \
	"$(sql postgres <<SQL 2>/dev/null
INSERT INTO orders VALUES ('eu', 1, 5), ('eu', 150, 5), ('us', 7, 5);
DO \$\$ BEGIN INSERT INTO orders VALUES ('eu', 1, 4); EXCEPTION WHEN OTHERS THEN NULL; END \$\$;
DO \$\$ BEGIN INSERT INTO orders VALUES ('us', 7, 3); EXCEPTION WHEN OTHERS THEN NULL; END \$\$;
DO \$\$ BEGIN INSERT INTO orders VALUES ('eu', 2, NULL); EXCEPTION WHEN OTHERS THEN NULL; END \$\$;
INSERT INTO orders VALUES ('eu', 151, 6);
SELECT $cols FROM fence_stat_tables;
DROP TABLE orders_eu_2;
SELECT $cols FROM fence_stat_tables;
SELECT tables FROM fence_stat_info;
SQL
)" \
	"orders|7|4|2|1|4
orders|5|2|2|1|2
2"

# --- the update from 1.1 keeps the privileges --------------------------
sql postgres -c "CREATE DATABASE upgraded" -c "CREATE DATABASE fresh" -c "CREATE ROLE monitor"
sql upgraded >/dev/null <<'SQL'
CREATE EXTENSION fencing VERSION '1.1';
REVOKE SELECT ON fence_stat_tables FROM PUBLIC;
GRANT SELECT ON fence_stat_tables TO monitor;
REVOKE EXECUTE ON FUNCTION fence_stat_tables_data() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION fence_stat_tables_data() TO monitor;
SQL
acl="SELECT (SELECT relacl::text FROM pg_class WHERE oid = 'fence_stat_tables'::regclass) || ' ' ||
	(SELECT proacl::text FROM pg_proc WHERE oid = 'fence_stat_tables_data()'::regprocedure)"
initprivs="SELECT coalesce(string_agg(i.classoid::regclass || ' ' || i.initprivs::text, ', ' ORDER BY 1), '')
	FROM pg_init_privs i WHERE (i.classoid, i.objoid) IN (('pg_class'::regclass, 'fence_stat_tables'::regclass),
		('pg_proc'::regclass, 'fence_stat_tables_data()'::regprocedure))"
acl_before=$(sql upgraded -c "$acl")
sql upgraded -c "ALTER EXTENSION fencing UPDATE"
sql fresh -c "CREATE EXTENSION fencing"
expect "the update from 1.1 makes fence_stat_tables again, with last_rejected_at" \
	"$(sql upgraded -c "SELECT extversion, EXISTS (SELECT 1 FROM pg_attribute WHERE attrelid = 'fence_stat_tables'::regclass AND attname = 'last_rejected_at') FROM pg_extension WHERE extname = 'fencing'")" \
	"$(sql fresh -c "SELECT default_version FROM pg_available_extensions WHERE name = 'fencing'")|t"
expect "... with the privileges an administrator gave the view and the function" "$(sql upgraded -c "$acl")" "$acl_before"
expect "... and the initial privileges of a fresh install" "$(sql upgraded -c "$initprivs")" "$(sql fresh -c "$initprivs")"
dump=$(pg_dump --schema-only upgraded)
check "... so that pg_dump still dumps the administrator's REVOKE and GRANT" \
	grep -q '^REVOKE SELECT ON TABLE public.fence_stat_tables FROM PUBLIC;' <<<"$dump"
check "... of the function too" \
	grep -q '^GRANT ALL ON FUNCTION public.fence_stat_tables_data(.*) TO monitor;' <<<"$dump"
expect "monitor may read the view, PUBLIC may not, nor call the function" \
	"$(sql upgraded -c "SELECT has_table_privilege('monitor', 'fence_stat_tables', 'SELECT'),
		has_table_privilege('public', 'fence_stat_tables', 'SELECT'),
		has_function_privilege('public', 'fence_stat_tables_data()', 'EXECUTE')")" \
	"t|f|f"

checks_finish
