#!/usr/bin/env bash
# test/scripts/logical_replication.sh: a fenced table on a logical-
# replication subscriber (SPEC §2; doc/guard.md "Logical replication").
#
# Starts two throwaway clusters, a publisher (wal_level = logical) and a
# subscriber, each with the extension and a table guarded per resource;
# the subscriber's guard is ENABLE ALWAYS, so that it fires in the apply
# worker.  The publication is FOR ALL TABLES, which also publishes the
# extension's marks table.  Then checks that:
#
# - INSERT, UPDATE, DELETE and a move between resources all reach the
#   subscriber (before, the apply worker failed every DELETE with "no
#   token" and retried it forever: replication stalled);
# - the subscriber's own marks are raised from the replicated tokens, so
#   a stale local write on the subscriber is rejected and a fresh one
#   accepted;
# - replicated marks rows only raise the subscriber's marks: never lower
#   them, never collide with them, and a mark forgotten on the publisher
#   stays on the subscriber;
# - a raise reaches a subscriber that lacks the mark's row.
#
# Every wait polls the subscriber (its data, pg_subscription_rel) against
# a deadline; nothing sleeps for a fixed time to let replication happen.
#
# Prints one "ok - ..." or "not ok - ..." line per assertion and exits
# non-zero if any failed.
#
#   bash test/scripts/logical_replication.sh
set -euo pipefail

source "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/../lib/harness.sh"
source "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/../lib/checks.sh"
source "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/../lib/psql.sh"

harness_start_pg "wal_level = logical"
PUB_HOST=$PGHOST PUB_PORT=$PGPORT PUB_DATA=$PGDATA_DIR
harness_start_pg
SUB_HOST=$PGHOST SUB_PORT=$PGPORT SUB_DATA=$PGDATA_DIR

pub() { PGOPTIONS="-c client_min_messages=warning" sql -h "$PUB_HOST" -p "$PUB_PORT" "$@"; }
sub() { PGOPTIONS="-c client_min_messages=warning" sql -h "$SUB_HOST" -p "$SUB_PORT" "$@"; }

# The SQLSTATE a statement ends with on the subscriber ("00000" on success).
sub_sqlstate() { sqlstate_of "host=$SUB_HOST port=$SUB_PORT" "$1"; }

# Poll the subscriber until a query returns the wanted text, for at most
# 30 seconds; print what it returned last.
wait_sub() {
	local query=$1 want=$2 got=
	for _ in $(seq 300); do
		got=$(sub -c "$query" 2>/dev/null || true)
		[ "$got" = "$want" ] && break
		sleep 0.1
	done
	printf '%s' "$got"
}

schema="
CREATE EXTENSION fencing;
CREATE TABLE items (id int PRIMARY KEY, order_id int NOT NULL, tok fence_token, val text);
CREATE TRIGGER fence BEFORE INSERT OR UPDATE OR DELETE ON items
	FOR EACH ROW EXECUTE FUNCTION fence_guard('tok', 'order:{order_id}');
"
pub -c "$schema"
sub -c "$schema"
sub -c "ALTER TABLE items ENABLE ALWAYS TRIGGER fence"

# A mark the subscriber already has, above the one the publisher will send.
sub -c "SELECT fence_advance('shared:x', 50)" >/dev/null

pub -c "CREATE PUBLICATION pub FOR ALL TABLES"
sub -c "CREATE SUBSCRIPTION sub CONNECTION 'host=$PUB_HOST port=$PUB_PORT dbname=postgres user=postgres' PUBLICATION pub"

expect "the initial synchronization finishes" \
	"$(wait_sub "SELECT bool_and(srsubstate = 'r') AND count(*) = 2 FROM pg_subscription_rel" t)" "t"

# INSERT, UPDATE, a move between resources, DELETE
pub >/dev/null <<'SQL'
INSERT INTO items VALUES (1, 1, 10, 'a'), (2, 2, 20, 'b'), (3, 3, 30, 'c');
UPDATE items SET tok = 11, val = 'a2' WHERE id = 1;
UPDATE items SET order_id = 2, tok = 21, val = 'moved' WHERE id = 1;
SELECT fence_use('order:3', 31);
DELETE FROM items WHERE id = 3;
SQL
want="1|2|21|moved
2|2|20|b"
expect "INSERT, UPDATE, a move and DELETE reach the subscriber" \
	"$(wait_sub "SELECT id, order_id, tok, val FROM items ORDER BY id" "$want")" "$want"
expect "the apply worker is running, not restarting" \
	"$(sub -c "SELECT pid IS NOT NULL FROM pg_stat_subscription WHERE subname = 'sub'")" "t"

# The subscriber's marks were raised from the replicated tokens: the move
# raised both resources to 21.  (order:3 was raised by the publisher's
# DELETE, whose declared token is not replicated: its mark comes from the
# marks table's own replication, checked below.)
expect "the subscriber's marks follow the replicated tokens" \
	"$(sub -c "SELECT resource, token FROM fence_marks WHERE resource IN ('order:1', 'order:2') ORDER BY 1")" \
	"order:1|21
order:2|21"

# The subscriber stays fenced for its local writers.
expect "a stale local write on the subscriber is rejected" \
	"$(sub_sqlstate "INSERT INTO items VALUES (10, 2, 20, 'stale')")" "TF001"
expect "a tokenless local DELETE on the subscriber is rejected" \
	"$(sub_sqlstate "DELETE FROM items WHERE id = 2")" "TF002"
