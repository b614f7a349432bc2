# Marks raised many times in one transaction, through a crash and on a
# standby (issue 33).  However a transaction writes its raises (one version
# per raise, per subtransaction, or only its first and its last), what
# recovery and a standby must show is what committed:
#
# - one INSERT raising one mark 20,000 times; a loop of subtransactions
#   raising one mark, every 7th rolled back, the last one too;
#   fence_advance 5,000 times in one statement; 300 marks raised 20 times
#   each, interleaved, a subtransaction per row; raises in a statement
#   then a deferred trigger's fence_advance at commit;
# - a transaction with many raises rolled back; two prepared transactions
#   with many raises, open at the crash, one committed and one rolled back
#   after it; a transaction with many raises open at the crash;
# - after an immediate stop of the primary and a restart: every mark is its
#   committed value, the marks table and its key pass amcheck, stale writes
#   are rejected with TF001;
# - a streaming standby shows the primary's marks before the crash, after
#   it, after COMMIT PREPARED, and after its own immediate stop.

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $primary = PostgreSQL::Test::Cluster->new('raises_primary');
$primary->init(allows_streaming => 1);
$primary->append_conf('postgresql.conf', qq(
fsync = on
max_prepared_transactions = 5
));
$primary->start;
$primary->safe_psql('postgres', q{
CREATE EXTENSION fencing;
CREATE EXTENSION amcheck;
CREATE TABLE mr_rows (res text, i int, tok fence_token);
CREATE TRIGGER fence BEFORE INSERT ON mr_rows
	FOR EACH ROW EXECUTE FUNCTION fence_guard('tok', 'mr:{res}');
-- n rows, row i of resource names[1 + i % length] at token base + i, each
-- in a subtransaction; every 7th rolled back after its write, and the
-- last one too with last_rolled_back.
CREATE FUNCTION mr_loop(names text[], base bigint, n int, last_rolled_back bool)
RETURNS void LANGUAGE plpgsql AS $$
DECLARE
	i int;
BEGIN
	FOR i IN 1..n LOOP
		BEGIN
			INSERT INTO mr_rows VALUES (names[1 + i % array_length(names, 1)], i, base + i);
			IF i % 7 = 0 OR (last_rolled_back AND i = n) THEN
				RAISE EXCEPTION 'rolled back';
			END IF;
		EXCEPTION WHEN raise_exception THEN
			NULL;
		END;
	END LOOP;
END
$$;
CREATE TABLE mr_defer (res text, tok bigint);
CREATE FUNCTION mr_defer_advance() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	PERFORM fence_advance(NEW.res, NEW.tok::text::fence_token);
	RETURN NULL;
END
$$;
CREATE CONSTRAINT TRIGGER advance AFTER INSERT ON mr_defer
	DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION mr_defer_advance();
});

$primary->backup('base');
my $standby = PostgreSQL::Test::Cluster->new('raises_standby');
$standby->init_from_backup($primary, 'base', has_streaming => 1);
$standby->append_conf('postgresql.conf', 'max_prepared_transactions = 5');
$standby->start;

# Committed.
$primary->safe_psql('postgres', q{
INSERT INTO mr_rows SELECT 'bulk', g, g FROM generate_series(1, 20000) g;
SELECT mr_loop(ARRAY['sub'], 0, 3003, true);
SELECT count(fence_advance('mr:adv', g::text::fence_token)) FROM generate_series(1, 5000) g;
SELECT mr_loop(ARRAY(SELECT 'm' || k FROM generate_series(0, 299) k), 0, 6000, false);
BEGIN;
INSERT INTO mr_rows SELECT 'deferred', g, g FROM generate_series(1, 100) g;
INSERT INTO mr_defer VALUES ('mr:deferred', 500);
INSERT INTO mr_rows SELECT 'deferred', g, 100 + g FROM generate_series(1, 50) g;
COMMIT;
INSERT INTO mr_rows VALUES ('rb', 0, 10), ('pc', 0, 10), ('pr', 0, 10);
BEGIN;
INSERT INTO mr_rows SELECT 'rb', g, 10 + g FROM generate_series(1, 7000) g;
SELECT mr_loop(ARRAY['rb'], 8000, 50, false);
ROLLBACK;
BEGIN;
INSERT INTO mr_rows SELECT 'pc', g, 10 + g FROM generate_series(1, 3990) g;
SELECT mr_loop(ARRAY['pc', 'pc_new'], 4000, 99, true);
PREPARE TRANSACTION 'mr_commit';
BEGIN;
INSERT INTO mr_rows SELECT 'pr', g, 10 + g FROM generate_series(1, 3000) g;
SELECT mr_loop(ARRAY['pr', 'pr_new'], 5000, 100, false);
PREPARE TRANSACTION 'mr_rollback';
});

