#!/usr/bin/env bash
# test/scripts/dump_restore.sh: the high-water marks survive pg_dump and
# pg_restore (SPEC, "The promise", 4).
#
# Starts a throwaway cluster, fills database "src" with fenced tables and
# marks, dumps it with pg_dump -Fc, restores it into a fresh database
# "dst" with pg_restore, and checks that dst fences exactly as src did: the
# same marks, stale tokens still rejected, row-scope tokens kept.  Also
# checks that a plain-format dump carries the marks table's rows, and that
# partitions keep their TRUNCATE guards (in a restore, and what a
# pg_upgrade dump holds).
#
# Prints one "ok - ..." or "not ok - ..." line per assertion and exits
# non-zero if any failed.  Runs as root or as a developer (see harness.sh).
#
#   bash test/scripts/dump_restore.sh
set -euo pipefail

source "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/../lib/harness.sh"
source "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/../lib/checks.sh"
source "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/../lib/psql.sh"
source "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/../lib/snippet.sh"

harness_start_pg
harness_tmpdir workdir
STATEMENTS_LOG=$workdir/statements.log

# The marks, one "resource|token|moved_at" line each, in a fixed order.
marks_of() {
	sql "$1" -c "SELECT resource, token, moved_at FROM fence_marks ORDER BY resource COLLATE \"C\""
}

harness_log "filling database src"
sql postgres -c 'CREATE DATABASE src'
sql src >"$workdir/setup.log" <<'EOF'
CREATE EXTENSION fencing;

-- resource scope: every item of an order shares the order's mark
CREATE TABLE order_items (
	order_id    int NOT NULL,
	item        text NOT NULL,
	qty         int NOT NULL,
	fence_token fence_token
);
CREATE TRIGGER fence BEFORE INSERT OR UPDATE OR DELETE ON order_items
	FOR EACH ROW EXECUTE FUNCTION fence_guard('fence_token', 'order:{order_id}');
CREATE TRIGGER no_truncate BEFORE TRUNCATE ON order_items
	FOR EACH STATEMENT EXECUTE FUNCTION fence_truncate_guard();

-- row scope: each row's token is its own mark
CREATE TABLE orders (
	id          int PRIMARY KEY,
	status      text NOT NULL,
	fence_token fence_token
);
CREATE TRIGGER fence BEFORE INSERT OR UPDATE ON orders
	FOR EACH ROW EXECUTE FUNCTION fence_guard('fence_token');

-- successive lock holders of order 1 write with growing tokens, up to 34
INSERT INTO order_items VALUES (1, 'apple', 1, 3);
INSERT INTO order_items VALUES (1, 'pear', 2, 20);
UPDATE order_items SET qty = 5, fence_token = 34 WHERE order_id = 1 AND item = 'apple';
-- others, one of them with a declared token, one in hexadecimal
SELECT fence_use('order:2', 7);
INSERT INTO order_items (order_id, item, qty) VALUES (2, 'plum', 1);
SELECT fence_use('order:2', NULL);
INSERT INTO order_items VALUES (3, 'fig', 4, '0x10');
-- marks with no rows behind them, one of them with an awkward name
SELECT fence_advance('order:9', 100);
SELECT fence_advance(E'odd: ''single'' "double" \\ tab\there \u00fc', 9223372036854775807);

INSERT INTO orders VALUES (1, 'new', 5), (2, 'new', 12);
UPDATE orders SET status = 'paid', fence_token = 40 WHERE id = 1;
EOF

src_marks=$(marks_of src)
expect "src has the marks written (order:1 at 34)" \
	"$(sql src -c "SELECT fence_mark('order:1')")" "34"
expect "src has 5 marks" "$(sql src -c 'SELECT count(*) FROM fence_marks')" "5"

harness_log "pg_dump -Fc src; pg_restore -d dst"
if pg_dump -Fc -f "$workdir/src.dump" src 2>"$workdir/pg_dump.log"; then
	ok "pg_dump -Fc src"
