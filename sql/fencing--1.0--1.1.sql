/* fencing--1.0--1.1.sql */

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION fencing UPDATE TO '1.1'" to load this file. \quit

-- marks

-- The library reads and writes the marks with heap_* calls directly, so
-- the table must be a heap whatever default_table_access_method said when
-- 1.0 was installed.
ALTER TABLE @extschema@.fence_high_water SET ACCESS METHOD heap;

-- backups

-- pg_dump dumps the rows of the marks table (pg_extension_config_dump), so
-- whoever dumps the database must be able to read it.  Reading it is
-- granted to the database's owner, whoever that is now or later
-- (pg_database_owner), so that the owner's whole-database dump works
-- without a superuser.  Everyone can read the marks through fence_marks
-- anyway; writing the table stays its owner's alone.
GRANT SELECT ON @extschema@.fence_high_water TO pg_database_owner;
