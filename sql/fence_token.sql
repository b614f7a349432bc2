-- fence_token input and output

-- decimal, with surrounding white space and an optional sign
SELECT '0'::fence_token, '42'::fence_token, '+7'::fence_token, '-0'::fence_token;
SELECT ' 12 '::fence_token, E'\t\n13\r\f'::fence_token, '007'::fence_token;
SELECT '9223372036854775807'::fence_token AS max_token;

-- hexadecimal, as ZooKeeper prints zxids
SELECT '0x0'::fence_token, '0x10'::fence_token, '0XfF'::fence_token, ' 0x1f '::fence_token;
SELECT '0x7fffffffffffffff'::fence_token AS max_token;
SELECT '0x00000000000000000000000000000001'::fence_token AS leading_zeros;

-- output is always decimal, and round-trips
SELECT '0x2a'::fence_token::text;
SELECT t::text::fence_token = t AS round_trip
FROM (VALUES ('0'::fence_token), ('1'), ('9223372036854775807')) v(t);

-- invalid input: not a number
SELECT ''::fence_token;
SELECT '   '::fence_token;
SELECT 'abc'::fence_token;
SELECT '+'::fence_token;
SELECT '-'::fence_token;
SELECT '0x'::fence_token;
SELECT '0xg'::fence_token;
SELECT '12abc'::fence_token;
SELECT '1 2'::fence_token;
SELECT '1.0'::fence_token;
SELECT '1e3'::fence_token;
SELECT '1_000'::fence_token;
SELECT '++1'::fence_token;
SELECT '+0x10'::fence_token;
SELECT '-0x10'::fence_token;
SELECT 'x10'::fence_token;
SELECT '0x 10'::fence_token;

-- invalid input: out of range
SELECT '-1'::fence_token;
SELECT '-9223372036854775808'::fence_token;
SELECT '9223372036854775808'::fence_token;
SELECT '18446744073709551616'::fence_token;
SELECT '99999999999999999999999999'::fence_token;
SELECT '0x8000000000000000'::fence_token;
SELECT '0xffffffffffffffffff'::fence_token;

-- the SQLSTATEs, for clients that test them
DO $$
BEGIN
	PERFORM 'nope'::fence_token;
EXCEPTION WHEN invalid_text_representation THEN
	RAISE NOTICE 'syntax: %', SQLSTATE;
END $$;
DO $$
BEGIN
	PERFORM '-3'::fence_token;
EXCEPTION WHEN numeric_value_out_of_range THEN
	RAISE NOTICE 'range: %', SQLSTATE;
END $$;

-- NULL passes through
SELECT NULL::fence_token IS NULL AS is_null;

-- binary send and receive, as COPY BINARY and binary drivers use them
SELECT fence_token_send('9223372036854775807');
SELECT fence_token_send('258');
CREATE TABLE tokens (t fence_token);
INSERT INTO tokens VALUES ('0'), ('1'), ('4294967296'), ('9223372036854775807'), (NULL);
\getenv port PGPORT
\set copyfile '/tmp/fencing_regress_' :port '.bin'
COPY tokens TO :'copyfile' WITH (FORMAT binary);
CREATE TABLE tokens_back (t fence_token);
COPY tokens_back FROM :'copyfile' WITH (FORMAT binary);
SELECT t FROM tokens_back ORDER BY t;
-- a negative 8-byte value in binary form is refused, and nothing is loaded
TRUNCATE tokens_back;
CREATE TABLE bigints (t bigint);
INSERT INTO bigints VALUES (5), (-5);
COPY bigints TO :'copyfile' WITH (FORMAT binary);
COPY tokens_back FROM :'copyfile' WITH (FORMAT binary);
SELECT count(*) AS rows_after_failed_copy FROM tokens_back;
DROP TABLE tokens, tokens_back, bigints;
\! rm -f /tmp/fencing_regress_*.bin

-- casts from the integer types: implicit, range-checked
SELECT 5::smallint::fence_token, 5::integer::fence_token, 5::bigint::fence_token;
SELECT fence_token(9223372036854775807);
SELECT (-1)::smallint::fence_token;
SELECT (-1)::integer::fence_token;
SELECT (-9223372036854775808)::bigint::fence_token;
CREATE TABLE implicit_cast (t fence_token);
INSERT INTO implicit_cast VALUES (1::smallint), (2::integer), (3::bigint);
SELECT t FROM implicit_cast ORDER BY t;
DROP TABLE implicit_cast;

-- casts from numeric: assignment, rounding like the cast to bigint
SELECT 1.4::numeric::fence_token, 1.5::numeric::fence_token, '-0.4'::numeric::fence_token;
SELECT 9223372036854775807::numeric::fence_token;
SELECT '-0.5'::numeric::fence_token;
SELECT 9223372036854775808::numeric::fence_token;
SELECT 'NaN'::numeric::fence_token;
SELECT 'Infinity'::numeric::fence_token;
CREATE TABLE assigned (t fence_token);
INSERT INTO assigned VALUES (2.0::numeric);
SELECT t FROM assigned;
DROP TABLE assigned;

-- casts to bigint, numeric and text: assignment
SELECT '9223372036854775807'::fence_token::bigint, '12'::fence_token::numeric,
	'12'::fence_token::text;
CREATE TABLE targets (b bigint, n numeric, s text);
INSERT INTO targets VALUES ('1'::fence_token, '2'::fence_token, '3'::fence_token);
SELECT * FROM targets;
DROP TABLE targets;
-- from text: explicit only, like every type
SELECT '77'::text::fence_token;
SELECT 'nope'::text::fence_token;

-- the cast catalog, so that a change of context is a visible decision
SELECT castsource::regtype, casttarget::regtype,
	CASE castcontext WHEN 'i' THEN 'implicit' WHEN 'a' THEN 'assignment'
		ELSE 'explicit' END AS context,
	CASE castmethod WHEN 'f' THEN 'function' WHEN 'b' THEN 'binary'
		ELSE 'inout' END AS method
FROM pg_cast
WHERE castsource = 'fence_token'::regtype OR casttarget = 'fence_token'::regtype
ORDER BY 1::text, 2::text;

-- no cast makes operator resolution ambiguous: each of these resolves to
-- exactly one operator and needs no explicit cast
SELECT '5'::fence_token = 5 AS int4, '5'::fence_token = 5::bigint AS int8,
	'5'::fence_token = 5::smallint AS int2, 5 < '6'::fence_token AS int4_left,
	'5'::fence_token = '5' AS unknown;
SELECT '5'::fence_token + 1;
SELECT '5'::fence_token = 5.0;
SELECT pg_typeof(x) FROM (SELECT 5::bigint UNION ALL SELECT '6'::fence_token) s(x) LIMIT 1;
SELECT pg_typeof(coalesce(NULL::fence_token, 0));
