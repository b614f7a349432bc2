-- fence_forget_idle(older_than, pattern): forgetting many marks at once,
-- explicitly, by a privileged role, bounded by a grace period

CREATE ROLE regress_fence_janitor;
-- it reads every mark, as pg_read_all_stats does
GRANT pg_read_all_stats TO regress_fence_janitor;

-- the marks' versions as an earlier call would have seen them when they
-- last moved: without track_commit_timestamp (as here) a mark is forgotten
-- only once fence_forget_idle() has seen its version idle for the whole
-- grace period, across calls
CREATE FUNCTION seen_idle() RETURNS void LANGUAGE sql AS $$
	INSERT INTO fence_forget_candidates SELECT resource, xmin, moved_at FROM fence_high_water
	ON CONFLICT (resource) DO UPDATE SET version = excluded.version, seen_at = excluded.seen_at
$$;

-- marks idle for 10 days, 2 days and none, in two families of resources
SELECT fence_advance(r, 7) FROM unnest(ARRAY['job:1', 'job:2', 'job:10', 'jobs_all',
	'order:1', 'order:2', 'order:3', 'fresh:1']) AS r;
UPDATE fence_high_water SET moved_at = now() - interval '10 days'
WHERE resource IN ('job:1', 'job:10', 'jobs_all', 'order:1');
SELECT seen_idle();
UPDATE fence_high_water SET moved_at = now() - interval '2 days'
WHERE resource IN ('job:2', 'order:2', 'order:3');
SELECT seen_idle();

-- nobody may call it unless granted
SELECT has_function_privilege('public', 'fence_forget_idle(interval, text)', 'EXECUTE') AS public_may_forget;
SET ROLE regress_fence_janitor;
SELECT fence_forget_idle('1 day');
RESET ROLE;
GRANT EXECUTE ON FUNCTION fence_forget_idle(interval, text) TO regress_fence_janitor;

-- the grace period is required and positive
SET ROLE regress_fence_janitor;
SELECT fence_forget_idle(NULL);
SELECT fence_forget_idle('0');
SELECT fence_forget_idle('-1 day');

-- a pattern is a LIKE pattern: "_" is any one character, escaped with \
SELECT fence_forget_idle('5 days', 'job:_');
SELECT fence_forget_idle('5 days', 'job\__');
SELECT resource FROM fence_marks WHERE resource LIKE 'job%' ORDER BY resource;
-- a grace period keeps what moved within it; nothing matching is 0
SELECT fence_forget_idle('5 days');
SELECT fence_forget_idle('5 days');
SELECT resource FROM fence_marks ORDER BY resource;
SELECT fence_forget_idle('1 day', 'order:%');
SELECT resource FROM fence_marks ORDER BY resource;
-- the janitor still cannot write the marks table itself
DELETE FROM fence_high_water;
RESET ROLE;

-- a forgotten resource starts afresh: any token is accepted and makes a
-- new mark; that is the risk of forgetting a resource that is still in use
CREATE TABLE forget_items (id int, tok fence_token);
CREATE TRIGGER fence BEFORE INSERT OR UPDATE OR DELETE ON forget_items
	FOR EACH ROW EXECUTE FUNCTION fence_guard('tok', 'job:{id}');
INSERT INTO forget_items VALUES (2, 1);
SELECT fence_forget_idle('1 day', 'job:%');
INSERT INTO forget_items VALUES (2, 1);
SELECT fence_mark('job:2');

-- a write at the mark's own token refreshes moved_at once it is more than
-- a minute old: a resource in use does not look idle
UPDATE fence_high_water SET moved_at = now() - interval '2 days' WHERE resource = 'job:2';
SELECT seen_idle();
INSERT INTO forget_items VALUES (2, 1);
SELECT token, moved_at > now() - interval '1 minute' AS refreshed
FROM fence_marks WHERE resource = 'job:2';
SELECT fence_forget_idle('1 day', 'job:%');
-- within a minute of its last move it is only locked, not rewritten
UPDATE fence_high_water SET moved_at = now() - interval '50 seconds' WHERE resource = 'job:2';
SELECT seen_idle();
INSERT INTO forget_items VALUES (2, 1);
SELECT token, moved_at < now() - interval '40 seconds' AS untouched
FROM fence_marks WHERE resource = 'job:2';

-- a refresh is no raise: to a strict trigger, a mark this transaction only
-- refreshed is still another's, and an equal token is rejected; one it
-- raised is its own
CREATE TABLE forget_strict (id int, tok fence_token);
CREATE TRIGGER fence BEFORE INSERT OR UPDATE OR DELETE ON forget_strict
	FOR EACH ROW EXECUTE FUNCTION fence_guard('tok', 'job:{id}', 'strict');
UPDATE fence_high_water SET moved_at = now() - interval '2 days' WHERE resource = 'job:2';
SELECT seen_idle();
BEGIN;
INSERT INTO forget_items VALUES (2, 1);
INSERT INTO forget_strict VALUES (2, 1);
ROLLBACK;
BEGIN;
INSERT INTO forget_items VALUES (2, 3);
INSERT INTO forget_strict VALUES (2, 3);
COMMIT;
SELECT fence_mark('job:2');

-- in the caller's own transaction, a mark it holds is not protected from
-- it (call it in a transaction of its own), and its cache of checked marks
-- does not outlive the forget: writing again makes a new mark
UPDATE fence_high_water SET moved_at = now() - interval '50 seconds' WHERE resource = 'job:2';
SELECT seen_idle();
BEGIN;
INSERT INTO forget_items VALUES (2, 3);
SELECT fence_forget_idle('30 seconds', 'job:%');
SELECT fence_mark('job:2');
INSERT INTO forget_items VALUES (2, 3);
SELECT fence_mark('job:2');
COMMIT;

-- a first sighting only records the version: it is forgotten by a later
-- call once seen unchanged for the grace, and not if it moved meanwhile
SELECT fence_advance('seen:1', 1), fence_advance('seen:2', 1);
UPDATE fence_high_water SET moved_at = now() - interval '2 days' WHERE resource LIKE 'seen:%';
SELECT fence_forget_idle('1 day', 'seen:%');
SELECT resource, seen_at > now() - interval '1 minute' AS recorded FROM fence_forget_candidates
WHERE resource LIKE 'seen:%' ORDER BY resource;
UPDATE fence_forget_candidates SET seen_at = now() - interval '25 hours';
SELECT fence_advance('seen:2', 2);
UPDATE fence_high_water SET moved_at = now() - interval '2 days' WHERE resource = 'seen:2';
SELECT fence_forget_idle('1 day', 'seen:%');
SELECT resource FROM fence_marks WHERE resource LIKE 'seen:%' ORDER BY resource;

DROP TABLE forget_strict;
DROP TABLE forget_items;
DELETE FROM fence_high_water;
DROP OWNED BY regress_fence_janitor;
DROP ROLE regress_fence_janitor;
DROP FUNCTION seen_idle();
