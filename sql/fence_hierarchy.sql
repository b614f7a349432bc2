-- Partitions, defaults and tables joining a hierarchy: no way around the
-- guard through the schema

CREATE SCHEMA fence_h;
SET search_path = fence_h, public;
-- the TRUNCATE guards of a table: name, enabled state, whether a clone
CREATE FUNCTION truncate_guards(tbl regclass) RETURNS TABLE (tgname name, enabled "char", clone boolean)
	LANGUAGE sql AS $$
	SELECT tgname, tgenabled, tgparentid <> 0 FROM pg_trigger
	WHERE tgrelid = tbl AND tgfoid = 'fence_truncate_guard'::regproc ORDER BY tgname
$$;
-- whether TRUNCATE of a table is refused
CREATE FUNCTION truncate_refused(tbl regclass) RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
	EXECUTE format('TRUNCATE %s', tbl);
	RETURN false;
EXCEPTION WHEN SQLSTATE 'TF004' THEN
	RETURN true;
END $$;

-- section: partitions that existed before the TRUNCATE guard get a clone
-- of it (before, TRUNCATE of a partition was accepted)
CREATE TABLE pt (id int, part int, tok fence_token) PARTITION BY LIST (part);
CREATE TABLE pt_1 PARTITION OF pt FOR VALUES IN (1);
CREATE TABLE pt_2 PARTITION OF pt FOR VALUES IN (2, 3) PARTITION BY LIST (part);
CREATE TABLE pt_2a PARTITION OF pt_2 FOR VALUES IN (2);
CREATE TRIGGER fence BEFORE INSERT OR UPDATE OR DELETE ON pt
	FOR EACH ROW EXECUTE FUNCTION fence_guard('tok', 'pt:{part}');
CREATE TRIGGER fence_truncate BEFORE TRUNCATE ON pt
	FOR EACH STATEMENT EXECUTE FUNCTION fence_truncate_guard();
SELECT * FROM truncate_guards('pt_1');
SELECT * FROM truncate_guards('pt_2a');
SELECT truncate_refused('pt_1') AS pt_1, truncate_refused('pt_2') AS pt_2,
	truncate_refused('pt_2a') AS pt_2a;
-- partitions made after it, created or attached, sub-partitioned or not
CREATE TABLE pt_4 PARTITION OF pt FOR VALUES IN (4);
CREATE TABLE pt_5 (id int, part int, tok fence_token) PARTITION BY LIST (part);
CREATE TABLE pt_5a PARTITION OF pt_5 FOR VALUES IN (5);
ALTER TABLE pt ATTACH PARTITION pt_5 FOR VALUES IN (5, 6);
CREATE TABLE pt_2b PARTITION OF pt_2 FOR VALUES IN (3);
SELECT truncate_refused('pt_4') AS pt_4, truncate_refused('pt_5') AS pt_5,
	truncate_refused('pt_5a') AS pt_5a, truncate_refused('pt_2b') AS pt_2b;
-- a clone goes only with its parent's trigger
DROP TRIGGER fence_truncate ON pt_1;
-- a partition's own TRUNCATE guard of the same name replaces the clone,
-- as in a restore of a dump made before 1.2; one of another name joins it
CREATE TRIGGER fence_truncate BEFORE TRUNCATE ON pt_4
	FOR EACH STATEMENT EXECUTE FUNCTION fence_truncate_guard();
CREATE TRIGGER fence_truncate_too BEFORE TRUNCATE ON pt_1
	FOR EACH STATEMENT EXECUTE FUNCTION fence_truncate_guard();
SELECT * FROM truncate_guards('pt_4');
SELECT * FROM truncate_guards('pt_1');
DROP TRIGGER fence_truncate_too ON pt_1;
-- TRUNCATE of the whole hierarchy is refused as before
SELECT truncate_refused('pt') AS pt;
-- ENABLE ALWAYS (or REPLICA, or DISABLE) of the parent's guard reaches its
-- clones at every level, which PostgreSQL does only for row triggers; not
-- a partition's own guard
ALTER TABLE pt ENABLE ALWAYS TRIGGER fence_truncate;
SELECT tgrelid::regclass, tgenabled, tgparentid <> 0 AS clone FROM pg_trigger
	WHERE tgfoid = 'fence_truncate_guard'::regproc AND tgrelid::regclass::text LIKE 'pt%'
	ORDER BY tgrelid::regclass::text;
ALTER TABLE pt ENABLE TRIGGER fence_truncate;
SELECT count(*) FROM pg_trigger
	WHERE tgfoid = 'fence_truncate_guard'::regproc AND tgenabled <> 'O';

-- section: DETACH PARTITION drops the clones, and the detached table gets
-- a TRUNCATE guard of its own, cloned in turn to its partitions
ALTER TABLE pt DETACH PARTITION pt_2;
SELECT * FROM truncate_guards('pt_2');
SELECT * FROM truncate_guards('pt_2a');
SELECT truncate_refused('pt_2') AS pt_2, truncate_refused('pt_2a') AS pt_2a;
-- unfencing it is an explicit act
DROP TRIGGER fence_truncate ON pt_2;
SELECT * FROM truncate_guards('pt_2a');
SELECT truncate_refused('pt_2a') AS pt_2a;
DROP TABLE pt_2;

