--
-- rows repeating the last write accepted through a one-resource template
-- (guard_repeat.c): accepted without a lookup only while nothing they
-- depend on changed, in the statement or between statements
--
\set VERBOSITY terse
CREATE TABLE rp (id int PRIMARY KEY, tok fence_token, val int);
CREATE TRIGGER fence BEFORE INSERT OR UPDATE OR DELETE ON rp
	FOR EACH ROW EXECUTE FUNCTION fence_guard('tok', 'rp');
CREATE TABLE rps (id int PRIMARY KEY, tok fence_token, val int);
CREATE TRIGGER fence BEFORE INSERT OR UPDATE OR DELETE ON rps
	FOR EACH ROW EXECUTE FUNCTION fence_guard('tok', 'rps', 'strict');

-- a declaration made in the middle of a statement: the rows after it are
-- stamped with the new token, and the mark raised to it
SELECT fence_use('rp', 5);
INSERT INTO rp (id, val)
	SELECT g, CASE WHEN g = 3 THEN (SELECT 0 FROM fence_use('rp', 7)) ELSE 0 END
	FROM generate_series(1, 5) g;
SELECT id, tok FROM rp ORDER BY id;
SELECT fence_mark('rp');

-- withdrawn in the middle of a statement: the next row carries no token
INSERT INTO rp (id, val)
	SELECT g, CASE WHEN g = 12 THEN (SELECT 0 FROM fence_use('rp', NULL)) ELSE 0 END
	FROM generate_series(10, 14) g;
\echo :LAST_ERROR_SQLSTATE
SELECT count(*) AS rows_from_10 FROM rp WHERE id >= 10;

-- a raise rolled back to a savepoint: the same token again raises the
-- mark, which the rollback took back
BEGIN;
INSERT INTO rp SELECT g, 8, 0 FROM generate_series(20, 22) g;
SAVEPOINT s;
INSERT INTO rp SELECT g, 9, 0 FROM generate_series(23, 25) g;
ROLLBACK TO SAVEPOINT s;
INSERT INTO rp SELECT g, 9, 0 FROM generate_series(26, 28) g;
SELECT fence_mark('rp');
COMMIT;
SELECT fence_mark('rp');

-- the mark forgotten in the middle of a transaction is created again
BEGIN;
INSERT INTO rp SELECT g, 10, 0 FROM generate_series(30, 31) g;
SELECT fence_forget('rp');
INSERT INTO rp SELECT g, 10, 0 FROM generate_series(32, 33) g;
COMMIT;
SELECT fence_mark('rp');

-- strict: a transaction that set the mark writes at it row after row; the
-- next transaction, which did not, is rejected at its first row
INSERT INTO rps SELECT g, 3, 0 FROM generate_series(1, 3) g;
INSERT INTO rps SELECT g, 3, 0 FROM generate_series(4, 6) g;
\echo :LAST_ERROR_SQLSTATE
-- and a raise in the same statement is a new check, not a repeat
INSERT INTO rps SELECT g, CASE WHEN g < 9 THEN 4 ELSE 5 END, 0
	FROM generate_series(7, 10) g;
SELECT id, tok FROM rps ORDER BY id;
SELECT fence_mark('rps');

-- a stale row after repeats is rejected
INSERT INTO rp SELECT g, CASE WHEN g < 43 THEN 10 ELSE 9 END, 0
	FROM generate_series(40, 44) g;
\echo :LAST_ERROR_SQLSTATE
SELECT count(*) AS rows_from_40 FROM rp WHERE id >= 40;

DROP TABLE rp, rps;
SELECT fence_forget('rp'), fence_forget('rps');
