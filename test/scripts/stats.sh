#!/usr/bin/env bash
# test/scripts/stats.sh: with the library in shared_preload_libraries, the
# guard's counters are cluster-wide, in shared memory.
#
# Starts a throwaway cluster preloading fencing, writes known accepts and
# rejects in some sessions and reads the counters from others, checks that
# each database sees its own tables, that the shared table's 1000 entries
# fill up into one overflow row, and that only a granted role may reset;
# then counts known acquisitions, a busy lock, a repair and an unreachable
# Redis against a redis-server of its own.
#
# Prints one "ok - ..." or "not ok - ..." line per assertion and exits
# non-zero if any failed.
#
#   bash test/scripts/stats.sh
set -euo pipefail

source "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/../lib/harness.sh"
source "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/../lib/checks.sh"
source "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/../lib/psql.sh"

harness_start_redis
harness_start_pg "shared_preload_libraries = 'fencing'" \
	"fencing.redis_host = '127.0.0.1'" "fencing.redis_port = $REDIS_PORT"

sql postgres -c 'CREATE DATABASE one' -c 'CREATE DATABASE two' -c 'CREATE ROLE stats_reader'
for db in one two; do
	sql "$db" >/dev/null <<'EOF'
CREATE EXTENSION fencing;
CREATE TABLE items (order_id int, tok fence_token);
CREATE TRIGGER fence BEFORE INSERT OR UPDATE OR DELETE ON items
	FOR EACH ROW EXECUTE FUNCTION fence_guard('tok', 'order:{order_id}');
EOF
done

expect "fence_stat_info: shared, room for 1000 tables, none yet" \
	"$(sql one -c 'SELECT mode, capacity, tables FROM fence_stat_info')" "shared|1000|0"

harness_log "accepts and rejects in several sessions, read from others"
sql one -c 'INSERT INTO items VALUES (1, 5), (1, 5), (2, 7)'
sqlstate_of one "INSERT INTO items VALUES (1, 4)" >/dev/null
sqlstate_of one "INSERT INTO items VALUES (1, 3)" >/dev/null
sqlstate_of one "UPDATE items SET order_id = 1 WHERE order_id = 2" >/dev/null
sql one -c 'INSERT INTO items VALUES (1, 6)'
sql two -c 'INSERT INTO items VALUES (1, 1)'
sqlstate_of two "INSERT INTO items VALUES (1, 0)" >/dev/null
# counted at the end of each transaction: an open one shows nothing yet
sql one -c 'BEGIN' -c 'INSERT INTO items VALUES (3, 1)' \
	-c "\\! psql -X -q -A -t -d one -c 'SELECT checked FROM fence_stat_tables' >$PGHOST/during" -c 'COMMIT'

expect "a transaction's counts are not shown before it ends" "$(cat "$PGHOST/during")" "7"
expect "database one: checked, accepted, rejected stale, without token, marks raised" \
	"$(sql one -c 'SELECT table_name, checked, accepted, rejected_stale, rejected_no_token, marks_raised FROM fence_stat_tables')" \
	"items|8|5|2|1|4"
expect "database two sees its own table only" \
	"$(sql two -c 'SELECT table_name, checked, accepted, rejected_stale, rejected_no_token, marks_raised FROM fence_stat_tables')" \
	"items|2|1|1|0|1"
expect "fence_stat_info counts the tables of every database" \
	"$(sql two -c 'SELECT tables FROM fence_stat_info')" "2"

# the hot resources (issue 37): per database, role and resource
harness_log "rejections per resource"
expect "fence_stat_resources: the rejections per database, role and resource, read from another database" \
	"$(sql two -c "SELECT datname, role, resource, rejected_stale, rejected_no_token, rejected,
		first_rejected_at <= last_rejected_at FROM fence_stat_resources ORDER BY datname, resource")" \
	"$(printf '%s\n' 'one|postgres|order:1|2|1|3|t' 'two|postgres|order:1|1|0|1|t')"
sql postgres -c 'CREATE ROLE clerk LOGIN' -c 'CREATE ROLE monitor LOGIN' >/dev/null
sql one -c 'GRANT INSERT ON items TO clerk' >/dev/null
sqlstate_of one "SET ROLE clerk; INSERT INTO items VALUES (1, 2)" >/dev/null
expect "a role without privileges sees its own rejections only" \
	"$(sql one -U clerk -c "SELECT datname, role, resource, rejected FROM fence_stat_resources")" \
	"one|clerk|order:1|1"
