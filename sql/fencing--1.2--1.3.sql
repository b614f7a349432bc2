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