else
	not_ok "pg_dump -Fc src"
	sed 's/^/#   /' "$workdir/pg_dump.log"
fi
sql postgres -c 'CREATE DATABASE dst TEMPLATE template0'
if pg_restore --exit-on-error -d dst "$workdir/src.dump" 2>"$workdir/pg_restore.log"; then
	ok "pg_restore -d dst"
else
	not_ok "pg_restore -d dst"
	sed 's/^/#   /' "$workdir/pg_restore.log"
fi

dst_marks=$(marks_of dst) || dst_marks="(fence_marks unreadable)"
expect "fence_marks of dst equals src (resources and tokens)" \
	"$(cut -d'|' -f1,2 <<<"$dst_marks")" "$(cut -d'|' -f1,2 <<<"$src_marks")"
expect "fence_marks of dst keeps when each mark moved" "$dst_marks" "$src_marks"
expect "dst still registers fence_high_water for pg_dump" \
	"$(sql dst -c "SELECT 'fence_high_water'::regclass = ANY (extconfig) FROM pg_extension WHERE extname = 'fencing'")" \
	"t"
expect "in dst, PUBLIC still cannot write the marks or move them by hand" \
	"$(sql dst -c "SELECT has_table_privilege('public', 'fence_high_water', 'INSERT'),
		has_table_privilege('public', 'fence_high_water', 'UPDATE'),
		has_table_privilege('public', 'fence_high_water', 'DELETE'),
		has_function_privilege('public', 'fence_advance(text, fence_token)', 'EXECUTE'),
		has_function_privilege('public', 'fence_forget(text)', 'EXECUTE')")" \
	"f|f|f|f|f"

harness_log "writing to dst"
expect "dst rejects a write to order:1 with stale token 33 (TF001)" \
	"$(sqlstate_of dst "INSERT INTO order_items VALUES (1, 'stale', 1, 33)")" "TF001"
expect "dst rejects a stale declared token for order:1 on DELETE (TF001)" \
	"$(sqlstate_of dst "SELECT fence_use('order:1', 33); DELETE FROM order_items WHERE order_id = 1")" "TF001"
expect "dst rejects a write to order:9 (no rows, mark 100) with token 99 (TF001)" \
	"$(sqlstate_of dst "INSERT INTO order_items VALUES (9, 'stale', 1, 99)")" "TF001"
expect "dst rejects a write without a token (TF002)" \
	"$(sqlstate_of dst "UPDATE order_items SET qty = 0 WHERE order_id = 3")" "TF002"
expect "dst refuses TRUNCATE of the fenced table" \
	"$(sqlstate_of dst "TRUNCATE order_items")" "TF004"
expect "the rejected writes changed nothing in dst" \
	"$(sql dst -c "SELECT fence_mark('order:1'), count(*) FROM order_items WHERE order_id = 1")" "34|2"
expect "dst accepts a write to order:1 with token 35" \
	"$(sqlstate_of dst "INSERT INTO order_items VALUES (1, 'fresh', 1, 35)")" "00000"
expect "the accepted write raised order:1 to 35 in dst" \
	"$(sql dst -c "SELECT fence_mark('order:1')")" "35"

expect "row-scope rows of dst kept their tokens" \
	"$(sql dst -c 'SELECT id, status, fence_token FROM orders ORDER BY id')" \
	"$(sql src -c 'SELECT id, status, fence_token FROM orders ORDER BY id')"
expect "dst rejects a row-scope UPDATE with a lower token 39 (TF001)" \
	"$(sqlstate_of dst "UPDATE orders SET status = 'stale', fence_token = 39 WHERE id = 1")" "TF001"
expect "dst rejects a row-scope UPDATE that does not set the token (TF002)" \
	"$(sqlstate_of dst "UPDATE orders SET status = 'stale' WHERE id = 2")" "TF002"
expect "dst accepts a row-scope UPDATE with token 41" \
	"$(sqlstate_of dst "UPDATE orders SET status = 'shipped', fence_token = 41 WHERE id = 1")" "00000"
