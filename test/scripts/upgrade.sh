#!/usr/bin/env bash
# test/scripts/upgrade.sh: an install upgraded with ALTER EXTENSION fencing
# UPDATE equals a fresh install of the default version, and keeps fencing.
#
# For every version the server offers other than the default (1.0 today),
# database "from_<version>" installs that version from its own script,
# gets the same fenced tables and marks as a fresh database "fresh"
# (written at the old version, with the new library), and is updated;
# "from_<version>_other_am" does the same with its marks table created
# under a table access method other than heap, as a 1.0 install could
# have been.  Then the extensions of the two
# databases are compared, as text and shown as a diff when they differ:
#
#  - the catalogs: members (pg_depend deptype 'e', pg_identify_object),
#    every member function's properties, relations (access method,
#    options, columns, constraints, indexes, views), types, operators,
#    casts, operator classes, event triggers, ACLs and initial privileges,
#    comments, and extconfig/extcondition;
#  - pg_dump --binary-upgrade --schema-only, OIDs normalized, which lists
#    every member with its full definition.
#
# Nothing here names an object of 1.1, so whatever is appended to
# sql/fencing--1.0--1.1.sql is compared too.  As long as there is no
# fencing--1.1.sql, a fresh install runs the 1.0 script and then the same
# update scripts: what this catches then is an update script whose result
# depends on the database it runs in (its settings, such as the access
# method below, its marks, what was written at the old version), and, the
# day a full script for a newer version exists, any drift between the two
# paths.  Finally the upgraded database must still fence with the marks
# written before the update, the 1.2 update must have given the
# partitions made before their parent's TRUNCATE guard a clone of it, and
# fence_use, made again by 1.3 with a lease argument, must keep the
# privileges it had.
#
# Prints one "ok - ..." or "not ok - ..." line per assertion and exits
# non-zero if any failed.
#
#   bash test/scripts/upgrade.sh
set -euo pipefail

source "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/../lib/harness.sh"
source "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/../lib/checks.sh"
source "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/../lib/psql.sh"
source "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/../lib/snippet.sh"

harness_start_pg
harness_tmpdir workdir
STATEMENTS_LOG=$workdir/statements.log

# Assert that two files are equal; show the diff when they are not.
expect_same_file() {
	local desc=$1 want=$2 got=$3
	if diff -u "$want" "$got" >"$workdir/diff" 2>&1; then
		ok "$desc"
	else
		not_ok "$desc"
		sed 's/^/#   /' "$workdir/diff"
	fi
}


# A new database, with a table access method heap_copy (heap's handler
# under another name): the old installs below create their marks table
# with it, and it exists everywhere so that the dumps can be compared.
new_db() {
	sql postgres -c "CREATE DATABASE $1"
	sql "$1" -c 'CREATE ACCESS METHOD heap_copy TYPE TABLE HANDLER heap_tableam_handler'
}

# Fenced tables of both scopes, a TRUNCATE guard, and marks; the same in
# every database.
fill() {
	sql "$1" >/dev/null <<'EOF'
CREATE TABLE orders (id int PRIMARY KEY, status text NOT NULL, tok fence_token);
CREATE TRIGGER fence BEFORE INSERT OR UPDATE ON orders
	FOR EACH ROW EXECUTE FUNCTION fence_guard('tok');

CREATE TABLE items (order_id int NOT NULL, item text NOT NULL, tok fence_token);
CREATE TRIGGER fence BEFORE INSERT OR UPDATE OR DELETE ON items
	FOR EACH ROW EXECUTE FUNCTION fence_guard('tok', 'order:{order_id}');
CREATE TRIGGER fence_truncate BEFORE TRUNCATE ON items
	FOR EACH STATEMENT EXECUTE FUNCTION fence_truncate_guard();

INSERT INTO orders VALUES (1, 'new', 5), (2, 'new', 12);
INSERT INTO items VALUES (1, 'apple', 30), (2, 'pear', 7);
UPDATE items SET tok = 34 WHERE order_id = 1;
SELECT fence_advance('order:9', 100);

-- partitions made before the TRUNCATE guard of their parent: before 1.2
-- they got none of it, and the 1.2 update clones it to them
CREATE TABLE events (id int, part int, tok fence_token) PARTITION BY LIST (part);
CREATE TABLE events_1 PARTITION OF events FOR VALUES IN (1);
CREATE TABLE events_2 PARTITION OF events FOR VALUES IN (2, 3) PARTITION BY LIST (part);
CREATE TABLE events_2a PARTITION OF events_2 FOR VALUES IN (2);
CREATE TRIGGER fence_truncate BEFORE TRUNCATE ON events
	FOR EACH STATEMENT EXECUTE FUNCTION fence_truncate_guard();
EOF
}

