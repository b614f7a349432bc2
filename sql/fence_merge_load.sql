-- a MERGE that first loads the library, from under plain DML
--
-- fence_guard tells which UPDATE set the token in a MERGE by watching
-- statements start.  In a session where the library is not loaded yet, the
-- first fenced write loads it in the middle of a statement whose start it
-- did not see; here that is a MERGE run by a trigger under a plain UPDATE.
-- The MERGE's taken action does not set the token, its other action does:
-- the write must still be rejected for carrying no token.
CREATE TABLE m (id int PRIMARY KEY, v text, tok fence_token);
CREATE TRIGGER fence BEFORE INSERT OR UPDATE ON m
	FOR EACH ROW EXECUTE FUNCTION fence_guard('tok', 'm:{id}');
INSERT INTO m VALUES (1, 'holder', 10);
CREATE TABLE drv (id int, flag boolean, newtok int);
INSERT INTO drv VALUES (1, false, 99);
CREATE TABLE kick (id int);
INSERT INTO kick VALUES (1);
CREATE FUNCTION kick_merge() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	MERGE INTO m USING drv ON m.id = drv.id
		WHEN MATCHED AND drv.flag THEN UPDATE SET tok = drv.newtok
		WHEN MATCHED THEN UPDATE SET v = 'stale write';
	RETURN NULL;
END $$;
CREATE TRIGGER kick AFTER UPDATE ON kick
	FOR EACH ROW EXECUTE FUNCTION kick_merge();

-- a new session, which has not loaded the library
\c
UPDATE kick SET id = id;
SELECT id, v, tok FROM m;

-- once loaded, the same is rejected for the same reason
UPDATE kick SET id = id;

DROP TABLE m, drv, kick;
DROP FUNCTION kick_merge();
DELETE FROM fence_high_water WHERE resource = 'm:1';
