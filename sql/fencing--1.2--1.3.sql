/* fencing--1.2--1.3.sql */

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION fencing UPDATE TO '1.3'" to load this file. \quit

-- issue 38: a longest hold per acquisition
--
-- fenced_acquire and fenced_acquire_xact gain max_hold (default NULL:
-- fencing.lease_max_hold): a lease taken with renew => true is renewed no
-- further than max_hold after its acquisition (src/lease_renewer.c).  A
-- new argument is a new signature, so each function is made again, with
-- the privileges it had and its initial privileges, as
-- fencing--1.1--1.2.sql did when they gained renew.
DO $$
DECLARE
	f record;
	fn_acl pg_catalog.aclitem[];
	fn_init pg_catalog.aclitem[];
	new_fn pg_catalog.oid;
	a record;
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
				max_hold interval DEFAULT NULL)
			RETURNS @extschema@.fence_token
			AS ''MODULE_PATHNAME'', %L LANGUAGE C VOLATILE PARALLEL UNSAFE', f.name, f.name);
		new_fn := pg_catalog.format('@extschema@.%I(text, interval, interval, boolean, interval)', f.name)::pg_catalog.regprocedure;
		EXECUTE pg_catalog.format('REVOKE ALL ON FUNCTION %s FROM PUBLIC', new_fn::pg_catalog.regprocedure);
		FOR a IN SELECT * FROM pg_catalog.aclexplode(fn_acl) LOOP
			EXECUTE pg_catalog.format('GRANT %s ON FUNCTION %s TO %s%s',
				a.privilege_type, new_fn::pg_catalog.regprocedure,
				CASE WHEN a.grantee = 0 THEN 'PUBLIC' ELSE pg_catalog.quote_ident(pg_catalog.pg_get_userbyid(a.grantee)) END,
				CASE WHEN a.is_grantable THEN ' WITH GRANT OPTION' ELSE '' END);
		END LOOP;
		DELETE FROM pg_catalog.pg_init_privs i
			WHERE i.objsubid = 0 AND i.objoid = new_fn AND i.classoid = 'pg_catalog.pg_proc'::pg_catalog.regclass;
		IF fn_init IS NOT NULL THEN
			INSERT INTO pg_catalog.pg_init_privs (objoid, classoid, objsubid, privtype, initprivs)
				VALUES (new_fn, 'pg_catalog.pg_proc'::pg_catalog.regclass, 0, 'e', fn_init);
		END IF;
		EXECUTE pg_catalog.format('COMMENT ON FUNCTION %s IS %L', new_fn::pg_catalog.regprocedure,
			'take the Redis lock on a resource and a new token, declared for ' || f.scope
			|| '; NULL if still busy after wait; with renew, renewed while the backend works, up to max_hold');
	END LOOP;
END $$;
