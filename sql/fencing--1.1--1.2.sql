/* fencing--1.1--1.2.sql */

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION fencing UPDATE TO '1.2'" to load this file. \quit

-- Tokens bound as strings.  JDBC's setString() binds varchar, and other
-- drivers bind text: an assignment cast from both lets such a parameter
-- be stored in a token column (INSERT, UPDATE SET tok = $1) as a literal
-- can.  Not implicit: in a function call (fence_use(resource, $2)) or a
-- comparison a string would then match the text overloads of other
-- functions and operators as well, and be ambiguous.  The I/O conversion
-- checks the token's syntax and range.
CREATE CAST (text AS @extschema@.fence_token) WITH INOUT AS ASSIGNMENT;
CREATE CAST (varchar AS @extschema@.fence_token) WITH INOUT AS ASSIGNMENT;

-- Statistics for partitioned schemas: fence_stat_tables adds partitions up
-- to their root and forgets dropped tables when it is read, and shows the
-- time of each table's last rejection.  The function behind it gains an
-- OUT column, which CREATE OR REPLACE cannot do, so both are made again,
-- with the privileges they had: an administrator may have revoked the view
-- from PUBLIC, or granted or revoked the function.  The privileges are
-- carried with GRANT and REVOKE, which in an extension script also record
-- them as the extension's initial privileges; those are then set back to
-- what they were, so that pg_dump still dumps the administrator's changes.
DO $$
DECLARE
	old_fn pg_catalog.oid := '@extschema@.fence_stat_tables_data()'::pg_catalog.regprocedure;
	old_view pg_catalog.oid := '@extschema@.fence_stat_tables'::pg_catalog.regclass;
	fn_acl pg_catalog.aclitem[];
	view_acl pg_catalog.aclitem[];
	fn_init pg_catalog.aclitem[];
	view_init pg_catalog.aclitem[];
	new_fn pg_catalog.oid;
	new_view pg_catalog.oid;
	a record;
BEGIN
	SELECT p.proacl INTO fn_acl FROM pg_catalog.pg_proc p WHERE p.oid = old_fn;
	SELECT c.relacl INTO view_acl FROM pg_catalog.pg_class c WHERE c.oid = old_view;
	SELECT i.initprivs INTO fn_init FROM pg_catalog.pg_init_privs i
		WHERE i.objoid = old_fn AND i.classoid = 'pg_catalog.pg_proc'::pg_catalog.regclass AND i.objsubid = 0;
	SELECT i.initprivs INTO view_init FROM pg_catalog.pg_init_privs i
		WHERE i.objoid = old_view AND i.classoid = 'pg_catalog.pg_class'::pg_catalog.regclass AND i.objsubid = 0;

	DROP VIEW @extschema@.fence_stat_tables;
	DROP FUNCTION @extschema@.fence_stat_tables_data();
	CREATE FUNCTION @extschema@.fence_stat_tables_data(OUT relid oid, OUT checked bigint,
			OUT accepted bigint, OUT rejected_stale bigint, OUT rejected_no_token bigint,
			OUT marks_raised bigint, OUT last_rejected_at timestamptz)
		RETURNS SETOF record
		AS 'MODULE_PATHNAME' LANGUAGE C STRICT VOLATILE PARALLEL RESTRICTED;
	CREATE VIEW @extschema@.fence_stat_tables AS
		SELECT NULLIF(s.relid, 0::pg_catalog.oid)::pg_catalog.regclass AS table_name,
			s.checked, s.accepted, s.rejected_stale, s.rejected_no_token, s.marks_raised,
			s.last_rejected_at
		FROM @extschema@.fence_stat_tables_data() AS s;
	new_fn := '@extschema@.fence_stat_tables_data()'::pg_catalog.regprocedure;
	new_view := '@extschema@.fence_stat_tables'::pg_catalog.regclass;

	-- the privileges they had (NULL: the defaults, as CREATE left them)
	IF fn_acl IS NOT NULL THEN
		REVOKE ALL ON FUNCTION @extschema@.fence_stat_tables_data() FROM PUBLIC;
		FOR a IN SELECT * FROM pg_catalog.aclexplode(fn_acl) LOOP
			EXECUTE pg_catalog.format('GRANT %s ON FUNCTION @extschema@.fence_stat_tables_data() TO %s%s',
				a.privilege_type,
				CASE WHEN a.grantee = 0 THEN 'PUBLIC' ELSE pg_catalog.quote_ident(pg_catalog.pg_get_userbyid(a.grantee)) END,
				CASE WHEN a.is_grantable THEN ' WITH GRANT OPTION' ELSE '' END);
		END LOOP;
	END IF;
	IF view_acl IS NOT NULL THEN
		REVOKE ALL ON @extschema@.fence_stat_tables FROM PUBLIC;
		FOR a IN SELECT * FROM pg_catalog.aclexplode(view_acl) LOOP
			EXECUTE pg_catalog.format('GRANT %s ON @extschema@.fence_stat_tables TO %s%s',
				a.privilege_type,
				CASE WHEN a.grantee = 0 THEN 'PUBLIC' ELSE pg_catalog.quote_ident(pg_catalog.pg_get_userbyid(a.grantee)) END,
				CASE WHEN a.is_grantable THEN ' WITH GRANT OPTION' ELSE '' END);
		END LOOP;
	END IF;

	-- and the initial privileges they had
	DELETE FROM pg_catalog.pg_init_privs i
		WHERE i.objsubid = 0 AND ((i.objoid = new_fn AND i.classoid = 'pg_catalog.pg_proc'::pg_catalog.regclass)
			OR (i.objoid = new_view AND i.classoid = 'pg_catalog.pg_class'::pg_catalog.regclass));
	IF fn_init IS NOT NULL THEN
		INSERT INTO pg_catalog.pg_init_privs (objoid, classoid, objsubid, privtype, initprivs)
			VALUES (new_fn, 'pg_catalog.pg_proc'::pg_catalog.regclass, 0, 'e', fn_init);
	END IF;
	IF view_init IS NOT NULL THEN
		INSERT INTO pg_catalog.pg_init_privs (objoid, classoid, objsubid, privtype, initprivs)
			VALUES (new_view, 'pg_catalog.pg_class'::pg_catalog.regclass, 0, 'e', view_init);
	END IF;
