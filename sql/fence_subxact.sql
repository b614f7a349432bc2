-- One mark raised across many subtransactions: a PL/pgSQL loop with an
-- exception block per row.  Each subtransaction raises from the version the
-- previous one left (marks.c); a rolled-back one returns the mark to it.
-- The loop checks the mark after every row against the tokens it knows
-- were accepted, so a wrong raise, or a missed rollback, stops it.

CREATE TABLE sub_rows (id int, tok fence_token);
CREATE TRIGGER fence BEFORE INSERT ON sub_rows
	FOR EACH ROW EXECUTE FUNCTION fence_guard('tok', 'sub:one');

-- Row i carries token base + 2i.  Every 7th row is rolled back after its insert,
-- every 5th inserts once more in a nested block that is rolled back, and
-- every 11th is followed by a stale write just below the mark.
CREATE FUNCTION sub_loop(base bigint, n int, OUT accepted int,
						 OUT rolled_back int, OUT rejected int,
						 OUT mark fence_token)
LANGUAGE plpgsql AS $$
DECLARE
	i int;
	expected bigint := fence_mark('sub:one');
BEGIN
	accepted := 0;
	rolled_back := 0;
	rejected := 0;
	FOR i IN 1..n LOOP
		BEGIN
			INSERT INTO sub_rows VALUES (i, base + 2 * i);
			IF i % 5 = 0 THEN
				BEGIN
					INSERT INTO sub_rows VALUES (-i, base + 2 * i + 1);
					RAISE EXCEPTION 'nested %', i;
				EXCEPTION WHEN raise_exception THEN
					NULL;
				END;
			END IF;
			IF i % 7 = 0 THEN
				RAISE EXCEPTION 'row %', i;
			END IF;
			accepted := accepted + 1;
			expected := base + 2 * i;
		EXCEPTION WHEN raise_exception THEN
			rolled_back := rolled_back + 1;
		END;
		IF i % 11 = 0 THEN
			BEGIN
				INSERT INTO sub_rows VALUES (-i, expected - 1);
			EXCEPTION WHEN SQLSTATE 'TF001' THEN
				rejected := rejected + 1;
			END;
		END IF;
		IF fence_mark('sub:one') IS DISTINCT FROM expected::fence_token THEN
			RAISE EXCEPTION 'mark % after row %, expected %',
				fence_mark('sub:one'), i, expected;
		END IF;
	END LOOP;
	mark := fence_mark('sub:one');
END
$$;

-- 3000 rows: 2572 accepted, 428 rolled back, 272 stale writes rejected
SELECT * FROM sub_loop(0, 3000);
SELECT count(*), max(tok), min(id) FROM sub_rows;
SELECT token FROM fence_marks WHERE resource = 'sub:one';

-- the same in one transaction that then rolls back: the mark returns to
-- what it was
BEGIN;
SELECT accepted FROM sub_loop(6000, 300);
ROLLBACK;
SELECT token FROM fence_marks WHERE resource = 'sub:one';

-- and in a transaction whose first raise is its own, outside any
-- subtransaction: the loop raises from that version
TRUNCATE sub_rows;
SELECT fence_forget('sub:one');
BEGIN;
INSERT INTO sub_rows VALUES (0, 0);
SELECT * FROM sub_loop(0, 500);
COMMIT;
SELECT token FROM fence_marks WHERE resource = 'sub:one';

DROP FUNCTION sub_loop(bigint, int);
DROP TABLE sub_rows;
SELECT fence_forget('sub:one');
