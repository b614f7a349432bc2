-- guards set up in ways that cannot fence are refused at the first write
-- (TF003), naming what to change

-- section: a token column with a DEFAULT: a trigger cannot tell it from a
-- token the statement wrote (the usual ALTER TABLE ... ADD COLUMN leaves one)
CREATE TABLE leases (id int, tok fence_token, v text);
ALTER TABLE leases ALTER COLUMN tok SET DEFAULT 0;
CREATE TRIGGER fence BEFORE INSERT OR UPDATE OR DELETE ON leases
	FOR EACH ROW EXECUTE FUNCTION fence_guard('tok', 'lease:{id}');
-- the holder of 34 declares it and inserts; before, the row went in at
-- the default 0, the mark with it, and a stale holder of 5 was accepted
SELECT fence_use('lease:1', 34);
INSERT INTO leases (id, v) VALUES (1, 'a');
\echo :LAST_ERROR_SQLSTATE
COPY leases (id, v) FROM stdin;
1	b
\.
ALTER TABLE leases ALTER COLUMN tok DROP DEFAULT;
INSERT INTO leases (id, v) VALUES (1, 'a');
SELECT fence_use('lease:1', NULL);
INSERT INTO leases VALUES (1, 5, 'stale');
SELECT * FROM leases;
SELECT fence_mark('lease:1');
DROP TABLE leases;

-- section: generated columns, as token column or placeholder
CREATE TABLE gen (id int, k int GENERATED ALWAYS AS (id % 10) STORED,
	tok fence_token, gtok fence_token GENERATED ALWAYS AS (id) STORED);
CREATE TRIGGER fence BEFORE INSERT OR UPDATE ON gen
	FOR EACH ROW EXECUTE FUNCTION fence_guard('tok', 'gen:{k}');
INSERT INTO gen (id, tok) VALUES (12, 5);
DROP TRIGGER fence ON gen;
CREATE TRIGGER fence BEFORE INSERT OR UPDATE ON gen
	FOR EACH ROW EXECUTE FUNCTION fence_guard('gtok', 'gen:{id}');
INSERT INTO gen (id, tok) VALUES (12, 5);
DROP TABLE gen;

-- section: an array placeholder is refused for what it is
CREATE TABLE arr (ids int[], tok fence_token);
CREATE TRIGGER fence BEFORE INSERT ON arr
	FOR EACH ROW EXECUTE FUNCTION fence_guard('tok', 'arr:{ids}');
INSERT INTO arr VALUES ('{1,2}', 1);
DROP TABLE arr;

-- section: two guards on one token column, firing in either order
CREATE TABLE pair (a int, b int, tok fence_token);
CREATE TRIGGER fence_a BEFORE INSERT OR UPDATE OR DELETE ON pair
	FOR EACH ROW EXECUTE FUNCTION fence_guard('tok', 'A:{a}');
CREATE TRIGGER fence_b BEFORE INSERT OR UPDATE OR DELETE ON pair
	FOR EACH ROW EXECUTE FUNCTION fence_guard('tok', 'B:{b}');
SELECT fence_use('A:1', 34);
INSERT INTO pair (a, b) VALUES (1, 1);
ALTER TRIGGER fence_a ON pair RENAME TO fence_z;
INSERT INTO pair (a, b) VALUES (1, 1);
SELECT fence_use('A:1', NULL);
SELECT count(*) AS marks_of_b FROM fence_marks WHERE resource LIKE 'B:%';
-- a disabled second guard is no guard
ALTER TABLE pair DISABLE TRIGGER fence_b;
INSERT INTO pair VALUES (1, 1, 5);
-- guards on different token columns each use their own token
ALTER TABLE pair ENABLE TRIGGER fence_b;
ALTER TABLE pair ADD COLUMN tok_b fence_token;
DROP TRIGGER fence_b ON pair;
CREATE TRIGGER fence_b BEFORE INSERT OR UPDATE OR DELETE ON pair
	FOR EACH ROW EXECUTE FUNCTION fence_guard('tok_b', 'B:{b}');
SELECT fence_use('A:1', 36), fence_use('B:1', 7);
INSERT INTO pair (a, b) VALUES (1, 1);
SELECT fence_use('A:1', NULL), fence_use('B:1', NULL);
SELECT a, b, tok, tok_b FROM pair ORDER BY tok;
SELECT resource, token FROM fence_marks WHERE resource IN ('A:1', 'B:1') ORDER BY 1;
DROP TABLE pair;