END $$;

COMMENT ON FUNCTION @extschema@.fence_stat_tables_data() IS 'counters of the guard trigger per guarded table, partitions added to their root (see fence_stat_tables)';
COMMENT ON VIEW @extschema@.fence_stat_tables IS 'per guarded table (partitions added to their root): rows checked, accepted, rejected with a stale token, rejected without a token, marks raised, and the last rejection';

-- TRUNCATE guards of partitions
--
-- Every partition of a table with a TRUNCATE guard gets a clone of its
-- parent's guard, whatever the order in which the tables and the guard were
-- made (src/ddl_partitions.c): the event trigger now also runs at CREATE
-- TRIGGER, at its end to clone a new guard on a partitioned table, at its
-- start so that a table's own guard replaces a clone of the same name (a
-- restore of a dump made before 1.2).  fence_truncate_guard_partitions()
-- clones the guards of hierarchies made before, here, and after pg_upgrade,
-- whose dump is restored before the event trigger exists.

DROP EVENT TRIGGER fence_ddl_guard;
CREATE EVENT TRIGGER fence_ddl_guard ON ddl_command_end
	WHEN TAG IN ('CREATE TABLE', 'ALTER TABLE', 'ALTER TYPE', 'CREATE TRIGGER')
	EXECUTE FUNCTION @extschema@.fence_ddl_guard();
ALTER EVENT TRIGGER fence_ddl_guard ENABLE ALWAYS;
DROP EVENT TRIGGER fence_drop_guard;
CREATE EVENT TRIGGER fence_drop_guard ON ddl_command_start
	WHEN TAG IN ('DROP EXTENSION', 'CREATE TRIGGER')
	EXECUTE FUNCTION @extschema@.fence_ddl_guard();
ALTER EVENT TRIGGER fence_drop_guard ENABLE ALWAYS;

CREATE FUNCTION @extschema@.fence_truncate_guard_partitions() RETURNS integer
	AS 'MODULE_PATHNAME' LANGUAGE C;