# The TRUNCATE guards of the partitions of events, and whether each is a
# clone of its parent's.
partition_guards_of() {
	sql "$1" -c "SELECT tgrelid::regclass, tgname, tgparentid <> 0 FROM pg_trigger
		WHERE tgfoid = 'fence_truncate_guard'::regproc AND tgrelid::regclass::text LIKE 'events_%'
		ORDER BY tgrelid::regclass::text"
}

# The extension as the catalogs describe it, one line per fact, sorted, no
# OIDs.  Every query is over the members, so that a new kind of member
# shows up at least in the first list.
catalog_of() {
	sql "$1" <<'EOF'
\pset fieldsep ' | '
CREATE TEMP VIEW m AS
	SELECT d.classid, d.objid, d.objsubid
	FROM pg_catalog.pg_depend d
	WHERE d.refclassid = 'pg_catalog.pg_extension'::pg_catalog.regclass
		AND d.refobjid = (SELECT oid FROM pg_catalog.pg_extension WHERE extname = 'fencing')
		AND d.deptype = 'e';
SELECT 'extension', e.extname, e.extversion, e.extrelocatable, n.nspname,
	(SELECT pg_catalog.string_agg(c::pg_catalog.regclass::text || ' WHERE ' || pg_catalog.quote_literal(w), ', '
		ORDER BY c::pg_catalog.regclass::text)
	 FROM unnest(e.extconfig, e.extcondition) AS u(c, w)) AS config_dump
FROM pg_catalog.pg_extension e JOIN pg_catalog.pg_namespace n ON n.oid = e.extnamespace
WHERE e.extname = 'fencing';
SELECT 'member', i.type, i.identity
FROM m, pg_catalog.pg_identify_object(m.classid, m.objid, m.objsubid) i ORDER BY 2, 3;
SELECT 'comment', i.type, i.identity, ds.description
FROM pg_catalog.pg_description ds
	JOIN m ON ds.classoid = m.classid AND ds.objoid = m.objid,
	pg_catalog.pg_identify_object(ds.classoid, ds.objoid, ds.objsubid) i
ORDER BY 2, 3;
SELECT 'init_privs', i.type, i.identity, ip.privtype, ip.initprivs
FROM pg_catalog.pg_init_privs ip
	JOIN m ON ip.classoid = m.classid AND ip.objoid = m.objid,
	pg_catalog.pg_identify_object(ip.classoid, ip.objoid, ip.objsubid) i
ORDER BY 2, 3;
SELECT 'function', p.oid::pg_catalog.regprocedure::text, p.prokind, p.provolatile, p.proparallel,
	p.prosecdef, p.proisstrict, p.proleakproof, p.proretset, p.proconfig,
	pg_catalog.pg_get_function_result(p.oid), pg_catalog.pg_get_function_arguments(p.oid),
	l.lanname, p.prosrc, p.probin, p.procost, p.prorows, p.prosupport, p.proacl
FROM pg_catalog.pg_proc p JOIN m ON m.classid = 'pg_catalog.pg_proc'::pg_catalog.regclass AND m.objid = p.oid
	JOIN pg_catalog.pg_language l ON l.oid = p.prolang
ORDER BY 2;
SELECT 'aggregate', a.aggfnoid::pg_catalog.regprocedure::text, a.aggkind, a.aggtransfn, a.aggfinalfn,
	a.aggcombinefn, a.aggsortop::pg_catalog.regoperator, a.aggtranstype::pg_catalog.regtype, a.agginitval
FROM pg_catalog.pg_aggregate a JOIN m ON m.classid = 'pg_catalog.pg_proc'::pg_catalog.regclass AND m.objid = a.aggfnoid
ORDER BY 2;
SELECT 'relation', c.oid::pg_catalog.regclass::text, c.relkind, am.amname, c.relpersistence, c.reloptions,
	c.relrowsecurity, c.relforcerowsecurity, c.relreplident, c.relacl
FROM pg_catalog.pg_class c JOIN m ON m.classid = 'pg_catalog.pg_class'::pg_catalog.regclass AND m.objid = c.oid
	LEFT JOIN pg_catalog.pg_am am ON am.oid = c.relam
ORDER BY 2;
SELECT 'column', a.attrelid::pg_catalog.regclass::text,
	pg_catalog.row_number() OVER (PARTITION BY a.attrelid ORDER BY a.attnum), a.attname,
	pg_catalog.format_type(a.atttypid, a.atttypmod), a.attnotnull, co.collname,
	pg_catalog.pg_get_expr(ad.adbin, ad.adrelid), a.attidentity, a.attgenerated, a.attstorage,
	a.attacl
FROM pg_catalog.pg_attribute a JOIN m ON m.classid = 'pg_catalog.pg_class'::pg_catalog.regclass AND m.objid = a.attrelid
	LEFT JOIN pg_catalog.pg_collation co ON co.oid = a.attcollation
	LEFT JOIN pg_catalog.pg_attrdef ad ON ad.adrelid = a.attrelid AND ad.adnum = a.attnum
WHERE a.attnum > 0 AND NOT a.attisdropped
ORDER BY 2, 3;
SELECT 'constraint', co.conrelid::pg_catalog.regclass::text, co.conname, pg_catalog.pg_get_constraintdef(co.oid)
FROM pg_catalog.pg_constraint co JOIN m ON m.classid = 'pg_catalog.pg_class'::pg_catalog.regclass AND m.objid = co.conrelid
ORDER BY 2, 3;
SELECT 'index', i.indrelid::pg_catalog.regclass::text, pg_catalog.pg_get_indexdef(i.indexrelid)
FROM pg_catalog.pg_index i JOIN m ON m.classid = 'pg_catalog.pg_class'::pg_catalog.regclass AND m.objid = i.indrelid
ORDER BY 2, 3;
SELECT 'view', c.oid::pg_catalog.regclass::text, pg_catalog.pg_get_viewdef(c.oid)
FROM pg_catalog.pg_class c JOIN m ON m.classid = 'pg_catalog.pg_class'::pg_catalog.regclass AND m.objid = c.oid
WHERE c.relkind IN ('v', 'm')
ORDER BY 2;
SELECT 'trigger', t.tgrelid::pg_catalog.regclass::text, pg_catalog.pg_get_triggerdef(t.oid), t.tgenabled
FROM pg_catalog.pg_trigger t JOIN m ON m.classid = 'pg_catalog.pg_class'::pg_catalog.regclass AND m.objid = t.tgrelid
ORDER BY 2, 3;
SELECT 'policy', p.polrelid::pg_catalog.regclass::text, p.polname, p.polcmd, p.polpermissive,
	pg_catalog.pg_get_expr(p.polqual, p.polrelid), pg_catalog.pg_get_expr(p.polwithcheck, p.polrelid)
FROM pg_catalog.pg_policy p JOIN m ON m.classid = 'pg_catalog.pg_class'::pg_catalog.regclass AND m.objid = p.polrelid
ORDER BY 2, 3;
SELECT 'type', t.oid::pg_catalog.regtype::text, t.typtype, t.typlen, t.typbyval, t.typalign, t.typstorage,
	t.typcategory, t.typispreferred, t.typinput, t.typoutput, t.typreceive, t.typsend,
	t.typmodin, t.typmodout, t.typanalyze, t.typelem::pg_catalog.regtype,
	t.typbasetype::pg_catalog.regtype, t.typnotnull, t.typdefault, t.typacl
FROM pg_catalog.pg_type t JOIN m ON m.classid = 'pg_catalog.pg_type'::pg_catalog.regclass AND m.objid = t.oid
ORDER BY 2;
SELECT 'operator', o.oid::pg_catalog.regoperator::text, o.oprcode, o.oprcom::pg_catalog.regoperator,
	o.oprnegate::pg_catalog.regoperator, o.oprrest, o.oprjoin, o.oprcanmerge, o.oprcanhash,
	o.oprresult::pg_catalog.regtype
FROM pg_catalog.pg_operator o JOIN m ON m.classid = 'pg_catalog.pg_operator'::pg_catalog.regclass AND m.objid = o.oid
ORDER BY 2;
SELECT 'cast', c.castsource::pg_catalog.regtype::text, c.casttarget::pg_catalog.regtype::text,
	c.castfunc::pg_catalog.regprocedure, c.castcontext, c.castmethod
FROM pg_catalog.pg_cast c JOIN m ON m.classid = 'pg_catalog.pg_cast'::pg_catalog.regclass AND m.objid = c.oid
ORDER BY 2, 3;
SELECT 'opclass', i.identity, oc.opcdefault, oc.opcintype::pg_catalog.regtype,
	oc.opckeytype::pg_catalog.regtype, f.identity
FROM pg_catalog.pg_opclass oc JOIN m ON m.classid = 'pg_catalog.pg_opclass'::pg_catalog.regclass AND m.objid = oc.oid,
	pg_catalog.pg_identify_object('pg_catalog.pg_opclass'::pg_catalog.regclass, oc.oid, 0) i,
	pg_catalog.pg_identify_object('pg_catalog.pg_opfamily'::pg_catalog.regclass, oc.opcfamily, 0) f
ORDER BY 2;
SELECT 'amop', f.identity, o.amopstrategy, o.amopopr::pg_catalog.regoperator::text, o.amoppurpose,
	o.amopsortfamily
FROM pg_catalog.pg_amop o,
	pg_catalog.pg_identify_object('pg_catalog.pg_opfamily'::pg_catalog.regclass, o.amopfamily, 0) f
WHERE o.amopopr IN (SELECT objid FROM m WHERE classid = 'pg_catalog.pg_operator'::pg_catalog.regclass)
ORDER BY 2, 3, 4;
SELECT 'amproc', f.identity, p.amprocnum, p.amproclefttype::pg_catalog.regtype::text,
	p.amprocrighttype::pg_catalog.regtype::text, p.amproc::pg_catalog.regprocedure
FROM pg_catalog.pg_amproc p,
	pg_catalog.pg_identify_object('pg_catalog.pg_opfamily'::pg_catalog.regclass, p.amprocfamily, 0) f
WHERE p.amproc IN (SELECT objid FROM m WHERE classid = 'pg_catalog.pg_proc'::pg_catalog.regclass)
ORDER BY 2, 3, 4, 5;
SELECT 'event trigger', t.evtname, t.evtevent, t.evtfoid::pg_catalog.regprocedure, t.evtenabled, t.evttags
FROM pg_catalog.pg_event_trigger t JOIN m ON m.classid = 'pg_catalog.pg_event_trigger'::pg_catalog.regclass AND m.objid = t.oid
ORDER BY 2;
EOF
}

