/* fencing--1.0.sql */

-- complain if script is sourced in psql, rather than via CREATE EXTENSION
\echo Use "CREATE EXTENSION fencing" to load this file. \quit

-- fence_token type

CREATE TYPE fence_token;

CREATE FUNCTION fence_token_in(cstring) RETURNS fence_token
	AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION fence_token_out(fence_token) RETURNS cstring
	AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION fence_token_recv(internal) RETURNS fence_token
	AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION fence_token_send(fence_token) RETURNS bytea
	AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

-- Stored exactly as a bigint, so that comparison, hashing and sorting can
-- use the backend's int8 functions and the casts to bigint cost nothing.
CREATE TYPE fence_token (
	INPUT          = fence_token_in,
	OUTPUT         = fence_token_out,
	RECEIVE        = fence_token_recv,
	SEND           = fence_token_send,
	INTERNALLENGTH = 8,
	PASSEDBYVALUE,
	ALIGNMENT      = double,
	STORAGE        = plain,
	CATEGORY       = 'N'
);

COMMENT ON TYPE fence_token IS 'fencing token: a lock grant number from 0 to 9223372036854775807';
COMMENT ON FUNCTION fence_token_in(cstring) IS 'I/O';
COMMENT ON FUNCTION fence_token_out(fence_token) IS 'I/O';
COMMENT ON FUNCTION fence_token_recv(internal) IS 'I/O';
COMMENT ON FUNCTION fence_token_send(fence_token) IS 'I/O';

-- fence_token casts
--
-- From the integer types the cast is implicit, so that a token can be
-- written as a plain number wherever one is expected (fence_advance('r', 33)),
-- and checks the range.  Toward bigint and numeric it is an assignment cast:
-- were it implicit both ways, "token = 33" would match both the fence_token
-- and the bigint operators and be ambiguous.  Text casts are the automatic
-- I/O conversions.

CREATE FUNCTION fence_token(bigint) RETURNS fence_token
	AS 'MODULE_PATHNAME', 'fence_token_from_int8'
	LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION fence_token(integer) RETURNS fence_token
	AS 'MODULE_PATHNAME', 'fence_token_from_int4'
	LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION fence_token(smallint) RETURNS fence_token
	AS 'MODULE_PATHNAME', 'fence_token_from_int2'
	LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION fence_token(numeric) RETURNS fence_token
	AS 'MODULE_PATHNAME', 'fence_token_from_numeric'
	LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION fence_token_to_numeric(fence_token) RETURNS numeric
	AS 'MODULE_PATHNAME', 'fence_token_to_numeric'
	LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

COMMENT ON FUNCTION fence_token(bigint) IS 'convert bigint to fence_token';
COMMENT ON FUNCTION fence_token(integer) IS 'convert integer to fence_token';
COMMENT ON FUNCTION fence_token(smallint) IS 'convert smallint to fence_token';
COMMENT ON FUNCTION fence_token(numeric) IS 'convert numeric to fence_token';
COMMENT ON FUNCTION fence_token_to_numeric(fence_token) IS 'convert fence_token to numeric';

CREATE CAST (bigint AS fence_token) WITH FUNCTION fence_token(bigint) AS IMPLICIT;
CREATE CAST (integer AS fence_token) WITH FUNCTION fence_token(integer) AS IMPLICIT;
CREATE CAST (smallint AS fence_token) WITH FUNCTION fence_token(smallint) AS IMPLICIT;
CREATE CAST (numeric AS fence_token) WITH FUNCTION fence_token(numeric) AS ASSIGNMENT;
CREATE CAST (fence_token AS bigint) WITHOUT FUNCTION AS ASSIGNMENT;
CREATE CAST (fence_token AS numeric) WITH FUNCTION fence_token_to_numeric(fence_token) AS ASSIGNMENT;

-- fence_token operators
--
-- Besides fence_token against itself, every comparison exists against
-- bigint, integer and smallint in both directions, all in the integer
-- operator families below: "token < 33" then needs no cast and can use an
-- index on a fence_token column, and fence_token joins bigint by hash or
-- merge join.

-- fence_token vs fence_token
CREATE FUNCTION fence_token_eq(fence_token, fence_token) RETURNS boolean
	AS 'int8eq' LANGUAGE internal IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;
CREATE FUNCTION fence_token_ne(fence_token, fence_token) RETURNS boolean
	AS 'int8ne' LANGUAGE internal IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;
CREATE FUNCTION fence_token_lt(fence_token, fence_token) RETURNS boolean
	AS 'int8lt' LANGUAGE internal IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;
CREATE FUNCTION fence_token_le(fence_token, fence_token) RETURNS boolean
	AS 'int8le' LANGUAGE internal IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;
CREATE FUNCTION fence_token_gt(fence_token, fence_token) RETURNS boolean
	AS 'int8gt' LANGUAGE internal IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;
CREATE FUNCTION fence_token_ge(fence_token, fence_token) RETURNS boolean
	AS 'int8ge' LANGUAGE internal IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;
CREATE FUNCTION fence_token_cmp(fence_token, fence_token) RETURNS integer
	AS 'btint8cmp' LANGUAGE internal IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;

COMMENT ON FUNCTION fence_token_eq(fence_token, fence_token) IS 'implementation of = operator';
COMMENT ON FUNCTION fence_token_ne(fence_token, fence_token) IS 'implementation of <> operator';
COMMENT ON FUNCTION fence_token_lt(fence_token, fence_token) IS 'implementation of < operator';
COMMENT ON FUNCTION fence_token_le(fence_token, fence_token) IS 'implementation of <= operator';
COMMENT ON FUNCTION fence_token_gt(fence_token, fence_token) IS 'implementation of > operator';
COMMENT ON FUNCTION fence_token_ge(fence_token, fence_token) IS 'implementation of >= operator';
COMMENT ON FUNCTION fence_token_cmp(fence_token, fence_token) IS 'btree comparison';

