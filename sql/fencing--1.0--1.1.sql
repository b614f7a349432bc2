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

-- what is fenced

-- One row per fence_guard() trigger: the table, how the trigger fences it,
-- whether TRUNCATE is refused too, and whether the partitions and
-- inheritance children below the table are fenced the same way (a row
-- trigger is cloned to partitions, but not to inheritance children, and a
-- TRUNCATE trigger to neither).  Reads only the catalogs, which everyone
-- may read.  The trigger arguments are split at their NUL terminators
-- byte by byte, so that any argument text comes back unchanged.
CREATE VIEW @extschema@.fence_guarded_tables AS
WITH RECURSIVE guard AS (
	SELECT t.tgrelid, t.tgname, t.tgtype, t.tgenabled, t.tgparentid, t.tgargs, a.args
	FROM pg_catalog.pg_trigger t,
		LATERAL (
			SELECT pg_catalog.array_agg(pg_catalog.convert_from(
					pg_catalog.substring(t.tgargs, n.pos OPERATOR(pg_catalog.+) 1,
						n.next OPERATOR(pg_catalog.-) n.pos OPERATOR(pg_catalog.-) 1),
					pg_catalog.getdatabaseencoding()) ORDER BY n.pos) AS args
			FROM (SELECT z.pos, pg_catalog.lead(z.pos) OVER (ORDER BY z.pos) AS next
				  FROM (SELECT 0 AS pos
						UNION ALL
						SELECT i FROM pg_catalog.generate_series(1, pg_catalog.length(t.tgargs)) AS i
						WHERE pg_catalog.get_byte(t.tgargs, i OPERATOR(pg_catalog.-) 1) OPERATOR(pg_catalog.=) 0
						) AS z) AS n
			WHERE n.next IS NOT NULL) AS a
	WHERE t.tgfoid OPERATOR(pg_catalog.=) '@extschema@.fence_guard()'::pg_catalog.regprocedure
),
truncate_guarded AS (
	SELECT DISTINCT t.tgrelid
	FROM pg_catalog.pg_trigger t
	WHERE t.tgfoid OPERATOR(pg_catalog.=) '@extschema@.fence_truncate_guard()'::pg_catalog.regprocedure
		AND (t.tgtype OPERATOR(pg_catalog.&) 32::pg_catalog.int2) OPERATOR(pg_catalog.<>) 0::pg_catalog.int2
		AND t.tgenabled OPERATOR(pg_catalog.<>) 'D'::pg_catalog."char"
),
descendant AS (
	SELECT i.inhparent AS ancestor, i.inhrelid AS relid
	FROM pg_catalog.pg_inherits i
	UNION
	SELECT d.ancestor, i.inhrelid
	FROM descendant d JOIN pg_catalog.pg_inherits i ON i.inhparent OPERATOR(pg_catalog.=) d.relid
)
SELECT g.tgrelid::pg_catalog.regclass AS table_name,
	g.tgname AS trigger_name,
	CASE g.tgenabled
		WHEN 'O' THEN 'origin' WHEN 'R' THEN 'replica'
		WHEN 'A' THEN 'always' WHEN 'D' THEN 'disabled'
	END AS enabled,
	(g.tgtype OPERATOR(pg_catalog.&) 67::pg_catalog.int2) OPERATOR(pg_catalog.=) 3::pg_catalog.int2 AS before_row,
	pg_catalog.array_remove(ARRAY[
		CASE WHEN (g.tgtype OPERATOR(pg_catalog.&) 4::pg_catalog.int2) OPERATOR(pg_catalog.<>) 0::pg_catalog.int2 THEN 'INSERT' END,
		CASE WHEN (g.tgtype OPERATOR(pg_catalog.&) 16::pg_catalog.int2) OPERATOR(pg_catalog.<>) 0::pg_catalog.int2 THEN 'UPDATE' END,
		CASE WHEN (g.tgtype OPERATOR(pg_catalog.&) 8::pg_catalog.int2) OPERATOR(pg_catalog.<>) 0::pg_catalog.int2 THEN 'DELETE' END
	], NULL) AS events,
	g.args[1] AS token_column,
	CASE WHEN COALESCE(g.args[2], '') OPERATOR(pg_catalog.=) '' THEN 'row' ELSE 'resource' END AS scope,
	NULLIF(g.args[2], '') AS resource_template,
	COALESCE(g.args[3:], '{}') AS options,
	EXISTS (SELECT FROM truncate_guarded tg WHERE tg.tgrelid OPERATOR(pg_catalog.=) g.tgrelid) AS truncate_guard,
	g.tgparentid OPERATOR(pg_catalog.<>) 0::pg_catalog.oid AS inherited,
	CASE WHEN u.children OPERATOR(pg_catalog.>) 0 THEN u.uncovered IS NULL END AS children_covered,
	u.uncovered AS uncovered_children
