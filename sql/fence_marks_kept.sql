--
-- the marks table and its primary key kept open by a writing transaction
-- (src/marks/marks_kept.c): DDL on the table in that transaction still
-- works, and neither commit nor a rolled-back savepoint or exception
-- block reports a leaked reference
--
CREATE TABLE kp (id int PRIMARY KEY, tok fence_token, val int);
CREATE TRIGGER fence BEFORE INSERT OR UPDATE OR DELETE ON kp
	FOR EACH ROW EXECUTE FUNCTION fence_guard('tok', 'kp:{id}');

-- DDL on the marks table after writes: it refuses a table the session
-- has open, so the library closes it first
BEGIN;
INSERT INTO kp SELECT g, 1, 0 FROM generate_series(1, 5) g;
ALTER TABLE fence_high_water SET (fillfactor = 50);
UPDATE kp SET tok = 2;
COMMIT;
SELECT count(*) AS marks, min(token), max(token) FROM fence_high_water WHERE resource LIKE 'kp:%';

-- the first write in a savepoint rolled back; the table stays open
BEGIN;
SAVEPOINT a;
UPDATE kp SET tok = 3 WHERE id <= 2;
ROLLBACK TO SAVEPOINT a;
UPDATE kp SET tok = 4 WHERE id >= 4;
COMMIT;
SELECT resource, token FROM fence_marks WHERE resource LIKE 'kp:%' ORDER BY resource;

-- the first write in an exception block that fails, then a write after it
DO $$
BEGIN
	BEGIN
		UPDATE kp SET tok = 5 WHERE id = 1;
		PERFORM 1 / 0;
	EXCEPTION WHEN division_by_zero THEN
		NULL;
	END;
	UPDATE kp SET tok = 6 WHERE id = 2;
END
$$;
SELECT resource, token FROM fence_marks WHERE resource LIKE 'kp:%' ORDER BY resource;

-- a failed transaction, then the next one
BEGIN;
UPDATE kp SET tok = 7;
SELECT 1 / 0;
ROLLBACK;
UPDATE kp SET tok = 7 WHERE id = 3;
SELECT resource, token FROM fence_marks WHERE resource LIKE 'kp:%' ORDER BY resource;

DROP TABLE kp;
SELECT count(fence_forget(resource)) FROM fence_high_water WHERE resource LIKE 'kp:%';
