/* fencing--1.2--1.3.sql */

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION fencing UPDATE TO '1.3'" to load this file. \quit

-- issue 37: operations

-- Forget the marks that no guarded table of the database could write: those
-- of dropped tables (and of resources only fence_advance or an acquisition
-- raised).  A resource is kept if any fence_guard() trigger's template,
-- enabled or not, a partition's clone included, could produce it: each
-- template is read as a regular expression in which its text is literal
-- ("{{" and "}}" one brace) and each placeholder matches any text, more
-- than its column could give, so that nothing a live table writes is ever
-- taken; a template that does not parse keeps every mark.  Like
-- fence_forget_idle, only marks idle for the grace period, skipping those
-- a running transaction holds, each deleted through fence_forget().
CREATE FUNCTION @extschema@.fence_forget_unguarded(older_than interval, pattern text DEFAULT NULL)
	RETURNS bigint
	LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE SECURITY DEFINER
	SET search_path = pg_catalog, pg_temp
	AS $$
DECLARE
	forgotten bigint := 0;
	kept text[] := '{}';
	tmpl text;
	re text;
	c text;
	i int;
	j int;
	doomed record;
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
	FOR tmpl IN
		SELECT DISTINCT g.resource_template FROM @extschema@.fence_guarded_tables g
		WHERE g.resource_template IS NOT NULL
	LOOP
		re := '^';
		i := 1;
		WHILE re IS NOT NULL AND i <= length(tmpl) LOOP
			c := substr(tmpl, i, 1);
			IF c IN ('{', '}') AND substr(tmpl, i + 1, 1) = c THEN
				re := re || '\' || c;
				i := i + 2;
			ELSIF c = '{' THEN
				j := strpos(substr(tmpl, i + 1), '}');
				IF j <= 1 THEN
					re := NULL;
				ELSE
					re := re || '.*';
					i := i + j + 1;
				END IF;
			ELSIF c = '}' THEN
				re := NULL;
			ELSE
				re := re || CASE WHEN strpos('.^$*+?()[]|\', c) > 0 THEN '\' || c ELSE c END;
				i := i + 1;
			END IF;
		END LOOP;
		kept := kept || coalesce(re || '$', '');
	END LOOP;
	FOR doomed IN
		SELECT m.resource
		FROM @extschema@.fence_high_water m
		WHERE m.moved_at < now() - older_than
			AND (pattern IS NULL OR m.resource LIKE pattern)
			AND NOT m.resource ~ ANY (kept)
		FOR UPDATE SKIP LOCKED
	LOOP
		IF @extschema@.fence_forget(doomed.resource) THEN
			forgotten := forgotten + 1;
		END IF;
	END LOOP;
	RETURN forgotten;
END
$$;
REVOKE ALL ON FUNCTION @extschema@.fence_forget_unguarded(interval, text) FROM PUBLIC;

COMMENT ON FUNCTION @extschema@.fence_forget_unguarded(interval, text) IS 'delete the marks that no guarded table''s resource template could produce (those of dropped tables) and that have not moved for longer than a grace period, optionally only resources LIKE a pattern, skipping any a running transaction holds; returns how many';

-- progress of fence_attach, fence_attach_concurrently and
-- fence_check_coverage, one row per run, from a table of slots in shared
-- memory (the library preloaded; otherwise empty).  A run of another role
-- shows its pid, database, role and command only, unless the reader has the
-- privileges of that role or of pg_read_all_stats.
CREATE FUNCTION @extschema@.fence_progress_data(OUT pid integer, OUT datid oid, OUT userid oid,
		OUT command text, OUT phase text, OUT relid oid, OUT started timestamptz,
		OUT table_started timestamptz, OUT tables_done bigint, OUT pages_done bigint,
		OUT pages_total bigint, OUT rows_done bigint, OUT rows_estimate bigint,
		OUT batches bigint)
	RETURNS SETOF record
	AS 'MODULE_PATHNAME' LANGUAGE C STRICT VOLATILE PARALLEL RESTRICTED;

CREATE VIEW @extschema@.fence_progress AS
	SELECT p.pid, d.datname, p.userid::pg_catalog.regrole AS role, p.command, p.phase,
		CASE WHEN p.datid OPERATOR(pg_catalog.=) (SELECT o.oid FROM pg_catalog.pg_database o
				WHERE o.datname OPERATOR(pg_catalog.=) pg_catalog.current_database())
			THEN p.relid::pg_catalog.regclass END AS table_name,
		p.relid, p.tables_done, p.pages_done, p.pages_total,
		pg_catalog.round(100.0 OPERATOR(pg_catalog.*) p.pages_done OPERATOR(pg_catalog./)
			NULLIF(p.pages_total, 0), 1) AS percent,
		p.rows_done, p.rows_estimate, p.batches,
		pg_catalog.round((p.rows_done OPERATOR(pg_catalog./) NULLIF(pg_catalog.date_part('epoch',
			pg_catalog.clock_timestamp() OPERATOR(pg_catalog.-) p.table_started), 0))::pg_catalog.numeric, 1)
			AS rows_per_second,
		CASE WHEN p.pages_done OPERATOR(pg_catalog.>) 0 AND p.pages_done OPERATOR(pg_catalog.<) p.pages_total
			THEN pg_catalog.date_trunc('second', (pg_catalog.clock_timestamp() OPERATOR(pg_catalog.-) p.table_started)
				OPERATOR(pg_catalog.*) ((p.pages_total OPERATOR(pg_catalog.-) p.pages_done)::pg_catalog.float8
					OPERATOR(pg_catalog./) p.pages_done::pg_catalog.float8))
		END AS time_left,
		p.started, p.table_started
	FROM @extschema@.fence_progress_data() AS p
		LEFT JOIN pg_catalog.pg_database d ON d.oid OPERATOR(pg_catalog.=) p.datid;
GRANT SELECT ON @extschema@.fence_progress TO PUBLIC;

COMMENT ON FUNCTION @extschema@.fence_progress_data() IS 'progress of the running fence_attach, fence_attach_concurrently and fence_check_coverage calls (see fence_progress)';
COMMENT ON VIEW @extschema@.fence_progress IS 'progress of the running fence_attach, fence_attach_concurrently and fence_check_coverage calls: table, phase, pages and rows read, batches, rate, time left (with the library preloaded)';

-- the health of each Redis target (the server, the Sentinels' primary or the
-- Cluster the session's settings name): when an acquisition was last
-- answered, and when the Redis functions last failed, with the SQLSTATE;
-- kept with the other counters (cluster-wide when preloaded), from zero at
-- each server start.  Readable by everyone, as fence_stat_redis.
CREATE FUNCTION @extschema@.fence_stat_redis_targets_data(OUT target text,
		OUT last_success timestamptz, OUT last_error timestamptz, OUT last_error_sqlstate text)
	RETURNS SETOF record
	AS 'MODULE_PATHNAME' LANGUAGE C STRICT VOLATILE PARALLEL RESTRICTED;

CREATE VIEW @extschema@.fence_stat_redis_targets AS
	SELECT t.target, t.last_success, t.last_error, t.last_error_sqlstate
	FROM @extschema@.fence_stat_redis_targets_data() AS t;
GRANT SELECT ON @extschema@.fence_stat_redis_targets TO PUBLIC;

COMMENT ON FUNCTION @extschema@.fence_stat_redis_targets_data() IS 'per Redis target, the times of the last answered acquisition and of the last error (see fence_stat_redis_targets)';
COMMENT ON VIEW @extschema@.fence_stat_redis_targets IS 'per Redis target: when an acquisition was last answered, when the Redis functions last failed and with which SQLSTATE';

-- the resources whose writes the guard rejected, per database, role and
-- resource, in bounded memory (cluster-wide when preloaded): every role
-- sees the entries of its own rejected writes, members of
-- pg_read_all_stats those of every role (resource names carry column
-- values)
CREATE FUNCTION @extschema@.fence_stat_resources_data(OUT datid oid, OUT userid oid,
		OUT resource text, OUT rejected_stale bigint, OUT rejected_no_token bigint,
		OUT first_rejected_at timestamptz, OUT last_rejected_at timestamptz)
	RETURNS SETOF record
	AS 'MODULE_PATHNAME' LANGUAGE C STRICT VOLATILE PARALLEL RESTRICTED;

CREATE VIEW @extschema@.fence_stat_resources AS
	SELECT d.datname, r.userid::pg_catalog.regrole AS role, r.resource,
		r.rejected_stale, r.rejected_no_token,
		r.rejected_stale OPERATOR(pg_catalog.+) r.rejected_no_token AS rejected,
		r.first_rejected_at, r.last_rejected_at
	FROM @extschema@.fence_stat_resources_data() AS r
		LEFT JOIN pg_catalog.pg_database d ON d.oid OPERATOR(pg_catalog.=) r.datid;
GRANT SELECT ON @extschema@.fence_stat_resources TO PUBLIC;

COMMENT ON FUNCTION @extschema@.fence_stat_resources_data() IS 'rejected writes per database, role and resource, in bounded memory (see fence_stat_resources)';
COMMENT ON VIEW @extschema@.fence_stat_resources IS 'the resources with the most and the latest rejected writes (stale or without a token), per database and role: one''s own, or all with pg_read_all_stats';