FROM guard g,
	LATERAL (
		SELECT pg_catalog.count(*) AS children,
			pg_catalog.array_agg(d.relid::pg_catalog.regclass ORDER BY d.relid::pg_catalog.regclass::pg_catalog.text)
				FILTER (WHERE NOT d.covered) AS uncovered
		FROM (
			SELECT d.relid,
				EXISTS (SELECT FROM guard c
						WHERE c.tgrelid OPERATOR(pg_catalog.=) d.relid
							AND c.tgargs OPERATOR(pg_catalog.=) g.tgargs
							AND c.tgtype OPERATOR(pg_catalog.=) g.tgtype
							AND c.tgenabled OPERATOR(pg_catalog.<>) 'D'::pg_catalog."char")
				AND (NOT EXISTS (SELECT FROM truncate_guarded tg WHERE tg.tgrelid OPERATOR(pg_catalog.=) g.tgrelid)
					 OR EXISTS (SELECT FROM truncate_guarded tg WHERE tg.tgrelid OPERATOR(pg_catalog.=) d.relid)) AS covered
			FROM descendant d
			WHERE d.ancestor OPERATOR(pg_catalog.=) g.tgrelid
		) AS d
	) AS u;
GRANT SELECT ON @extschema@.fence_guarded_tables TO PUBLIC;

COMMENT ON VIEW @extschema@.fence_guarded_tables IS 'every fence_guard() trigger: its table, token column, template, options, TRUNCATE guard, and whether the children below are fenced the same way';

-- retention

-- Forget, in one call, the marks that have not moved for longer than a
-- grace period, optionally only those whose resource matches a LIKE
-- pattern.  A mark another running transaction holds (one that raised it,
-- or checked a write against it and keeps it locked) is skipped, not
-- waited for: SKIP LOCKED takes each mark's row lock or passes it by, and
-- a mark raised meanwhile by a transaction that has committed is no longer
-- idle when its newest version is rechecked.  Each mark is then deleted
-- through fence_forget(), which also clears this transaction's cache of
-- checked marks.  It runs as the extension's owner, who may write the
-- marks table; EXECUTE is revoked from PUBLIC.
CREATE FUNCTION @extschema@.fence_forget_idle(older_than interval, pattern text DEFAULT NULL)
	RETURNS bigint
	LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE SECURITY DEFINER
	SET search_path = pg_catalog, pg_temp
	AS $$
DECLARE
	forgotten bigint := 0;
	idle record;
BEGIN
	IF older_than IS NULL THEN
		RAISE EXCEPTION 'grace period must not be null'
			USING ERRCODE = 'null_value_not_allowed';
	END IF;
	IF older_than <= interval '0' THEN
		RAISE EXCEPTION 'grace period must be positive'
			USING ERRCODE = 'invalid_parameter_value',
				DETAIL = format('The grace period given was %s.', older_than),
				HINT = 'Give a period longer than any lock holder may stay paused, such as ''7 days''.';
	END IF;
	FOR idle IN
		SELECT m.resource
		FROM @extschema@.fence_high_water m
		WHERE m.moved_at < now() - older_than
			AND (pattern IS NULL OR m.resource LIKE pattern)
		FOR UPDATE SKIP LOCKED
	LOOP
		IF @extschema@.fence_forget(idle.resource) THEN
			forgotten := forgotten + 1;
		END IF;
	END LOOP;
	RETURN forgotten;
END
$$;
REVOKE ALL ON FUNCTION @extschema@.fence_forget_idle(interval, text) FROM PUBLIC;

COMMENT ON FUNCTION @extschema@.fence_forget_idle(interval, text) IS 'delete the marks that have not moved for longer than a grace period (optionally only resources LIKE a pattern), skipping any a running transaction holds; returns how many';

COMMENT ON VIEW @extschema@.fence_marks IS 'high-water mark of every resource, and when it was last raised or (to within a minute) written at its token';

-- statistics

-- What the guard trigger did, per guarded table, in the shape of
-- pg_stat_user_tables: cluster-wide when the library is in
-- shared_preload_libraries, else this backend's own (fence_stat_info says
-- which).
CREATE FUNCTION @extschema@.fence_stat_tables_data(OUT relid oid, OUT checked bigint,
		OUT accepted bigint, OUT rejected_stale bigint, OUT rejected_no_token bigint,
		OUT marks_raised bigint)
	RETURNS SETOF record
	AS 'MODULE_PATHNAME' LANGUAGE C STRICT VOLATILE PARALLEL RESTRICTED;
