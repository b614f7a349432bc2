-- fence_attach() and fence_detach(): guarding a table that already has rows

-- section: a table converted to fence_token is fenced from the first write
-- on: the marks are seeded from the highest token per resource
CREATE TABLE shipments (id int, order_id int, tok fence_token, val text);
INSERT INTO shipments VALUES (1, 7, 30, 'a'), (2, 7, 34, 'b'), (3, 8, 5, 'c'),
	(4, 9, NULL, 'no token yet'), (5, NULL, 3, 'no resource');
SELECT fence_attach('shipments', 'tok', 'ship:{order_id}');
SELECT resource, token FROM fence_marks WHERE resource LIKE 'ship:%' ORDER BY 1;
SELECT tgname, tgfoid::regproc, pg_get_triggerdef(oid) FROM pg_trigger
	WHERE tgrelid = 'shipments'::regclass ORDER BY tgname;
-- a stale write right after attaching is rejected: 33 was handed out
-- before 34, whose holder wrote last
INSERT INTO shipments VALUES (6, 7, 33, 'stale');
UPDATE shipments SET val = 'stale', tok = 33 WHERE id = 1;
SELECT fence_use('ship:8', 4);
DELETE FROM shipments WHERE order_id = 8;
SELECT fence_use('ship:8', NULL);
UPDATE shipments SET val = 'fresh', tok = 35 WHERE id = 1;
TRUNCATE shipments;
-- attaching twice is refused
SELECT fence_attach('shipments', 'tok', 'ship:{order_id}');
-- detaching drops both triggers; the marks stay
SELECT fence_detach('shipments');
SELECT count(*) FROM pg_trigger WHERE tgrelid = 'shipments'::regclass;
SELECT fence_mark('ship:7');
SELECT fence_detach('shipments');
DROP TABLE shipments;

-- section: resource names are spelt as the guard spells them
CREATE TABLE parcels (amount numeric, code char(4), flag boolean, tok fence_token);
INSERT INTO parcels VALUES (42.0, 'ab', true, 10), (42.50, 'ab', true, 11);
SELECT fence_attach('parcels', 'tok', 'p:{amount}:{code}:{flag}:{{x}}', 'strict');
SELECT resource, token FROM fence_marks WHERE resource LIKE 'p:%' ORDER BY 1;
-- the guard finds the same marks: 42 is 42.0, 'ab' is 'ab  '
INSERT INTO parcels VALUES (42, 'ab', true, 9);
INSERT INTO parcels VALUES (42.5, 'ab', true, 11);
SELECT pg_get_triggerdef(oid) FROM pg_trigger
	WHERE tgrelid = 'parcels'::regclass AND tgname = '~fence';
DROP TABLE parcels;

-- section: row scope: no marks to seed, the rows hold their tokens
CREATE TABLE docs (id int, tok fence_token);
INSERT INTO docs VALUES (1, 5);
SELECT fence_attach('docs', 'tok');
SELECT pg_get_triggerdef(oid) FROM pg_trigger
	WHERE tgrelid = 'docs'::regclass AND tgname = '~fence';
UPDATE docs SET tok = 4;
DROP TABLE docs;

-- section: partitions and inheritance children are guarded and seeded too
CREATE TABLE readings (id int, tok fence_token) PARTITION BY RANGE (id);
CREATE TABLE readings_1 PARTITION OF readings FOR VALUES FROM (0) TO (10);
CREATE TABLE readings_2 PARTITION OF readings FOR VALUES FROM (10) TO (20);
INSERT INTO readings VALUES (1, 3), (15, 4);
SELECT fence_attach('readings', 'tok', 'rd:{id}');
SELECT tgrelid::regclass, tgname, tgparentid <> 0 AS clone FROM pg_trigger
	WHERE tgrelid IN ('readings'::regclass, 'readings_1'::regclass, 'readings_2'::regclass)
	ORDER BY 1::text, 2;
TRUNCATE readings_2;
UPDATE readings SET tok = 3 WHERE id = 15;
-- the partitions' TRUNCATE guards are clones, dropped with the parent's
SELECT fence_detach('readings');
SELECT count(*) FROM pg_trigger
	WHERE tgrelid IN ('readings'::regclass, 'readings_1'::regclass, 'readings_2'::regclass);
