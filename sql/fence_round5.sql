-- Ways around the guard, round 5 (issue 32): each section is an attack
-- that let a stale write through, lost a mark or let a weak role block a
-- resource, and what stops it now.  Refusals print their SQLSTATE.
\set SHOW_CONTEXT never

-- section: trigger shapes the guard cannot honour (a column list, WHEN)
CREATE TABLE r5_cols (id int, tok fence_token, val text);
-- an UPDATE OF list: UPDATE SET tok = 1 would not fire the guard
CREATE TRIGGER fence BEFORE INSERT OR UPDATE OF val OR DELETE ON r5_cols
	FOR EACH ROW EXECUTE FUNCTION fence_guard('tok', 'cols:{id}');
\echo :SQLSTATE
-- a WHEN clause: a row it skips is not checked
DROP TRIGGER IF EXISTS fence ON r5_cols;
CREATE TRIGGER fence BEFORE INSERT OR UPDATE ON r5_cols
	FOR EACH ROW WHEN (NEW.val IS NOT NULL)
	EXECUTE FUNCTION fence_guard('tok', 'cols:{id}');
\echo :SQLSTATE
DROP TRIGGER IF EXISTS fence ON r5_cols;
-- CREATE OR REPLACE of a good guard into one of those shapes
CREATE TRIGGER fence BEFORE INSERT OR UPDATE OR DELETE ON r5_cols
	FOR EACH ROW EXECUTE FUNCTION fence_guard('tok', 'cols:{id}');
CREATE OR REPLACE TRIGGER fence BEFORE INSERT OR UPDATE OF val OR DELETE ON r5_cols
	FOR EACH ROW EXECUTE FUNCTION fence_guard('tok', 'cols:{id}');
\echo :SQLSTATE
INSERT INTO r5_cols VALUES (1, 50, 'a');
UPDATE r5_cols SET tok = 1;
SELECT id, tok FROM r5_cols;
DROP TRIGGER fence ON r5_cols;

-- such triggers made where the event trigger did not run (a restore of a
-- dump made before 1.3): refused when they fire, reported unhealthy
ALTER EVENT TRIGGER fence_ddl_guard DISABLE;
CREATE TRIGGER fence BEFORE INSERT OR UPDATE OF val OR DELETE ON r5_cols
	FOR EACH ROW EXECUTE FUNCTION fence_guard('tok', 'cols:{id}');
CREATE TABLE r5_when (id int, tok fence_token, val text);
CREATE TRIGGER fence BEFORE INSERT OR UPDATE ON r5_when
	FOR EACH ROW WHEN (NEW.val IS NOT NULL)
	EXECUTE FUNCTION fence_guard('tok', 'when:{id}');
ALTER EVENT TRIGGER fence_ddl_guard ENABLE ALWAYS;
UPDATE r5_cols SET tok = 1, val = 'b';
\echo :SQLSTATE
SELECT id, tok FROM r5_cols;
SELECT fence_advance('when:1', 50);
-- a row the condition lets through reaches the guard, which refuses it;
-- a row the condition skips never reaches it, and goes in: such a trigger
-- must be fixed, and both reports name it
INSERT INTO r5_when VALUES (1, 10, 'x');
\echo :SQLSTATE
INSERT INTO r5_when VALUES (1, 10, NULL);
SELECT count(*) AS skipped_rows_in FROM r5_when;
SELECT table_name, trigger_name, before_row FROM fence_guarded_tables
WHERE table_name IN ('r5_cols'::regclass, 'r5_when'::regclass) ORDER BY 1;
SELECT table_name, rows, resources, uncovered FROM fence_check_coverage()
WHERE table_name IN ('r5_cols'::regclass, 'r5_when'::regclass) ORDER BY 1;
DROP TABLE r5_cols, r5_when;

-- section: renames by DDL
-- ALTER COLUMN TYPE of a placeholder column renames every row's resource
CREATE TABLE r5_act (n numeric, tok fence_token);
CREATE TRIGGER fence BEFORE INSERT OR UPDATE OR DELETE ON r5_act
	FOR EACH ROW EXECUTE FUNCTION fence_guard('tok', 'act:{n}');
INSERT INTO r5_act VALUES (42.5, 50);
ALTER TABLE r5_act ALTER COLUMN n TYPE int;
\echo :SQLSTATE
-- a stale write to the row's resource
INSERT INTO r5_act VALUES (42.5, 10);
\echo :SQLSTATE
SELECT n, tok FROM r5_act ORDER BY tok;
-- a type change of another column is not refused
ALTER TABLE r5_act ADD COLUMN note varchar(10);
ALTER TABLE r5_act ALTER COLUMN note TYPE text;
DROP TABLE r5_act;
-- CREATE OR REPLACE TRIGGER with a new template renames them too
CREATE TABLE r5_tpl (id int, tok fence_token);
CREATE TRIGGER fence BEFORE INSERT OR UPDATE OR DELETE ON r5_tpl
	FOR EACH ROW EXECUTE FUNCTION fence_guard('tok', 'tpl:{id}');