expect "row-scope rows of dst after the writes" \
	"$(sql dst -c 'SELECT id, status, fence_token FROM orders ORDER BY id')" $'1|shipped|41\n2|new|12'

harness_log "pg_dump -Fp src"
if pg_dump -Fp -f "$workdir/src.sql" src 2>"$workdir/pg_dump_plain.log"; then
	ok "pg_dump -Fp src"
else
	not_ok "pg_dump -Fp src"
	sed 's/^/#   /' "$workdir/pg_dump_plain.log"
fi
# The rows of fence_high_water as the plain dump's COPY block has them, and
# as COPY writes them from src (same text format, same escaping).
dump_rows=$(sed -n '/^COPY [a-z_."]*fence_high_water (resource, token, moved_at, set_by) FROM stdin;$/,/^\\\.$/p' \
	"$workdir/src.sql" | sed '1d;$d' | cut -f1,2 | LC_ALL=C sort) || dump_rows="(no dump)"
src_rows=$(sql src -c 'COPY (SELECT resource, token FROM fence_high_water) TO STDOUT' | LC_ALL=C sort)
expect "the plain dump holds every row of fence_high_water" "$dump_rows" "$src_rows"
if grep -q $'^order:1\t34\t' "$workdir/src.sql"; then
	ok "the plain dump holds the mark order:1 at 34"
else
	not_ok "the plain dump holds the mark order:1 at 34"
fi

# A database owned by an ordinary role: its owner dumps it whole, a
# superuser restores it (the extension is untrusted, and only the marks
# table's owner may write it).
harness_log "pg_dump by the database owner"
sql postgres >/dev/null <<'EOF'
CREATE ROLE app_owner LOGIN;
CREATE DATABASE owned OWNER app_owner;
EOF
sql owned >/dev/null <<'EOF'
CREATE EXTENSION fencing;
GRANT EXECUTE ON FUNCTION fence_guard() TO app_owner;
EOF
sql owned -U app_owner >/dev/null <<'EOF'
CREATE TABLE shipments (order_id int NOT NULL, carrier text, tok fence_token);
CREATE TRIGGER fence BEFORE INSERT OR UPDATE OR DELETE ON shipments
	FOR EACH ROW EXECUTE FUNCTION fence_guard('tok', 'shipment:{order_id}');
INSERT INTO shipments VALUES (1, 'post', 7), (2, 'courier', 3);
UPDATE shipments SET carrier = 'rail', tok = 8 WHERE order_id = 1;
EOF
owned_marks=$(marks_of owned)
expect "the owner wrote marks in its database" \
	"$(cut -d'|' -f1,2 <<<"$owned_marks")" $'shipment:1|8\nshipment:2|3'
expect "the owner is no superuser" \
	"$(sql owned -U app_owner -c "SELECT rolsuper FROM pg_roles WHERE rolname = current_user")" "f"
if pg_dump -U app_owner -Fc -f "$workdir/owned.dump" owned 2>"$workdir/pg_dump_owner.log"; then
	ok "pg_dump -Fc of the whole database by its owner"
else
	not_ok "pg_dump -Fc of the whole database by its owner"
	sed 's/^/#   /' "$workdir/pg_dump_owner.log"
fi
expect "the owner reads the marks table, no other role does" \
	"$(sql owned -c "SELECT has_table_privilege('app_owner', 'fence_high_water', 'SELECT'),
		has_table_privilege('public', 'fence_high_water', 'SELECT')")" \
	"t|f"
expect "the owner may only insert into the marks table (a raise)" \
	"$(sql owned -c "SELECT has_table_privilege('app_owner', 'fence_high_water', 'INSERT'),
		has_table_privilege('app_owner', 'fence_high_water', 'UPDATE'),
		has_table_privilege('app_owner', 'fence_high_water', 'DELETE'),
		has_table_privilege('app_owner', 'fence_high_water', 'TRUNCATE')")" \
	"t|f|f|f"