DROP TABLE readings;
CREATE TABLE notes (id int, tok fence_token);
CREATE TABLE old_notes () INHERITS (notes);
INSERT INTO old_notes VALUES (1, 8);
SELECT fence_attach('notes', 'tok', 'note:{id}');
SELECT tgrelid::regclass, tgname FROM pg_trigger
	WHERE tgrelid IN ('notes'::regclass, 'old_notes'::regclass) ORDER BY 1::text, 2;
INSERT INTO old_notes VALUES (1, 7);
SELECT fence_detach('notes');
DROP TABLE notes CASCADE;

-- section: refused: a token column with a default, generated columns, a
-- wrong column, nulls, tables the caller does not own
CREATE TABLE bad (id int, tok fence_token DEFAULT 0,
	gen int GENERATED ALWAYS AS (id * 2) STORED,
	gtok fence_token GENERATED ALWAYS AS (id) STORED, n bigint);
SELECT fence_attach('bad', 'tok', 'b:{id}');
SELECT fence_attach('bad', 'gtok', 'b:{id}');
ALTER TABLE bad ALTER COLUMN tok DROP DEFAULT;
SELECT fence_attach('bad', 'tok', 'b:{gen}');
SELECT fence_attach('bad', 'tok', 'b:{nope}');
SELECT fence_attach('bad', 'tok', 'b:{}');
-- the templates the guard refuses, read as the guard reads them
SELECT fence_attach('bad', 'tok', 'b:{id}}');
SELECT fence_attach('bad', 'tok', 'b:{i{d}');
SELECT fence_attach('bad', 'nope');
SELECT fence_attach('bad', 'n');
SELECT fence_attach('bad', NULL);
SELECT fence_attach(NULL, 'tok');
SELECT count(*) FROM pg_trigger WHERE tgrelid = 'bad'::regclass;
CREATE ROLE regress_fence_stranger;
GRANT EXECUTE ON FUNCTION fence_guard() TO regress_fence_stranger;
SET ROLE regress_fence_stranger;
SELECT fence_attach('bad', 'tok', 'b:{id}');
SELECT fence_detach('bad');
RESET ROLE;
-- an owner without EXECUTE on fence_guard() cannot guard, and so cannot
-- raise marks, through fence_attach either
CREATE SCHEMA stranger_own;
GRANT USAGE, CREATE ON SCHEMA stranger_own TO regress_fence_stranger;
REVOKE EXECUTE ON FUNCTION fence_guard() FROM regress_fence_stranger;
SET ROLE regress_fence_stranger;
CREATE TABLE stranger_own.mine (id int, tok fence_token);
INSERT INTO stranger_own.mine VALUES (1, 1000);
SELECT fence_attach('stranger_own.mine', 'tok', 'ship:{id}');
RESET ROLE;
SELECT fence_mark('ship:1');
DROP SCHEMA stranger_own CASCADE;
DROP TABLE bad;
REVOKE EXECUTE ON FUNCTION fence_guard() FROM regress_fence_stranger;
DROP ROLE regress_fence_stranger;

-- section: 100,000 rows, one resource each
CREATE TABLE big (id int, tok fence_token);
INSERT INTO big SELECT g, g % 1000 FROM generate_series(1, 100000) g;
SELECT fence_attach('big', 'tok', 'big:{id}');
SELECT count(*), min(token), max(token) FROM fence_marks WHERE resource LIKE 'big:%';
UPDATE big SET tok = 998 WHERE id = 99999;
UPDATE big SET tok = 999 WHERE id = 99999;
DROP TABLE big;