CREATE FUNCTION @extschema@.fence_stat_info_data(OUT mode text, OUT capacity integer,
		OUT tables integer, OUT stats_reset timestamptz)
	RETURNS record
	AS 'MODULE_PATHNAME' LANGUAGE C STRICT VOLATILE PARALLEL RESTRICTED;
CREATE FUNCTION @extschema@.fence_stat_reset() RETURNS void
	AS 'MODULE_PATHNAME' LANGUAGE C VOLATILE PARALLEL UNSAFE;
REVOKE ALL ON FUNCTION @extschema@.fence_stat_reset() FROM PUBLIC;

CREATE VIEW @extschema@.fence_stat_tables AS
	SELECT NULLIF(s.relid, 0::pg_catalog.oid)::pg_catalog.regclass AS table_name,
		s.checked, s.accepted, s.rejected_stale, s.rejected_no_token, s.marks_raised
	FROM @extschema@.fence_stat_tables_data() AS s;
GRANT SELECT ON @extschema@.fence_stat_tables TO PUBLIC;
CREATE VIEW @extschema@.fence_stat_info AS
	SELECT i.mode, i.capacity, i.tables, i.stats_reset
	FROM @extschema@.fence_stat_info_data() AS i;
GRANT SELECT ON @extschema@.fence_stat_info TO PUBLIC;

COMMENT ON FUNCTION @extschema@.fence_stat_tables_data() IS 'counters of the guard trigger per guarded table (see fence_stat_tables)';
COMMENT ON FUNCTION @extschema@.fence_stat_info_data() IS 'where the counters are kept and when they were reset (see fence_stat_info)';
COMMENT ON FUNCTION @extschema@.fence_stat_reset() IS 'set the counters of fence_stat_tables and fence_stat_redis back to zero';
COMMENT ON VIEW @extschema@.fence_stat_tables IS 'per guarded table: rows checked, accepted, rejected with a stale token, rejected without a token, and marks raised';
COMMENT ON VIEW @extschema@.fence_stat_info IS 'whether the counters are cluster-wide (shared) or this backend''s, the shared table''s capacity and use, and the last reset';

-- The Redis functions' counters, one row.
CREATE FUNCTION @extschema@.fence_stat_redis_data(OUT acquired bigint, OUT busy bigint,
		OUT repairs bigint, OUT connects bigint, OUT redirects bigint,
		OUT failovers bigint, OUT errors_unavailable bigint,
		OUT errors_busy bigint, OUT errors_cluster_changing bigint,
		OUT errors_refused bigint, OUT errors_protocol bigint,
		OUT errors_not_replicated bigint, OUT acquire_p50_ms double precision,
		OUT acquire_p99_ms double precision)
	RETURNS record
	AS 'MODULE_PATHNAME' LANGUAGE C STRICT VOLATILE PARALLEL RESTRICTED;
CREATE VIEW @extschema@.fence_stat_redis AS
	SELECT r.acquired, r.busy, r.repairs, r.connects, r.redirects, r.failovers,
		r.errors_unavailable, r.errors_busy,
		r.errors_cluster_changing, r.errors_refused, r.errors_protocol,
		r.errors_not_replicated, r.acquire_p50_ms, r.acquire_p99_ms
	FROM @extschema@.fence_stat_redis_data() AS r;
GRANT SELECT ON @extschema@.fence_stat_redis TO PUBLIC;

COMMENT ON FUNCTION @extschema@.fence_stat_redis_data() IS 'counters of the Redis functions (see fence_stat_redis)';
COMMENT ON VIEW @extschema@.fence_stat_redis IS 'locks taken and given up as busy, token counters repaired, connections made, Cluster redirects followed, moves to a new Sentinel primary, errors by SQLSTATE (TF101 to TF106) of the Redis functions, and how long an acquisition took (median and 99th percentile)';

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

-- transaction leases
--
-- fenced_acquire_xact is fenced_acquire for one transaction (the
-- pg_advisory_xact_lock convention): the token is declared for the
-- transaction only, and the Redis lock is given back when it ends, commit
-- or abort, so that a pooler in transaction mode hands neither to the next
-- client.  Revoked from PUBLIC like the other Redis functions; grant it to
-- the roles that take locks.

CREATE FUNCTION @extschema@.fenced_acquire_xact(resource text, ttl interval DEFAULT NULL, wait interval DEFAULT NULL)
	RETURNS @extschema@.fence_token
	AS 'MODULE_PATHNAME' LANGUAGE C VOLATILE PARALLEL UNSAFE;
REVOKE ALL ON FUNCTION @extschema@.fenced_acquire_xact(text, interval, interval) FROM PUBLIC;
COMMENT ON FUNCTION @extschema@.fenced_acquire_xact(text, interval, interval) IS 'take the Redis lock on a resource and a new token, declared for the current transaction and released when it ends; NULL if still busy after wait';