sql postgres -c 'CREATE DATABASE owned_by_owner OWNER app_owner TEMPLATE template0'
if pg_restore -U app_owner --exit-on-error -d owned_by_owner "$workdir/owned.dump" \
	2>"$workdir/pg_restore_owner.log"; then
	not_ok "a restore by the owner stops at CREATE EXTENSION (untrusted)"
else
	expect "a restore by the owner stops at CREATE EXTENSION (untrusted)" \
		"$(grep -c 'permission denied to create extension "fencing"' "$workdir/pg_restore_owner.log")" "1"
fi

# The managed-database set-up: a superuser created the extension in an
# empty database the owner owns, and granted it the guard; the owner
# restores its dump itself.  CREATE EXTENSION and COMMENT ON EXTENSION
# fail (they exist, and are not the owner's), the marks do not.
harness_log "pg_restore by the owner into a database where a superuser created the extension"
sql postgres -c 'CREATE DATABASE owned_managed OWNER app_owner TEMPLATE template0'
sql owned_managed >/dev/null <<'EOF'
CREATE EXTENSION fencing;
GRANT EXECUTE ON FUNCTION fence_guard() TO app_owner;
EOF
managed_rc=0
pg_restore -U app_owner -d owned_managed "$workdir/owned.dump" 2>"$workdir/pg_restore_managed.log" || managed_rc=$?
expect "the owner's restore hit no error on the marks table" \
	"$(grep -c 'fence_high_water' "$workdir/pg_restore_managed.log" || true)" "0"
# what a "set -e" restore job trips on: one error, COMMENT ON EXTENSION
# (owner only), so pg_restore exits 1 (issue 37)
expect "the owner's plain restore exits 1, its one error COMMENT ON EXTENSION" \
	"$managed_rc|$(grep -c 'must be owner of extension fencing' "$workdir/pg_restore_managed.log" || true)|$(sed -n 's/.*errors ignored on restore: //p' "$workdir/pg_restore_managed.log")" \
	"1|1|1"
expect "the owner's restore brought the marks, with when each moved" \
	"$(marks_of owned_managed || echo '(fence_marks unreadable)')" "$owned_marks"
expect "after the owner's restore a stale write is rejected (TF001)" \
	"$(sqlstate_of owned_managed "SET ROLE app_owner; UPDATE shipments SET tok = 5 WHERE order_id = 1")" \
	"TF001"
expect "the owner's insert cannot lower a mark" \
	"$(sql owned_managed -U app_owner -c "INSERT INTO fence_high_water VALUES ('shipment:1', 1, now()); SELECT fence_mark('shipment:1')")" \
	"8"
expect "nor can it update, delete or truncate one (42501)" \
	"$(sqlstate_of owned_managed "SET ROLE app_owner; UPDATE fence_high_water SET token = 1")|$(sqlstate_of owned_managed "SET ROLE app_owner; DELETE FROM fence_high_water")|$(sqlstate_of owned_managed "SET ROLE app_owner; TRUNCATE fence_high_water")" \
	"42501|42501|42501"

harness_log "fence_check_coverage after the restore"
expect "the owner's check finds every resource covered" \
	"$(sql owned_managed -U app_owner -c "SELECT table_name::text, rows, resources, uncovered, repaired FROM fence_check_coverage()")" \
	"shipments|2|2|0|0"
# a mark lost, as by a restore that failed on the marks table
sql owned_managed -c "SELECT fence_forget('shipment:2')" >/dev/null
# (an update of the row is still floored by the row's own token)
expect "with a mark lost, a stale new row is accepted" \
	"$(sqlstate_of owned_managed "BEGIN; SET ROLE app_owner; INSERT INTO shipments VALUES (2, 'stale', 1); ROLLBACK")" \
	"00000"
expect "the check reports it" \
	"$(sql owned_managed -U app_owner -c "SELECT table_name::text, uncovered, repaired FROM fence_check_coverage('shipments')")" \
	"shipments|1|0"
