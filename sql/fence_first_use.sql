-- the first fenced write of a session, without preloading
--
-- In a new session the library is not loaded yet.  A statement that
-- carries a fence_token literal loads it while the statement is parsed,
-- before the executor starts, so it misses no statement's start: an
-- UPDATE that re-sends the row's own token has set it, and is accepted.
-- (1.0 took any load inside a transaction for a load in the middle of a
-- statement, assumed a MERGE, and refused this UPDATE with TF002.)
CREATE TABLE fu (id int PRIMARY KEY, v text, tok fence_token);
CREATE TRIGGER fence BEFORE INSERT OR UPDATE ON fu
	FOR EACH ROW EXECUTE FUNCTION fence_guard('tok');
CREATE TABLE fr (id int PRIMARY KEY, v text, tok fence_token);
CREATE TRIGGER fence BEFORE INSERT OR UPDATE ON fr
	FOR EACH ROW EXECUTE FUNCTION fence_guard('tok', 'fr:{id}');
INSERT INTO fu VALUES (1, 'a', 10);
INSERT INTO fr VALUES (1, 'a', 10);

-- row scope, in a new session
\c
UPDATE fu SET v = 'b', tok = 10 WHERE id = 1;
SELECT id, v, tok FROM fu;

-- resource scope, in a new session
\c
UPDATE fr SET v = 'b', tok = 10 WHERE id = 1;
SELECT id, v, tok FROM fr;

-- a new session whose first statement is a MERGE that loads the library
-- while it runs (no token in the statement): the MERGE is counted, so the
-- action taken, which does not set the token, is refused for carrying
-- none, although its other action names the column
CREATE TABLE drv (id int, flag boolean, newtok int);
INSERT INTO drv VALUES (1, false, 99);
\c
MERGE INTO fr USING drv ON fr.id = drv.id
	WHEN MATCHED AND drv.flag THEN UPDATE SET tok = drv.newtok
	WHEN MATCHED THEN UPDATE SET v = 'stale write';
SELECT id, v, tok FROM fr;

-- and a later UPDATE in that session that sets the token to the row's own
-- is not taken for a MERGE
UPDATE fr SET v = 'c', tok = 10 WHERE id = 1;
SELECT id, v, tok FROM fr;

DROP TABLE fu, fr, drv;
DELETE FROM fence_high_water WHERE resource = 'fr:1';
