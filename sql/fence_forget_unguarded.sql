-- fence_forget_unguarded(older_than, pattern): forgetting the marks of
-- dropped tables, never one a live table's template could produce (issue 37)

CREATE SCHEMA fence_fu;
SET search_path = fence_fu, public;
CREATE ROLE regress_fence_fu_janitor;
GRANT pg_read_all_stats TO regress_fence_fu_janitor;

-- a table that will be dropped, and live ones: a composite template, one
-- whose text reaches into the dropped one's ("shipment:x{kind}" produces
-- "shipment:x" and "shipment:x1"), one with literal braces, one
-- whole-table resource, and a guard that is disabled (it still counts)
CREATE TABLE shipments (order_id int, tok fence_token);
CREATE TRIGGER fence BEFORE INSERT OR UPDATE OR DELETE ON shipments
	FOR EACH ROW EXECUTE FUNCTION fence_guard('tok', 'shipment:{order_id}');
CREATE TABLE accounts (a text, b int, tok fence_token);
CREATE TRIGGER fence BEFORE INSERT OR UPDATE OR DELETE ON accounts
	FOR EACH ROW EXECUTE FUNCTION fence_guard('tok', 'acct:{a}/{b}');
CREATE TABLE ships (kind text, tok fence_token);
CREATE TRIGGER fence BEFORE INSERT OR UPDATE OR DELETE ON ships
	FOR EACH ROW EXECUTE FUNCTION fence_guard('tok', 'shipment:x{kind}');
CREATE TABLE braces (id int, tok fence_token);
CREATE TRIGGER fence BEFORE INSERT OR UPDATE OR DELETE ON braces
	FOR EACH ROW EXECUTE FUNCTION fence_guard('tok', 'lit{{x}}.{id}');
CREATE TABLE whole (id int, tok fence_token);
CREATE TRIGGER fence BEFORE INSERT OR UPDATE OR DELETE ON whole
	FOR EACH ROW EXECUTE FUNCTION fence_guard('tok', 'the whole (table)');
CREATE TABLE paused (id int, tok fence_token);
CREATE TRIGGER fence BEFORE INSERT OR UPDATE OR DELETE ON paused
	FOR EACH ROW EXECUTE FUNCTION fence_guard('tok', 'paused:{id}');
-- row scope has no marks
CREATE TABLE rows_only (id int PRIMARY KEY, tok fence_token);
CREATE TRIGGER fence BEFORE INSERT OR UPDATE ON rows_only
	FOR EACH ROW EXECUTE FUNCTION fence_guard('tok');

INSERT INTO shipments VALUES (1, 5), (2, 6), (3, 7);
INSERT INTO accounts VALUES ('x', 1, 5);
INSERT INTO braces VALUES (1, 5);
INSERT INTO whole VALUES (1, 5);
INSERT INTO paused VALUES (1, 5);
INSERT INTO rows_only VALUES (1, 5);
ALTER TABLE paused DISABLE TRIGGER fence;
-- marks no table wrote: one a live template could produce, and others
SELECT fence_advance(r, 9) FROM unnest(ARRAY['shipment:x', 'acct:y/z', 'litx.1', 'lit{x}.2',
	'the whole table', 'job:1', 'paused', 'ship']) AS r ORDER BY 1;
DROP TABLE shipments;
-- every mark idle for 10 days, but shipment:3 (the marks of the other
-- tests of this database are none older than a day)
UPDATE fence_high_water SET moved_at = now() - interval '10 days'
WHERE resource ~ '^(shipment|acct|lit|the whole|job|paused|ship)';
UPDATE fence_high_water SET moved_at = now() WHERE resource = 'shipment:3';

-- nobody may call it unless granted
SELECT has_function_privilege('public', 'fence_forget_unguarded(interval, text)', 'EXECUTE') AS public_may_forget;
SET ROLE regress_fence_fu_janitor;
SELECT fence_forget_unguarded('1 day');
RESET ROLE;
GRANT EXECUTE ON FUNCTION fence_forget_unguarded(interval, text) TO regress_fence_fu_janitor;
SET ROLE regress_fence_fu_janitor;

-- the grace period is required and positive
SELECT fence_forget_unguarded(NULL);
SELECT fence_forget_unguarded('0');

-- a pattern limits it
SELECT fence_forget_unguarded('1 day', 'shipment:1');
SELECT resource FROM fence_marks WHERE resource ~ '^(shipment|acct|lit|the whole|job|paused|ship)'
ORDER BY resource COLLATE "C";

-- then everything no live template produces, idle for the grace period:
-- shipment:2 (its table dropped), job:1, litx.1, the whole table, ship,
-- paused; shipment:x is kept ("shipment:x{kind}" produces it), shipment:3
-- is not idle
SELECT fence_forget_unguarded('1 day');
SELECT resource FROM fence_marks WHERE resource ~ '^(shipment|acct|lit|the whole|job|paused|ship)'
ORDER BY resource COLLATE "C";
RESET ROLE;

-- the kept marks still fence (paused's guard is disabled: its write is not
-- checked, and its template keeps its marks)
INSERT INTO accounts VALUES ('x', 1, 4);
INSERT INTO paused VALUES (1, 4);

-- a template that does not parse keeps every mark
ALTER TABLE paused ENABLE TRIGGER fence;
CREATE TABLE broken (id int, tok fence_token);
CREATE TRIGGER fence BEFORE INSERT OR UPDATE OR DELETE ON broken
	FOR EACH ROW EXECUTE FUNCTION fence_guard('tok', 'b:{id');
SELECT fence_forget_unguarded('1 microsecond');
DROP TABLE broken;

-- with their tables dropped, their idle marks go
DROP TABLE accounts, ships, braces, whole, paused, rows_only;
UPDATE fence_high_water SET moved_at = now() - interval '10 days'
WHERE resource ~ '^(shipment|acct|lit|the whole|job|paused|ship)';
SELECT fence_forget_unguarded('1 day', 'acct:%') + fence_forget_unguarded('1 day', 'lit%')
	+ fence_forget_unguarded('1 day', 'ship%') + fence_forget_unguarded('1 day', 'paused%')
	+ fence_forget_unguarded('1 day', 'the whole%') AS forgotten;
SELECT resource FROM fence_marks WHERE resource ~ '^(shipment|acct|lit|the whole|job|paused|ship)'
ORDER BY resource COLLATE "C";

RESET search_path;
DROP SCHEMA fence_fu CASCADE;
REVOKE EXECUTE ON FUNCTION fence_forget_unguarded(interval, text) FROM regress_fence_fu_janitor;
DROP ROLE regress_fence_fu_janitor;
