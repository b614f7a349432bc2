/* fencing--1.0--1.1.sql */

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION fencing UPDATE TO '1.1'" to load this file. \quit

-- marks

-- The library reads and writes the marks with heap_* calls directly, so
-- the table must be a heap whatever default_table_access_method said when
-- 1.0 was installed.
ALTER TABLE @extschema@.fence_high_water SET ACCESS METHOD heap;

-- DDL that would unfence a table
--
-- One event trigger, a member of the extension: new inheritance children
-- and partitions get the guards of their fenced ancestors, a detached
-- partition keeps the guards it had, a renamed enum value that a resource
-- template names is refused, and so is DROP EXTENSION fencing CASCADE
-- while tables use the extension (see src/ddl_guard.c).  ENABLE ALWAYS,
-- so that session_replication_role = replica does not switch it off.

CREATE FUNCTION @extschema@.fence_ddl_guard() RETURNS event_trigger
	AS 'MODULE_PATHNAME' LANGUAGE C;
REVOKE ALL ON FUNCTION @extschema@.fence_ddl_guard() FROM PUBLIC;
COMMENT ON FUNCTION @extschema@.fence_ddl_guard() IS 'event trigger fencing new children and detached partitions of fenced tables, refusing DDL that would unfence them';

CREATE EVENT TRIGGER fence_ddl_guard ON ddl_command_end
	WHEN TAG IN ('CREATE TABLE', 'ALTER TABLE', 'ALTER TYPE')
	EXECUTE FUNCTION @extschema@.fence_ddl_guard();
ALTER EVENT TRIGGER fence_ddl_guard ENABLE ALWAYS;
CREATE EVENT TRIGGER fence_drop_guard ON ddl_command_start
	WHEN TAG IN ('DROP EXTENSION')
	EXECUTE FUNCTION @extschema@.fence_ddl_guard();
ALTER EVENT TRIGGER fence_drop_guard ENABLE ALWAYS;

-- adopting an existing table
--
-- fence_attach creates the guard and the TRUNCATE guard on a table and its
-- children and seeds the marks from the rows present; fence_detach drops
-- them (the marks stay).  Both run as the caller, who must own the tables
-- and, to create the guard, hold EXECUTE on fence_guard().

CREATE FUNCTION @extschema@.fence_attach(tbl regclass, token_column name,
		template text DEFAULT NULL, VARIADIC options text[] DEFAULT '{}')
	RETURNS bigint
	AS 'MODULE_PATHNAME' LANGUAGE C VOLATILE PARALLEL UNSAFE;
CREATE FUNCTION @extschema@.fence_detach(tbl regclass)
	RETURNS integer
	AS 'MODULE_PATHNAME' LANGUAGE C VOLATILE STRICT PARALLEL UNSAFE;

COMMENT ON FUNCTION @extschema@.fence_attach(regclass, name, text, text[]) IS 'guard a table and its children, seeding the marks from the rows present; returns the number of resources seeded';
COMMENT ON FUNCTION @extschema@.fence_detach(regclass) IS 'drop the guards of a table and its children; the marks stay';

-- logical replication
--
-- The marks on a subscriber belong to the subscriber.  A FOR ALL TABLES
-- publication publishes this table too: on the subscriber, a replicated
-- mark only raises the subscriber's own (never lowers it, never collides
-- with it, and a mark forgotten on the publisher stays), see src/replica.c.
-- ENABLE ALWAYS, so that it fires in the apply worker.

CREATE FUNCTION @extschema@.fence_marks_replicated() RETURNS trigger
	AS 'MODULE_PATHNAME' LANGUAGE C;
REVOKE ALL ON FUNCTION @extschema@.fence_marks_replicated() FROM PUBLIC;
COMMENT ON FUNCTION @extschema@.fence_marks_replicated() IS 'trigger on the marks table: a mark replicated from a publisher only raises the subscriber''s own';
CREATE TRIGGER fence_marks_replicated BEFORE INSERT OR UPDATE OR DELETE
	ON @extschema@.fence_high_water
	FOR EACH ROW EXECUTE FUNCTION @extschema@.fence_marks_replicated();
ALTER TABLE @extschema@.fence_high_water ENABLE ALWAYS TRIGGER fence_marks_replicated;
