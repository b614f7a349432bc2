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