CREATE OPERATOR = (
	LEFTARG = fence_token, RIGHTARG = fence_token, FUNCTION = fence_token_eq,
	COMMUTATOR = = , NEGATOR = <> ,
	RESTRICT = eqsel, JOIN = eqjoinsel,
	HASHES, MERGES
);
CREATE OPERATOR <> (
	LEFTARG = fence_token, RIGHTARG = fence_token, FUNCTION = fence_token_ne,
	COMMUTATOR = <> , NEGATOR = = ,
	RESTRICT = neqsel, JOIN = neqjoinsel
);
CREATE OPERATOR < (
	LEFTARG = fence_token, RIGHTARG = fence_token, FUNCTION = fence_token_lt,
	COMMUTATOR = > , NEGATOR = >= ,
	RESTRICT = scalarltsel, JOIN = scalarltjoinsel
);
CREATE OPERATOR <= (
	LEFTARG = fence_token, RIGHTARG = fence_token, FUNCTION = fence_token_le,
	COMMUTATOR = >= , NEGATOR = > ,
	RESTRICT = scalarlesel, JOIN = scalarlejoinsel
);
CREATE OPERATOR > (
	LEFTARG = fence_token, RIGHTARG = fence_token, FUNCTION = fence_token_gt,
	COMMUTATOR = < , NEGATOR = <= ,
	RESTRICT = scalargtsel, JOIN = scalargtjoinsel
);
CREATE OPERATOR >= (
	LEFTARG = fence_token, RIGHTARG = fence_token, FUNCTION = fence_token_ge,
	COMMUTATOR = <= , NEGATOR = < ,
	RESTRICT = scalargesel, JOIN = scalargejoinsel
);
COMMENT ON OPERATOR = (fence_token, fence_token) IS 'equal';
COMMENT ON OPERATOR <> (fence_token, fence_token) IS 'not equal';
COMMENT ON OPERATOR < (fence_token, fence_token) IS 'less than';
COMMENT ON OPERATOR <= (fence_token, fence_token) IS 'less than or equal';
COMMENT ON OPERATOR > (fence_token, fence_token) IS 'greater than';
COMMENT ON OPERATOR >= (fence_token, fence_token) IS 'greater than or equal';

-- fence_token vs bigint
CREATE FUNCTION fence_token_int8_eq(fence_token, bigint) RETURNS boolean
	AS 'int8eq' LANGUAGE internal IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;
CREATE FUNCTION fence_token_int8_ne(fence_token, bigint) RETURNS boolean
	AS 'int8ne' LANGUAGE internal IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;
CREATE FUNCTION fence_token_int8_lt(fence_token, bigint) RETURNS boolean
	AS 'int8lt' LANGUAGE internal IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;
CREATE FUNCTION fence_token_int8_le(fence_token, bigint) RETURNS boolean
	AS 'int8le' LANGUAGE internal IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;
CREATE FUNCTION fence_token_int8_gt(fence_token, bigint) RETURNS boolean
	AS 'int8gt' LANGUAGE internal IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;
CREATE FUNCTION fence_token_int8_ge(fence_token, bigint) RETURNS boolean
	AS 'int8ge' LANGUAGE internal IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;
CREATE FUNCTION fence_token_int8_cmp(fence_token, bigint) RETURNS integer
	AS 'btint8cmp' LANGUAGE internal IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;

COMMENT ON FUNCTION fence_token_int8_eq(fence_token, bigint) IS 'implementation of = operator';
COMMENT ON FUNCTION fence_token_int8_ne(fence_token, bigint) IS 'implementation of <> operator';
COMMENT ON FUNCTION fence_token_int8_lt(fence_token, bigint) IS 'implementation of < operator';
COMMENT ON FUNCTION fence_token_int8_le(fence_token, bigint) IS 'implementation of <= operator';
COMMENT ON FUNCTION fence_token_int8_gt(fence_token, bigint) IS 'implementation of > operator';
COMMENT ON FUNCTION fence_token_int8_ge(fence_token, bigint) IS 'implementation of >= operator';
COMMENT ON FUNCTION fence_token_int8_cmp(fence_token, bigint) IS 'btree comparison';

CREATE OPERATOR = (
	LEFTARG = fence_token, RIGHTARG = bigint, FUNCTION = fence_token_int8_eq,
	COMMUTATOR = = , NEGATOR = <> ,
	RESTRICT = eqsel, JOIN = eqjoinsel,
	HASHES, MERGES
);
CREATE OPERATOR <> (
	LEFTARG = fence_token, RIGHTARG = bigint, FUNCTION = fence_token_int8_ne,
	COMMUTATOR = <> , NEGATOR = = ,
	RESTRICT = neqsel, JOIN = neqjoinsel
);
CREATE OPERATOR < (
	LEFTARG = fence_token, RIGHTARG = bigint, FUNCTION = fence_token_int8_lt,
	COMMUTATOR = > , NEGATOR = >= ,
	RESTRICT = scalarltsel, JOIN = scalarltjoinsel
);
CREATE OPERATOR <= (
	LEFTARG = fence_token, RIGHTARG = bigint, FUNCTION = fence_token_int8_le,
	COMMUTATOR = >= , NEGATOR = > ,
	RESTRICT = scalarlesel, JOIN = scalarlejoinsel
);
CREATE OPERATOR > (
	LEFTARG = fence_token, RIGHTARG = bigint, FUNCTION = fence_token_int8_gt,
	COMMUTATOR = < , NEGATOR = <= ,
	RESTRICT = scalargtsel, JOIN = scalargtjoinsel
);
CREATE OPERATOR >= (
	LEFTARG = fence_token, RIGHTARG = bigint, FUNCTION = fence_token_int8_ge,
	COMMUTATOR = <= , NEGATOR = < ,
	RESTRICT = scalargesel, JOIN = scalargejoinsel
);
COMMENT ON OPERATOR = (fence_token, bigint) IS 'equal';
COMMENT ON OPERATOR <> (fence_token, bigint) IS 'not equal';
COMMENT ON OPERATOR < (fence_token, bigint) IS 'less than';
COMMENT ON OPERATOR <= (fence_token, bigint) IS 'less than or equal';
COMMENT ON OPERATOR > (fence_token, bigint) IS 'greater than';
COMMENT ON OPERATOR >= (fence_token, bigint) IS 'greater than or equal';