INSERT INTO r5_tpl VALUES (1, 50);
CREATE OR REPLACE TRIGGER fence BEFORE INSERT OR UPDATE OR DELETE ON r5_tpl
	FOR EACH ROW EXECUTE FUNCTION fence_guard('tok', 'tpl2:{id}');
\echo :SQLSTATE
INSERT INTO r5_tpl VALUES (1, 10);
\echo :SQLSTATE
-- the same template, another option: not a rename
CREATE OR REPLACE TRIGGER fence BEFORE INSERT OR UPDATE OR DELETE ON r5_tpl
	FOR EACH ROW EXECUTE FUNCTION fence_guard('tok', 'tpl:{id}', 'strict');
SELECT count(*) FROM r5_tpl;
DROP TABLE r5_tpl;

-- section: TRUNCATE of the marks table (a publisher's would empty its
-- subscribers' marks)
SELECT fence_advance('trunc:1', 5);
TRUNCATE fence_high_water;
\echo :SQLSTATE
SELECT fence_mark('trunc:1');
SELECT fence_forget('trunc:1');

-- section: a role with INSERT alone raising a mark to the top
CREATE ROLE regress_r5_inserter;
CREATE TABLE r5_oc (id int PRIMARY KEY, tok fence_token, owner name DEFAULT current_user);
CREATE TRIGGER fence BEFORE INSERT OR UPDATE OR DELETE ON r5_oc
	FOR EACH ROW EXECUTE FUNCTION fence_guard('tok', 'oc:{id}');
ALTER TABLE r5_oc ENABLE ROW LEVEL SECURITY;
CREATE POLICY own ON r5_oc USING (owner = current_user);
GRANT INSERT ON r5_oc TO regress_r5_inserter;
INSERT INTO r5_oc VALUES (1, 10);
-- the row exists (hidden from the role by RLS): nothing is inserted, and
-- the mark stays where the row's holder left it
SET ROLE regress_r5_inserter;
INSERT INTO r5_oc VALUES (1, 9223372036854775807) ON CONFLICT DO NOTHING;
RESET ROLE;
SELECT fence_mark('oc:1');
-- nor does an ON CONFLICT DO UPDATE that updates nothing raise it
INSERT INTO r5_oc VALUES (1, 1000) ON CONFLICT (id) DO UPDATE SET tok = excluded.tok WHERE false;
SELECT fence_mark('oc:1');
-- a stale token is still rejected under ON CONFLICT DO NOTHING when the
-- row would go in, and a fresh one goes in and raises the mark
INSERT INTO r5_oc VALUES (2, 10);
SELECT fence_use('oc:2', 10);
DELETE FROM r5_oc WHERE id = 2;
SELECT fence_use('oc:2', NULL);
INSERT INTO r5_oc VALUES (2, 9) ON CONFLICT DO NOTHING;
\echo :SQLSTATE
INSERT INTO r5_oc VALUES (2, 11) ON CONFLICT DO NOTHING;
SELECT fence_mark('oc:2');
-- a row let through because it conflicted (its statement to check it
-- again at its end) is forgotten with the savepoint its statement failed
-- in: the end of a later ON CONFLICT statement does not check it, though
-- the row it conflicted with is gone by then
INSERT INTO r5_oc VALUES (6, 10);
BEGIN;
SAVEPOINT a;
INSERT INTO r5_oc VALUES (6, 11), (7, NULL) ON CONFLICT DO NOTHING;
\echo :SQLSTATE
ROLLBACK TO a;
SELECT fence_use('oc:6', 12, is_local => true);
DELETE FROM r5_oc WHERE id = 6;
INSERT INTO r5_oc VALUES (8, 1) ON CONFLICT DO NOTHING;
\echo :SQLSTATE
COMMIT;
SELECT fence_mark('oc:6');
-- a token only the statement supplies moves a mark at most
-- fencing.max_token_step above it
SHOW fencing.max_token_step;
INSERT INTO r5_oc VALUES (3, 100);
UPDATE r5_oc SET tok = 9223372036854775807 WHERE id = 3;
\echo :SQLSTATE
UPDATE r5_oc SET tok = 100 + 1000000000000000 WHERE id = 3;
SELECT fence_mark('oc:3');
-- in row scope the row's token is its mark, bounded the same way
CREATE TABLE r5_rows (id int, tok fence_token);
CREATE TRIGGER fence BEFORE INSERT OR UPDATE ON r5_rows
	FOR EACH ROW EXECUTE FUNCTION fence_guard('tok');
INSERT INTO r5_rows VALUES (1, 100);
UPDATE r5_rows SET tok = 9223372036854775807;
\echo :SQLSTATE
UPDATE r5_rows SET tok = 200;
DROP TABLE r5_rows;
-- a declared token, and fence_advance, may move it further
BEGIN;
SELECT fence_use('oc:3', 9000000000000000000, is_local => true);
UPDATE r5_oc SET owner = owner WHERE id = 3;
COMMIT;
SELECT fence_mark('oc:3');
SELECT fence_advance('oc:4', 1), fence_advance('oc:4', 9223372036854775807);
-- a resource without a mark takes any token
INSERT INTO r5_oc VALUES (5, 9000000000000000000);
-- ordinary users cannot raise the step
SET ROLE regress_r5_inserter;
SET fencing.max_token_step = '9223372036854775807';
\echo :SQLSTATE
RESET ROLE;
DROP TABLE r5_oc;
DROP ROLE regress_r5_inserter;

-- section: placeholder values that contain the template's separators
CREATE TABLE r5_sep (a text, b text, tok fence_token);
CREATE TRIGGER fence BEFORE INSERT OR UPDATE OR DELETE ON r5_sep
	FOR EACH ROW EXECUTE FUNCTION fence_guard('tok', 'sep:{a}:{b}');
INSERT INTO r5_sep VALUES ('x:y', 'z', 50);
\echo :SQLSTATE
INSERT INTO r5_sep VALUES ('x', 'y:z', 10);
\echo :SQLSTATE
-- values without a separator name what they always named
INSERT INTO r5_sep VALUES ('x', 'y', 10);
SELECT resource, token FROM fence_marks WHERE resource LIKE 'sep:%' ORDER BY 1;
-- the last placeholder has no separator after it: any value
INSERT INTO r5_sep VALUES ('w', 'v:u:{}', 5);
-- a row written before 1.3 with such a value can still be deleted, under
-- the name it always had; an UPDATE that keeps the value is refused
ALTER TABLE r5_sep DISABLE TRIGGER fence;
INSERT INTO r5_sep VALUES ('p:q', 'r', 7);
ALTER TABLE r5_sep ENABLE TRIGGER fence;
SELECT fence_use('sep:p:q:r', 7, is_local => false);
UPDATE r5_sep SET b = 's' WHERE a = 'p:q';
\echo :SQLSTATE
DELETE FROM r5_sep WHERE a = 'p:q';
\echo :SQLSTATE
SELECT fence_use('sep:p:q:r', NULL);
DROP TABLE r5_sep;

-- section: a DEFAULT on a view's token column
CREATE TABLE r5_v (id int, tok fence_token, val text);
CREATE TRIGGER fence BEFORE INSERT OR UPDATE OR DELETE ON r5_v
	FOR EACH ROW EXECUTE FUNCTION fence_guard('tok', 'v:{id}');
CREATE VIEW r5_vv AS SELECT * FROM r5_v;
ALTER VIEW r5_vv ALTER COLUMN tok SET DEFAULT 1000;
INSERT INTO r5_v VALUES (1, 10, 'a');
-- tokenless and undeclared: the view's default must not stand in
INSERT INTO r5_vv (id, val) VALUES (1, 'tokenless');
\echo :SQLSTATE
UPDATE r5_vv SET tok = DEFAULT WHERE id = 1;
\echo :SQLSTATE
SELECT fence_mark('v:1');
-- a token the statement writes through the view is fine; DEFAULT in any
-- row of a VALUES list is not
INSERT INTO r5_vv (id, tok, val) VALUES (1, 11, 'b');
INSERT INTO r5_vv VALUES (1, 11, 'c'), (1, DEFAULT, 'd');
\echo :SQLSTATE
-- through a view over that view, whose INSERT takes the inner view's
-- default, or a default of its own
CREATE VIEW r5_vvv AS SELECT * FROM r5_vv;
INSERT INTO r5_vvv (id, val) VALUES (1, 'through two views');
\echo :SQLSTATE
ALTER VIEW r5_vvv ALTER COLUMN tok SET DEFAULT 2000;
INSERT INTO r5_vvv (id, val) VALUES (1, 'through two views');
\echo :SQLSTATE
SELECT fence_mark('v:1');
DROP VIEW r5_vvv, r5_vv;
DROP TABLE r5_v;
SELECT count(fence_forget(resource)) > 0 AS forgotten FROM fence_marks
WHERE resource ~ '^(cols|when|act|tpl|oc|sep|v):';