expect "repair raises it" \
	"$(sql owned_managed -U app_owner -c "SELECT table_name::text, uncovered, repaired FROM fence_check_coverage('shipments', repair => true)")" \
	"shipments|1|1"
expect "and the stale write is rejected again (TF001)" \
	"$(sql owned_managed -c "SELECT fence_mark('shipment:2')")|$(sqlstate_of owned_managed "SET ROLE app_owner; INSERT INTO shipments VALUES (2, 'stale', 1)")" \
	"3|TF001"
sql postgres -c 'CREATE ROLE app_reader LOGIN' >/dev/null
expect "a role that does not own the database may not run the check (42501)" \
	"$(sqlstate_of owned_managed "SET ROLE app_reader; SELECT * FROM fence_check_coverage()")" "42501"

# doc/operations.md's recipes for an owner's restore that exits 0: a list
# without the COMMENT ON EXTENSION entry (snippet owner-restore-list), or
# no comments at all (owner-restore-no-comments).  They run as written, in
# $workdir, on the dump "app.dump" into a database "app" set up as above.
harness_log "the owner's restore that exits 0"
cp "$workdir/owned.dump" "$workdir/app.dump"
for db in app app_nc; do
	sql postgres -c "CREATE DATABASE $db OWNER app_owner TEMPLATE template0" >/dev/null
	sql "$db" >/dev/null <<'EOF'
CREATE EXTENSION fencing;
GRANT EXECUTE ON FUNCTION fence_guard() TO app_owner;
EOF
done
recipe=$(snippet owner-restore-list)
check "doc/operations.md has the recipe with a restore list" test -n "$recipe"
if (cd "$workdir" && set -e && eval "$recipe") >"$workdir/owner_list.log" 2>&1; then
	ok "the owner's restore with the list exits 0"
else
	not_ok "the owner's restore with the list exits 0"
	sed 's/^/#   /' "$workdir/owner_list.log"
fi
expect "the list leaves out the extension's comment, and that entry only" \
	"$(pg_restore -l "$workdir/app.dump" | grep -v '^;' | grep -c . || true)" \
	"$(( $(grep -v '^;' "$workdir/app.list" | grep -c . || true) + 1 ))"
expect "the restore with the list brought the tables, the triggers and the marks" \
	"$(marks_of app || echo '(fence_marks unreadable)')|$(sqlstate_of app "SET ROLE app_owner; UPDATE shipments SET tok = 5 WHERE order_id = 1")" \
	"$owned_marks|TF001"
recipe=$(sed 's/-d app /-d app_nc /' <<<"$(snippet owner-restore-no-comments)")
check "doc/operations.md has the recipe without comments" test -n "$recipe"
if (cd "$workdir" && set -e && eval "$recipe") >"$workdir/owner_nc.log" 2>&1; then
	ok "the owner's restore with --no-comments exits 0"
else
	not_ok "the owner's restore with --no-comments exits 0"
	sed 's/^/#   /' "$workdir/owner_nc.log"
fi
expect "the restore without comments brought the marks, and the stale write is rejected (TF001)" \
	"$(marks_of app_nc || echo '(fence_marks unreadable)')|$(sqlstate_of app_nc "SET ROLE app_owner; UPDATE shipments SET tok = 5 WHERE order_id = 1")" \
	"$owned_marks|TF001"

sql postgres -c 'CREATE DATABASE owned_copy OWNER app_owner TEMPLATE template0'
if pg_restore --exit-on-error -d owned_copy "$workdir/owned.dump" 2>"$workdir/pg_restore_copy.log"; then
	ok "pg_restore of the owner's dump by a superuser"
else
	not_ok "pg_restore of the owner's dump by a superuser"
	sed 's/^/#   /' "$workdir/pg_restore_copy.log"
fi
expect "the restored copy has the owner's marks" \
	"$(marks_of owned_copy || echo '(fence_marks unreadable)')" "$owned_marks"