-- bigint vs fence_token
CREATE FUNCTION int8_fence_token_eq(bigint, fence_token) RETURNS boolean
	AS 'int8eq' LANGUAGE internal IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;
CREATE FUNCTION int8_fence_token_ne(bigint, fence_token) RETURNS boolean
	AS 'int8ne' LANGUAGE internal IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;
CREATE FUNCTION int8_fence_token_lt(bigint, fence_token) RETURNS boolean
	AS 'int8lt' LANGUAGE internal IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;
CREATE FUNCTION int8_fence_token_le(bigint, fence_token) RETURNS boolean
	AS 'int8le' LANGUAGE internal IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;
CREATE FUNCTION int8_fence_token_gt(bigint, fence_token) RETURNS boolean
	AS 'int8gt' LANGUAGE internal IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;
CREATE FUNCTION int8_fence_token_ge(bigint, fence_token) RETURNS boolean
	AS 'int8ge' LANGUAGE internal IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;
CREATE FUNCTION int8_fence_token_cmp(bigint, fence_token) RETURNS integer
	AS 'btint8cmp' LANGUAGE internal IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;

COMMENT ON FUNCTION int8_fence_token_eq(bigint, fence_token) IS 'implementation of = operator';
COMMENT ON FUNCTION int8_fence_token_ne(bigint, fence_token) IS 'implementation of <> operator';
COMMENT ON FUNCTION int8_fence_token_lt(bigint, fence_token) IS 'implementation of < operator';
COMMENT ON FUNCTION int8_fence_token_le(bigint, fence_token) IS 'implementation of <= operator';
COMMENT ON FUNCTION int8_fence_token_gt(bigint, fence_token) IS 'implementation of > operator';
COMMENT ON FUNCTION int8_fence_token_ge(bigint, fence_token) IS 'implementation of >= operator';
COMMENT ON FUNCTION int8_fence_token_cmp(bigint, fence_token) IS 'btree comparison';

CREATE OPERATOR = (
	LEFTARG = bigint, RIGHTARG = fence_token, FUNCTION = int8_fence_token_eq,
	COMMUTATOR = = , NEGATOR = <> ,
	RESTRICT = eqsel, JOIN = eqjoinsel,
	HASHES, MERGES
);
CREATE OPERATOR <> (
	LEFTARG = bigint, RIGHTARG = fence_token, FUNCTION = int8_fence_token_ne,
	COMMUTATOR = <> , NEGATOR = = ,
	RESTRICT = neqsel, JOIN = neqjoinsel
);
CREATE OPERATOR < (
	LEFTARG = bigint, RIGHTARG = fence_token, FUNCTION = int8_fence_token_lt,
	COMMUTATOR = > , NEGATOR = >= ,
	RESTRICT = scalarltsel, JOIN = scalarltjoinsel
);
CREATE OPERATOR <= (
	LEFTARG = bigint, RIGHTARG = fence_token, FUNCTION = int8_fence_token_le,
	COMMUTATOR = >= , NEGATOR = > ,
	RESTRICT = scalarlesel, JOIN = scalarlejoinsel
);
CREATE OPERATOR > (
	LEFTARG = bigint, RIGHTARG = fence_token, FUNCTION = int8_fence_token_gt,
	COMMUTATOR = < , NEGATOR = <= ,
	RESTRICT = scalargtsel, JOIN = scalargtjoinsel
);
CREATE OPERATOR >= (
	LEFTARG = bigint, RIGHTARG = fence_token, FUNCTION = int8_fence_token_ge,
	COMMUTATOR = <= , NEGATOR = < ,
	RESTRICT = scalargesel, JOIN = scalargejoinsel
);
COMMENT ON OPERATOR = (bigint, fence_token) IS 'equal';
COMMENT ON OPERATOR <> (bigint, fence_token) IS 'not equal';
COMMENT ON OPERATOR < (bigint, fence_token) IS 'less than';
COMMENT ON OPERATOR <= (bigint, fence_token) IS 'less than or equal';
COMMENT ON OPERATOR > (bigint, fence_token) IS 'greater than';
COMMENT ON OPERATOR >= (bigint, fence_token) IS 'greater than or equal';

-- fence_token vs integer
CREATE FUNCTION fence_token_int4_eq(fence_token, integer) RETURNS boolean
	AS 'int84eq' LANGUAGE internal IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;
CREATE FUNCTION fence_token_int4_ne(fence_token, integer) RETURNS boolean
	AS 'int84ne' LANGUAGE internal IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;
