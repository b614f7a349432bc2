-- DDL that would silently unfence a table: the extension's event trigger
-- fences new children and detached partitions, and refuses the rest

-- the guards of a table, as its triggers
CREATE FUNCTION guards(tbl regclass) RETURNS TABLE (tgname name, fn regproc, enabled "char", clone boolean)
	LANGUAGE sql AS $$
	SELECT tgname, tgfoid::regproc, tgenabled, tgparentid <> 0 FROM pg_trigger
	WHERE tgrelid = tbl AND tgfoid IN ('fence_guard'::regproc, 'fence_truncate_guard'::regproc)
	ORDER BY tgname
$$;

-- section: a new inheritance child gets the guards of its fenced parent
CREATE TABLE jobs (id int, tok fence_token, val text);
CREATE TRIGGER fence BEFORE INSERT OR UPDATE OR DELETE ON jobs
	FOR EACH ROW EXECUTE FUNCTION fence_guard('tok', 'job:{id}');
ALTER TABLE jobs ENABLE ALWAYS TRIGGER fence;
CREATE TRIGGER fence_truncate BEFORE TRUNCATE ON jobs
	FOR EACH STATEMENT EXECUTE FUNCTION fence_truncate_guard();
INSERT INTO jobs VALUES (1, 10, 'parent');
CREATE TABLE urgent_jobs (prio int) INHERITS (jobs);
SELECT * FROM guards('urgent_jobs');
-- a stale write to the child is rejected, as it would be on the parent
INSERT INTO urgent_jobs VALUES (1, 9, 'stale', 1);
TRUNCATE urgent_jobs;
INSERT INTO urgent_jobs VALUES (1, 11, 'fresh', 1);
SELECT fence_mark('job:1');
-- grandchildren too
CREATE TABLE very_urgent_jobs () INHERITS (urgent_jobs);
SELECT * FROM guards('very_urgent_jobs');
-- a table joining the hierarchy with ALTER TABLE ... INHERIT, with its
-- own children
CREATE TABLE late_jobs (id int, tok fence_token, val text);
CREATE TABLE late_jobs_2026 () INHERITS (late_jobs);
ALTER TABLE late_jobs INHERIT jobs;
SELECT * FROM guards('late_jobs');
SELECT * FROM guards('late_jobs_2026');
INSERT INTO late_jobs_2026 VALUES (1, 10, 'stale');
-- a child that has a guard of its own keeps only that one
CREATE TABLE own_jobs (id int, tok fence_token, val text);
CREATE TRIGGER own_fence BEFORE INSERT OR UPDATE OR DELETE ON own_jobs
	FOR EACH ROW EXECUTE FUNCTION fence_guard('tok', 'job:{id}');
ALTER TABLE own_jobs INHERIT jobs;
SELECT * FROM guards('own_jobs');
-- unrelated DDL is left alone
CREATE TABLE plain_parent (id int);
CREATE TABLE plain_child () INHERITS (plain_parent);
SELECT count(*) FROM pg_trigger WHERE tgrelid = 'plain_child'::regclass;
DROP TABLE jobs, plain_parent CASCADE;

-- section: partitions get the TRUNCATE guard, which PostgreSQL does not clone:
-- the event trigger clones it (clone = t), as PostgreSQL clones row triggers
CREATE TABLE events (id int, tok fence_token, val text) PARTITION BY RANGE (id);
CREATE TRIGGER fence BEFORE INSERT OR UPDATE OR DELETE ON events
	FOR EACH ROW EXECUTE FUNCTION fence_guard('tok', 'ev:{id}');
CREATE TRIGGER fence_truncate BEFORE TRUNCATE ON events
	FOR EACH STATEMENT EXECUTE FUNCTION fence_truncate_guard();