REVOKE ALL ON FUNCTION @extschema@.fence_truncate_guard_partitions() FROM PUBLIC;
COMMENT ON FUNCTION @extschema@.fence_truncate_guard_partitions() IS 'give every partition of a table with a TRUNCATE guard a clone of it; returns how many were made';
SELECT @extschema@.fence_truncate_guard_partitions();
-- adopting a big table online
--
-- fence_attach_concurrently is fence_attach for a table that must stay
-- writable: it creates the guards in a transaction of their own, under a
-- lock taken with lock_timeout and tried again after a pause up to
-- lock_attempts times, then seeds the marks in batches of batch_rows rows,
-- committing after each (see src/attach_online.c for what is fenced
-- meanwhile).  It refuses to run inside a transaction block.  Like
-- fence_attach, it runs as the caller, who must own the tables and hold
-- EXECUTE on fence_guard().
CREATE PROCEDURE @extschema@.fence_attach_concurrently(tbl regclass, token_column name,
		template text DEFAULT NULL, options text[] DEFAULT '{}',
		batch_rows integer DEFAULT 10000, lock_timeout interval DEFAULT '200ms',
		lock_attempts integer DEFAULT 50)
	AS 'MODULE_PATHNAME' LANGUAGE C;
COMMENT ON PROCEDURE @extschema@.fence_attach_concurrently(regclass, name, text, text[], integer, interval, integer) IS 'guard a table and its children under a short lock, then seed the marks from the rows present in batches, each its own transaction';

-- who reads the marks
--
-- Resource names carry column values (order:{customer_id}), so the marks
-- of every table are not for every role to read.  fence_marks is readable
-- by the database's owner and pg_read_all_stats; fence_table_marks shows
-- any role the marks of the rows it can read of one guarded table (it
-- queries the table as the caller).  fence_mark(resource) still answers
-- everyone for a resource named in full.
REVOKE SELECT ON @extschema@.fence_marks FROM PUBLIC;
GRANT SELECT ON @extschema@.fence_marks TO pg_database_owner, pg_read_all_stats;

CREATE FUNCTION @extschema@.fence_table_marks(tbl regclass,
		OUT resource text, OUT token @extschema@.fence_token)
	RETURNS SETOF record
	AS 'MODULE_PATHNAME' LANGUAGE C STABLE STRICT PARALLEL RESTRICTED;
COMMENT ON FUNCTION @extschema@.fence_table_marks(regclass) IS 'marks of the resources named by the rows of a guarded table that the caller can read';

-- restores by the database's owner
--
-- pg_restore writes the marks table's rows with COPY, which a database
-- owner who did not create the extension could not: INSERT is granted to
-- pg_database_owner, and the ENABLE ALWAYS trigger fence_marks_replicated
-- turns every insert into a raise (a resource without a mark gets the row
-- as given, one with a mark is raised if the row is higher).  No UPDATE,
-- DELETE or TRUNCATE: no way to lower a mark.
GRANT INSERT ON @extschema@.fence_high_water TO pg_database_owner;

-- whether the marks cover the rows
--
-- fence_check_coverage reads every row of each guarded table (of tbl and
-- the tables below it, or of every guarded table) and reports, per table
-- with storage, the resources whose mark is missing or below a token
-- their rows carry; with repair, it raises those marks.  It scans whole
-- tables.  The caller must own each table; EXECUTE is granted to the
-- database's owner only.
CREATE FUNCTION @extschema@.fence_check_coverage(tbl regclass DEFAULT NULL,
		repair boolean DEFAULT false,
		OUT table_name regclass, OUT rows bigint, OUT resources bigint,
		OUT uncovered bigint, OUT repaired bigint)
	RETURNS SETOF record
	AS 'MODULE_PATHNAME' LANGUAGE C VOLATILE PARALLEL UNSAFE;
REVOKE ALL ON FUNCTION @extschema@.fence_check_coverage(regclass, boolean) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION @extschema@.fence_check_coverage(regclass, boolean) TO pg_database_owner;
COMMENT ON FUNCTION @extschema@.fence_check_coverage(regclass, boolean) IS 'per guarded table, the resources whose mark is missing or below a token of their rows (a full scan); repair raises them';

-- leases renewed while their owner works, and who holds what
--
-- fenced_acquire and fenced_acquire_xact gain renew (default false): with
-- the library preloaded, a background worker extends the lease about every
-- third of its ttl while its backend runs a statement, or is idle in a
-- transaction for less than the ttl (src/lease_renewer.c).  A new argument
-- is a new signature, so each function is made again, with the privileges
-- it had (REVOKEd from PUBLIC at creation, granted to the roles that take
-- locks since), carried as for fence_stat_tables_data above, initial
-- privileges included.
DO $$
DECLARE
	f record;
	fn_acl pg_catalog.aclitem[];
	fn_init pg_catalog.aclitem[];
	new_fn pg_catalog.oid;
	a record;