CREATE FUNCTION fence_token_int4_lt(fence_token, integer) RETURNS boolean
	AS 'int84lt' LANGUAGE internal IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;
CREATE FUNCTION fence_token_int4_le(fence_token, integer) RETURNS boolean
	AS 'int84le' LANGUAGE internal IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;
CREATE FUNCTION fence_token_int4_gt(fence_token, integer) RETURNS boolean
	AS 'int84gt' LANGUAGE internal IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;
CREATE FUNCTION fence_token_int4_ge(fence_token, integer) RETURNS boolean
	AS 'int84ge' LANGUAGE internal IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;
CREATE FUNCTION fence_token_int4_cmp(fence_token, integer) RETURNS integer
	AS 'btint84cmp' LANGUAGE internal IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;

COMMENT ON FUNCTION fence_token_int4_eq(fence_token, integer) IS 'implementation of = operator';
COMMENT ON FUNCTION fence_token_int4_ne(fence_token, integer) IS 'implementation of <> operator';
COMMENT ON FUNCTION fence_token_int4_lt(fence_token, integer) IS 'implementation of < operator';
COMMENT ON FUNCTION fence_token_int4_le(fence_token, integer) IS 'implementation of <= operator';
COMMENT ON FUNCTION fence_token_int4_gt(fence_token, integer) IS 'implementation of > operator';
COMMENT ON FUNCTION fence_token_int4_ge(fence_token, integer) IS 'implementation of >= operator';
COMMENT ON FUNCTION fence_token_int4_cmp(fence_token, integer) IS 'btree comparison';

CREATE OPERATOR = (
	LEFTARG = fence_token, RIGHTARG = integer, FUNCTION = fence_token_int4_eq,
	COMMUTATOR = = , NEGATOR = <> ,
	RESTRICT = eqsel, JOIN = eqjoinsel,
	HASHES, MERGES
);
CREATE OPERATOR <> (
	LEFTARG = fence_token, RIGHTARG = integer, FUNCTION = fence_token_int4_ne,
	COMMUTATOR = <> , NEGATOR = = ,
	RESTRICT = neqsel, JOIN = neqjoinsel
);
CREATE OPERATOR < (
	LEFTARG = fence_token, RIGHTARG = integer, FUNCTION = fence_token_int4_lt,
	COMMUTATOR = > , NEGATOR = >= ,
	RESTRICT = scalarltsel, JOIN = scalarltjoinsel
);
CREATE OPERATOR <= (
	LEFTARG = fence_token, RIGHTARG = integer, FUNCTION = fence_token_int4_le,
	COMMUTATOR = >= , NEGATOR = > ,
	RESTRICT = scalarlesel, JOIN = scalarlejoinsel
);
CREATE OPERATOR > (
	LEFTARG = fence_token, RIGHTARG = integer, FUNCTION = fence_token_int4_gt,
	COMMUTATOR = < , NEGATOR = <= ,
	RESTRICT = scalargtsel, JOIN = scalargtjoinsel
);
CREATE OPERATOR >= (
	LEFTARG = fence_token, RIGHTARG = integer, FUNCTION = fence_token_int4_ge,
	COMMUTATOR = <= , NEGATOR = < ,
	RESTRICT = scalargesel, JOIN = scalargejoinsel
);
COMMENT ON OPERATOR = (fence_token, integer) IS 'equal';
COMMENT ON OPERATOR <> (fence_token, integer) IS 'not equal';
COMMENT ON OPERATOR < (fence_token, integer) IS 'less than';
COMMENT ON OPERATOR <= (fence_token, integer) IS 'less than or equal';
COMMENT ON OPERATOR > (fence_token, integer) IS 'greater than';
COMMENT ON OPERATOR >= (fence_token, integer) IS 'greater than or equal';

-- integer vs fence_token
CREATE FUNCTION int4_fence_token_eq(integer, fence_token) RETURNS boolean
	AS 'int48eq' LANGUAGE internal IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;
CREATE FUNCTION int4_fence_token_ne(integer, fence_token) RETURNS boolean
	AS 'int48ne' LANGUAGE internal IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;
CREATE FUNCTION int4_fence_token_lt(integer, fence_token) RETURNS boolean
	AS 'int48lt' LANGUAGE internal IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;
CREATE FUNCTION int4_fence_token_le(integer, fence_token) RETURNS boolean
	AS 'int48le' LANGUAGE internal IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;
CREATE FUNCTION int4_fence_token_gt(integer, fence_token) RETURNS boolean
	AS 'int48gt' LANGUAGE internal IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;
CREATE FUNCTION int4_fence_token_ge(integer, fence_token) RETURNS boolean
	AS 'int48ge' LANGUAGE internal IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;
CREATE FUNCTION int4_fence_token_cmp(integer, fence_token) RETURNS integer
	AS 'btint48cmp' LANGUAGE internal IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;

COMMENT ON FUNCTION int4_fence_token_eq(integer, fence_token) IS 'implementation of = operator';
COMMENT ON FUNCTION int4_fence_token_ne(integer, fence_token) IS 'implementation of <> operator';
COMMENT ON FUNCTION int4_fence_token_lt(integer, fence_token) IS 'implementation of < operator';
COMMENT ON FUNCTION int4_fence_token_le(integer, fence_token) IS 'implementation of <= operator';
COMMENT ON FUNCTION int4_fence_token_gt(integer, fence_token) IS 'implementation of > operator';
COMMENT ON FUNCTION int4_fence_token_ge(integer, fence_token) IS 'implementation of >= operator';
COMMENT ON FUNCTION int4_fence_token_cmp(integer, fence_token) IS 'btree comparison';

