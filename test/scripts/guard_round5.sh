#!/usr/bin/env bash
# test/scripts/guard_round5.sh: the ways around the guard of issue 32 that
# need more than one SQL session (doc/guard.md "Retention", "What a row
# trigger cannot fence"); the others are in sql/fence_round5.sql.
#
#   - retention counts from the commit of a mark's version: a mark raised
#     by a transaction that ran longer than the grace period is not
#     forgotten right after it commits, with track_commit_timestamp on
#     (its commit time) and off (fence_forget_idle forgets only a version
#     it has seen unchanged for the whole grace, across calls);
#   - foreign tables (postgres_fdw, to a second database of the same
#     cluster): written on their own server, outside any guard, so
#     fence_attach, ATTACH PARTITION and CREATE FOREIGN TABLE ... PARTITION
#     OF a guarded table refuse them, and fence_check_coverage never counts
#     one covered.
#
# Prints one "ok - ..." or "not ok - ..." line per assertion.
#
#   bash test/scripts/guard_round5.sh
set -euo pipefail

source "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/../lib/harness.sh"
source "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/../lib/checks.sh"
source "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/../lib/psql.sh"

harness_tmpdir workdir
STATEMENTS_LOG=$workdir/statements.log

# The stale writer's attack of issue 32, item 1: B raises order:1 to 34 in
# a transaction that runs 5 s (its start is 5 s old when it commits); a
# forget with a 3 s grace runs right after; stale A then writes at 33.
long_raise_then_forget() {
	sql >/dev/null <<'EOF'
CREATE EXTENSION IF NOT EXISTS fencing;
DROP TABLE IF EXISTS items;
SELECT fence_forget(resource) FROM fence_marks;
CREATE TABLE items (id int, order_id int, tok fence_token);
CREATE TRIGGER fence BEFORE INSERT OR UPDATE OR DELETE ON items
	FOR EACH ROW EXECUTE FUNCTION fence_guard('tok', 'order:{order_id}');
INSERT INTO items VALUES (1, 1, 30);
EOF
	sql <<'EOF' >/dev/null
BEGIN;
SELECT pg_sleep(5);
INSERT INTO items VALUES (2, 1, 34);
COMMIT;
EOF
	forgotten=$(sql -c "SELECT fence_forget_idle('3 s')")
	stale=$(sqlstate_of postgres "INSERT INTO items VALUES (3, 1, 33)")
	mark=$(sql -c "SELECT fence_mark('order:1')")
}

harness_log "retention with track_commit_timestamp = on"
harness_start_pg "track_commit_timestamp = on"
long_raise_then_forget
expect "on: a mark committed just now is not forgotten by a 3 s grace" "$forgotten" 0
expect "on: the stale write at 33 is then rejected" "$stale" TF001
expect "on: the mark stays at 34" "$mark" 34
sleep 3.5
expect "on: after the grace from its commit it is forgotten" \
	"$(sql -c "SELECT fence_forget_idle('3 s')")" 1

harness_log "retention with track_commit_timestamp = off"
harness_start_pg "track_commit_timestamp = off"
long_raise_then_forget
expect "off: a mark committed just now is not forgotten by a 3 s grace" "$forgotten" 0
expect "off: the stale write at 33 is then rejected" "$stale" TF001
expect "off: the mark stays at 34" "$mark" 34
sleep 3.5
expect "off: a later call, the version unchanged for the grace, forgets it" \
	"$(sql -c "SELECT fence_forget_idle('3 s')")" 1
# a version that changed between the calls starts the count again
sql -c "SELECT fence_advance('order:2', 5)" >/dev/null
sql -c "UPDATE fence_high_water SET moved_at = now() - interval '1 day'" >/dev/null
expect "off: first sighting of an old-looking mark only records it" \
	"$(sql -c "SELECT fence_forget_idle('3 s')")" 0