expect "a fresh local write on the subscriber is accepted" \
	"$(sub_sqlstate "INSERT INTO items VALUES (10, 5, 1, 'local')")" "00000"

# The marks table is published too (FOR ALL TABLES): replicated marks
# only raise the subscriber's.
expect "the publisher's marks table is in the publication" \
	"$(pub -c "SELECT count(*) = 1 FROM pg_publication_tables WHERE pubname = 'pub' AND tablename = 'fence_high_water'")" \
	"t"
expect "a replicated mark raises the subscriber's" \
	"$(wait_sub "SELECT resource, token FROM fence_marks WHERE resource = 'order:3'" "order:3|31")" \
	"order:3|31"
pub -c "SELECT fence_advance('shared:x', 40)" >/dev/null
pub -c "INSERT INTO items VALUES (4, 4, 40, 'after a lower mark')"
wait_sub "SELECT count(*) FROM items WHERE id = 4" 1 >/dev/null
expect "a replicated lower mark does not lower the subscriber's" \
	"$(sub -c "SELECT token FROM fence_marks WHERE resource = 'shared:x'")" "50"
pub -c "SELECT fence_advance('shared:x', 60)" >/dev/null
expect "a replicated higher mark raises the subscriber's" \
	"$(wait_sub "SELECT token FROM fence_marks WHERE resource = 'shared:x'" 60)" "60"
pub -c "SELECT fence_forget('shared:x')" >/dev/null
pub -c "INSERT INTO items VALUES (5, 5, 50, 'after a forget')"
wait_sub "SELECT count(*) FROM items WHERE id = 5" 1 >/dev/null
expect "a mark forgotten on the publisher stays on the subscriber" \
	"$(sub -c "SELECT token FROM fence_marks WHERE resource = 'shared:x'")" "60"
expect "replication still runs after all of it" \
	"$(sub -c "SELECT pid IS NOT NULL FROM pg_stat_subscription WHERE subname = 'sub'")" "t"

# A mark raised several times in one transaction: the first raise is
# written, the others kept in memory and the last written at commit, which
# logical decoding sees (the subscriber must get 90, not 70).
pub >/dev/null <<'SQL'
BEGIN;
SELECT fence_advance('double:x', 70);
SELECT fence_advance('double:x', 80);
SELECT fence_advance('double:x', 90);
COMMIT;
SQL
expect "a mark raised three times in one transaction reaches the subscriber at its last token" \
	"$(wait_sub "SELECT token FROM fence_marks WHERE resource = 'double:x'" 90)" "90"

# Outside the apply worker, the marks table's trigger changes nothing.
expect "a superuser's own write to the marks table passes the trigger" \
	"$(sub -c "DELETE FROM fence_high_water WHERE resource = 'shared:x' RETURNING 1")" "1"

# A subscriber that lacks a mark's row (it forgot it, above; or it
# subscribed with copy_data = false) still gets every later raise: under
# wal_level = logical a raise is a delete and an insert of the row, and
# the insert reaches the marks table's trigger whether or not the row
# exists.  (Before, the raise was an UPDATE, which the apply worker skips
# for a row it lacks, firing no trigger: the mark stayed missing there,
# and a local write with any token was accepted.)
pub -c "SELECT fence_advance('shared:x', 70)" >/dev/null
pub -c "INSERT INTO items VALUES (6, 6, 60, 'after a raise the subscriber lacks the row for')"
wait_sub "SELECT count(*) FROM items WHERE id = 6" 1 >/dev/null
expect "a raise reaches a subscriber that lacks the mark's row" \
	"$(sub -c "SELECT token FROM fence_marks WHERE resource = 'shared:x'")" "70"
pub -c "SELECT fence_advance('order:9', 50)" >/dev/null
wait_sub "SELECT token FROM fence_marks WHERE resource = 'order:9'" 50 >/dev/null
sub -c "DELETE FROM fence_high_water WHERE resource = 'order:9'" >/dev/null
pub -c "SELECT fence_advance('order:9', 60)" >/dev/null
expect "a raise of a mark the subscriber forgot reaches it" \
	"$(wait_sub "SELECT token FROM fence_marks WHERE resource = 'order:9'" 60)" "60"
expect "so a stale local write there is rejected" \
	"$(sub_sqlstate "INSERT INTO items VALUES (11, 9, 11, 'stale')")" "TF001"
pub >/dev/null <<'SQL'
BEGIN;
SELECT fence_advance('double:y', 70);
SAVEPOINT s;
SELECT fence_advance('double:y', 80);
ROLLBACK TO s;
SELECT fence_advance('double:y', 75);
COMMIT;
SQL
expect "a raise rolled back to a savepoint does not reach the subscriber" \
	"$(wait_sub "SELECT token FROM fence_marks WHERE resource = 'double:y'" 75)" "75"
expect "the publisher keeps one live row per mark" \
	"$(pub -c "SELECT count(*) FROM fence_high_water WHERE resource = 'double:y'")" "1"
expect "replication still runs after the raises" \
	"$(sub -c "SELECT pid IS NOT NULL FROM pg_stat_subscription WHERE subname = 'sub'")" "t"

sub -c "DROP SUBSCRIPTION sub" >/dev/null
if [ "$CHECKS_FAILED" -gt 0 ]; then
	echo "# subscriber log:"
	tail -20 "$SUB_DATA/../server.log" | sed 's/^/#   /'
fi
checks_finish
