--
-- declarations and the end of a session or transaction: DISCARD ALL clears
-- them all; PREPARE TRANSACTION is refused while transaction-local ones
-- exist (no Redis needed)
--
SELECT fence_use('dd:1', 10), fence_use('dd:2', 20);
BEGIN;
SELECT fence_use('dd:3', 30, is_local => true);
SELECT * FROM fence_declared() ORDER BY is_local, resource;
-- they would not follow the transaction to COMMIT PREPARED
PREPARE TRANSACTION 'fence_declared_1';
\echo :LAST_ERROR_SQLSTATE
-- the refused PREPARE rolled the transaction back: the local one is gone
SELECT * FROM fence_declared() ORDER BY is_local, resource;
-- a local declaration withdrawn is gone, and no longer refuses a PREPARE
-- (test/scripts/redis_xact.sh prepares one: installcheck may run where
-- max_prepared_transactions is 0)
BEGIN;
SELECT fence_use('dd:3', 30, is_local => true);
SELECT fence_use('dd:3', NULL, is_local => true);
SELECT count(*) AS local_declarations FROM fence_declared() WHERE is_local;
ROLLBACK;

-- DISCARD ALL is refused in a transaction block, as always, and clears
-- nothing then
BEGIN;
DISCARD ALL;
ROLLBACK;
SELECT * FROM fence_declared() ORDER BY is_local, resource;
-- outside one it clears every declaration of the session
DISCARD ALL;
SELECT * FROM fence_declared() ORDER BY is_local, resource;
-- and the session declares again as before
SELECT fence_use('dd:1', 11);
SELECT * FROM fence_declared() ORDER BY is_local, resource;
DISCARD ALL;
