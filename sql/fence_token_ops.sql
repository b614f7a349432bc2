-- fence_token operators, opclasses and aggregates

-- every operator, against fence_token and each integer type, both ways
CREATE TABLE pairs (a fence_token, b fence_token);
INSERT INTO pairs VALUES ('1', '2'), ('2', '2'), ('3', '2');
SELECT a, b, a = b AS eq, a <> b AS ne, a < b AS lt, a <= b AS le, a > b AS gt,
	a >= b AS ge
FROM pairs ORDER BY a;
SELECT a, a = 2::bigint AS eq, a <> 2::bigint AS ne, a < 2::bigint AS lt,
	a <= 2::bigint AS le, a > 2::bigint AS gt, a >= 2::bigint AS ge
FROM pairs ORDER BY a;
SELECT a, 2::bigint = a AS eq, 2::bigint <> a AS ne, 2::bigint < a AS lt,
	2::bigint <= a AS le, 2::bigint > a AS gt, 2::bigint >= a AS ge
FROM pairs ORDER BY a;
SELECT a, a = 2 AS eq, a <> 2 AS ne, a < 2 AS lt, a <= 2 AS le, a > 2 AS gt,
	a >= 2 AS ge
FROM pairs ORDER BY a;
SELECT a, 2 = a AS eq, 2 <> a AS ne, 2 < a AS lt, 2 <= a AS le, 2 > a AS gt,
	2 >= a AS ge
FROM pairs ORDER BY a;
SELECT a, a = 2::smallint AS eq, a <> 2::smallint AS ne, a < 2::smallint AS lt,
	a <= 2::smallint AS le, a > 2::smallint AS gt, a >= 2::smallint AS ge
FROM pairs ORDER BY a;
SELECT a, 2::smallint = a AS eq, 2::smallint <> a AS ne, 2::smallint < a AS lt,
	2::smallint <= a AS le, 2::smallint > a AS gt, 2::smallint >= a AS ge
FROM pairs ORDER BY a;
-- values beyond the integer's range on the other side
SELECT '9223372036854775807'::fence_token > 2147483647 AS above_int4,
	'40000'::fence_token > 32767::smallint AS above_int2;
DROP TABLE pairs;

-- planner metadata of every operator that takes a fence_token
SELECT o.oprname, o.oprleft::regtype, o.oprright::regtype,
	c.oprname AS commutator, n.oprname AS negator,
	o.oprrest, o.oprjoin, o.oprcanhash AS hashes, o.oprcanmerge AS merges
FROM pg_operator o
	LEFT JOIN pg_operator c ON c.oid = o.oprcom
	LEFT JOIN pg_operator n ON n.oid = o.oprnegate
WHERE 'fence_token'::regtype IN (o.oprleft, o.oprright)
ORDER BY o.oprleft::regtype::text, o.oprright::regtype::text, o.oprname;

-- the opclasses are the default ones and sit in the integer families
SELECT am.amname, opc.opcname, opf.opfname, opc.opcdefault
FROM pg_opclass opc
	JOIN pg_am am ON am.oid = opc.opcmethod
	JOIN pg_opfamily opf ON opf.oid = opc.opcfamily
WHERE opc.opcintype = 'fence_token'::regtype
ORDER BY am.amname;
SELECT am.amname, p.amproclefttype::regtype, p.amprocrighttype::regtype,
	p.amprocnum, p.amproc
FROM pg_amproc p
	JOIN pg_opfamily f ON f.oid = p.amprocfamily
	JOIN pg_am am ON am.oid = f.opfmethod
WHERE 'fence_token'::regtype IN (p.amproclefttype, p.amprocrighttype)
ORDER BY 1, 2::text, 3::text, 4;

-- the families stay consistent for the index AMs' own validators
SELECT opc.opcname, am.amname, amvalidate(opc.oid)
FROM pg_opclass opc JOIN pg_am am ON am.oid = opc.opcmethod
WHERE opc.opcintype = 'fence_token'::regtype
ORDER BY am.amname;

