-- In resource scope the token an existing row carries is a floor under
-- its resource's mark: an UPDATE or DELETE of the row is checked against
-- the higher of the two.  Marks can be missing (fence_forget_idle, a
-- restore without them) or recreated low, while the rows keep theirs.

CREATE TABLE accounts (id int PRIMARY KEY, balance int NOT NULL, tok fence_token);
CREATE TRIGGER fence BEFORE INSERT OR UPDATE OR DELETE ON accounts
	FOR EACH ROW EXECUTE FUNCTION fence_guard('tok', 'acct:{id}');
INSERT INTO accounts VALUES (1, 1000, 35), (2, 500, 35);

-- the marks are forgotten, the rows still carry 35
SELECT fence_forget('acct:1'), fence_forget('acct:2');
SELECT fence_mark('acct:1') IS NULL AS no_mark;
-- a stale UPDATE below the row's token is rejected, and writes no mark
UPDATE accounts SET balance = 1, tok = 1 WHERE id = 1;
SELECT fence_mark('acct:1') IS NULL AS still_no_mark;
-- so is a DELETE with a declared token below it
SELECT fence_use('acct:1', 34);
DELETE FROM accounts WHERE id = 1;
SELECT fence_use('acct:1', NULL);
-- the row's own token, or above, is accepted and recreates the mark
UPDATE accounts SET balance = 1001, tok = 35 WHERE id = 1;
SELECT fence_mark('acct:1');

-- after a forget, a first INSERT at 1 of another row of the resource
-- creates a low mark; the old row at 35 still refuses token 2
CREATE TABLE items (acct int NOT NULL, line int NOT NULL, tok fence_token,
	PRIMARY KEY (acct, line));
CREATE TRIGGER fence BEFORE INSERT OR UPDATE OR DELETE ON items
	FOR EACH ROW EXECUTE FUNCTION fence_guard('tok', 'acct:{acct}');
INSERT INTO items VALUES (2, 1, 35);
SELECT fence_forget('acct:2');
INSERT INTO items VALUES (2, 2, 1);
SELECT fence_mark('acct:2');
UPDATE items SET tok = 2 WHERE acct = 2 AND line = 1;
-- rows at or below the new mark are writable as usual
UPDATE items SET tok = 2 WHERE acct = 2 AND line = 2;
SELECT acct, line, tok FROM items ORDER BY line;

-- a row moving to another resource: the old row's token is a floor for
-- the resource it leaves
SELECT fence_forget('acct:2');
UPDATE items SET acct = 3, tok = 20 WHERE acct = 2 AND line = 1;
SELECT fence_mark('acct:3') IS NULL AS no_mark_for_the_target;

-- a strict guard: an equal token is the mark's affair, not the floor's
CREATE TABLE strict_items (id int PRIMARY KEY, tok fence_token);
CREATE TRIGGER fence BEFORE INSERT OR UPDATE ON strict_items
	FOR EACH ROW EXECUTE FUNCTION fence_guard('tok', 's:{id}', 'strict');
INSERT INTO strict_items VALUES (1, 10);
SELECT fence_forget('s:1');
UPDATE strict_items SET tok = 9 WHERE id = 1;
UPDATE strict_items SET tok = 11 WHERE id = 1;
SELECT id, tok FROM strict_items;

DROP TABLE accounts, items, strict_items;
DELETE FROM fence_high_water;
