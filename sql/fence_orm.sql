-- ORMs write every loaded column back: when a token is declared for the
-- write's resource, the write carries the declared token, whatever the
-- statement sets (lower or higher)

CREATE TABLE app_order (id int PRIMARY KEY, status text, tok fence_token);
CREATE TRIGGER fence BEFORE INSERT OR UPDATE OR DELETE ON app_order
	FOR EACH ROW EXECUTE FUNCTION fence_guard('tok', 'order:{id}');
INSERT INTO app_order VALUES (42, 'paid', 33);

-- section: Django's Model.save() (update_fields=None) writes every field:
-- B holds the lock at 34 and saves the row it loaded at 33
SELECT fence_use('order:42', 34);
UPDATE "app_order" SET "status" = 'shipped', "tok" = 33 WHERE "app_order"."id" = 42;
SELECT * FROM app_order;
SELECT fence_mark('order:42');
SELECT fence_use('order:42', NULL);
-- the stale holder A, at 33, is now rejected
UPDATE "app_order" SET "status" = 'refunded', "tok" = 33 WHERE "app_order"."id" = 42;

-- section: a stalled holder echoing the newer holder's token. A declared
-- 33 and stalled; B (34) wrote the row; A then loads the row, now at 34,
-- and saves every column, Django style: the write carries A's declared 33
-- and is rejected, B's work stays
INSERT INTO app_order VALUES (60, 'new', 30);
SELECT fence_use('order:60', 33);
-- B writes with its token (played here by withdrawing A's declaration;
-- the isolation spec declared_echo plays A and B in two sessions)
SELECT fence_use('order:60', NULL);
UPDATE app_order SET status = 'paid', tok = 34 WHERE id = 60;
SELECT fence_use('order:60', 33);
UPDATE "app_order" SET "status" = 'refunded', "tok" = 34 WHERE "app_order"."id" = 60;
-- the same with Hibernate's static all-column UPDATE, as a prepared statement
PREPARE hibernate_echo (text, fence_token, int) AS
	update app_order set status=$1, tok=$2 where id=$3;
EXECUTE hibernate_echo('refunded', 34, 60);
DEALLOCATE hibernate_echo;
SELECT fence_use('order:60', NULL);
SELECT * FROM app_order WHERE id = 60;

-- section: Hibernate without @DynamicUpdate: one static UPDATE listing
-- every updatable column, as a prepared statement
SELECT fence_use('order:42', 35, is_local => false);
PREPARE hibernate_update (text, fence_token, int) AS
	update app_order set status=$1, tok=$2 where id=$3;
EXECUTE hibernate_update('packed', 34, 42);
SELECT * FROM app_order;
SELECT fence_use('order:42', NULL);
EXECUTE hibernate_update('lost', 34, 42);
DEALLOCATE hibernate_update;

-- section: Django's INSERT of a new object sends its unset token as NULL
SELECT fence_use('order:43', 7);
INSERT INTO "app_order" ("id", "status", "tok") VALUES (43, 'new', NULL);
SELECT * FROM app_order WHERE id = 43;
SELECT fence_use('order:43', NULL);

-- section: the precedence table, one row each
-- declared, statement sets the declared token: that token
SELECT fence_use('order:42', 36);
UPDATE app_order SET tok = 36 WHERE id = 42;
SELECT tok FROM app_order WHERE id = 42;
-- declared, statement sets a higher token: the declared one, stamped
UPDATE app_order SET tok = 40 WHERE id = 42;
SELECT tok FROM app_order WHERE id = 42;
SELECT fence_mark('order:42');
SELECT fence_use('order:42', 41);
-- declared, statement sets a lower token: the declared one, stamped
UPDATE app_order SET tok = 2 WHERE id = 42;
SELECT tok FROM app_order WHERE id = 42;
-- declared, statement sets NULL: the declared one, stamped
UPDATE app_order SET tok = NULL WHERE id = 42;
SELECT tok FROM app_order WHERE id = 42;
-- declared, statement does not set it: the declared one, stamped
SELECT fence_use('order:42', 42);
UPDATE app_order SET status = 'done' WHERE id = 42;
SELECT tok FROM app_order WHERE id = 42;
SELECT fence_use('order:42', NULL);
-- nothing declared, statement sets it: the statement's
UPDATE app_order SET tok = 43 WHERE id = 42;
-- nothing declared, statement sets NULL or nothing: rejected
UPDATE app_order SET tok = NULL WHERE id = 42;
UPDATE app_order SET status = 'x' WHERE id = 42;
-- a transaction-local declaration takes part the same way
BEGIN;
SELECT fence_use('order:42', 44, is_local => true);
UPDATE app_order SET tok = 43 WHERE id = 42;
COMMIT;
SELECT id, status, tok FROM app_order ORDER BY id;
SELECT resource, token FROM fence_marks WHERE resource LIKE 'order:%' ORDER BY 1;

-- section: a row moving between resources: each side uses its own
-- declaration, the row stores the new side's
SELECT fence_use('order:50', 60);
SELECT fence_use('order:42', 45);
UPDATE app_order SET id = 50, tok = 3 WHERE id = 42;
SELECT id, tok FROM app_order ORDER BY id;
SELECT resource, token FROM fence_marks WHERE resource IN ('order:42', 'order:50') ORDER BY 1;
SELECT fence_use('order:50', NULL), fence_use('order:42', NULL);

DROP TABLE app_order;
DELETE FROM fence_high_water;