# Every mark, as "resource=token" joined by commas.
sub marks
{
	my ($node) = @_;
	return $node->safe_psql('postgres', q{
		SELECT string_agg(resource || '=' || token, ',' ORDER BY resource)
		FROM fence_marks WHERE resource LIKE 'mr:%' AND resource NOT LIKE 'mr:m%'});
}

# How many of the 300 interleaved marks differ from their last raise kept
# (every 7th row's was rolled back).
sub interleaved_off
{
	my ($node) = @_;
	return $node->safe_psql('postgres', q{
		SELECT count(*) FROM generate_series(0, 299) k
		WHERE fence_mark('mr:m' || k) IS DISTINCT FROM
			(SELECT max(i) FROM generate_series(1, 6000) i
			 WHERE i % 300 = k AND i % 7 <> 0)::text::fence_token});
}

my $committed = 'mr:adv=5000,mr:bulk=20000,mr:deferred=500,mr:pc=10,mr:pr=10,mr:rb=10,mr:sub=3002';
is(marks($primary), $committed, 'the committed marks, before the crash');
is(interleaved_off($primary), '0', '300 interleaved marks at their last raise, before the crash');
$primary->wait_for_catchup($standby);
is(marks($standby), $committed, 'the standby shows the committed marks');
is(interleaved_off($standby), '0', 'the standby shows the 300 interleaved marks');

# A transaction with many raises, open at the crash.
my $open = $primary->background_psql('postgres', on_error_stop => 0);
$open->query_safe(q{BEGIN});
$open->query_safe(q{INSERT INTO mr_rows SELECT 'bulk', g, 20000 + g FROM generate_series(1, 9000) g});
$open->query_safe(q{SELECT mr_loop(ARRAY['bulk', 'open_new'], 40000, 500, false)});
$open->query_safe(q{SELECT count(fence_advance('mr:adv', g::text::fence_token)) FROM generate_series(5001, 9000) g});
is($primary->safe_psql('postgres', q{SELECT fence_mark('mr:bulk')}), '20000',
	'another session sees the committed mark while a transaction raises it');

$primary->stop('immediate');
$open->quit;
$primary->start;

is(marks($primary), $committed, 'after the crash, every mark is its committed value');
is(interleaved_off($primary), '0', 'after the crash, the 300 interleaved marks too');
is($primary->safe_psql('postgres', q{
	SELECT bt_index_check('fence_high_water_pkey', true);
	SELECT count(*) FROM verify_heapam('fence_high_water')}),
	"\n0", 'amcheck finds the marks table and its key sound');
is($primary->safe_psql('postgres', q{
	SET enable_seqscan = off; SET enable_bitmapscan = off;
	SELECT count(*) FROM fence_high_water WHERE resource = 'mr:bulk'}),
	'1', 'the index finds one live row of a mark raised 29,500 times');

$primary->safe_psql('postgres', q{COMMIT PREPARED 'mr_commit'; ROLLBACK PREPARED 'mr_rollback'});
my $after = 'mr:adv=5000,mr:bulk=20000,mr:deferred=500,mr:pc=4096,mr:pc_new=4097,mr:pr=10,mr:rb=10,mr:sub=3002';
is(marks($primary), $after,
	'a prepared transaction committed after the crash keeps its last raises; one rolled back, none');

my ($rc, $out, $err) = $primary->psql('postgres',
	q{INSERT INTO mr_rows VALUES ('bulk', 0, 19999)},
	extra_params => ['-v', 'VERBOSITY=verbose']);
like($err, qr/TF001/, 'after recovery a stale write is rejected');
($rc, $out, $err) = $primary->psql('postgres',
	q{INSERT INTO mr_rows VALUES ('pc', 0, 4095)},
	extra_params => ['-v', 'VERBOSITY=verbose']);
like($err, qr/TF001/, 'a write below the prepared transaction\'s last raise is rejected');
is($primary->safe_psql('postgres', q{
	INSERT INTO mr_rows VALUES ('bulk', 0, 20000), ('bulk', 0, 20001);
	SELECT fence_mark('mr:bulk')}), '20001', 'after recovery the mark is raised again');

$primary->wait_for_catchup($standby);
$after =~ s/mr:bulk=20000/mr:bulk=20001/;
is(marks($standby), $after, 'the standby follows the crash and the prepared transactions');
$standby->stop('immediate');
$standby->start;
$primary->wait_for_catchup($standby);
is(marks($standby), $after, 'and shows the same marks after its own crash');
is(interleaved_off($standby), '0', 'and the 300 interleaved marks');

$standby->stop;
$primary->stop;
done_testing();
