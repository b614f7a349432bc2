-- The rule naming a row's resource is written twice, in C for the guard
-- and in SQL for fence_attach()'s seeding (resource_template.c): both must
-- name every row alike, on every type a placeholder accepts.

-- section: one placeholder of each accepted type, and domains over some
CREATE TYPE rt_colour AS ENUM ('red', 'green', 'with space');
CREATE DOMAIN rt_int AS int;
CREATE DOMAIN rt_num AS numeric;
CREATE DOMAIN rt_chr AS char(6);
CREATE TABLE rt_rows (
	n int, b boolean, c "char", nm name, i2 int2, i4 int4, i8 int8, o oid,
	t text, bp char(6), vc varchar(10), nu numeric, u uuid, e rt_colour,
	ft fence_token, di rt_int, dn rt_num, dc rt_chr);
INSERT INTO rt_rows VALUES
	(1, true, 'x', 'name', -32768, -2147483648, -9223372036854775808, 0,
	 '', 'ab', '', 42.0, '00000000-0000-0000-0000-000000000000', 'red',
	 0, -1, 42.50, 'ab'),
	(2, false, 'Y', 'with space', 32767, 2147483647, 9223372036854775807,
	 4294967295, 'a {b} ''c'' %s \n', 'ab   c', 'x y ', 0.000,
	 'A0EEBC99-9C0B-4EF8-BB6D-6BB9BD380A11', 'with space',
	 9223372036854775807, 0, -0.0100, ' a '),
	(3, true, ' ', 'x', 0, 0, 0, 1, 'é ü', '', '  ', 'NaN',
	 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a12', 'green', 7, 12, 1e20, ''),
	(4, false, '''', '"q"', 1, 1, 1, 2, '{{x}}', ' lead', 'tail  ',
	 'Infinity', 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a13', 'red', 8, 13,
	 '-Infinity', 'z     ');

-- For each column: the C rule names the marks 'c:<column>:<n>:<value>' as
-- the rows are written through a guard, and the SQL rule names the marks
-- 's:<column>:<n>:<value>' as fence_attach() seeds them from the same rows.
CREATE FUNCTION rt_both_rules(col text) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
	EXECUTE format('CREATE TABLE %I (LIKE rt_rows, tok fence_token)', 'rt_c_' || col);
	EXECUTE format('CREATE TRIGGER g BEFORE INSERT ON %I FOR EACH ROW EXECUTE FUNCTION fence_guard(%L, %L)',
		'rt_c_' || col, 'tok', 'c:' || col || ':{n}:{' || col || '}');
	EXECUTE format('INSERT INTO %I SELECT *, 5 FROM rt_rows', 'rt_c_' || col);
	EXECUTE format('CREATE TABLE %I (LIKE rt_rows, tok fence_token)', 'rt_s_' || col);
	EXECUTE format('INSERT INTO %I SELECT *, 5 FROM rt_rows', 'rt_s_' || col);
	PERFORM fence_attach(('rt_s_' || col)::regclass, 'tok',
						 's:' || col || ':{n}:{' || col || '}');
END
$$;
SELECT count(rt_both_rules(col)) FROM unnest(ARRAY['b', 'c', 'nm', 'i2',
	'i4', 'i8', 'o', 't', 'bp', 'vc', 'nu', 'u', 'e', 'ft', 'di', 'dn', 'dc']) col;

-- Every row names the same resource by both rules: no mark of one is
-- missing from the other.
SELECT substr(resource, 3) AS only_in_c FROM fence_marks WHERE resource LIKE 'c:%'
EXCEPT SELECT substr(resource, 3) FROM fence_marks WHERE resource LIKE 's:%';
SELECT substr(resource, 3) AS only_in_sql FROM fence_marks WHERE resource LIKE 's:%'
EXCEPT SELECT substr(resource, 3) FROM fence_marks WHERE resource LIKE 'c:%';
-- 17 columns, 4 rows each: the names themselves
SELECT resource FROM fence_marks WHERE resource LIKE 'c:%' ORDER BY resource COLLATE "C";

-- section: values that compare equal name one resource, in C as in SQL
-- (42.0 and 42.000, 'ab' and 'ab    '): the guard finds the seeded mark
INSERT INTO rt_s_nu (n, nu, tok) VALUES (1, 42.000, 4);
INSERT INTO rt_s_dn (n, dn, tok) VALUES (1, 42.5000, 4);
INSERT INTO rt_s_bp (n, bp, tok) VALUES (1, 'ab    ', 4);
INSERT INTO rt_s_dc (n, dc, tok) VALUES (1, 'ab', 6);
SELECT resource, token FROM fence_marks WHERE resource = 's:dc:1:ab';

DO $$
DECLARE
	col text;
BEGIN
	FOREACH col IN ARRAY ARRAY['b', 'c', 'nm', 'i2', 'i4', 'i8', 'o', 't',
		'bp', 'vc', 'nu', 'u', 'e', 'ft', 'di', 'dn', 'dc']
	LOOP
		EXECUTE format('DROP TABLE %I, %I', 'rt_c_' || col, 'rt_s_' || col);
	END LOOP;
END
$$;
DROP FUNCTION rt_both_rules(text);
DROP TABLE rt_rows;
DROP DOMAIN rt_int, rt_num, rt_chr;
DROP TYPE rt_colour;
SELECT count(fence_forget(resource)) FROM fence_marks
	WHERE resource LIKE 'c:%' OR resource LIKE 's:%';
