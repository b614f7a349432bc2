# Crash recovery of marks raised across many subtransactions: each
# subtransaction of a PL/pgSQL exception block raises the mark, in memory
# after the transaction's first write of it (marks.c), undone with a
# rolled-back subtransaction, the last raise written at commit.  After a
# SIGKILL of the postmaster:
#
# - a committed transaction's mark is its last raise that was not rolled
#   back, also when its last subtransaction rolled back;
# - the raises of a transaction still open at the crash are all gone;
# - the marks table and its primary key pass amcheck, and a lookup through
#   the index finds one live row per resource;
# - stale writes are rejected (TF001), fresh ones accepted.
#
# Run with wal_level = replica and logical (a write of a mark is then a
# delete and an insert).

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

# Raise mark $res from $base + 1 over $n subtransactions of one call, every
# 7th rolled back after its raise, every 5th with a nested block rolled
# back; $last_rolled_back rolls back the last one too.  Returns the last
# token kept.
my $setup = <<'SQL';
CREATE EXTENSION fencing;
CREATE EXTENSION amcheck;
CREATE TABLE sx_rows (res text, id int, tok fence_token);
CREATE TRIGGER fence BEFORE INSERT ON sx_rows
	FOR EACH ROW EXECUTE FUNCTION fence_guard('tok', 'sx:{res}');
CREATE FUNCTION sx_raise(res text, base bigint, n int, last_rolled_back bool)
RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
	i int;
	kept bigint := 0;
BEGIN
	FOR i IN 1..n LOOP
		BEGIN
			INSERT INTO sx_rows VALUES (res, i, base + i);
			IF i % 5 = 0 THEN
				BEGIN
					INSERT INTO sx_rows VALUES (res, -i, base + i + n);
					RAISE EXCEPTION 'nested';
				EXCEPTION WHEN raise_exception THEN
					NULL;
				END;
			END IF;
			IF i % 7 = 0 OR (last_rolled_back AND i = n) THEN
				RAISE EXCEPTION 'row';
			END IF;
			kept := base + i;
		EXCEPTION WHEN raise_exception THEN
			NULL;
		END;
	END LOOP;
	RETURN kept;
END
$$;
SQL

foreach my $wal_level ('replica', 'logical')
{
	my $node = PostgreSQL::Test::Cluster->new("subxact_$wal_level");
	$node->init;
	$node->append_conf('postgresql.conf', qq(
wal_level = $wal_level
max_wal_senders = 2
fsync = on
));
	$node->start;
	$node->safe_psql('postgres', $setup);

	my $committed = $node->safe_psql('postgres',
		q{SELECT sx_raise('committed', 0, 3000, false)});
	my $ends_rolled_back = $node->safe_psql('postgres',
		q{SELECT sx_raise('ends_rolled_back', 0, 1000, true)});
	is($ends_rolled_back, '999', "$wal_level: the last subtransaction's raise is not kept");

	# A transaction raising two marks over many subtransactions, open at
	# the crash: one mark it created, one committed before at 3000.
	my $open = $node->background_psql('postgres', on_error_stop => 0);
	$open->query_safe(q{BEGIN});
	$open->query_safe(q{SELECT sx_raise('committed', 5000, 2000, false)});
	$open->query_safe(q{SELECT sx_raise('open_only', 0, 2000, false)});
	is($node->safe_psql('postgres', q{SELECT count(*) FROM fence_marks WHERE resource = 'sx:open_only'}),
		'0', "$wal_level: the open transaction's new mark is invisible to others");

	my $postmaster = $node->{_pid};
	$node->kill9;
	for (1 .. 100)
	{
		last unless kill 0, $postmaster;
		select(undef, undef, undef, 0.1);
	}
	my $started = 0;
	for (1 .. 60)
	{
		if ($node->start(fail_ok => 1))
		{
			$started = 1;
			last;
		}
		$node->{_pid} = undef;
		sleep 1;
	}
	ok($started, "$wal_level: the server restarts after SIGKILL");
	$open->quit;

	is($committed, '3000', "$wal_level: the committed loop kept its last raise");
	is($node->safe_psql('postgres', q{SELECT fence_mark('sx:committed')}),
		'3000', "$wal_level: the committed mark survives at its last raise");
	is($node->safe_psql('postgres', q{SELECT fence_mark('sx:ends_rolled_back')}),
		'999', "$wal_level: a mark whose last raise was rolled back survives at the one before");
	is($node->safe_psql('postgres', q{SELECT fence_mark('sx:open_only')}),
		'', "$wal_level: the open transaction's new mark is gone");
	is($node->safe_psql('postgres', q{SELECT count(*) FROM sx_rows WHERE tok > 3000 AND res = 'committed'}),
		'0', "$wal_level: the open transaction's rows are gone");

	# The versions the loops left are consistent with the index: amcheck,
	# and one live row per resource through the index as by a scan.
	is($node->safe_psql('postgres', q{
		SELECT bt_index_check('fence_high_water_pkey', true);
		SELECT count(*) FROM verify_heapam('fence_high_water')}),
		"\n0", "$wal_level: amcheck finds the marks table and its key sound");
	is($node->safe_psql('postgres', q{
		SET enable_seqscan = off; SET enable_bitmapscan = off;
		SELECT string_agg(resource || '=' || token, ',' ORDER BY resource)
		FROM fence_high_water WHERE resource LIKE 'sx:%'}),
		'sx:committed=3000,sx:ends_rolled_back=999',
		"$wal_level: the index finds one live row per resource");

	my ($rc, $out, $err) = $node->psql('postgres',
		q{INSERT INTO sx_rows VALUES ('committed', 0, 2999)},
		extra_params => ['-v', 'VERBOSITY=verbose']);
	like($err, qr/TF001/, "$wal_level: after recovery a stale write is rejected");
	is($node->safe_psql('postgres', q{SELECT sx_raise('committed', 3000, 100, false)}),
		'3100', "$wal_level: after recovery the mark is raised again across subtransactions");
	is($node->safe_psql('postgres', q{SELECT fence_mark('sx:committed')}),
		'3100', "$wal_level: and keeps its last raise");

	$node->stop;
}

done_testing();
