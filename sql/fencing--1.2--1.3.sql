/* fencing--1.2--1.3.sql */

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION fencing UPDATE TO '1.3'" to load this file. \quit

-- issue 33: marks raised in memory

-- A transaction writes each mark at most twice, its first raise and its
-- last (at commit); the raises in between are kept in memory.  The view
-- shows a mark as the reading transaction holds it, those raises
-- included; the table itself shows the version written.
CREATE FUNCTION @extschema@.fence_mark_held(resource text, stored @extschema@.fence_token)
	RETURNS @extschema@.fence_token
	AS 'MODULE_PATHNAME' LANGUAGE C STABLE STRICT PARALLEL RESTRICTED;
COMMENT ON FUNCTION @extschema@.fence_mark_held(text, @extschema@.fence_token) IS 'the mark of a resource whose row holds stored, as the calling transaction holds it';
CREATE OR REPLACE VIEW @extschema@.fence_marks AS
	SELECT resource, @extschema@.fence_mark_held(resource, token) AS token, moved_at
	FROM @extschema@.fence_high_water;