CREATE OPERATOR = (
	LEFTARG = integer, RIGHTARG = fence_token, FUNCTION = int4_fence_token_eq,
	COMMUTATOR = = , NEGATOR = <> ,
	RESTRICT = eqsel, JOIN = eqjoinsel,
	HASHES, MERGES
);
CREATE OPERATOR <> (
	LEFTARG = integer, RIGHTARG = fence_token, FUNCTION = int4_fence_token_ne,
	COMMUTATOR = <> , NEGATOR = = ,
	RESTRICT = neqsel, JOIN = neqjoinsel
);
CREATE OPERATOR < (
	LEFTARG = integer, RIGHTARG = fence_token, FUNCTION = int4_fence_token_lt,
	COMMUTATOR = > , NEGATOR = >= ,
	RESTRICT = scalarltsel, JOIN = scalarltjoinsel
);
CREATE OPERATOR <= (
	LEFTARG = integer, RIGHTARG = fence_token, FUNCTION = int4_fence_token_le,
	COMMUTATOR = >= , NEGATOR = > ,
	RESTRICT = scalarlesel, JOIN = scalarlejoinsel
);
CREATE OPERATOR > (
	LEFTARG = integer, RIGHTARG = fence_token, FUNCTION = int4_fence_token_gt,
	COMMUTATOR = < , NEGATOR = <= ,
	RESTRICT = scalargtsel, JOIN = scalargtjoinsel
);
CREATE OPERATOR >= (
	LEFTARG = integer, RIGHTARG = fence_token, FUNCTION = int4_fence_token_ge,
	COMMUTATOR = <= , NEGATOR = < ,
	RESTRICT = scalargesel, JOIN = scalargejoinsel
);
COMMENT ON OPERATOR = (integer, fence_token) IS 'equal';
COMMENT ON OPERATOR <> (integer, fence_token) IS 'not equal';
COMMENT ON OPERATOR < (integer, fence_token) IS 'less than';
COMMENT ON OPERATOR <= (integer, fence_token) IS 'less than or equal';
COMMENT ON OPERATOR > (integer, fence_token) IS 'greater than';
COMMENT ON OPERATOR >= (integer, fence_token) IS 'greater than or equal';

-- fence_token vs smallint
CREATE FUNCTION fence_token_int2_eq(fence_token, smallint) RETURNS boolean
	AS 'int82eq' LANGUAGE internal IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;
CREATE FUNCTION fence_token_int2_ne(fence_token, smallint) RETURNS boolean
	AS 'int82ne' LANGUAGE internal IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;
CREATE FUNCTION fence_token_int2_lt(fence_token, smallint) RETURNS boolean
	AS 'int82lt' LANGUAGE internal IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;
CREATE FUNCTION fence_token_int2_le(fence_token, smallint) RETURNS boolean
	AS 'int82le' LANGUAGE internal IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;
CREATE FUNCTION fence_token_int2_gt(fence_token, smallint) RETURNS boolean
	AS 'int82gt' LANGUAGE internal IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;
CREATE FUNCTION fence_token_int2_ge(fence_token, smallint) RETURNS boolean
	AS 'int82ge' LANGUAGE internal IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;
CREATE FUNCTION fence_token_int2_cmp(fence_token, smallint) RETURNS integer
	AS 'btint82cmp' LANGUAGE internal IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;

COMMENT ON FUNCTION fence_token_int2_eq(fence_token, smallint) IS 'implementation of = operator';
COMMENT ON FUNCTION fence_token_int2_ne(fence_token, smallint) IS 'implementation of <> operator';
COMMENT ON FUNCTION fence_token_int2_lt(fence_token, smallint) IS 'implementation of < operator';
COMMENT ON FUNCTION fence_token_int2_le(fence_token, smallint) IS 'implementation of <= operator';
COMMENT ON FUNCTION fence_token_int2_gt(fence_token, smallint) IS 'implementation of > operator';
COMMENT ON FUNCTION fence_token_int2_ge(fence_token, smallint) IS 'implementation of >= operator';
COMMENT ON FUNCTION fence_token_int2_cmp(fence_token, smallint) IS 'btree comparison';

CREATE OPERATOR = (
	LEFTARG = fence_token, RIGHTARG = smallint, FUNCTION = fence_token_int2_eq,
	COMMUTATOR = = , NEGATOR = <> ,
	RESTRICT = eqsel, JOIN = eqjoinsel,
	HASHES, MERGES
);
CREATE OPERATOR <> (
	LEFTARG = fence_token, RIGHTARG = smallint, FUNCTION = fence_token_int2_ne,
	COMMUTATOR = <> , NEGATOR = = ,
	RESTRICT = neqsel, JOIN = neqjoinsel
);
CREATE OPERATOR < (
	LEFTARG = fence_token, RIGHTARG = smallint, FUNCTION = fence_token_int2_lt,
	COMMUTATOR = > , NEGATOR = >= ,
	RESTRICT = scalarltsel, JOIN = scalarltjoinsel
);
CREATE OPERATOR <= (
	LEFTARG = fence_token, RIGHTARG = smallint, FUNCTION = fence_token_int2_le,
	COMMUTATOR = >= , NEGATOR = > ,
	RESTRICT = scalarlesel, JOIN = scalarlejoinsel
);
CREATE OPERATOR > (
	LEFTARG = fence_token, RIGHTARG = smallint, FUNCTION = fence_token_int2_gt,
	COMMUTATOR = < , NEGATOR = <= ,
	RESTRICT = scalargtsel, JOIN = scalargtjoinsel
);
CREATE OPERATOR >= (
	LEFTARG = fence_token, RIGHTARG = smallint, FUNCTION = fence_token_int2_ge,
	COMMUTATOR = <= , NEGATOR = < ,
	RESTRICT = scalargesel, JOIN = scalargejoinsel
);
COMMENT ON OPERATOR = (fence_token, smallint) IS 'equal';
COMMENT ON OPERATOR <> (fence_token, smallint) IS 'not equal';
COMMENT ON OPERATOR < (fence_token, smallint) IS 'less than';
COMMENT ON OPERATOR <= (fence_token, smallint) IS 'less than or equal';
COMMENT ON OPERATOR > (fence_token, smallint) IS 'greater than';
COMMENT ON OPERATOR >= (fence_token, smallint) IS 'greater than or equal';