expect "a monitoring role sees nobody's but its own" \
	"$(sql one -U monitor -c "SELECT count(*) FROM fence_stat_resources")" "0"
sql postgres -c 'GRANT pg_read_all_stats TO monitor' >/dev/null
expect "granted pg_read_all_stats, it sees every role's" \
	"$(sql one -U monitor -c "SELECT string_agg(datname || ' ' || role || ' ' || resource, ', ' ORDER BY datname, role::text) FROM fence_stat_resources")" \
	"one clerk order:1, one postgres order:1, two postgres order:1"
# 300 resources more than it has room for, each rejected once (and caught:
# counted all the same): the most rejected and the latest stay
sql one >/dev/null <<'EOF'
DO $$
BEGIN
	FOR i IN 1..300 LOOP
		BEGIN
			INSERT INTO items VALUES (1000 + i, NULL);
		EXCEPTION WHEN SQLSTATE 'TF002' THEN
			NULL;
		END;
	END LOOP;
END $$;
EOF
expect "in bounded memory (128 entries), the most rejected resource and the latest kept" \
	"$(sql one -c "SELECT count(*), count(*) FILTER (WHERE resource = 'order:1' AND role = 'postgres'::regrole AND datname = 'one'),
		count(*) FILTER (WHERE resource = 'order:1300'),
		(SELECT resource FROM fence_stat_resources ORDER BY last_rejected_at DESC, resource DESC LIMIT 1)
		FROM fence_stat_resources")" "128|1|1|order:1300"

harness_log "reset"
expect "a role without the grant cannot reset" \
	"$(sql one -c "SELECT has_function_privilege('stats_reader', 'fence_stat_reset()', 'EXECUTE')")" "f"
before=$(sql one -c 'SELECT stats_reset FROM fence_stat_info')
sql one -c 'SELECT fence_stat_reset()' >/dev/null
expect "a reset empties the counters of every database" \
	"$(sql one -c 'SELECT count(*) FROM fence_stat_tables'),$(sql two -c 'SELECT count(*) FROM fence_stat_tables'),$(sql one -c 'SELECT tables FROM fence_stat_info')" \
	"0,0,0"
expect "and moves stats_reset" \
	"$(sql one -c "SELECT stats_reset > '$before' FROM fence_stat_info")" "t"

harness_log "1005 guarded tables: the shared table fills"
sql one >/dev/null <<'EOF'
DO $$
BEGIN
	FOR i IN 1..1005 LOOP
		EXECUTE format('CREATE TABLE many_%s (tok fence_token)', i);
		EXECUTE format('CREATE TRIGGER fence BEFORE INSERT ON many_%s
			FOR EACH ROW EXECUTE FUNCTION fence_guard(''tok'', ''many'')', i);
	END LOOP;
END $$;
EOF
sql one >/dev/null <<'EOF'
DO $$
BEGIN
	FOR i IN 1..1005 LOOP
		EXECUTE format('INSERT INTO many_%s VALUES (1)', i);
	END LOOP;
END $$;
EOF
expect "fence_stat_info: 1000 tables of 1000" \
	"$(sql one -c 'SELECT tables, capacity FROM fence_stat_info')" "1000|1000"
expect "1000 tables counted one row each, the 5 others together in the row without a table" \
	"$(sql one -c 'SELECT count(table_name), sum(checked) FILTER (WHERE table_name IS NOT NULL),
		sum(checked) FILTER (WHERE table_name IS NULL) FROM fence_stat_tables')" \
	"1000|1000|5"

harness_log "the Redis functions' counters"
sql one -c 'SELECT fence_stat_reset()' >/dev/null
expect "fence_stat_redis starts at zero, with no acquisition time" \
	"$(sql two -c 'SELECT * FROM fence_stat_redis')" "0|0|0|0|0|0|0|0|0|0|0|0||"
# the lock is busy while its holder is connected (a backend that exits
# gives its locks back)
sql one >/dev/null <<'EOF'
SELECT fenced_acquire('job:1', ttl => '1 min');
\! psql -X -q -A -t -v ON_ERROR_STOP=1 -d two -c "SELECT fenced_acquire('job:1', wait => '0')"
EOF
# a mark above the Redis clock, so above any token the rule issues: the
# next acquisition repairs the counter
sql one -c "SELECT fence_advance('job:2', 8000000000000000000)" >/dev/null
sql one -c "SELECT fenced_acquire('job:2')" >/dev/null 2>&1
# Redis unreachable, reported; and caught by an exception block, not counted
dead=$(harness_free_port)
sqlstate_of one "SET fencing.redis_port = $dead; SELECT fenced_acquire('job:3')" >/dev/null
dead_caught=$(harness_free_port)
sql one >/dev/null <<EOF
SET fencing.redis_port = $dead_caught;
DO \$\$
BEGIN
	PERFORM fenced_acquire('job:3');
EXCEPTION WHEN SQLSTATE 'TF101' THEN
	NULL;
END \$\$;
EOF
expect "acquired 2, busy 1, repairs 1, connects 3, unavailable 1" \
	"$(sql two -c 'SELECT acquired, busy, repairs, connects, errors_unavailable, errors_busy,
		errors_cluster_changing, errors_refused, errors_protocol, errors_not_replicated
		FROM fence_stat_redis')" \
	"2|1|1|3|1|0|0|0|0|0"
expect "the acquisition times: a median and a 99th percentile, under a second" \
	"$(sql two -c 'SELECT 0 < acquire_p50_ms AND acquire_p50_ms <= acquire_p99_ms
		AND acquire_p99_ms < 1000 FROM fence_stat_redis')" \
	"t"

# per Redis target, the last success and the last error (issue 37)
expect "fence_stat_redis_targets: the live server's last success, the dead port's last error (TF101); the caught error is not counted" \
	"$(sql two -c "SELECT target, last_success IS NOT NULL, last_error IS NOT NULL, last_error_sqlstate
		FROM fence_stat_redis_targets ORDER BY target COLLATE \"C\"")" \
	"$(printf '%s\n' "127.0.0.1:$REDIS_PORT|t|f|" "127.0.0.1:$dead|f|t|TF101" | LC_ALL=C sort)"
