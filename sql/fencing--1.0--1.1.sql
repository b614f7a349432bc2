/* fencing--1.0--1.1.sql */

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION fencing UPDATE TO '1.1'" to load this file. \quit

-- marks

-- The library reads and writes the marks with heap_* calls directly, so
-- the table must be a heap whatever default_table_access_method said when
-- 1.0 was installed.
ALTER TABLE @extschema@.fence_high_water SET ACCESS METHOD heap;