sql -c "SELECT fence_advance('order:2', 6)" >/dev/null
sql -c "UPDATE fence_high_water SET moved_at = now() - interval '1 day'" >/dev/null
sleep 3.5
expect "off: a mark raised since it was recorded is recorded anew" \
	"$(sql -c "SELECT fence_forget_idle('3 s')")" 0
sleep 3.5
expect "off: then forgotten once seen unchanged for the grace" \
	"$(sql -c "SELECT fence_forget_idle('3 s')")" 1

harness_log "foreign tables under a guard"
sql >/dev/null <<EOF
CREATE DATABASE remote;
\\c remote
CREATE TABLE remote_items (id int, tok bigint);
INSERT INTO remote_items VALUES (500, 800);
CREATE TABLE lone_items (id int, tok bigint);
INSERT INTO lone_items VALUES (7, 70);
\\c postgres
CREATE EXTENSION postgres_fdw;
CREATE SERVER loop FOREIGN DATA WRAPPER postgres_fdw
	OPTIONS (host '$PGHOST', port '$PGPORT', dbname 'remote');
CREATE USER MAPPING FOR postgres SERVER loop OPTIONS (user 'postgres');
CREATE TABLE pt (id int, tok fence_token) PARTITION BY RANGE (id);
CREATE TABLE pt_local PARTITION OF pt FOR VALUES FROM (1) TO (100);
CREATE TRIGGER fence BEFORE INSERT OR UPDATE OR DELETE ON pt
	FOR EACH ROW EXECUTE FUNCTION fence_guard('tok', 'item:{id}');
CREATE FOREIGN TABLE pt_remote (id int, tok fence_token)
	SERVER loop OPTIONS (table_name 'remote_items');
CREATE FOREIGN TABLE lone (id int, tok fence_token)
	SERVER loop OPTIONS (table_name 'lone_items');
EOF
expect "ATTACH PARTITION of a populated foreign table under a guard is refused" \
	"$(sqlstate_of postgres "ALTER TABLE pt ATTACH PARTITION pt_remote FOR VALUES FROM (100) TO (1000)")" TF013
expect_match "a stale write of the remote row's resource is not accepted" \
	"$(sqlstate_of postgres "INSERT INTO pt VALUES (500, 100)")" '^(TF001|23514)$'
expect "CREATE FOREIGN TABLE ... PARTITION OF a guarded table is refused" \
	"$(sqlstate_of postgres "CREATE FOREIGN TABLE pt_remote2 PARTITION OF pt FOR VALUES FROM (1000) TO (2000) SERVER loop OPTIONS (table_name 'remote_items')")" TF013
expect "fence_attach of a foreign table is refused" \
	"$(sqlstate_of postgres "SELECT fence_attach('lone', 'tok', 'lone:{id}')")" TF013
# one attached where the event trigger did not run (a restore, 1.2)
sql >/dev/null <<'EOF'
ALTER EVENT TRIGGER fence_ddl_guard DISABLE;
DO $$
BEGIN
	IF NOT EXISTS (SELECT FROM pg_inherits WHERE inhrelid = 'pt_remote'::regclass) THEN
		ALTER TABLE pt ATTACH PARTITION pt_remote FOR VALUES FROM (100) TO (1000);
	END IF;
END
$$;
ALTER EVENT TRIGGER fence_ddl_guard ENABLE ALWAYS;
EOF
expect "fence_check_coverage reports the foreign partition as not coverable" \
	"$(sql -c "SELECT table_name || ':' || coalesce(uncovered::text, 'not coverable') FROM fence_check_coverage('pt') WHERE table_name = 'pt_remote'::regclass" 2>/dev/null)" \
	"pt_remote:not coverable"
expect "a write through the parent to the foreign partition is refused" \
	"$(sqlstate_of postgres "INSERT INTO pt VALUES (500, 100)")" TF013

if [ "$CHECKS_FAILED" -gt 0 ]; then sed 's/^/#   /' "$STATEMENTS_LOG"; fi
checks_finish
