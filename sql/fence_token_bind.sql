-- Tokens bound the ways client drivers bind them (doc/clients.md "Java (JDBC,
-- HikariCP)"): as varchar and text (JDBC setString), numeric
-- (setObject(BigInteger)), bigint (setLong) and unknown
-- (stringtype=unspecified, or a literal).
CREATE TABLE bind_orders (order_id int PRIMARY KEY, status text, tok fence_token);
CREATE TRIGGER fence BEFORE INSERT OR UPDATE ON bind_orders
	FOR EACH ROW EXECUTE FUNCTION fence_guard('tok', 'bind:{order_id}');
-- stored in a token column: every binding works
PREPARE ins_varchar(int, varchar) AS INSERT INTO bind_orders VALUES ($1, 'new', $2);
PREPARE upd_varchar(varchar) AS UPDATE bind_orders SET tok = $1 WHERE order_id = 1 RETURNING tok;
PREPARE upd_text(text) AS UPDATE bind_orders SET tok = $1 WHERE order_id = 1 RETURNING tok;
PREPARE upd_numeric(numeric) AS UPDATE bind_orders SET tok = $1 WHERE order_id = 1 RETURNING tok;
PREPARE upd_bigint(bigint) AS UPDATE bind_orders SET tok = $1 WHERE order_id = 1 RETURNING tok;
EXECUTE ins_varchar(1, '10');
EXECUTE upd_varchar('11');
EXECUTE upd_text('12');
EXECUTE upd_numeric(13);
EXECUTE upd_bigint(14);
-- the string is checked as a token literal is
EXECUTE upd_varchar('-1');
EXECUTE upd_text('twelve');
EXECUTE upd_varchar('9223372036854775808');
-- and a stale one is fenced as any other
EXECUTE upd_varchar('13');
-- the largest token (the mark moved near it by hand first: a token only
-- the statement supplies may be at most fencing.max_token_step above it)
SELECT fence_advance('bind:1', 9223372036854775000);
EXECUTE upd_text('9223372036854775807');
-- in fence_use(): bigint and unknown work; a string does not (42883,
-- cast it: $2::fence_token), nor numeric
BEGIN;
PREPARE use_bigint(text, bigint) AS SELECT fence_use($1, $2, is_local => true);
EXECUTE use_bigint('bind:2', 20);
SELECT fence_use('bind:2', '21', is_local => true);
SELECT fence_use('bind:2', 22, is_local => true);
PREPARE use_cast(text, varchar) AS SELECT fence_use($1, $2::fence_token, is_local => true);
EXECUTE use_cast('bind:2', '23');
SELECT resource, token FROM fence_declared();
COMMIT;
PREPARE use_varchar(text, varchar) AS SELECT fence_use($1, $2);
PREPARE use_numeric(text, numeric) AS SELECT fence_use($1, $2);
-- comparisons stay unambiguous: a string is a token only as a literal
SELECT tok = '9223372036854775807' AS literal_equal FROM bind_orders;
SELECT tok = 9223372036854775807 AS bigint_equal FROM bind_orders;
SELECT tok::text = '9223372036854775807'::varchar AS as_text FROM bind_orders;
DROP TABLE bind_orders;
SELECT fence_forget('bind:1');
