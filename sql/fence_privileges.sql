-- privileges: who may write a fenced table, and who may move a mark
--
-- An ordinary role with only DML rights (SELECT, INSERT, UPDATE, DELETE) on
-- a fenced table writes with a fresh token and is rejected with a stale one,
-- and has no route to lower a high-water mark: the marks table, the
-- functions that move marks by hand, the trigger function itself and the
-- usual ways around a row trigger are all closed to it.  Each attempt is
-- one statement, so that this file documents each error, and the marks are
-- shown after each group of attempts.

CREATE ROLE regress_fence_writer;
CREATE ROLE regress_fence_guarder;

-- a schema the roles may create their own objects in
CREATE SCHEMA fence_priv_own;
GRANT USAGE, CREATE ON SCHEMA fence_priv_own
	TO regress_fence_writer, regress_fence_guarder;

CREATE TABLE priv_items (order_id int, tok fence_token, val text);
CREATE TRIGGER fence BEFORE INSERT OR UPDATE OR DELETE ON priv_items
	FOR EACH ROW EXECUTE FUNCTION fence_guard('tok', 'priv:{order_id}');
GRANT SELECT, INSERT, UPDATE, DELETE ON priv_items TO regress_fence_writer;

-- the writer needs nothing on the marks or the guard to write
SELECT has_table_privilege('regress_fence_writer', 'fence_high_water', 'SELECT') AS hw_select,
	has_table_privilege('regress_fence_writer', 'fence_high_water', 'INSERT') AS hw_insert,
	has_table_privilege('regress_fence_writer', 'fence_high_water', 'UPDATE') AS hw_update,
	has_table_privilege('regress_fence_writer', 'fence_high_water', 'DELETE') AS hw_delete,
	has_table_privilege('regress_fence_writer', 'fence_high_water', 'TRUNCATE') AS hw_truncate,
	has_table_privilege('regress_fence_writer', 'fence_marks', 'SELECT') AS marks_select,
	has_table_privilege('regress_fence_writer', 'fence_marks', 'UPDATE') AS marks_update;
SELECT has_function_privilege('regress_fence_writer', 'fence_guard()', 'EXECUTE') AS guard,
	has_function_privilege('regress_fence_writer', 'fence_advance(text, fence_token)', 'EXECUTE') AS advance,
	has_function_privilege('regress_fence_writer', 'fence_forget(text)', 'EXECUTE') AS forget,
	has_function_privilege('regress_fence_writer', 'fence_mark(text)', 'EXECUTE') AS mark,
	has_function_privilege('regress_fence_writer', 'fence_use(text, fence_token, boolean, interval)', 'EXECUTE') AS use;

--
-- the writer writes with fresh tokens and is rejected with stale ones
--
SET ROLE regress_fence_writer;
SELECT current_user;
INSERT INTO priv_items VALUES (1, 34, 'first');
UPDATE priv_items SET tok = 35, val = 'second' WHERE order_id = 1;
SELECT fence_mark('priv:1');
INSERT INTO priv_items VALUES (1, 33, 'stale insert');
UPDATE priv_items SET tok = 33, val = 'stale update' WHERE order_id = 1;
-- an UPDATE or DELETE that carries no token is rejected, not let through
UPDATE priv_items SET val = 'no token' WHERE order_id = 1;
DELETE FROM priv_items WHERE order_id = 1;
-- a declared stale token is no better than a stated one
SELECT fence_use('priv:1', 33);
UPDATE priv_items SET val = 'declared stale' WHERE order_id = 1;
DELETE FROM priv_items WHERE order_id = 1;
SELECT fence_use('priv:1', NULL);
-- a rejected statement changes nothing, not even its accepted rows' marks
INSERT INTO priv_items VALUES (2, 5, 'fresh'), (1, 33, 'stale');
SELECT fence_mark('priv:2') IS NULL AS priv2_unmarked;
-- the SQLSTATEs, for clients that test them
DO $$
BEGIN
	INSERT INTO priv_items VALUES (1, 33, 'stale');
EXCEPTION WHEN SQLSTATE 'TF001' THEN
	RAISE NOTICE 'stale: %', SQLSTATE;
END $$;
DO $$
BEGIN
	UPDATE priv_items SET val = 'no token' WHERE order_id = 1;
EXCEPTION WHEN SQLSTATE 'TF002' THEN
	RAISE NOTICE 'no token: %', SQLSTATE;
END $$;
SELECT order_id, tok, val FROM priv_items ORDER BY order_id, tok;
SELECT resource, token FROM fence_table_marks('priv_items') ORDER BY 1;

--
-- the writer cannot touch the marks table: it reads the marks through the
-- rows it can read (fence_table_marks) or fence_mark() only
--
SELECT resource, token FROM fence_high_water;
INSERT INTO fence_high_water VALUES ('priv:1', 0, now());
INSERT INTO fence_high_water VALUES ('priv:1', 0, now())
	ON CONFLICT (resource) DO UPDATE SET token = excluded.token;
UPDATE fence_high_water SET token = 0 WHERE resource = 'priv:1';
DELETE FROM fence_high_water WHERE resource = 'priv:1';
TRUNCATE fence_high_water;
ALTER TABLE fence_high_water DISABLE TRIGGER ALL;
DROP TABLE fence_high_water;
DROP EXTENSION fencing;