-- smallint vs fence_token
CREATE FUNCTION int2_fence_token_eq(smallint, fence_token) RETURNS boolean
	AS 'int28eq' LANGUAGE internal IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;
CREATE FUNCTION int2_fence_token_ne(smallint, fence_token) RETURNS boolean
	AS 'int28ne' LANGUAGE internal IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;
CREATE FUNCTION int2_fence_token_lt(smallint, fence_token) RETURNS boolean
	AS 'int28lt' LANGUAGE internal IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;
CREATE FUNCTION int2_fence_token_le(smallint, fence_token) RETURNS boolean
	AS 'int28le' LANGUAGE internal IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;
CREATE FUNCTION int2_fence_token_gt(smallint, fence_token) RETURNS boolean
	AS 'int28gt' LANGUAGE internal IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;
CREATE FUNCTION int2_fence_token_ge(smallint, fence_token) RETURNS boolean
	AS 'int28ge' LANGUAGE internal IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;
CREATE FUNCTION int2_fence_token_cmp(smallint, fence_token) RETURNS integer
	AS 'btint28cmp' LANGUAGE internal IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;

COMMENT ON FUNCTION int2_fence_token_eq(smallint, fence_token) IS 'implementation of = operator';
COMMENT ON FUNCTION int2_fence_token_ne(smallint, fence_token) IS 'implementation of <> operator';
COMMENT ON FUNCTION int2_fence_token_lt(smallint, fence_token) IS 'implementation of < operator';
COMMENT ON FUNCTION int2_fence_token_le(smallint, fence_token) IS 'implementation of <= operator';
COMMENT ON FUNCTION int2_fence_token_gt(smallint, fence_token) IS 'implementation of > operator';
COMMENT ON FUNCTION int2_fence_token_ge(smallint, fence_token) IS 'implementation of >= operator';
COMMENT ON FUNCTION int2_fence_token_cmp(smallint, fence_token) IS 'btree comparison';

CREATE OPERATOR = (
	LEFTARG = smallint, RIGHTARG = fence_token, FUNCTION = int2_fence_token_eq,
	COMMUTATOR = = , NEGATOR = <> ,
	RESTRICT = eqsel, JOIN = eqjoinsel,
	HASHES, MERGES
);
CREATE OPERATOR <> (
	LEFTARG = smallint, RIGHTARG = fence_token, FUNCTION = int2_fence_token_ne,
	COMMUTATOR = <> , NEGATOR = = ,
	RESTRICT = neqsel, JOIN = neqjoinsel
);
CREATE OPERATOR < (
	LEFTARG = smallint, RIGHTARG = fence_token, FUNCTION = int2_fence_token_lt,
	COMMUTATOR = > , NEGATOR = >= ,
	RESTRICT = scalarltsel, JOIN = scalarltjoinsel
);
CREATE OPERATOR <= (
	LEFTARG = smallint, RIGHTARG = fence_token, FUNCTION = int2_fence_token_le,
	COMMUTATOR = >= , NEGATOR = > ,
	RESTRICT = scalarlesel, JOIN = scalarlejoinsel
);
CREATE OPERATOR > (
	LEFTARG = smallint, RIGHTARG = fence_token, FUNCTION = int2_fence_token_gt,
	COMMUTATOR = < , NEGATOR = <= ,
	RESTRICT = scalargtsel, JOIN = scalargtjoinsel
);
CREATE OPERATOR >= (
	LEFTARG = smallint, RIGHTARG = fence_token, FUNCTION = int2_fence_token_ge,
	COMMUTATOR = <= , NEGATOR = < ,
	RESTRICT = scalargesel, JOIN = scalargejoinsel
);
COMMENT ON OPERATOR = (smallint, fence_token) IS 'equal';
COMMENT ON OPERATOR <> (smallint, fence_token) IS 'not equal';
COMMENT ON OPERATOR < (smallint, fence_token) IS 'less than';
COMMENT ON OPERATOR <= (smallint, fence_token) IS 'less than or equal';
COMMENT ON OPERATOR > (smallint, fence_token) IS 'greater than';
COMMENT ON OPERATOR >= (smallint, fence_token) IS 'greater than or equal';

-- fence_token opclasses
--
-- Joining the built-in integer_ops families rather than making our own
-- gives the planner every cross-type comparison between fence_token and
-- the integer types without duplicating the integer ones.

CREATE FUNCTION fence_token_sortsupport(internal) RETURNS void
	AS 'btint8sortsupport' LANGUAGE internal IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION fence_token_hash(fence_token) RETURNS integer
	AS 'hashint8' LANGUAGE internal IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION fence_token_hash_extended(fence_token, bigint) RETURNS bigint
	AS 'hashint8extended' LANGUAGE internal IMMUTABLE STRICT PARALLEL SAFE;

