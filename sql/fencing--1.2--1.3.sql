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


-- ---------------------------------------------------------------------
-- Issue 32 (guard32): ways around the guard, round 5
-- ---------------------------------------------------------------------

-- Trigger shapes the guard cannot honour: a fence_guard() trigger with an
-- UPDATE OF column list or a WHEN condition does not fire for every row
-- it must check.  The event trigger refuses them at CREATE [OR REPLACE]
-- TRIGGER and the guard when it fires (TF010); the view reports them as
-- not fencing: before_row is true only for BEFORE ... FOR EACH ROW with
-- neither (tgattr empty, tgqual null).
CREATE OR REPLACE VIEW @extschema@.fence_guarded_tables AS
WITH RECURSIVE guard AS (
	SELECT t.tgrelid, t.tgname, t.tgtype, t.tgenabled, t.tgparentid, t.tgargs, a.args,
		t.tgattr, t.tgqual
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
	(g.tgtype OPERATOR(pg_catalog.&) 67::pg_catalog.int2) OPERATOR(pg_catalog.=) 3::pg_catalog.int2
		AND pg_catalog.cardinality(g.tgattr::pg_catalog.int2[]) OPERATOR(pg_catalog.=) 0
		AND g.tgqual IS NULL AS before_row,
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

-- The marks table is not truncated (TF012).  A TRUNCATE fires no row
-- trigger, so it would drop every mark, the subscriber's own included: a
-- FOR ALL TABLES publication publishes TRUNCATE.  The trigger is refused
-- where the TRUNCATE is issued, not where it is applied: enabled ALWAYS it
-- would fire in a subscriber's apply worker, whose every retry would fail
-- (doc/guard.md "Logical replication" says what a subscriber does with a
-- TRUNCATE from an older publisher).
CREATE FUNCTION @extschema@.fence_marks_truncate() RETURNS trigger
	LANGUAGE plpgsql
	SET search_path = pg_catalog, pg_temp
	AS $$
BEGIN
	RAISE EXCEPTION 'cannot truncate the marks table %', TG_TABLE_NAME
		USING ERRCODE = 'TF012',
			DETAIL = 'TRUNCATE would forget every high-water mark, on this server and on the subscribers of a publication of the table, and every resource would accept any token.',
			HINT = 'Forget the marks of retired resources with fence_forget() or fence_forget_idle().';
END
$$;
REVOKE ALL ON FUNCTION @extschema@.fence_marks_truncate() FROM PUBLIC;
COMMENT ON FUNCTION @extschema@.fence_marks_truncate() IS 'trigger on the marks table refusing TRUNCATE';
CREATE TRIGGER fence_marks_truncate BEFORE TRUNCATE ON @extschema@.fence_high_water
	FOR EACH STATEMENT EXECUTE FUNCTION @extschema@.fence_marks_truncate();

-- retention counts from the commit of a mark's version
--
-- moved_at is the start of the transaction that raised a mark: one that
-- ran longer than the grace period left a mark that looked idle the
-- moment it committed.  A mark is now forgotten only when its version's
-- commit is older than the grace: by pg_xact_commit_timestamp(xmin) where
-- track_commit_timestamp is on and knows the transaction; otherwise, when
-- fence_forget_idle has seen the same version (xmin) for the whole grace,
-- across calls.  The versions seen are kept in fence_forget_candidates,
-- UNLOGGED: a publication of all tables leaves it out (the subscriber
-- judges its own marks), and a crash that empties it only delays
-- forgetting.  moved_at still selects the candidates: a commit is never
-- older than its transaction's start.
CREATE UNLOGGED TABLE @extschema@.fence_forget_candidates (
	resource text COLLATE "C" PRIMARY KEY,
	version  xid NOT NULL,
	seen_at  timestamptz NOT NULL
);
REVOKE ALL ON @extschema@.fence_forget_candidates FROM PUBLIC;
COMMENT ON TABLE @extschema@.fence_forget_candidates IS 'marks fence_forget_idle() has seen idle, by version, when track_commit_timestamp cannot date their commit';

CREATE OR REPLACE FUNCTION @extschema@.fence_forget_idle(older_than interval, pattern text DEFAULT NULL)
	RETURNS bigint
	LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE SECURITY DEFINER
	SET search_path = pg_catalog, pg_temp
	AS $$
DECLARE
	forgotten bigint := 0;
	by_commit boolean := current_setting('track_commit_timestamp')::boolean;
	idle record;
	committed timestamptz;
	seen record;
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
	-- versions seen of marks forgotten since
	DELETE FROM @extschema@.fence_forget_candidates c
	WHERE NOT EXISTS (SELECT FROM @extschema@.fence_high_water m
					  WHERE m.resource = c.resource);
	FOR idle IN
		SELECT m.resource, m.xmin AS version
		FROM @extschema@.fence_high_water m
		WHERE m.moved_at < now() - older_than
			AND (pattern IS NULL OR m.resource LIKE pattern)
		FOR UPDATE SKIP LOCKED
	LOOP
		committed := NULL;
		IF by_commit THEN
			committed := pg_xact_commit_timestamp(idle.version);
		END IF;
		IF committed IS NULL THEN
			SELECT c.version, c.seen_at INTO seen
			FROM @extschema@.fence_forget_candidates c
			WHERE c.resource = idle.resource;
			IF NOT FOUND OR seen.version <> idle.version THEN
				INSERT INTO @extschema@.fence_forget_candidates AS c
				VALUES (idle.resource, idle.version, now())
				ON CONFLICT (resource) DO UPDATE
					SET version = excluded.version, seen_at = excluded.seen_at;
				CONTINUE;
			END IF;
			committed := seen.seen_at;
		END IF;
		IF committed < now() - older_than THEN
			IF @extschema@.fence_forget(idle.resource) THEN
				forgotten := forgotten + 1;
			END IF;
			DELETE FROM @extschema@.fence_forget_candidates c
			WHERE c.resource = idle.resource;
		END IF;
	END LOOP;
	RETURN forgotten;
END
$$;
COMMENT ON FUNCTION @extschema@.fence_forget_idle(interval, text) IS 'delete the marks whose last move committed longer ago than a grace period (optionally only resources LIKE a pattern), skipping any a running transaction holds; returns how many';

-- Foreign tables are written on their own servers, outside any guard of
-- this database: the event trigger now also runs at CREATE FOREIGN TABLE
-- (... PARTITION OF or INHERITS a guarded table: refused, TF013) and ALTER
-- FOREIGN TABLE (... INHERIT one: refused).  It also refuses, at CREATE
-- [OR REPLACE] TRIGGER, a guard with an UPDATE OF list or a WHEN condition
-- (TF010) or one replacing a guard of another resource template, and
-- ALTER COLUMN ... TYPE of a placeholder column (TF014).
DROP EVENT TRIGGER fence_ddl_guard;
CREATE EVENT TRIGGER fence_ddl_guard ON ddl_command_end
	WHEN TAG IN ('CREATE TABLE', 'ALTER TABLE', 'ALTER TYPE', 'CREATE TRIGGER',
				 'CREATE FOREIGN TABLE', 'ALTER FOREIGN TABLE')
	EXECUTE FUNCTION @extschema@.fence_ddl_guard();
ALTER EVENT TRIGGER fence_ddl_guard ENABLE ALWAYS;


-- The privileges of a function or view made again (new arguments, new
-- columns): this script's helper, used by the sections of issues 38/36
-- and 31 and dropped at its end.  acl and init are the ACL and the initial
-- privileges the old object had; a NULL ACL is the default (EXECUTE to
-- PUBLIC for a function, the owner's alone for a view), which the new
-- object has already.
CREATE FUNCTION @extschema@.fence_upgrade_carry_privileges(classid pg_catalog.regclass,
		objid pg_catalog.oid, acl pg_catalog.aclitem[], init pg_catalog.aclitem[])
	RETURNS void LANGUAGE plpgsql
	SET search_path = pg_catalog, pg_temp
	AS $$
DECLARE
	target text;
	a record;
BEGIN
	IF classid = 'pg_catalog.pg_proc'::pg_catalog.regclass THEN
		target := 'FUNCTION ' || objid::pg_catalog.regprocedure::text;
	ELSE
		target := 'TABLE ' || objid::pg_catalog.regclass::text;
	END IF;
	IF acl IS NOT NULL THEN
		EXECUTE pg_catalog.format('REVOKE ALL ON %s FROM PUBLIC', target);
		FOR a IN SELECT * FROM pg_catalog.aclexplode(acl) LOOP
			EXECUTE pg_catalog.format('GRANT %s ON %s TO %s%s',
				a.privilege_type, target,
				CASE WHEN a.grantee = 0 THEN 'PUBLIC' ELSE pg_catalog.quote_ident(pg_catalog.pg_get_userbyid(a.grantee)) END,
				CASE WHEN a.is_grantable THEN ' WITH GRANT OPTION' ELSE '' END);
		END LOOP;
	END IF;
	DELETE FROM pg_catalog.pg_init_privs i
		WHERE i.objsubid = 0 AND i.objoid = objid AND i.classoid = classid;
	IF init IS NOT NULL THEN
		INSERT INTO pg_catalog.pg_init_privs (objoid, classoid, objsubid, privtype, initprivs)
			VALUES (objid, classid, 0, 'e', init);
	END IF;
END $$;

-- issue 38: a longest hold per acquisition
--
-- fenced_acquire and fenced_acquire_xact gain max_hold (default NULL:
-- fencing.lease_max_hold): a lease taken with renew => true is renewed no
-- further than max_hold after its acquisition (src/lease_renewer.c).  A
-- new argument is a new signature, so each function is made again, with
-- the privileges it had and its initial privileges, as
-- fencing--1.1--1.2.sql did when they gained renew.
--
-- issue 36 adds fair (default false: FIFO among fair waiters, through a
-- queue kept in Redis beside the lock, src/lock/lock_scripts.h) and
-- on_lost (default 'ignore'; 'error': the next statement once the lease is
-- lost fails with TF131, src/lock/lock_lost.c) to the same new signature,
-- 1.3 being the release that brings max_hold.
DO $$
DECLARE
	f record;
	fn_acl pg_catalog.aclitem[];
	fn_init pg_catalog.aclitem[];
	new_fn pg_catalog.oid;
BEGIN
	FOR f IN SELECT * FROM (VALUES
		('fenced_acquire', 'the session'),
		('fenced_acquire_xact', 'the current transaction and released when it ends')) AS v(name, scope)
	LOOP
		SELECT p.proacl INTO fn_acl FROM pg_catalog.pg_proc p
			WHERE p.oid = pg_catalog.format('@extschema@.%I(text, interval, interval, boolean)', f.name)::pg_catalog.regprocedure;
		SELECT i.initprivs INTO fn_init FROM pg_catalog.pg_init_privs i
			WHERE i.objoid = pg_catalog.format('@extschema@.%I(text, interval, interval, boolean)', f.name)::pg_catalog.regprocedure
				AND i.classoid = 'pg_catalog.pg_proc'::pg_catalog.regclass AND i.objsubid = 0;
		EXECUTE pg_catalog.format('DROP FUNCTION @extschema@.%I(text, interval, interval, boolean)', f.name);
		EXECUTE pg_catalog.format('CREATE FUNCTION @extschema@.%I(resource text, ttl interval DEFAULT NULL,
				wait interval DEFAULT NULL, renew boolean DEFAULT false,
				max_hold interval DEFAULT NULL, fair boolean DEFAULT false,
				on_lost text DEFAULT ''ignore'')
			RETURNS @extschema@.fence_token
			AS ''MODULE_PATHNAME'', %L LANGUAGE C VOLATILE PARALLEL UNSAFE', f.name, f.name);
		new_fn := pg_catalog.format('@extschema@.%I(text, interval, interval, boolean, interval, boolean, text)', f.name)::pg_catalog.regprocedure;
		PERFORM @extschema@.fence_upgrade_carry_privileges('pg_catalog.pg_proc', new_fn, fn_acl, fn_init);
		EXECUTE pg_catalog.format('COMMENT ON FUNCTION %s IS %L', new_fn::pg_catalog.regprocedure,
			'take the Redis lock on a resource and a new token, declared for ' || f.scope
			|| '; NULL if still busy after wait; with renew, renewed while the backend works, up to max_hold; with fair, in turn among fair waiters; with on_lost => ''error'', the next statement once it is lost fails');
	END LOOP;
END $$;


-- issue 36: the locks of several resources at once
--
-- fenced_acquire_xact(resources text[], ...) takes the locks of a set of
-- resources for the current transaction, in the byte order of their names,
-- all or none (src/lock/lock_multi.c); their tokens in the order given.  A
-- quoted literal still resolves to the single form (an unknown literal
-- prefers text, the string category, over text[]): the set is passed as an
-- ARRAY[...] or a text[] value.  Like the single form, EXECUTE is the
-- roles' the DBA grants it to, not PUBLIC's.
CREATE FUNCTION @extschema@.fenced_acquire_xact(resources text[], ttl interval DEFAULT NULL,
		wait interval DEFAULT NULL, renew boolean DEFAULT false,
		max_hold interval DEFAULT NULL, fair boolean DEFAULT false,
		on_lost text DEFAULT 'ignore')
	RETURNS @extschema@.fence_token[]
	AS 'MODULE_PATHNAME', 'fenced_acquire_xact_multi' LANGUAGE C VOLATILE PARALLEL UNSAFE;
REVOKE ALL ON FUNCTION @extschema@.fenced_acquire_xact(text[], interval, interval, boolean, interval, boolean, text) FROM PUBLIC;
COMMENT ON FUNCTION @extschema@.fenced_acquire_xact(text[], interval, interval, boolean, interval, boolean, text) IS 'take the Redis locks of several resources for the current transaction, in byte order of their names, all or none; their new tokens in the order given, declared for the transaction; NULL, holding none, if one is still busy after wait; fair and on_lost as for the single form';

-- fenced_lock_valid_until(resource): until when this session holds the
-- lock of resource, by this server's clock, without a round trip to Redis
-- (src/lock/lock_valid.c); NULL if not held or run out.  It reads only the
-- caller's own leases and reaches no server, so PUBLIC may call it.
CREATE FUNCTION @extschema@.fenced_lock_valid_until(resource text)
	RETURNS timestamptz
	AS 'MODULE_PATHNAME', 'fenced_lock_valid_until' LANGUAGE C VOLATILE STRICT PARALLEL RESTRICTED;
COMMENT ON FUNCTION @extschema@.fenced_lock_valid_until(text) IS 'until when this session holds the Redis lock of a resource, by this server''s clock and without asking Redis; NULL if not held or run out';

-- fenced_lock_holders gains lost: true once the renewer found the lease's
-- lock held by another owner; and source: 'redis' for the leases of
-- fenced_acquire*, 'fence_use' for those declared with fence_use(...,
-- lease => ...), now listed too.  The function behind it gains the
-- columns, so both are made again; the view keeps the privileges it had (SELECT to
-- PUBLIC when created) and its initial privileges.
DO $$
DECLARE
	view_acl pg_catalog.aclitem[];
	view_init pg_catalog.aclitem[];
BEGIN
	SELECT c.relacl INTO view_acl FROM pg_catalog.pg_class c
		WHERE c.oid = '@extschema@.fenced_lock_holders'::pg_catalog.regclass;
	SELECT i.initprivs INTO view_init FROM pg_catalog.pg_init_privs i
		WHERE i.objoid = '@extschema@.fenced_lock_holders'::pg_catalog.regclass
			AND i.classoid = 'pg_catalog.pg_class'::pg_catalog.regclass AND i.objsubid = 0;
	DROP VIEW @extschema@.fenced_lock_holders;
	DROP FUNCTION @extschema@.fenced_lock_holders_data();
	CREATE FUNCTION @extschema@.fenced_lock_holders_data(OUT pid integer, OUT role name,
			OUT database name, OUT resource text, OUT token @extschema@.fence_token,
			OUT kind text, OUT acquired_at timestamptz, OUT expires_at timestamptz,
			OUT renewing boolean, OUT lost boolean, OUT source text)
		RETURNS SETOF record
		AS 'MODULE_PATHNAME' LANGUAGE C VOLATILE STRICT PARALLEL RESTRICTED;
	COMMENT ON FUNCTION @extschema@.fenced_lock_holders_data() IS 'the leases of every backend (see fenced_lock_holders)';
	CREATE VIEW @extschema@.fenced_lock_holders AS
		SELECT h.pid, h.role, h.database, h.resource, h.token, h.kind,
			h.acquired_at, h.expires_at, h.renewing, h.lost, h.source
		FROM @extschema@.fenced_lock_holders_data() AS h;
	COMMENT ON VIEW @extschema@.fenced_lock_holders IS 'one row per lease of every backend, of fenced_acquire* (source redis) or declared with fence_use(..., lease => ...) (source fence_use); without preloading, this backend''s Redis leases: pid, role, database, resource, token, kind, acquired_at, expires_at, renewing, lost, source';
	PERFORM @extschema@.fence_upgrade_carry_privileges('pg_catalog.pg_class',
		'@extschema@.fenced_lock_holders'::pg_catalog.regclass, view_acl, view_init);
END $$;


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


-- ---------------------------------------------------------------------
-- Issue 31, part 5: what set a mark's token, in the mark
-- ---------------------------------------------------------------------

-- set_by records what set the token of each mark: 'a' an acquisition
-- (fenced_acquire*), 'v' fence_advance, 'w' a guarded write.  A strict
-- guard rejects an equal token only after a write: it accepts the first
-- write at a token an acquisition or fence_advance set, from any session
-- (a pool moves the holder between backends) and after a restart, and
-- that write records itself ('w').  Marks from before the update read as
-- written ('w'), as 1.2 treated them.  A constant default: no rewrite.
ALTER TABLE @extschema@.fence_high_water
	ADD COLUMN set_by "char" NOT NULL DEFAULT 'w'
	CHECK (set_by IN ('a', 'v', 'w'));
COMMENT ON COLUMN @extschema@.fence_high_water.set_by IS 'what set the token: a = an acquisition, v = fence_advance, w = a guarded write (strict mode rejects an equal token only after a write)';


-- ---------------------------------------------------------------------
-- Issue 31, part 4: leases for every token source
-- ---------------------------------------------------------------------

-- fence_use gains lease (default NULL: none): the declared token's lease
-- ends that long after the call by this server's clock, and a newer
-- holder of the resource whose write waits for this holder's transaction
-- ends it once the lease has ended, as for fenced_acquire's leases
-- (src/lock/lease_use.c, src/lock/lease_takeover.c).  A new argument is a
-- new signature, so the function is made again, with the privileges it
-- had (EXECUTE to PUBLIC when created: a NULL ACL, kept as it is) and its
-- initial privileges, as the section of issue 38 above does.
DO $$
DECLARE
	fn_acl pg_catalog.aclitem[];
	fn_init pg_catalog.aclitem[];
	new_fn pg_catalog.oid;
BEGIN
	SELECT p.proacl INTO fn_acl FROM pg_catalog.pg_proc p
		WHERE p.oid = '@extschema@.fence_use(text, @extschema@.fence_token, boolean)'::pg_catalog.regprocedure;
	SELECT i.initprivs INTO fn_init FROM pg_catalog.pg_init_privs i
		WHERE i.objoid = '@extschema@.fence_use(text, @extschema@.fence_token, boolean)'::pg_catalog.regprocedure
			AND i.classoid = 'pg_catalog.pg_proc'::pg_catalog.regclass AND i.objsubid = 0;
	DROP FUNCTION @extschema@.fence_use(text, @extschema@.fence_token, boolean);
	CREATE FUNCTION @extschema@.fence_use(resource text, token @extschema@.fence_token,
			is_local boolean DEFAULT false, lease interval DEFAULT NULL)
		RETURNS void
		AS 'MODULE_PATHNAME', 'fence_use_lease' LANGUAGE C VOLATILE PARALLEL UNSAFE;
	new_fn := '@extschema@.fence_use(text, @extschema@.fence_token, boolean, interval)'::pg_catalog.regprocedure;
	PERFORM @extschema@.fence_upgrade_carry_privileges('pg_catalog.pg_proc', new_fn, fn_acl, fn_init);
	COMMENT ON FUNCTION @extschema@.fence_use(text, @extschema@.fence_token, boolean, interval) IS 'declare the token this session (or transaction) writes a resource with; with lease, the holder''s lease ends that long after the call, and a newer holder waiting for its transaction then ends it';
END $$;

DROP FUNCTION @extschema@.fence_upgrade_carry_privileges(pg_catalog.regclass, pg_catalog.oid, pg_catalog.aclitem[], pg_catalog.aclitem[]);
