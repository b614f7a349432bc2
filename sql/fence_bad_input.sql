--
-- Bad input, end to end: malformed trigger arguments and templates, odd
-- resource names through the trigger and the functions, bad tokens, absurd
-- settings.  Each case is a clear error or documented behaviour, and the
-- backend survives them all.
--
-- Table-driven: bad_try() runs a case's statements in a subtransaction and
-- returns "ok" or the SQLSTATE, the message and the detail, so that every
-- case is one row of output.  Long names are cut short in the output.
--
LOAD 'fencing';
SET client_min_messages = warning;
SET TimeZone = 'UTC';
SET DateStyle = 'ISO, YMD';

CREATE TEMP TABLE marks_before AS SELECT resource FROM fence_marks;

CREATE FUNCTION bad_try(stmts text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
	detail text;
BEGIN
	EXECUTE stmts;
	RETURN 'ok';
EXCEPTION WHEN OTHERS THEN
	GET STACKED DIAGNOSTICS detail = PG_EXCEPTION_DETAIL;
	RETURN SQLSTATE || ' ' || left(regexp_replace(SQLERRM, '(.)\1{40,}', '\1...', 'g'), 160)
		-- (the detail of PostgreSQL's own 54000 names a tuple: left out)
		|| CASE WHEN detail <> '' AND SQLSTATE <> '54000' THEN ' / ' || left(detail, 120) ELSE '' END;
END
$$;

CREATE TABLE bi (
	id    int,
	name  text,
	tok   fence_token,
	n     int,
	"x}y" int,
	"ä"   text
);
INSERT INTO bi VALUES (1, 'one', 1, 1, 1, 'ä');

-- the trigger's arguments: each case attaches fence_guard with them and
-- writes one row (misuse is reported at the first write)
CREATE TABLE trigger_cases (id serial, args text, expect text);
INSERT INTO trigger_cases (args, expect) VALUES
	('',                              'no token column'),
	($$''$$,                          'empty token column'),
	($$'nosuch'$$,                    'unknown token column'),
	($$'TOK'$$,                       'column names are case-sensitive'),
	($$'ctid'$$,                      'system column'),
	($$'n'$$,                         'token column of type int'),
	($$'name'$$,                      'token column of type text'),
	($$'tok', 'bi:{id}', 'STRICT'$$,  'options are case-sensitive'),
	($$'tok', 'bi:{id}', ''$$,        'empty option'),
	($$'tok', 'bi:{id}', 'strict', 'strict'$$, 'an option twice: accepted'),
	($$'tok', 'bi:{nosuch}'$$,        'unknown placeholder'),
	($$'tok', 'bi:{}'$$,              'empty placeholder'),
	($$'tok', 'bi:{id'$$,             'unclosed placeholder'),
	($$'tok', 'bi:}'$$,               'stray closing brace'),
	($$'tok', 'bi:{{id}'$$,           'literal brace, then a stray one'),
	($$'tok', 'bi:{i{d}'$$,           'brace inside a placeholder'),
	($$'tok', 'bi:{ id}'$$,           'white space is part of the name'),
	($$'tok', 'bi:{ID}'$$,            'placeholders are case-sensitive'),
	($$'tok', 'bi:{ctid}'$$,          'system column in the template'),
	($$'tok', 'bi:{tok}'$$,           'template naming the token column'),
	($$'tok', 'bi:{x}y}'$$,           'a column named x}y cannot be a placeholder'),
	($$'tok', 'bi:{id}:{id}'$$,       'duplicate placeholder: accepted, resource bi:1:1'),
	($$'tok', 'bi:{{{id}}}'$$,        'literal braces around a placeholder: bi:{1}'),
	($$'tok', 'bi:{ä}'$$,             'non-ASCII column name: bi:ä'),
	($$'tok', 'bi whole table'$$,     'no placeholder: one resource for the table'),
	($$'tok', ''$$,                   'empty template: row scope'),
	(format('%L, %L', 'tok', repeat('L', 2001)), 'template without placeholders, over the name limit');

SELECT c.id, c.expect,
	bad_try(format($q$
		CREATE TRIGGER fence BEFORE INSERT OR UPDATE ON bi
			FOR EACH ROW EXECUTE FUNCTION fence_guard(%s);
		INSERT INTO bi (id, name, tok, "ä") VALUES (1, 'one', 5, 'ä');
		DROP TRIGGER fence ON bi;
	$q$, c.args)) AS result
  FROM trigger_cases c ORDER BY c.id;

-- the resources the accepted templates made
SELECT resource, token FROM fence_marks WHERE resource LIKE 'bi%' ORDER BY resource COLLATE "C";

-- misuse of the trigger functions themselves
SELECT bad_try($$SELECT fence_guard()$$) AS called_directly;
SELECT bad_try($$CREATE TRIGGER g AFTER INSERT ON bi FOR EACH ROW EXECUTE FUNCTION fence_guard('tok', 'bi:{id}');
	INSERT INTO bi (id, tok) VALUES (1, 5)$$) AS after_trigger;
SELECT bad_try($$CREATE TRIGGER g BEFORE INSERT ON bi FOR EACH STATEMENT EXECUTE FUNCTION fence_guard('tok', 'bi:{id}');
	INSERT INTO bi (id, tok) VALUES (1, 5)$$) AS statement_trigger;
SELECT bad_try($$CREATE TRIGGER g BEFORE DELETE ON bi FOR EACH ROW EXECUTE FUNCTION fence_guard('tok');
	DELETE FROM bi$$) AS row_scope_delete;
SELECT bad_try($$CREATE TRIGGER g BEFORE INSERT ON bi FOR EACH ROW EXECUTE FUNCTION fence_truncate_guard();
	INSERT INTO bi (id, tok) VALUES (1, 5)$$) AS truncate_guard_on_insert;
SELECT bad_try($$SELECT fence_truncate_guard()$$) AS truncate_guard_called_directly;

-- odd resource names made by a template from a column's value; a name
-- over 2000 bytes is refused (54000) by the trigger and by fence_use and
-- fence_advance, before it is written anywhere
CREATE TABLE names (name text, tok fence_token);
CREATE TRIGGER fence BEFORE INSERT OR UPDATE OR DELETE ON names
	FOR EACH ROW EXECUTE FUNCTION fence_guard('tok', '{name}');
CREATE TABLE name_cases (id serial, what text, name text);
INSERT INTO name_cases (what, name) VALUES
	('empty',                  ''),
	('null',                   NULL),
	('newline',                E'nl\nnl'),
	('tab and CR',             E'tab\tcr\r'),
	('quotes',                 $$q'uo"te$$),
	('backslash',              E'back\\slash'),
	('braces',                 '{br}a{ces'),
	('percent signs',          '%s%d%n'),
	('unicode',                E'\u00e9t\u00e9 \u65e5\u672c \U0001F600'),
	('combining vs precomposed (two resources)', E'e\u0301'),
	('100 kB, compressible',   repeat('x', 100000)),
	('3 kB, incompressible',   (SELECT string_agg(md5(i::text), '') FROM generate_series(1, 94) i)),
	('100 kB, incompressible', (SELECT string_agg(md5(i::text), '') FROM generate_series(1, 3125) i)),
	('2000 bytes, the limit',  repeat('y', 1998) || 'é'),
	('2001 bytes, over it',    repeat('y', 1999) || 'é');

-- first write: token 10; a stale one (9) is rejected; a DELETE with a
-- declared stale token is rejected; with the current one it passes
SELECT c.id, c.what, length(c.name) AS len,
	bad_try(format('INSERT INTO names VALUES (%L, 10)', c.name)) AS first,
	bad_try(format('INSERT INTO names VALUES (%L, 9)', c.name)) AS stale,
	bad_try(format($q$SELECT fence_use(%1$L, 9); DELETE FROM names WHERE name = %1$L$q$, c.name)) AS stale_delete,
	bad_try(format($q$SELECT fence_use(%1$L, 10); DELETE FROM names WHERE name = %1$L$q$, c.name)) AS delete
  FROM name_cases c ORDER BY c.id;

SELECT length(resource) AS len, left(resource, 20) AS resource, token
  FROM fence_marks WHERE resource NOT IN (SELECT resource FROM marks_before)
   AND resource NOT LIKE 'bi%'
 ORDER BY length(resource), resource COLLATE "C";
SELECT count(*) AS rows_left FROM names;

-- the same names through fence_use, fence_advance, fence_mark, fence_forget
-- (fence_use, fence_advance: 20; fence_mark reads it back)
SELECT c.id, c.what,
	bad_try(format('SELECT fence_use(%L, 20)', c.name)) AS use,
	bad_try(format('SELECT fence_advance(%L, 20)', c.name)) AS advance,
	bad_try(format($q$DO $d$ BEGIN IF fence_mark(%1$L) IS DISTINCT FROM 20 THEN RAISE 'mark is %%, not 20', coalesce(fence_mark(%1$L)::text, 'absent'); END IF; END $d$$q$, c.name)) AS mark,
	bad_try(format('SELECT fence_advance(%L, 19)', c.name)) AS advance_lower,
	bad_try(format($q$DO $d$ BEGIN IF fence_mark(%1$L) IS DISTINCT FROM 20 THEN RAISE 'mark is %%, not 20', coalesce(fence_mark(%1$L)::text, 'absent'); END IF; END $d$$q$, c.name)) AS still_20
  FROM name_cases c WHERE c.name IS NOT NULL ORDER BY c.id;
SELECT count(*) AS declared, count(DISTINCT resource) AS distinct_resources,
	max(length(resource)) AS longest
  FROM fence_declared();

-- NULLs and bad tokens
SELECT bad_try($$SELECT fence_use(NULL, 1)$$) AS use_null_resource,
	bad_try($$SELECT fence_use('bi:null', 1, NULL)$$) AS use_null_is_local,
	bad_try($$SELECT fence_use('bi:null', NULL)$$) AS use_null_token_withdraws;
-- a transaction-local declaration outside a transaction block: an error
-- (25P01), since it would end with its own statement
SELECT fence_use('bi:local', 1, true);
\echo :LAST_ERROR_SQLSTATE
-- several statements sent as one query string are one implicit
-- transaction block: the declaration holds for the statements after it
SELECT fence_use('bi:local', 1, true) \; SELECT resource, token FROM fence_declared() WHERE is_local;
SELECT count(*) AS declared_after_the_string FROM fence_declared() WHERE is_local;
-- a procedure CALLed outside BEGIN runs in no transaction block either
CREATE PROCEDURE bi_declare_local() LANGUAGE plpgsql AS $$
BEGIN
	PERFORM fence_use('bi:local', 1, true);
END $$;
CALL bi_declare_local();
\echo :LAST_ERROR_SQLSTATE
BEGIN;
CALL bi_declare_local();
SELECT resource, token FROM fence_declared() WHERE is_local;
COMMIT;
DROP PROCEDURE bi_declare_local();
SELECT bad_try($$SELECT fence_advance(NULL, 1)$$) AS advance_null_resource,
	bad_try($$SELECT fence_advance('bi:null', NULL)$$) AS advance_null_token,
	bad_try($$SELECT fence_forget(NULL)$$) AS forget_null;
SELECT fence_mark(NULL) IS NULL AS mark_of_null_is_null;
CREATE TABLE token_cases (id serial, token text);
INSERT INTO token_cases (token) VALUES
	('-1'), (''), (' '), ('0x'), ('1e3'), ('1.5'), ('9223372036854775808'),
	('0x8000000000000000'), ('１２'), (E'12\n'), ('12abc'), ('NaN');
SELECT c.id, c.token,
	bad_try(format('INSERT INTO names VALUES (%L, %L)', 'bi:tok', c.token)) AS through_trigger,
	bad_try(format('SELECT fence_use(%L, %L)', 'bi:tok', c.token)) AS through_fence_use,
	bad_try(format('SELECT fence_advance(%L, %L)', 'bi:tok', c.token)) AS through_fence_advance
  FROM token_cases c ORDER BY c.id;
SELECT bad_try($$SELECT fence_use('bi:tok', -1)$$) AS negative_integer,
	bad_try($$SELECT fence_use('bi:tok', 'NaN'::numeric)$$) AS nan_numeric,
	bad_try($$SELECT fence_use('bi:tok', 1e30)$$) AS huge_numeric;

-- fenced_acquire: arguments refused before any connection to Redis
SELECT bad_try($$SELECT fenced_acquire(NULL)$$) AS null_resource,
	bad_try($$SELECT fenced_acquire('')$$) AS empty_resource;
SELECT bad_try($$SELECT fenced_acquire('bi:a', ttl => '0')$$) AS ttl_zero,
	bad_try($$SELECT fenced_acquire('bi:a', ttl => '-1 s')$$) AS ttl_negative,
	bad_try($$SELECT fenced_acquire('bi:a', ttl => '25 days')$$) AS ttl_too_long,
	bad_try($$SELECT fenced_acquire('bi:a', ttl => '2147483647 days')$$) AS ttl_overflow;
SELECT bad_try($$SELECT fenced_acquire('bi:a', wait => '-1 ms')$$) AS wait_negative,
	bad_try($$SELECT fenced_acquire('bi:a', wait => '25 days')$$) AS wait_too_long;
SELECT bad_try($$SELECT fenced_extend(NULL)$$) AS extend_null,
	bad_try($$SELECT fenced_extend('', ttl => '1 s')$$) AS extend_empty,
	bad_try($$SELECT fenced_extend('bi:never', ttl => '0')$$) AS extend_ttl_zero,
	bad_try($$SELECT fenced_release(NULL)$$) AS release_null;
-- a resource this session never acquired: nothing to extend or release
SELECT fenced_extend('bi:never') AS extend_unknown, fenced_release('bi:never') AS release_unknown;

-- absurd settings
CREATE TABLE setting_cases (id serial, setting text, value text);
INSERT INTO setting_cases (setting, value) VALUES
	('fencing.default_ttl', '0'), ('fencing.default_ttl', '-1'),
	('fencing.default_ttl', 'abc'), ('fencing.default_ttl', '1 s'),
	('fencing.default_ttl', '25d'), ('fencing.default_ttl', '99999999999'),
	('fencing.default_wait', '-1'), ('fencing.default_wait', '1h'),
	('fencing.redis_port', '0'), ('fencing.redis_port', '65536'),
	('fencing.redis_port', '6379.5'),  -- rounded, as for any integer setting
	('fencing.redis_host', ''), ('fencing.redis_host', 'a b'),
	('fencing.redis_host', 'relative/path'), ('fencing.redis_host', '/' || repeat('s', 200)),
	('fencing.redis_host', repeat('h', 254)),
	('fencing.redis_database', '-1'),
	('fencing.redis_connect_timeout', '0'), ('fencing.redis_connect_timeout', '61s'),
	('fencing.redis_command_timeout', '0'), ('fencing.redis_command_timeout', '2h'),
	('fencing.redis_username', 'a b'), ('fencing.redis_password', repeat('p', 1048577)),
	('fencing.redis_password_file', E'pw\nfile'),
	('fencing.redis_lock_key', 'no placeholder'),
	('fencing.redis_lock_key', 'a:<resource>:<resource>'),
	('fencing.redis_lock_key', '<resource>' || repeat('k', 1100)),
	('fencing.redis_token_key', ''),
	('fencing.redis_wait_replicas', '-1'), ('fencing.redis_wait_timeout', '0'),
	('fencing.no_such_setting', '1');
SELECT c.id, c.setting, left(c.value, 20) AS value,
	bad_try(format('SET LOCAL %s = %L', c.setting, c.value)) AS result
  FROM setting_cases c ORDER BY c.id;
-- the same lock and token key: refused when used
SELECT bad_try($$SET LOCAL fencing.redis_lock_key = 'k:<resource>';
	SET LOCAL fencing.redis_token_key = 'k:<resource>';
	SELECT fenced_acquire('bi:same')$$) AS same_keys;

-- clean up: the marks this file made, its tables and declarations
SELECT count(fence_forget(resource)) > 0 AS forgot
  FROM fence_marks WHERE resource NOT IN (SELECT resource FROM marks_before);
SELECT count(*) AS marks_left FROM fence_marks WHERE resource NOT IN (SELECT resource FROM marks_before);
SELECT count(*) > 0 AS withdrawn FROM (SELECT fence_use(resource, NULL) FROM fence_declared()) s;
SELECT count(*) AS declared_left FROM fence_declared();
DROP TABLE bi, names, name_cases, trigger_cases, token_cases, setting_cases;
DROP FUNCTION bad_try(text);

-- the backend survived it all
SELECT 1 AS alive;