expect "in the restored copy the owner still reads, and cannot write, the marks table" \
	"$(sql owned_copy -c "SELECT has_table_privilege('app_owner', 'fence_high_water', 'SELECT'),
		has_table_privilege('app_owner', 'fence_high_water', 'UPDATE')")" \
	"t|f"
expect "in the restored copy a stale write of the owner is rejected (TF001)" \
	"$(sqlstate_of owned_copy "SET ROLE app_owner; UPDATE shipments SET tok = 7 WHERE order_id = 1")" "TF001"
expect "in the restored copy a newer write of the owner is accepted" \
	"$(sqlstate_of owned_copy "SET ROLE app_owner; UPDATE shipments SET tok = 9 WHERE order_id = 1")" "00000"

# A dump of one table carries no marks.  doc/operations.md's procedure: copy the
# table's marks along, and raise them in the target with fence_advance()
# before the rows are loaded.
harness_log "table-only dump, with its marks copied along"
pg_dump -U app_owner -Fc -t shipments -f "$workdir/shipments.dump" owned
sql owned -U app_owner -c "\\copy (SELECT resource, token FROM fence_marks WHERE resource LIKE 'shipment:%') TO '$workdir/shipment_marks.csv' WITH (FORMAT csv)"
sql postgres -c 'CREATE DATABASE one_table TEMPLATE template0'
sql one_table -c 'CREATE EXTENSION fencing'
sql one_table >/dev/null <<EOF
CREATE TEMP TABLE copied_marks (resource text, token fence_token);
\\copy copied_marks FROM '$workdir/shipment_marks.csv' WITH (FORMAT csv)
SELECT fence_advance(resource, token) FROM copied_marks;
EOF
expect "the marks copied along are raised in the target" \
	"$(sql one_table -c 'SELECT resource, token FROM fence_marks ORDER BY resource COLLATE "C"')" \
	"$(cut -d'|' -f1,2 <<<"$owned_marks")"
pg_restore --exit-on-error -d one_table "$workdir/shipments.dump"
expect "the table-only dump itself brought no marks" \
	"$(sql one_table -c 'SELECT count(*) FROM fence_marks')" "2"
expect "the table restored alone rejects a stale write (TF001)" \
	"$(sqlstate_of one_table "UPDATE shipments SET tok = 7 WHERE order_id = 1")" "TF001"

# Partitions keep their TRUNCATE guards across a dump and restore.  Each
# is a clone of its parent's (doc/guard.md, "What a row trigger cannot fence"), which
# pg_dump does not dump: the restore's own CREATE TRIGGER on the parent
# makes them again.  One partition was detached and attached again
# (without the row guard of its own that it got on DETACH, which the
# clone of the parent's would collide with), so it has a TRUNCATE guard of
# its own, of the same name, which pg_restore creates after the parent's:
# it replaces the clone, without a duplicate-trigger error.
# (Before, a guard created on a parent whose partitions already existed
# reached none of them: TRUNCATE of a partition was accepted.)
harness_log "partitions: pg_dump -Fc parts; pg_restore -d parts_dst"
sql postgres -c 'CREATE DATABASE parts'
sql parts >"$workdir/parts.log" <<'EOF'
CREATE EXTENSION fencing;
CREATE TABLE events (id int, part int, tok fence_token) PARTITION BY LIST (part);
CREATE TABLE events_1 PARTITION OF events FOR VALUES IN (1);
CREATE TABLE events_2 PARTITION OF events FOR VALUES IN (2, 3) PARTITION BY LIST (part);
CREATE TABLE events_2a PARTITION OF events_2 FOR VALUES IN (2);
CREATE TABLE events_4 PARTITION OF events FOR VALUES IN (4);
CREATE TRIGGER fence BEFORE INSERT OR UPDATE OR DELETE ON events
	FOR EACH ROW EXECUTE FUNCTION fence_guard('tok', 'part:{part}');