-- section: a BEFORE ROW trigger that fires after the guard could move a
-- checked row: refused, naming it; named before the guard, it is checked
CREATE TABLE lr (k int, tok fence_token);
CREATE TRIGGER fence BEFORE INSERT OR UPDATE OR DELETE ON lr
	FOR EACH ROW EXECUTE FUNCTION fence_guard('tok', 'lr:{k}');
CREATE FUNCTION lr_abs() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	NEW.k := abs(NEW.k);
	RETURN NEW;
END $$;
SELECT fence_advance('lr:2', 100);
CREATE TRIGGER z_abs BEFORE INSERT OR UPDATE ON lr
	FOR EACH ROW EXECUTE FUNCTION lr_abs();
-- before: checked lr:-2, stored in lr:2 at token 5 under mark 100
INSERT INTO lr VALUES (-2, 5);
SELECT count(*) AS marks_of_minus_2 FROM fence_marks WHERE resource = 'lr:-2';
ALTER TRIGGER z_abs ON lr RENAME TO a_abs;
INSERT INTO lr VALUES (-2, 5);
INSERT INTO lr VALUES (-2, 100);
SELECT * FROM lr;
-- a later trigger on another event only, or disabled, is no danger
CREATE FUNCTION lr_keep() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	RETURN OLD;
END $$;
CREATE TRIGGER z_keep BEFORE DELETE ON lr FOR EACH ROW EXECUTE FUNCTION lr_keep();
CREATE TRIGGER z_off BEFORE INSERT ON lr FOR EACH ROW EXECUTE FUNCTION lr_abs();
ALTER TABLE lr DISABLE TRIGGER z_off;
INSERT INTO lr VALUES (3, 1);
-- an UPDATE skipped by a later trigger is refused too: the guard would
-- have passed it without it being written
CREATE FUNCTION lr_skip() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	RETURN NULL;
END $$;
CREATE TRIGGER z_skip BEFORE UPDATE ON lr FOR EACH ROW EXECUTE FUNCTION lr_skip();
UPDATE lr SET tok = 2 WHERE k = 3;
DROP TABLE lr;
DROP FUNCTION lr_abs(), lr_keep(), lr_skip();

-- section: the row-movement memo does not outlive a rolled-back savepoint
CREATE TABLE moves (region int, id int, tok fence_token) PARTITION BY LIST (region);
CREATE TABLE moves_1 PARTITION OF moves FOR VALUES IN (1);
CREATE TABLE moves_2 PARTITION OF moves FOR VALUES IN (2);
CREATE TRIGGER fence BEFORE INSERT OR UPDATE OR DELETE ON moves
	FOR EACH ROW EXECUTE FUNCTION fence_guard('tok', 'mv:{id}');
INSERT INTO moves VALUES (1, 1, 5);
BEGIN;
SAVEPOINT s;
UPDATE moves SET tok = 6 WHERE id = 1;
ROLLBACK TO SAVEPOINT s;
-- before: accepted with the rolled-back UPDATE's token
DELETE FROM moves WHERE id = 1;
ROLLBACK;
-- a plain table keeps no memo at all
CREATE TABLE plain (id int, tok fence_token);
CREATE TRIGGER fence BEFORE INSERT OR UPDATE OR DELETE ON plain
	FOR EACH ROW EXECUTE FUNCTION fence_guard('tok', 'pl:{id}');
INSERT INTO plain VALUES (1, 5);
BEGIN;
SAVEPOINT s;
UPDATE plain SET tok = 6 WHERE id = 1;
ROLLBACK TO SAVEPOINT s;
DELETE FROM plain WHERE id = 1;
ROLLBACK;
-- a real move still carries the statement's token to the DELETE half
UPDATE moves SET region = 2, tok = 7 WHERE id = 1;
SELECT tableoid::regclass, * FROM moves;
DROP TABLE moves, plain;

-- section: the configurations of dropped triggers are freed
CREATE TABLE churn (id int, tok fence_token);
DO $$
BEGIN
	FOR i IN 1..200 LOOP
		EXECUTE format('CREATE TRIGGER fence_%s BEFORE INSERT ON churn
			FOR EACH ROW EXECUTE FUNCTION fence_guard(''tok'', ''churn:{id}'')', i);
		INSERT INTO churn VALUES (i, 1);
		EXECUTE format('DROP TRIGGER fence_%s ON churn', i);
	END LOOP;
END $$;
SELECT count(*) < 5 AS few_configurations_left
FROM pg_backend_memory_contexts WHERE name = 'fence_guard configuration';
DROP TABLE churn;

DELETE FROM fence_high_water;