COMMENT ON FUNCTION fence_token_sortsupport(internal) IS 'sort support';
COMMENT ON FUNCTION fence_token_hash(fence_token) IS 'hash';
COMMENT ON FUNCTION fence_token_hash_extended(fence_token, bigint) IS 'hash';

CREATE OPERATOR CLASS fence_token_ops
	DEFAULT FOR TYPE fence_token USING btree FAMILY pg_catalog.integer_ops AS
	OPERATOR 1 < , OPERATOR 2 <= , OPERATOR 3 = , OPERATOR 4 >= , OPERATOR 5 > ,
	FUNCTION 1 fence_token_cmp(fence_token, fence_token),
	FUNCTION 2 fence_token_sortsupport(internal);

ALTER OPERATOR FAMILY pg_catalog.integer_ops USING btree ADD
	OPERATOR 1 < (fence_token, bigint), OPERATOR 2 <= (fence_token, bigint),
	OPERATOR 3 = (fence_token, bigint), OPERATOR 4 >= (fence_token, bigint),
	OPERATOR 5 > (fence_token, bigint),
	FUNCTION 1 (fence_token, bigint) fence_token_int8_cmp(fence_token, bigint),
	OPERATOR 1 < (bigint, fence_token), OPERATOR 2 <= (bigint, fence_token),
	OPERATOR 3 = (bigint, fence_token), OPERATOR 4 >= (bigint, fence_token),
	OPERATOR 5 > (bigint, fence_token),
	FUNCTION 1 (bigint, fence_token) int8_fence_token_cmp(bigint, fence_token),
	OPERATOR 1 < (fence_token, integer), OPERATOR 2 <= (fence_token, integer),
	OPERATOR 3 = (fence_token, integer), OPERATOR 4 >= (fence_token, integer),
	OPERATOR 5 > (fence_token, integer),
	FUNCTION 1 (fence_token, integer) fence_token_int4_cmp(fence_token, integer),
	OPERATOR 1 < (integer, fence_token), OPERATOR 2 <= (integer, fence_token),
	OPERATOR 3 = (integer, fence_token), OPERATOR 4 >= (integer, fence_token),
	OPERATOR 5 > (integer, fence_token),
	FUNCTION 1 (integer, fence_token) int4_fence_token_cmp(integer, fence_token),
	OPERATOR 1 < (fence_token, smallint), OPERATOR 2 <= (fence_token, smallint),
	OPERATOR 3 = (fence_token, smallint), OPERATOR 4 >= (fence_token, smallint),
	OPERATOR 5 > (fence_token, smallint),
	FUNCTION 1 (fence_token, smallint) fence_token_int2_cmp(fence_token, smallint),
	OPERATOR 1 < (smallint, fence_token), OPERATOR 2 <= (smallint, fence_token),
	OPERATOR 3 = (smallint, fence_token), OPERATOR 4 >= (smallint, fence_token),
	OPERATOR 5 > (smallint, fence_token),
	FUNCTION 1 (smallint, fence_token) int2_fence_token_cmp(smallint, fence_token);

CREATE OPERATOR CLASS fence_token_ops
	DEFAULT FOR TYPE fence_token USING hash FAMILY pg_catalog.integer_ops AS
	OPERATOR 1 = ,
	FUNCTION 1 fence_token_hash(fence_token),
	FUNCTION 2 fence_token_hash_extended(fence_token, bigint);

ALTER OPERATOR FAMILY pg_catalog.integer_ops USING hash ADD
	OPERATOR 1 = (fence_token, bigint), OPERATOR 1 = (bigint, fence_token),
	OPERATOR 1 = (fence_token, integer), OPERATOR 1 = (integer, fence_token),
	OPERATOR 1 = (fence_token, smallint), OPERATOR 1 = (smallint, fence_token);

-- fence_token aggregates

CREATE FUNCTION fence_token_smaller(fence_token, fence_token) RETURNS fence_token
	AS 'int8smaller' LANGUAGE internal IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION fence_token_larger(fence_token, fence_token) RETURNS fence_token
	AS 'int8larger' LANGUAGE internal IMMUTABLE STRICT PARALLEL SAFE;

COMMENT ON FUNCTION fence_token_smaller(fence_token, fence_token) IS 'smaller of two';
COMMENT ON FUNCTION fence_token_larger(fence_token, fence_token) IS 'larger of two';

CREATE AGGREGATE min(fence_token) (
	SFUNC = fence_token_smaller, STYPE = fence_token,
	COMBINEFUNC = fence_token_smaller, SORTOP = < , PARALLEL = SAFE
);
CREATE AGGREGATE max(fence_token) (
	SFUNC = fence_token_larger, STYPE = fence_token,
	COMBINEFUNC = fence_token_larger, SORTOP = > , PARALLEL = SAFE
);

COMMENT ON AGGREGATE min(fence_token) IS 'minimum value of all fence_token input values';
COMMENT ON AGGREGATE max(fence_token) IS 'maximum value of all fence_token input values';

-- high-water marks
--
-- One row per resource: the highest token accepted for it.  Only the
-- extension's functions write it, running as its owner; nobody else may
-- touch the table, so that no ordinary user can lower a mark.  Its rows
-- are dumped by pg_dump (pg_extension_config_dump), so that a restore
-- does not re-admit stale tokens.

-- Half-empty pages leave room for a raised mark on the page of the old one,
-- so that raising it is a HOT update that touches no index.
CREATE TABLE fence_high_water (
	resource text COLLATE "C" PRIMARY KEY,
	token    fence_token NOT NULL,
	moved_at timestamptz NOT NULL
) WITH (fillfactor = 50);
REVOKE ALL ON fence_high_water FROM PUBLIC;
SELECT pg_catalog.pg_extension_config_dump('fence_high_water', '');