# pg_dump --binary-upgrade --schema-only, which dumps the extension's
# members one by one, with what differs between any two databases (OIDs,
# transaction ids, LSNs, the \restrict key) replaced by placeholders.
dump_of() {
	pg_dump --binary-upgrade --schema-only -d "$1" |
		sed -E -e "s/'[0-9]+'::pg_catalog\.oid/'OID'::pg_catalog.oid/g" \
			-e "s/'\{[0-9, ]*\}'/'{OIDS}'/g" \
			-e "s/^WHERE oid = '[0-9]+';$/WHERE oid = 'OID';/" \
			-e "s/relfrozenxid = '[0-9]+', relminmxid = '[0-9]+'/relfrozenxid = 'XID', relminmxid = 'XID'/" \
			-e "s/'\{[0-9A-F/,]*\}'::pg_catalog\.pg_lsn\[\]/'{LSNS}'::pg_catalog.pg_lsn[]/" \
			-e 's/^\\(un)?restrict .*/\\\1restrict KEY/'
}

default_version=$(sql postgres -c "SELECT default_version FROM pg_available_extensions WHERE name = 'fencing'")
old_versions=$(sql postgres -c "SELECT version FROM pg_available_extension_versions
	WHERE name = 'fencing' AND version <> '$default_version' ORDER BY version")
expect "the server offers versions to upgrade from" "$([ -n "$old_versions" ] && echo yes || echo no)" "yes"

harness_log "fresh install of $default_version"
new_db fresh
sql fresh -c 'CREATE EXTENSION fencing'
fill fresh
catalog_of fresh >"$workdir/fresh.catalog"
partition_guards_of fresh >"$workdir/fresh.partition_guards"
expect "fresh: every partition has a clone of the parent's TRUNCATE guard" \
	"$(cat "$workdir/fresh.partition_guards")" \
	$'events_1|fence_truncate|t\nevents_2|fence_truncate|t\nevents_2a|fence_truncate|t'
dump_of fresh >"$workdir/fresh.dump"

# Update database $1 to the default version.
update_db() {
	local db=$1
	sql "$db" -c 'ALTER EXTENSION fencing UPDATE'
	expect "$db: ALTER EXTENSION fencing UPDATE reaches $default_version" \
		"$(sql "$db" -c "SELECT extversion FROM pg_extension WHERE extname = 'fencing'")" "$default_version"
}

# Compare the extension of database $1 with the fresh install's.
compare_db() {
	local db=$1
	catalog_of "$db" >"$workdir/$db.catalog"
	expect_same_file "$db: the catalogs describe the extension as a fresh install does" \
		"$workdir/fresh.catalog" "$workdir/$db.catalog"
	dump_of "$db" >"$workdir/$db.dump"
	expect_same_file "$db: pg_dump --binary-upgrade --schema-only equals a fresh install's" \
		"$workdir/fresh.dump" "$workdir/$db.dump"
}

# check_acl_kept SUFFIX WHAT ON PRIV CHECK: in a new database, an install of
# version $v whose object ON (as GRANT names it) had PRIV revoked from
# PUBLIC and granted to app keeps exactly that across the update; CHECK is
# the has_*_privilege call, ROLE standing for the role.  Uses $db and $v.
check_acl_kept() {
	local d=${db}_$1 what=$2 on=$3 priv=$4 check=$5
	new_db "$d"
	sql "$d" -c "CREATE EXTENSION fencing VERSION '$v'" \
		-c "REVOKE $priv ON $on FROM PUBLIC" -c "GRANT $priv ON $on TO app" >/dev/null
	update_db "$d"
	expect "$d: $what revoked from PUBLIC and granted to app at $v stays so after the update" \
		"$(sql "$d" -c "SELECT ${check//ROLE/app}, ${check//ROLE/outsider}")" "t|f"
}

for v in $old_versions; do
	# An install of version $v, fenced tables and marks written at $v with
	# the new library, then the update.
	db=from_${v//./_}
	harness_log "install $v, fill, update to $default_version"
	new_db "$db"
	sql "$db" -c "CREATE EXTENSION fencing VERSION '$v'"
	expect "$db: version $v installed" \
		"$(sql "$db" -c "SELECT extversion FROM pg_extension WHERE extname = 'fencing'")" "$v"
	if fill "$db" 2>"$workdir/fill.log"; then
		ok "$db: fenced writes work at $v with the new library"
	else
		not_ok "$db: fenced writes work at $v with the new library"
		sed 's/^/#   /' "$workdir/fill.log"
	fi
	marks_before=$(sql "$db" -c 'SELECT resource, token, moved_at FROM fence_marks ORDER BY 1')
	# 1.2 clones the parent's TRUNCATE guard to partitions made before it
	case $v in
	1.0 | 1.1)
		expect "$db: at $v, the partitions made before the guard have none" \
			"$(partition_guards_of "$db")" "" ;;
	*)
		expect "$db: at $v, the partitions made before the guard have a clone of it, as a fresh install has" \
			"$(partition_guards_of "$db")" "$(cat "$workdir/fresh.partition_guards")" ;;
	esac
	update_db "$db"
	compare_db "$db"
	expect "$db: the update cloned the parent's TRUNCATE guard to every partition, as a fresh install has" \
		"$(partition_guards_of "$db")" "$(cat "$workdir/fresh.partition_guards")"
	expect "$db: TRUNCATE of a partition made before the update is refused (TF004)" \
		"$(sqlstate_of "$db" "TRUNCATE events_2a")" "TF004"

	harness_log "$db: fencing after the update"
	expect "$db: the marks are those written before the update" \
		"$(sql "$db" -c 'SELECT resource, token, moved_at FROM fence_marks ORDER BY 1')" "$marks_before"
	expect "$db: a stale resource-scope write is rejected (TF001)" \
		"$(sqlstate_of "$db" "INSERT INTO items VALUES (1, 'stale', 33)")" "TF001"
	expect "$db: a write below a mark set by hand is rejected (TF001)" \
		"$(sqlstate_of "$db" "INSERT INTO items VALUES (9, 'stale', 99)")" "TF001"
	expect "$db: a stale row-scope update is rejected (TF001)" \
		"$(sqlstate_of "$db" "UPDATE orders SET status = 'stale', tok = 4 WHERE id = 1")" "TF001"
	expect "$db: a write without a token is rejected (TF002)" \
		"$(sqlstate_of "$db" "UPDATE items SET item = 'none' WHERE order_id = 2")" "TF002"
	expect "$db: TRUNCATE of the guarded table is refused (TF004)" \
		"$(sqlstate_of "$db" "TRUNCATE items")" "TF004"
	expect "$db: a newer resource-scope write is accepted" \
		"$(sqlstate_of "$db" "INSERT INTO items VALUES (1, 'fresh', 35)")" "00000"
	expect "$db: a newer row-scope update is accepted" \
		"$(sqlstate_of "$db" "UPDATE orders SET status = 'paid', tok = 6 WHERE id = 1")" "00000"
	expect "$db: the accepted write raised the mark to 35" \
		"$(sql "$db" -c "SELECT fence_mark('order:1')")" "35"
	expect "$db: the rows after the writes" \
		"$(sql "$db" -c 'SELECT id, status, tok FROM orders ORDER BY id')" $'1|paid|6\n2|new|12'

	# fenced_acquire and fenced_acquire_xact gained renew in 1.2: a grant
	# script naming the three-argument signature fails after the update
	# (doc/operations.md, Upgrading), the one the doc gives passes
	sql postgres -c "DO \$\$ BEGIN CREATE ROLE app; EXCEPTION WHEN duplicate_object THEN NULL; END \$\$"
	expect "$db: after the update, GRANT on fenced_acquire's signature before 1.2 fails (42883)" \
		"$(sqlstate_of "$db" "GRANT EXECUTE ON FUNCTION fenced_acquire(text, interval, interval) TO app")" "42883"
	# and max_hold in 1.3: the 1.2 signature fails too
	expect "$db: after the update, GRANT on fenced_acquire's 1.2 signature fails (42883)" \
		"$(sqlstate_of "$db" "GRANT EXECUTE ON FUNCTION fenced_acquire(text, interval, interval, boolean) TO app")" "42883"
	expect "$db: the GRANT of doc/operations.md on the signature since 1.3 passes" \
		"$(sqlstate_of "$db" "$(snippet grant-acquire)")" "00000"
	expect "$db: and gives app both functions" \
		"$(sql "$db" -c "SELECT has_function_privilege('app', 'fenced_acquire(text, interval, interval, boolean, interval, boolean, text)', 'EXECUTE'),
			has_function_privilege('app', 'fenced_acquire_xact(text, interval, interval, boolean, interval, boolean, text)', 'EXECUTE')")" "t|t"

	# fence_use gained lease in 1.3 (issue 31): made again, it keeps the
	# privileges it had, the default (EXECUTE to PUBLIC) or those an
	# administrator gave it at $v
	sql postgres -c "DO \$\$ BEGIN CREATE ROLE outsider; EXCEPTION WHEN duplicate_object THEN NULL; END \$\$"
	expect "$db: after the update, fence_use has its lease and PUBLIC may still call it" \
		"$(sql "$db" -c "SELECT has_function_privilege('outsider', 'fence_use(text, fence_token, boolean, interval)', 'EXECUTE'),
			to_regprocedure('fence_use(text, fence_token, boolean)') IS NULL")" "t|t"
	check_acl_kept use_acl fence_use "FUNCTION fence_use(text, fence_token, boolean)" EXECUTE \
		"has_function_privilege('ROLE', 'fence_use(text, fence_token, boolean, interval)', 'EXECUTE')"
	# the view fenced_lock_holders (1.2) gained lost and source in 1.3: made again, it
	# keeps SELECT to PUBLIC, or what an administrator gave instead at 1.2
	if [ "$v" = 1.2 ]; then
		expect "$db: after the update, fenced_lock_holders has lost and source, and PUBLIC may still read it" \
			"$(sql "$db" -c "SELECT has_table_privilege('outsider', 'fenced_lock_holders', 'SELECT'),
				(SELECT count(*) FROM pg_attribute WHERE attrelid = 'fenced_lock_holders'::regclass AND attname IN ('lost', 'source'))")" "t|2"
		check_acl_kept view_acl fenced_lock_holders fenced_lock_holders SELECT \
			"has_table_privilege('ROLE', 'fenced_lock_holders', 'SELECT')"
	fi

	# An install of version $v whose marks table was created under another
	# default_table_access_method (here heap_copy, heap's handler under
	# another name): the library refuses to fence with it until the update
	# makes it a heap.
	db=from_${v//./_}_other_am
	harness_log "install $v with its marks table under another access method, update"
	new_db "$db"
	sql "$db" >/dev/null <<EOF
SET default_table_access_method = heap_copy;
CREATE EXTENSION fencing VERSION '$v';
RESET default_table_access_method;
EOF
	# From 1.1 on, the install script itself makes the marks table a heap
	# (1.0--1.1 does), so only an older version is left with heap_copy.
	am=$(sql "$db" -c "SELECT a.amname FROM pg_class c JOIN pg_am a ON a.oid = c.relam WHERE c.oid = 'fence_high_water'::regclass")
	if [ "$v" = 1.0 ]; then
		expect "$db: at $v, the marks table was created under heap_copy" "$am" "heap_copy"
		expect "$db: at $v, a fenced write is refused while the marks table is no heap (TF003)" \
			"$(sqlstate_of "$db" "SELECT fence_advance('order:9', 1)")" "TF003"
	else
		expect "$db: at $v, the install made the marks table a heap" "$am" "heap"
	fi
	update_db "$db"
	fill "$db"
	compare_db "$db"
	expect "$db: after the update, a stale write is rejected (TF001)" \
		"$(sqlstate_of "$db" "INSERT INTO items VALUES (1, 'stale', 33)")" "TF001"
done

if [ "$CHECKS_FAILED" -ne 0 ] && [ -s "$workdir/statements.log" ]; then
	echo "# server messages of the statements run:"
	sed 's/^/#   /' "$workdir/statements.log"
fi
checks_finish