BEGIN
	FOR f IN SELECT * FROM (VALUES
		('fenced_acquire', 'the session'),
		('fenced_acquire_xact', 'the current transaction and released when it ends')) AS v(name, scope)
	LOOP
		SELECT p.proacl INTO fn_acl FROM pg_catalog.pg_proc p
			WHERE p.oid = pg_catalog.format('@extschema@.%I(text, interval, interval)', f.name)::pg_catalog.regprocedure;
		SELECT i.initprivs INTO fn_init FROM pg_catalog.pg_init_privs i
			WHERE i.objoid = pg_catalog.format('@extschema@.%I(text, interval, interval)', f.name)::pg_catalog.regprocedure
				AND i.classoid = 'pg_catalog.pg_proc'::pg_catalog.regclass AND i.objsubid = 0;
		EXECUTE pg_catalog.format('DROP FUNCTION @extschema@.%I(text, interval, interval)', f.name);
		EXECUTE pg_catalog.format('CREATE FUNCTION @extschema@.%I(resource text, ttl interval DEFAULT NULL,
				wait interval DEFAULT NULL, renew boolean DEFAULT false)
			RETURNS @extschema@.fence_token
			AS ''MODULE_PATHNAME'', %L LANGUAGE C VOLATILE PARALLEL UNSAFE', f.name, f.name);
		new_fn := pg_catalog.format('@extschema@.%I(text, interval, interval, boolean)', f.name)::pg_catalog.regprocedure;
		EXECUTE pg_catalog.format('REVOKE ALL ON FUNCTION %s FROM PUBLIC', new_fn::pg_catalog.regprocedure);
		FOR a IN SELECT * FROM pg_catalog.aclexplode(fn_acl) LOOP
			EXECUTE pg_catalog.format('GRANT %s ON FUNCTION %s TO %s%s',
				a.privilege_type, new_fn::pg_catalog.regprocedure,
				CASE WHEN a.grantee = 0 THEN 'PUBLIC' ELSE pg_catalog.quote_ident(pg_catalog.pg_get_userbyid(a.grantee)) END,
				CASE WHEN a.is_grantable THEN ' WITH GRANT OPTION' ELSE '' END);
		END LOOP;
		DELETE FROM pg_catalog.pg_init_privs i
			WHERE i.objsubid = 0 AND i.objoid = new_fn AND i.classoid = 'pg_catalog.pg_proc'::pg_catalog.regclass;
		IF fn_init IS NOT NULL THEN
			INSERT INTO pg_catalog.pg_init_privs (objoid, classoid, objsubid, privtype, initprivs)
				VALUES (new_fn, 'pg_catalog.pg_proc'::pg_catalog.regclass, 0, 'e', fn_init);
		END IF;
		EXECUTE pg_catalog.format('COMMENT ON FUNCTION %s IS %L', new_fn::pg_catalog.regprocedure,
			'take the Redis lock on a resource and a new token, declared for ' || f.scope
			|| '; NULL if still busy after wait; with renew, renewed while the backend works');
	END LOOP;
END $$;

-- fenced_lock_holders: one row per lease of every backend (with the library
-- preloaded; else the calling backend's).  Rows of other roles' backends
-- show only that they exist (every column NULL) to a role without
-- pg_read_all_stats, as in pg_stat_activity.
CREATE FUNCTION @extschema@.fenced_lock_holders_data(OUT pid integer, OUT role name,
		OUT database name, OUT resource text, OUT token @extschema@.fence_token,
		OUT kind text, OUT acquired_at timestamptz, OUT expires_at timestamptz,
		OUT renewing boolean)
	RETURNS SETOF record
	AS 'MODULE_PATHNAME' LANGUAGE C VOLATILE STRICT PARALLEL RESTRICTED;
CREATE VIEW @extschema@.fenced_lock_holders AS
	SELECT h.pid, h.role, h.database, h.resource, h.token, h.kind,
		h.acquired_at, h.expires_at, h.renewing
	FROM @extschema@.fenced_lock_holders_data() AS h;
GRANT SELECT ON @extschema@.fenced_lock_holders TO PUBLIC;
COMMENT ON FUNCTION @extschema@.fenced_lock_holders_data() IS 'the leases of every backend (see fenced_lock_holders)';
COMMENT ON VIEW @extschema@.fenced_lock_holders IS 'one row per Redis lease of every backend (this backend''s without preloading): pid, role, database, resource, token, kind, acquired_at, expires_at, renewing';