CREATE TABLE events_1 PARTITION OF events FOR VALUES FROM (0) TO (100);
SELECT * FROM guards('events_1');
INSERT INTO events VALUES (1, 10, 'a');
TRUNCATE events_1;
-- attached later, and sub-partitioned
CREATE TABLE events_2 (id int, tok fence_token, val text) PARTITION BY RANGE (id);
CREATE TABLE events_2a PARTITION OF events_2 FOR VALUES FROM (100) TO (150);
ALTER TABLE events ATTACH PARTITION events_2 FOR VALUES FROM (100) TO (200);
SELECT * FROM guards('events_2');
SELECT * FROM guards('events_2a');
TRUNCATE events_2a;
SELECT count(*) FROM events;

-- section: a detached partition keeps its guards
ALTER TABLE events DETACH PARTITION events_1;
SELECT * FROM guards('events_1');
INSERT INTO events_1 VALUES (1, 9, 'stale');
DELETE FROM events_1;
TRUNCATE events_1;
SELECT * FROM events_1;
-- also when detached concurrently (two transactions)
CREATE TABLE events_3 PARTITION OF events FOR VALUES FROM (200) TO (300);
INSERT INTO events VALUES (201, 10, 'c');
ALTER TABLE events DETACH PARTITION events_3 CONCURRENTLY;
SELECT * FROM guards('events_3');
INSERT INTO events_3 VALUES (201, 9, 'stale');
DROP TABLE events_3;
-- unfencing it is an explicit act
DROP TRIGGER fence ON events_1;
DROP TRIGGER fence_truncate ON events_1;
TRUNCATE events_1;
DROP TABLE events, events_1;

-- section: renaming an enum value that a template names is refused
CREATE TYPE region AS ENUM ('north', 'south');
CREATE DOMAIN home_region AS region;
CREATE TYPE color AS ENUM ('red', 'blue');
CREATE TABLE depots (region home_region, shade color, tok fence_token);
CREATE TRIGGER fence BEFORE INSERT OR UPDATE OR DELETE ON depots
	FOR EACH ROW EXECUTE FUNCTION fence_guard('tok', 'depot:{region}');
INSERT INTO depots VALUES ('north', 'red', 5);
ALTER TYPE region RENAME VALUE 'north' TO 'nord';
-- the enum of a column the template does not name may be renamed
ALTER TYPE color RENAME VALUE 'red' TO 'crimson';
-- adding a value renames nothing
ALTER TYPE region ADD VALUE 'east';
-- a literal "{region}" ({{ and }}) names no column
DROP TRIGGER fence ON depots;
CREATE TRIGGER fence BEFORE INSERT OR UPDATE OR DELETE ON depots
	FOR EACH ROW EXECUTE FUNCTION fence_guard('tok', 'depot:{{region}}');
ALTER TYPE region RENAME VALUE 'north' TO 'nord';
DROP TABLE depots;
DROP DOMAIN home_region;
DROP TYPE region, color;

-- section: DROP EXTENSION fencing CASCADE is refused while tables use it
CREATE TABLE accounts (id int, tok fence_token);
BEGIN;
DROP EXTENSION fencing CASCADE;
ROLLBACK;
DROP TABLE accounts;
CREATE TABLE accounts (id int, tok bigint);
CREATE TRIGGER fence_truncate BEFORE TRUNCATE ON accounts
	FOR EACH STATEMENT EXECUTE FUNCTION fence_truncate_guard();
BEGIN;
DROP EXTENSION fencing CASCADE;
ROLLBACK;
DROP TABLE accounts;
-- a domain over fence_token, and an array of it, would go too
CREATE DOMAIN account_token AS fence_token;
CREATE TABLE accounts (id int, tok account_token);
BEGIN;
DROP EXTENSION fencing CASCADE;
ROLLBACK;
DROP TABLE accounts;
DROP DOMAIN account_token;
CREATE TABLE accounts (id int, toks fence_token[]);
BEGIN;
DROP EXTENSION fencing CASCADE;
ROLLBACK;
DROP TABLE accounts;
-- with nothing outside the extension using it, CASCADE is allowed
BEGIN;
DROP EXTENSION fencing CASCADE;
ROLLBACK;
SELECT count(*) FROM pg_extension WHERE extname = 'fencing';

DROP FUNCTION guards(regclass);
DELETE FROM fence_high_water;
