-- fence_guarded_tables: every fence_guard() trigger and how it fences its
-- table, TRUNCATE, and the partitions and inheritance children below it

CREATE SCHEMA fence_gt;

-- the columns shown below, in a fixed order, for the tables of this file
CREATE VIEW fence_gt.shown AS
	SELECT table_name, trigger_name, enabled, before_row, events, token_column, scope,
		resource_template, options, truncate_guard, inherited, children_covered,
		uncovered_children
	FROM fence_guarded_tables
	WHERE table_name::text LIKE 'fence_gt.%'
	ORDER BY table_name::text, trigger_name;

-- row scope; resource scope with an option and the TRUNCATE guard
CREATE TABLE fence_gt.orders (id int PRIMARY KEY, status text, tok fence_token);
CREATE TRIGGER fence BEFORE INSERT OR UPDATE ON fence_gt.orders
	FOR EACH ROW EXECUTE FUNCTION fence_guard('tok');
CREATE TABLE fence_gt.items (order_id int, item text, tok fence_token);
CREATE TRIGGER fence BEFORE INSERT OR UPDATE OR DELETE ON fence_gt.items
	FOR EACH ROW EXECUTE FUNCTION fence_guard('tok', 'order:{order_id}', 'strict');
CREATE TRIGGER fence_truncate BEFORE TRUNCATE ON fence_gt.items
	FOR EACH STATEMENT EXECUTE FUNCTION fence_truncate_guard();
-- a template of literal text only: the whole table is one resource
CREATE TABLE fence_gt."Mixed Case" (tok fence_token);
CREATE TRIGGER "Fence" BEFORE INSERT OR UPDATE OR DELETE ON fence_gt."Mixed Case"
	FOR EACH ROW EXECUTE FUNCTION fence_guard('tok', 'the one');
SELECT * FROM fence_gt.shown;

-- arguments come back byte for byte: quotes, backslashes, the text \000,
-- non-ASCII, an empty template (row scope)
CREATE TABLE fence_gt.odd (id int, tok fence_token);
CREATE TRIGGER fence BEFORE INSERT OR UPDATE ON fence_gt.odd
	FOR EACH ROW EXECUTE FUNCTION fence_guard('tok', E'odd:\\000''"\u00fc{id}');
CREATE TRIGGER fence_row BEFORE INSERT OR UPDATE ON fence_gt.odd
	FOR EACH ROW EXECUTE FUNCTION fence_guard('tok', '', 'strict');
SELECT trigger_name, scope, resource_template, options,
	resource_template = E'odd:\\000''"\u00fc{id}' AS template_intact
FROM fence_gt.shown WHERE table_name = 'fence_gt.odd'::regclass;
DROP TABLE fence_gt.odd;

-- a trigger attached the wrong way is listed, and says it is not BEFORE ROW
CREATE TABLE fence_gt.wrong (tok fence_token);
CREATE TRIGGER fence AFTER INSERT ON fence_gt.wrong
	FOR EACH ROW EXECUTE FUNCTION fence_guard('tok');
CREATE TRIGGER fence_stmt BEFORE INSERT ON fence_gt.wrong
	FOR EACH STATEMENT EXECUTE FUNCTION fence_guard('tok');
SELECT trigger_name, before_row, events FROM fence_gt.shown
WHERE table_name = 'fence_gt.wrong'::regclass;
DROP TABLE fence_gt.wrong;

-- disabled, and enabled for replication only or always
ALTER TABLE fence_gt.orders DISABLE TRIGGER fence;
ALTER TABLE fence_gt.items ENABLE ALWAYS TRIGGER fence;
ALTER TABLE fence_gt."Mixed Case" ENABLE REPLICA TRIGGER "Fence";
SELECT table_name, trigger_name, enabled FROM fence_gt.shown;
ALTER TABLE fence_gt.orders ENABLE TRIGGER fence;
-- a disabled TRUNCATE guard guards nothing
ALTER TABLE fence_gt.items DISABLE TRIGGER fence_truncate;
SELECT table_name, truncate_guard FROM fence_gt.shown WHERE table_name = 'fence_gt.items'::regclass;
ALTER TABLE fence_gt.items ENABLE TRIGGER fence_truncate;

