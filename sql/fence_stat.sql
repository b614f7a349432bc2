-- fence_stat_tables, fence_stat_info, fence_stat_reset(): what the guard
-- did, per table.  pg_regress does not preload the library, so these are
-- this backend's own counters.

SELECT mode, capacity, tables, stats_reset IS NOT NULL AS has_reset_time FROM fence_stat_info;
SELECT has_function_privilege('public', 'fence_stat_reset()', 'EXECUTE') AS public_may_reset,
	has_table_privilege('public', 'fence_stat_tables', 'SELECT') AS public_may_read;

CREATE TABLE stat_rows (id int PRIMARY KEY, tok fence_token);
CREATE TRIGGER fence BEFORE INSERT OR UPDATE ON stat_rows
	FOR EACH ROW EXECUTE FUNCTION fence_guard('tok');
CREATE TABLE stat_items (order_id int, tok fence_token);
CREATE TRIGGER fence BEFORE INSERT OR UPDATE OR DELETE ON stat_items
	FOR EACH ROW EXECUTE FUNCTION fence_guard('tok', 'stat:{order_id}');
SELECT fence_stat_reset();
SELECT count(*) AS tables_after_reset FROM fence_stat_tables;

-- row scope: 2 accepted, 1 without a token, 1 stale, 1 accepted update
INSERT INTO stat_rows VALUES (1, 10), (2, 10);
INSERT INTO stat_rows VALUES (3, NULL);
UPDATE stat_rows SET tok = 9 WHERE id = 1;
UPDATE stat_rows SET tok = 11 WHERE id = 1;

-- resource scope: three rows of one resource at one token raise its mark
-- once; a stale row, a higher token (a second raise), a delete without a
-- token
INSERT INTO stat_items VALUES (1, 5), (1, 5), (1, 5);
INSERT INTO stat_items VALUES (1, 4);
INSERT INTO stat_items VALUES (1, 6);
DELETE FROM stat_items WHERE order_id = 1;
-- a statement rejected at its second row: the first was let through, and
-- counts as accepted although the statement's error undid it
INSERT INTO stat_items VALUES (2, 1), (1, 3);
-- a mark raised by hand is no table's
SELECT fence_advance('stat:1', 100);

SELECT table_name, checked, accepted, rejected_stale, rejected_no_token, marks_raised
FROM fence_stat_tables ORDER BY table_name::text;
SELECT mode, tables FROM fence_stat_info;

-- a rejection inside a savepoint rolled back leaves nothing half-counted:
-- the raise by hand after it counts for no table
BEGIN;
SAVEPOINT s;
INSERT INTO stat_items VALUES (1, 1);
ROLLBACK TO SAVEPOINT s;
SELECT fence_advance('stat:3', 1);
COMMIT;
SELECT table_name, checked, rejected_stale, marks_raised
FROM fence_stat_tables WHERE table_name = 'stat_items'::regclass;

-- the rejections per resource, this backend's own (issue 37)
SELECT role = current_user::regrole AS own, resource, rejected_stale, rejected_no_token, rejected
FROM fence_stat_resources WHERE datname = current_database() AND resource LIKE 'stat:%'
ORDER BY resource;

SELECT fence_stat_reset();
SELECT count(*) AS tables_after_reset FROM fence_stat_tables;
SELECT count(*) AS resources_after_reset FROM fence_stat_resources;
SELECT count(*) AS redis_targets_after_reset FROM fence_stat_redis_targets;

-- the Redis functions' counters (counted against a live Redis in
-- test/scripts/stats.sh): none called here
SELECT * FROM fence_stat_redis;

DROP TABLE stat_rows, stat_items;
DELETE FROM fence_high_water WHERE resource LIKE 'stat:%';