-- section: a hierarchy made while the event trigger did not run (before
-- 1.2, or restored by pg_upgrade) is retrofitted by
-- fence_truncate_guard_partitions()
ALTER EVENT TRIGGER fence_ddl_guard DISABLE;
CREATE TABLE old (id int, tok fence_token) PARTITION BY RANGE (id);
CREATE TABLE old_1 PARTITION OF old FOR VALUES FROM (0) TO (10) PARTITION BY RANGE (id);
CREATE TABLE old_1a PARTITION OF old_1 FOR VALUES FROM (0) TO (5);
CREATE TRIGGER fence_truncate BEFORE TRUNCATE ON old
	FOR EACH STATEMENT EXECUTE FUNCTION fence_truncate_guard();
ALTER TABLE old ENABLE ALWAYS TRIGGER fence_truncate;
ALTER EVENT TRIGGER fence_ddl_guard ENABLE ALWAYS;
SELECT truncate_refused('old_1a') AS old_1a;
SELECT fence_truncate_guard_partitions();
SELECT * FROM truncate_guards('old_1');
SELECT * FROM truncate_guards('old_1a');
SELECT truncate_refused('old_1a') AS old_1a;
SELECT fence_truncate_guard_partitions();
SELECT has_function_privilege('public', 'fence_truncate_guard_partitions()', 'EXECUTE')
	AS public_may_run_it;
DROP TABLE old;

-- section: a DEFAULT on the token column of an ancestor is refused at the
-- first write (before, a tokenless INSERT through the parent was accepted,
-- and stamped with the default)
INSERT INTO pt VALUES (1, 1, 10);
ALTER TABLE ONLY pt ALTER COLUMN tok SET DEFAULT 9000000000000000000;
INSERT INTO pt (id, part) VALUES (2, 1);
INSERT INTO pt VALUES (3, 1, 11);
INSERT INTO pt_1 VALUES (3, 1, 11);
ALTER TABLE ONLY pt ALTER COLUMN tok DROP DEFAULT;
INSERT INTO pt VALUES (3, 1, 11);
-- a default set before the partition is attached, on its new grandparent:
-- the rows pt brings are seeded as it joins, which reads them through its
-- guard as a write would, so the ATTACH itself is refused
CREATE TABLE root (id int, part int, tok fence_token DEFAULT 12) PARTITION BY LIST (part);
ALTER TABLE root ATTACH PARTITION pt FOR VALUES IN (1, 4, 5, 6);
INSERT INTO pt_1 VALUES (4, 1, 12);
DROP TABLE root;
-- an inheritance parent's default, too
CREATE TABLE base (id int, tok fence_token DEFAULT 1);
CREATE TABLE heir (id int, tok fence_token);
CREATE TRIGGER fence BEFORE INSERT OR UPDATE ON heir
	FOR EACH ROW EXECUTE FUNCTION fence_guard('tok', 'heir:{id}');
INSERT INTO heir VALUES (1, 5);
ALTER TABLE heir INHERIT base;
INSERT INTO heir VALUES (1, 6);
DROP TABLE base, heir;

-- section: a populated table joining a hierarchy has its marks seeded
-- (before, a row at 500 left its resource unfenced: a new row at 400 was
-- accepted)
CREATE TABLE pt_7 (id int, part int, tok fence_token);
INSERT INTO pt_7 VALUES (1, 7, 500), (2, 7, 300);
ALTER TABLE pt ATTACH PARTITION pt_7 FOR VALUES IN (7);
SELECT fence_mark('pt:7');
UPDATE pt SET tok = 400 WHERE id = 2 AND part = 7;
INSERT INTO pt VALUES (3, 7, 400);
INSERT INTO pt VALUES (3, 7, 501);
-- by ALTER TABLE ... INHERIT, with the tables below it
CREATE TABLE stock (id int, depot int, tok fence_token);
CREATE TRIGGER fence BEFORE INSERT OR UPDATE ON stock
	FOR EACH ROW EXECUTE FUNCTION fence_guard('tok', 'depot:{depot}');
CREATE TABLE old_stock (id int, depot int, tok fence_token);
CREATE TABLE older_stock () INHERITS (old_stock);
INSERT INTO old_stock VALUES (1, 1, 70);
INSERT INTO older_stock VALUES (2, 2, 80), (3, 2, NULL);
ALTER TABLE old_stock INHERIT stock;
SELECT resource, token FROM fence_marks WHERE resource LIKE 'depot:%' ORDER BY 1;
INSERT INTO older_stock VALUES (4, 2, 79);
-- a row-scope guard has no marks to seed: each row keeps its own token
CREATE TABLE rows_pt (id int, tok fence_token) PARTITION BY RANGE (id);
CREATE TRIGGER fence BEFORE INSERT OR UPDATE ON rows_pt
	FOR EACH ROW EXECUTE FUNCTION fence_guard('tok');
CREATE TABLE rows_1 (id int, tok fence_token);
INSERT INTO rows_1 VALUES (1, 50);
ALTER TABLE rows_pt ATTACH PARTITION rows_1 FOR VALUES FROM (0) TO (10);
UPDATE rows_pt SET tok = 40 WHERE id = 1;
DROP TABLE stock, old_stock, older_stock, rows_pt;

DROP TABLE pt;
DROP SCHEMA fence_h CASCADE;
RESET search_path;
DELETE FROM fence_high_water;