-- partitions: the row trigger is cloned to every partition, present and
-- future, but the TRUNCATE trigger to none of them
CREATE TABLE fence_gt.events (kind text, id int, tok fence_token) PARTITION BY LIST (kind);
CREATE TABLE fence_gt.events_a PARTITION OF fence_gt.events FOR VALUES IN ('a')
	PARTITION BY RANGE (id);
CREATE TABLE fence_gt.events_a1 PARTITION OF fence_gt.events_a FOR VALUES FROM (0) TO (100);
CREATE TRIGGER fence BEFORE INSERT OR UPDATE OR DELETE ON fence_gt.events
	FOR EACH ROW EXECUTE FUNCTION fence_guard('tok', 'event:{kind}:{id}');
CREATE TABLE fence_gt.events_b PARTITION OF fence_gt.events FOR VALUES IN ('b');
SELECT table_name, trigger_name, inherited, truncate_guard, children_covered, uncovered_children
FROM fence_gt.shown WHERE table_name::text LIKE 'fence_gt.events%';
-- a TRUNCATE guard on the parent is cloned to every partition, present
-- and future (before 1.2, none: TRUNCATE of a partition got through)
CREATE TRIGGER fence_truncate BEFORE TRUNCATE ON fence_gt.events
	FOR EACH STATEMENT EXECUTE FUNCTION fence_truncate_guard();
SELECT table_name, truncate_guard, children_covered, uncovered_children
FROM fence_gt.shown WHERE table_name::text LIKE 'fence_gt.events%';
-- a partition's own TRUNCATE guard of the same name replaces its clone
CREATE TRIGGER fence_truncate BEFORE TRUNCATE ON fence_gt.events_a
	FOR EACH STATEMENT EXECUTE FUNCTION fence_truncate_guard();
CREATE TRIGGER fence_truncate BEFORE TRUNCATE ON fence_gt.events_a1
	FOR EACH STATEMENT EXECUTE FUNCTION fence_truncate_guard();
CREATE TRIGGER fence_truncate BEFORE TRUNCATE ON fence_gt.events_b
	FOR EACH STATEMENT EXECUTE FUNCTION fence_truncate_guard();
SELECT table_name, truncate_guard, children_covered, uncovered_children
FROM fence_gt.shown WHERE table_name::text LIKE 'fence_gt.events%';
-- a disabled clone leaves its partition unfenced
ALTER TABLE fence_gt.events_b DISABLE TRIGGER fence;
SELECT table_name, enabled, children_covered, uncovered_children
FROM fence_gt.shown WHERE table_name::text LIKE 'fence_gt.events%';
DROP TABLE fence_gt.events;

-- inheritance: children that existed before the guard get no trigger of
-- their parent's (the event trigger guards only children made later)
CREATE TABLE fence_gt.base (id int, tok fence_token);
CREATE TABLE fence_gt.child () INHERITS (fence_gt.base);
CREATE TABLE fence_gt.grandchild () INHERITS (fence_gt.child);
CREATE TRIGGER fence BEFORE INSERT OR UPDATE OR DELETE ON fence_gt.base
	FOR EACH ROW EXECUTE FUNCTION fence_guard('tok', 'base:{id}');
SELECT table_name, inherited, children_covered, uncovered_children
FROM fence_gt.shown WHERE table_name::text LIKE 'fence_gt.base%';
-- the child guarded the same way is covered; with another template it is not
CREATE TRIGGER fence BEFORE INSERT OR UPDATE OR DELETE ON fence_gt.child
	FOR EACH ROW EXECUTE FUNCTION fence_guard('tok', 'base:{id}');
CREATE TRIGGER fence BEFORE INSERT OR UPDATE OR DELETE ON fence_gt.grandchild
	FOR EACH ROW EXECUTE FUNCTION fence_guard('tok', 'grandchild:{id}');
SELECT table_name, resource_template, children_covered, uncovered_children
FROM fence_gt.shown WHERE table_name::text LIKE 'fence_gt.%child' OR table_name = 'fence_gt.base'::regclass;
SET client_min_messages = warning;
DROP TABLE fence_gt.base CASCADE;
RESET client_min_messages;

-- everyone may read it
CREATE ROLE regress_fence_gt_reader;
SET ROLE regress_fence_gt_reader;
SELECT count(*) FROM fence_guarded_tables WHERE table_name::text LIKE 'fence_gt.%';
RESET ROLE;
DROP ROLE regress_fence_gt_reader;

SET client_min_messages = warning;
DROP SCHEMA fence_gt CASCADE;
RESET client_min_messages;