-- section: row level security hides no row from the seeding: under FORCE
-- ROW LEVEL SECURITY with a policy showing the owner one tenant, both
-- tenants' marks are seeded
CREATE ROLE regress_fence_tenant_owner;
CREATE ROLE regress_fence_outsider;
GRANT EXECUTE ON FUNCTION fence_guard() TO regress_fence_tenant_owner;
CREATE SCHEMA tenant_own;
GRANT USAGE, CREATE ON SCHEMA tenant_own TO regress_fence_tenant_owner;
GRANT USAGE ON SCHEMA tenant_own TO regress_fence_outsider;
SET ROLE regress_fence_tenant_owner;
CREATE TABLE tenant_own.accounts (tenant text, id int, tok fence_token);
INSERT INTO tenant_own.accounts VALUES ('a', 1, 10), ('b', 2, 20);
ALTER TABLE tenant_own.accounts ENABLE ROW LEVEL SECURITY;
ALTER TABLE tenant_own.accounts FORCE ROW LEVEL SECURITY;
CREATE POLICY only_a ON tenant_own.accounts USING (tenant = 'a');
SELECT count(*) AS rows_the_owner_sees FROM tenant_own.accounts;
SELECT fence_attach('tenant_own.accounts', 'tok', 'acct:{tenant}:{id}');
-- the marks of the rows it can read, and only those
SELECT resource, token FROM fence_table_marks('tenant_own.accounts') ORDER BY 1;
-- the marks view is not the owner's to read: it names every table's keys
SELECT count(*) FROM fence_marks;
-- nor may a coverage check read every row of a table for a table owner
SELECT * FROM fence_check_coverage('tenant_own.accounts');
RESET ROLE;
SELECT resource, token FROM fence_marks WHERE resource LIKE 'acct:%' ORDER BY 1;
-- a stale write to the hidden tenant is rejected
INSERT INTO tenant_own.accounts VALUES ('b', 2, 19);
-- a role that cannot read the table learns none of its resource names
SET ROLE regress_fence_outsider;
SELECT resource FROM fence_table_marks('tenant_own.accounts');
SELECT resource FROM fence_marks;
RESET ROLE;
SELECT has_table_privilege('pg_read_all_stats', 'fence_marks', 'SELECT') AS stats_readers,
	has_table_privilege('pg_database_owner', 'fence_marks', 'SELECT') AS db_owner,
	has_table_privilege('public', 'fence_marks', 'SELECT') AS everyone;

-- section: fence_check_coverage: marks lost, as by a restore without them,
-- are found and repaired; it reads every row, whatever policies apply
SELECT * FROM fence_check_coverage('tenant_own.accounts');
SELECT fence_forget('acct:b:2');
SELECT * FROM fence_check_coverage('tenant_own.accounts');
SELECT * FROM fence_check_coverage('tenant_own.accounts', repair => true);
SELECT * FROM fence_check_coverage('tenant_own.accounts');
SELECT fence_mark('acct:b:2');
-- row scope has no marks to check; a plain table is not checked
CREATE TABLE unguarded (id int, tok fence_token);
SELECT * FROM fence_check_coverage('unguarded');
DROP TABLE unguarded;

-- section: an INSERT into the marks table (pg_restore's COPY) is a raise:
-- never a lowering, never a collision
INSERT INTO fence_high_water VALUES ('acct:b:2', 5, now());
SELECT fence_mark('acct:b:2');
INSERT INTO fence_high_water VALUES ('acct:b:2', 25, now());
SELECT fence_mark('acct:b:2');
INSERT INTO fence_high_water VALUES ('acct:c:3', 7, '2020-01-01 00:00:00+00');
SELECT resource, token, moved_at FROM fence_marks WHERE resource = 'acct:c:3';
SELECT has_table_privilege('pg_database_owner', 'fence_high_water', 'INSERT') AS owner_insert,
	has_table_privilege('pg_database_owner', 'fence_high_water', 'UPDATE') AS owner_update,
	has_table_privilege('pg_database_owner', 'fence_high_water', 'DELETE') AS owner_delete,
	has_table_privilege('pg_database_owner', 'fence_high_water', 'TRUNCATE') AS owner_truncate;
DROP SCHEMA tenant_own CASCADE;
REVOKE EXECUTE ON FUNCTION fence_guard() FROM regress_fence_tenant_owner;
DROP ROLE regress_fence_tenant_owner;
DROP ROLE regress_fence_outsider;

-- section: fence_attach_concurrently commits, so it refuses a transaction
-- block (its work while the table is written is in test/scripts/attach_online.sh)
CREATE TABLE online (id int, tok fence_token);
INSERT INTO online SELECT g, g FROM generate_series(1, 25) g;
BEGIN;
CALL fence_attach_concurrently('online', 'tok', 'on:{id}');
ROLLBACK;
CALL fence_attach_concurrently('online', 'tok', 'on:{id}', batch_rows => 10);
SELECT count(*), max(token) FROM fence_marks WHERE resource LIKE 'on:%';
SELECT tgname FROM pg_trigger WHERE tgrelid = 'online'::regclass ORDER BY 1;
INSERT INTO online VALUES (25, 24);
CALL fence_attach_concurrently('online', 'tok', 'on:{id}');
CALL fence_attach_concurrently('online', 'tok', 'on:{id}', lock_timeout => '0');
DROP TABLE online;

DELETE FROM fence_high_water;