-- index use: a btree index on a fence_token column serves comparisons
-- with integer literals of every width, without a cast in the query
CREATE TABLE orders (id integer, t fence_token);
INSERT INTO orders SELECT g, g FROM generate_series(1, 10000) g;
CREATE INDEX orders_t ON orders (t);
ANALYZE orders;
SET enable_seqscan = off;
SET enable_bitmapscan = off;
EXPLAIN (COSTS OFF) SELECT id FROM orders WHERE t < 33;
EXPLAIN (COSTS OFF) SELECT id FROM orders WHERE t = 33::bigint;
EXPLAIN (COSTS OFF) SELECT id FROM orders WHERE 33::smallint >= t;
EXPLAIN (COSTS OFF) SELECT id FROM orders WHERE t = '33';
SELECT id FROM orders WHERE t < 4 ORDER BY t;
SELECT id FROM orders WHERE t BETWEEN 9998 AND 20000 ORDER BY t DESC;
-- the index also provides order, through sort support and the opclass
EXPLAIN (COSTS OFF) SELECT id FROM orders ORDER BY t LIMIT 3;
RESET enable_seqscan;
RESET enable_bitmapscan;

-- a hash index
CREATE INDEX orders_t_hash ON orders USING hash (t);
SET enable_seqscan = off;
SET enable_bitmapscan = off;
DROP INDEX orders_t;
EXPLAIN (COSTS OFF) SELECT id FROM orders WHERE t = 42;
SELECT id FROM orders WHERE t = 42;
RESET enable_seqscan;
RESET enable_bitmapscan;
DROP INDEX orders_t_hash;

-- joins against a bigint column: hash join and merge join
CREATE TABLE ledger (ref bigint);
INSERT INTO ledger SELECT g * 2 FROM generate_series(1, 5000) g;
ANALYZE ledger;
SET enable_mergejoin = off;
SET enable_nestloop = off;
EXPLAIN (COSTS OFF) SELECT count(*) FROM orders o JOIN ledger l ON o.t = l.ref;
SELECT count(*) FROM orders o JOIN ledger l ON o.t = l.ref;
RESET enable_mergejoin;
RESET enable_nestloop;
SET enable_hashjoin = off;
SET enable_nestloop = off;
EXPLAIN (COSTS OFF) SELECT count(*) FROM orders o JOIN ledger l ON o.t = l.ref;
SELECT count(*) FROM orders o JOIN ledger l ON o.t = l.ref;
RESET enable_hashjoin;
RESET enable_nestloop;
-- and between two fence_token columns
SET enable_mergejoin = off;
SET enable_nestloop = off;
EXPLAIN (COSTS OFF) SELECT count(*) FROM orders a JOIN orders b ON a.t = b.t;
SELECT count(*) FROM orders a JOIN orders b ON a.t = b.t;
RESET enable_mergejoin;
RESET enable_nestloop;

-- hashing agrees with bigint's, so equal values of either type meet
SELECT fence_token_hash('42') = hashint8(42) AS same_hash,
	fence_token_hash_extended('42', 7) = hashint8extended(42, 7) AS same_extended;
SELECT count(DISTINCT t) FROM orders;
SELECT t, count(*) FROM (VALUES ('1'::fence_token), ('2'), ('1')) v(t)
GROUP BY t ORDER BY t;

-- sorting, with sort support
SELECT t FROM (VALUES ('10'::fence_token), ('0x2'), ('9223372036854775807'), ('0'))
	v(t) ORDER BY t;

-- min and max, also answered from the index
SELECT min(t), max(t) FROM orders;
SELECT min(t), max(t) FROM orders WHERE false;
SELECT min(t) FROM (VALUES ('5'::fence_token), (NULL), ('3')) v(t);
CREATE INDEX orders_t ON orders (t);
EXPLAIN (COSTS OFF) SELECT max(t) FROM orders;
SELECT max(t) FROM orders;
DROP TABLE orders, ledger;

-- a unique constraint and a primary key use the default opclasses
CREATE TABLE grants (t fence_token PRIMARY KEY);
INSERT INTO grants VALUES (1), (2);
INSERT INTO grants VALUES ('0x1');
DROP TABLE grants;