CREATE TRIGGER fence_truncate BEFORE TRUNCATE ON events
	FOR EACH STATEMENT EXECUTE FUNCTION fence_truncate_guard();
ALTER TABLE events DETACH PARTITION events_4;
DROP TRIGGER fence ON events_4;
ALTER TABLE events ATTACH PARTITION events_4 FOR VALUES IN (4);
INSERT INTO events VALUES (1, 1, 10), (2, 2, 20), (4, 4, 40);
EOF
guards_of() {
	sql "$1" -c "SELECT tgrelid::regclass, tgname, tgparentid <> 0 FROM pg_trigger
		WHERE tgfoid = 'fence_truncate_guard'::regproc ORDER BY tgrelid::regclass::text"
}
want_guards=$'events|fence_truncate|f\nevents_1|fence_truncate|t\nevents_2|fence_truncate|t\nevents_2a|fence_truncate|t\nevents_4|fence_truncate|f'
expect "every partition of parts has a TRUNCATE guard, clones but for the reattached one" \
	"$(guards_of parts)" "$want_guards"
pg_dump -Fc -f "$workdir/parts.dump" parts
expect "the dump creates the parent's TRUNCATE guard and the reattached partition's own, no clone" \
	"$(pg_restore -l "$workdir/parts.dump" | grep -o 'TRIGGER public [a-z_0-9]* fence_truncate' | sort)" \
	$'TRIGGER public events fence_truncate\nTRIGGER public events_4 fence_truncate'
sql postgres -c 'CREATE DATABASE parts_dst TEMPLATE template0'
if pg_restore --exit-on-error -d parts_dst "$workdir/parts.dump" 2>"$workdir/parts_restore.log"; then
	ok "pg_restore -d parts_dst, without a duplicate trigger"
else
	not_ok "pg_restore -d parts_dst, without a duplicate trigger"
	sed 's/^/#   /' "$workdir/parts_restore.log"
fi
expect "in parts_dst every partition has its TRUNCATE guard again" \
	"$(guards_of parts_dst)" "$want_guards"
for part in events_1 events_2 events_2a events_4; do
	expect "parts_dst refuses TRUNCATE of partition $part (TF004)" \
		"$(sqlstate_of parts_dst "TRUNCATE $part")" "TF004"
done
expect "parts_dst refuses a stale write to a partition (TF001)" \
	"$(sqlstate_of parts_dst "INSERT INTO events_2a VALUES (5, 2, 19)")" "TF001"

# What pg_upgrade restores: its dump (pg_dump --binary-upgrade) has no
# clones either, and creates the event trigger after every table's
# triggers, so none is cloned during the upgrade.  That is why
# fence_truncate_guard_partitions() is to be run after pg_upgrade.
pg_dump --binary-upgrade --schema-only -f "$workdir/parts_binary.sql" parts
expect "a binary-upgrade dump creates the TRUNCATE guards of the parent and of the reattached partition only" \
	"$(grep '^CREATE TRIGGER fence_truncate' "$workdir/parts_binary.sql")" \
	$'CREATE TRIGGER fence_truncate BEFORE TRUNCATE ON public.events FOR EACH STATEMENT EXECUTE FUNCTION public.fence_truncate_guard();\nCREATE TRIGGER fence_truncate BEFORE TRUNCATE ON public.events_4 FOR EACH STATEMENT EXECUTE FUNCTION public.fence_truncate_guard();'
expect "a binary-upgrade dump creates the event trigger after the tables' triggers" \
	"$(awk '/^CREATE TRIGGER/ { t = NR } /^CREATE EVENT TRIGGER fence_ddl_guard/ { e = NR } END { print (e > t ? "t" : "f") }' "$workdir/parts_binary.sql")" \
	"t"

if [ "$CHECKS_FAILED" -ne 0 ] && [ -s "$workdir/statements.log" ]; then
	echo "# server messages of the statements run:"
	sed 's/^/#   /' "$workdir/statements.log"
fi
checks_finish