COMMENT ON TABLE fence_high_water IS 'highest fence token accepted per resource; written only by fencing';

CREATE VIEW fence_marks AS
	SELECT resource, token, moved_at FROM @extschema@.fence_high_water;
GRANT SELECT ON fence_marks TO PUBLIC;

COMMENT ON VIEW fence_marks IS 'high-water mark of every resource, and when it last moved';

CREATE FUNCTION fence_mark(resource text) RETURNS fence_token
	AS 'MODULE_PATHNAME' LANGUAGE C STABLE STRICT PARALLEL RESTRICTED;
CREATE FUNCTION fence_advance(resource text, token fence_token) RETURNS fence_token
	AS 'MODULE_PATHNAME' LANGUAGE C VOLATILE PARALLEL UNSAFE;
CREATE FUNCTION fence_forget(resource text) RETURNS boolean
	AS 'MODULE_PATHNAME' LANGUAGE C VOLATILE PARALLEL UNSAFE;
REVOKE ALL ON FUNCTION fence_advance(text, fence_token) FROM PUBLIC;
REVOKE ALL ON FUNCTION fence_forget(text) FROM PUBLIC;

COMMENT ON FUNCTION fence_mark(text) IS 'current high-water mark of a resource, NULL if none';
COMMENT ON FUNCTION fence_advance(text, fence_token) IS 'raise the mark of a resource, fencing out older tokens; never lowers it';
COMMENT ON FUNCTION fence_forget(text) IS 'delete the mark of a retired resource';

-- declared tokens

CREATE FUNCTION fence_use(resource text, token fence_token, is_local boolean DEFAULT false)
	RETURNS void
	AS 'MODULE_PATHNAME' LANGUAGE C VOLATILE PARALLEL UNSAFE;
CREATE FUNCTION fence_declared(OUT resource text, OUT token fence_token, OUT is_local boolean)
	RETURNS SETOF record
	AS 'MODULE_PATHNAME' LANGUAGE C VOLATILE STRICT PARALLEL UNSAFE;

COMMENT ON FUNCTION fence_use(text, fence_token, boolean) IS 'declare the token this session (or transaction) writes a resource with';
COMMENT ON FUNCTION fence_declared() IS 'tokens declared in this session';

-- trigger functions
--
-- EXECUTE on a trigger function is checked when a trigger is created, not
-- when it fires.  Revoking it from PUBLIC means only roles granted it can
-- guard a table, and so raise marks of resources they name; writers of a
-- guarded table need nothing.

CREATE FUNCTION fence_guard() RETURNS trigger
	AS 'MODULE_PATHNAME' LANGUAGE C;
CREATE FUNCTION fence_truncate_guard() RETURNS trigger
	AS 'MODULE_PATHNAME' LANGUAGE C;
REVOKE ALL ON FUNCTION fence_guard() FROM PUBLIC;

COMMENT ON FUNCTION fence_guard() IS 'row trigger rejecting writes whose fence token is below the resource''s high-water mark';
COMMENT ON FUNCTION fence_truncate_guard() IS 'TRUNCATE trigger refusing to truncate a fenced table';

-- redis functions
--
-- Locks and tokens from the Redis server named by the fencing.redis_*
-- settings.  They open a network connection from the backend, so EXECUTE
-- is revoked from PUBLIC; grant them to the roles that take locks:
--
--   GRANT EXECUTE ON FUNCTION fenced_acquire(text, interval, interval),
--       fenced_extend(text, interval), fenced_release(text), fenced_leases()
--       TO app;
--
-- A NULL ttl or wait means fencing.default_ttl or fencing.default_wait.
-- In a build without hiredis they exist, and raise an error.

CREATE FUNCTION fenced_acquire(resource text, ttl interval DEFAULT NULL, wait interval DEFAULT NULL)
	RETURNS fence_token
	AS 'MODULE_PATHNAME' LANGUAGE C VOLATILE PARALLEL UNSAFE;
CREATE FUNCTION fenced_extend(resource text, ttl interval DEFAULT NULL)
	RETURNS boolean
	AS 'MODULE_PATHNAME' LANGUAGE C VOLATILE PARALLEL UNSAFE;
CREATE FUNCTION fenced_release(resource text)
	RETURNS boolean
	AS 'MODULE_PATHNAME' LANGUAGE C VOLATILE PARALLEL UNSAFE;
CREATE FUNCTION fenced_leases(OUT resource text, OUT token fence_token, OUT owner text,
		OUT acquired timestamptz, OUT expires timestamptz)
	RETURNS SETOF record
	AS 'MODULE_PATHNAME' LANGUAGE C VOLATILE STRICT PARALLEL UNSAFE;
REVOKE ALL ON FUNCTION fenced_acquire(text, interval, interval) FROM PUBLIC;
REVOKE ALL ON FUNCTION fenced_extend(text, interval) FROM PUBLIC;
REVOKE ALL ON FUNCTION fenced_release(text) FROM PUBLIC;
REVOKE ALL ON FUNCTION fenced_leases() FROM PUBLIC;

COMMENT ON FUNCTION fenced_acquire(text, interval, interval) IS 'take the Redis lock on a resource and a new token, declared for the session; NULL if still busy after wait';
COMMENT ON FUNCTION fenced_extend(text, interval) IS 'extend this session''s Redis lock on a resource; false if it was lost';
COMMENT ON FUNCTION fenced_release(text) IS 'release this session''s Redis lock on a resource; false if it was no longer ours';
COMMENT ON FUNCTION fenced_leases() IS 'Redis locks this session holds';