-- nor write through the view of the marks, nor through a view of its own
UPDATE fence_marks SET token = 0 WHERE resource = 'priv:1';
DELETE FROM fence_marks WHERE resource = 'priv:1';
INSERT INTO fence_marks VALUES ('priv:1', 0, now());
CREATE VIEW fence_priv_own.my_marks AS SELECT * FROM public.fence_high_water;
UPDATE fence_priv_own.my_marks SET token = 0 WHERE resource = 'priv:1';
DELETE FROM fence_priv_own.my_marks WHERE resource = 'priv:1';
DROP VIEW fence_priv_own.my_marks;

-- a view of its own over the fenced table is fenced like the table
CREATE VIEW fence_priv_own.my_items AS SELECT * FROM public.priv_items;
INSERT INTO fence_priv_own.my_items VALUES (1, 33, 'stale through a view');
UPDATE fence_priv_own.my_items SET tok = 33 WHERE order_id = 1;
DELETE FROM fence_priv_own.my_items WHERE order_id = 1;
DROP VIEW fence_priv_own.my_items;

-- nor move the marks by hand
SELECT fence_advance('priv:1', 0);
SELECT fence_forget('priv:1');

-- nor guard a table of its own, which would let it write any mark it names
CREATE TABLE fence_priv_own.my_table (order_id int, tok fence_token);
CREATE TRIGGER fence BEFORE INSERT OR UPDATE OR DELETE ON fence_priv_own.my_table
	FOR EACH ROW EXECUTE FUNCTION fence_guard('tok', 'priv:{order_id}');
DROP TABLE fence_priv_own.my_table;

-- nor call the trigger function directly
SELECT fence_guard();

-- nor switch off the triggers of the fenced table
SET session_replication_role = replica;
SHOW session_replication_role;
ALTER TABLE priv_items DISABLE TRIGGER fence;
ALTER TABLE priv_items DISABLE TRIGGER ALL;
DROP TRIGGER fence ON priv_items;
TRUNCATE priv_items;

-- nor capture, through its search_path, an operator or function that the
-- marks are looked up with: the mark is read and written without any SQL,
-- so this text comparison, which would lower every mark, is never called
CREATE FUNCTION fence_priv_own.texteq(a text, b text) RETURNS boolean
	LANGUAGE plpgsql AS $$
BEGIN
	RAISE NOTICE 'captured, running as %', current_user;
	UPDATE public.fence_high_water SET token = 1;
	RETURN a OPERATOR(pg_catalog.=) b;
END $$;
CREATE OPERATOR fence_priv_own.= (LEFTARG = text, RIGHTARG = text,
	FUNCTION = fence_priv_own.texteq);
SET search_path = fence_priv_own, pg_catalog, public;
SELECT fence_mark('priv:1');
INSERT INTO priv_items VALUES (1, 2, 'stale, with a captured search_path');
RESET search_path;

-- after all that, the marks are where they were
SELECT resource, token FROM fence_table_marks('priv_items') ORDER BY 1;
INSERT INTO priv_items VALUES (1, 33, 'still stale');
RESET ROLE;
SELECT current_user;

-- calling the trigger function directly fails for a superuser as well
SELECT fence_guard();

--
-- A role granted EXECUTE on fence_guard() can guard a table of its own.
-- That is a privilege over every resource: through its own table it raises
-- the mark of any resource its template names, up to the largest token,
-- and so fences out the real lock holders of that resource until a
-- superuser forgets the mark.  Grant it only to roles trusted with every
-- resource.  What it still cannot do is lower a mark.
--
GRANT EXECUTE ON FUNCTION fence_guard() TO regress_fence_guarder;
SET ROLE regress_fence_guarder;
SELECT current_user;
CREATE TABLE fence_priv_own.side (order_id int, tok fence_token);
CREATE TRIGGER fence BEFORE INSERT OR UPDATE OR DELETE ON fence_priv_own.side
	FOR EACH ROW EXECUTE FUNCTION fence_guard('tok', 'priv:{order_id}');
-- raises the mark of the writer's resource: the risk described above
INSERT INTO fence_priv_own.side VALUES (1, 50);
-- but cannot lower it
INSERT INTO fence_priv_own.side VALUES (1, 10);
UPDATE fence_priv_own.side SET tok = 10 WHERE order_id = 1;
-- nor move marks by hand
SELECT fence_advance('priv:1', 0);
SELECT fence_forget('priv:1');
-- dropping its table leaves the marks
DROP TABLE fence_priv_own.side;
SELECT resource, token FROM fence_table_marks('priv_items') ORDER BY 1;
RESET ROLE;

-- the writer's token 35, fresh a moment ago, is now fenced out
SET ROLE regress_fence_writer;
UPDATE priv_items SET tok = 35, val = 'fenced out' WHERE order_id = 1;
RESET ROLE;

--
-- even a superuser's fence_advance never lowers a mark
--
SELECT fence_advance('priv:1', 10);
SELECT fence_advance('priv:1', 0);
SELECT fence_mark('priv:1');
SELECT fence_advance('priv:1', 60);
SELECT fence_mark('priv:1');
SELECT resource, token FROM fence_table_marks('priv_items') ORDER BY 1;

-- forgetting a mark is the explicit, privileged act
SELECT fence_forget('priv:1');
SELECT fence_mark('priv:1') IS NULL AS forgotten;

-- clean up
SELECT fence_use('priv:1', NULL);
DROP TABLE priv_items;
DROP SCHEMA fence_priv_own CASCADE;
REVOKE EXECUTE ON FUNCTION fence_guard() FROM regress_fence_guarder;
DROP ROLE regress_fence_writer;
DROP ROLE regress_fence_guarder;
SELECT count(*) AS leftover_marks FROM fence_marks WHERE resource LIKE 'priv:%';
