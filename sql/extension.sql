-- the extension as a whole: schema safety, privileges, drop and re-create

-- every object lives in the extension's schema and belongs to the extension
SELECT count(*) > 0 AS has_members,
	bool_and(pg_describe_object(classid, objid, objsubid) IS NOT NULL) AS all_described
FROM pg_depend
WHERE refclassid = 'pg_extension'::regclass
	AND refobjid = (SELECT oid FROM pg_extension WHERE extname = 'fencing')
	AND deptype = 'e';
SELECT extname, extversion, extrelocatable, nspname
FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace
WHERE extname = 'fencing';

-- every function of the extension is documented by a comment
SELECT p.oid::regprocedure AS undocumented
FROM pg_proc p
	JOIN pg_depend d ON d.classid = 'pg_proc'::regclass AND d.objid = p.oid
WHERE d.refclassid = 'pg_extension'::regclass AND d.deptype = 'e'
	AND d.refobjid = (SELECT oid FROM pg_extension WHERE extname = 'fencing')
	AND obj_description(p.oid, 'pg_proc') IS NULL
ORDER BY 1::text;

-- it cannot be moved, since its objects refer to each other by schema
CREATE SCHEMA elsewhere;
ALTER EXTENSION fencing SET SCHEMA elsewhere;

-- dropping it takes the type's operators out of the integer families again
SET client_min_messages = warning;
DROP EXTENSION fencing CASCADE;
RESET client_min_messages;
SELECT count(*) AS leftover_family_members
FROM pg_amop o JOIN pg_opfamily f ON f.oid = o.amopfamily
WHERE f.opfname = 'integer_ops'
	AND o.amoplefttype NOT IN ('int2'::regtype, 'int4'::regtype, 'int8'::regtype);
SELECT count(*) AS integer_ops_btree_operators
FROM pg_amop o JOIN pg_opfamily f ON f.oid = o.amopfamily
	JOIN pg_am a ON a.oid = f.opfmethod
WHERE f.opfname = 'integer_ops' AND a.amname = 'btree';

-- it installs into a schema of the user's choice, and works there when that
-- schema is not on the search path
CREATE EXTENSION fencing SCHEMA elsewhere;
SELECT '0x10'::elsewhere.fence_token;
SELECT '5'::elsewhere.fence_token OPERATOR(elsewhere.<) 6;
SET client_min_messages = warning;
DROP EXTENSION fencing;
RESET client_min_messages;
DROP SCHEMA elsewhere;

-- back to the default for the tests that follow
CREATE EXTENSION fencing;