expect "the times are those of the events, the success before the error" \
	"$(sql two -c "SELECT s.last_success < e.last_error, e.last_error <= now()
		FROM fence_stat_redis_targets s, fence_stat_redis_targets e
		WHERE s.target = '127.0.0.1:$REDIS_PORT' AND e.target = '127.0.0.1:$dead'")" "t|t"
sql one -c "SELECT fenced_acquire('job:4')" >/dev/null
expect "a later success of the live server moves its time past the dead port's error" \
	"$(sql two -c "SELECT s.last_success > e.last_error, s.last_error IS NULL
		FROM fence_stat_redis_targets s, fence_stat_redis_targets e
		WHERE s.target = '127.0.0.1:$REDIS_PORT' AND e.target = '127.0.0.1:$dead'")" "t|t"
sql one -c 'SELECT fence_stat_reset()' >/dev/null
expect "fence_stat_reset() empties fence_stat_redis_targets and fence_stat_resources" \
	"$(sql two -c 'SELECT (SELECT count(*) FROM fence_stat_redis_targets), (SELECT count(*) FROM fence_stat_resources)')" "0|0"

# What survives a restart (doc/operations.md, Statistics): the marks, not
# the counters
sql one -c "SELECT fenced_acquire('job:5')" >/dev/null
sql one -c "INSERT INTO items VALUES (9, 50)" >/dev/null
sqlstate_of one "INSERT INTO items VALUES (9, 1)" >/dev/null
expect "before the restart, the counters and the rejections of resources are there" \
	"$(sql one -c "SELECT (SELECT acquired FROM fence_stat_redis), (SELECT count(*) FROM fence_stat_redis_targets),
		(SELECT count(*) FROM fence_stat_tables), (SELECT count(*) FROM fence_stat_resources)")" "1|1|1|1"
harness_log "restarting the server"
as_pg_owner "$("$PG_CONFIG" --bindir)/pg_ctl" -D "$PGDATA_DIR" -o "-p $PGPORT" -l "$PGDATA_DIR/../server.log" -w -s restart
HARNESS_PIDS+=("$(head -1 "$PGDATA_DIR/postmaster.pid")")
expect "after a restart the counters are zero, no Redis target or rejected resource is known; the marks are kept" \
	"$(sql one -c "SELECT (SELECT acquired FROM fence_stat_redis), (SELECT count(*) FROM fence_stat_redis_targets),
		(SELECT count(*) FROM fence_stat_tables), (SELECT count(*) FROM fence_stat_resources),
		fence_mark('job:5') IS NOT NULL, fence_mark('order:9')")" "0|0|0|0|t|50"

checks_finish
