# Physical replication: the marks replicate to a streaming standby, and a
# promoted standby keeps fencing (SPEC, "The promise", 4).
#
# A history of concurrent fenced writes (test/history/history.py) runs on
# the primary while a standby made with pg_basebackup streams from it (Unix
# sockets).  Once the standby has replayed everything:
#
# - its marks are the primary's, row for row;
# - it refuses to move marks (read-only);
# - after the primary is stopped and the standby promoted, the whole
#   history checks out there: every commit acknowledged by the old primary
#   is present, no token decreased, every mark is the highest token logged;
# - on the new primary a stale token (mark - 1) is rejected with TF001, on
#   INSERT and on a declared DELETE, an equal or higher one accepted;
# - a new history continues on the new primary, on top of the old one.
#
# FENCING_SABOTAGE=1 lowers a mark on the promoted standby behind the
# guard's back, to show that the checks fail when they should.

use strict;
use warnings;

use Cwd qw(abs_path);
use File::Basename qw(dirname);
use JSON::PP;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $history = abs_path(dirname(__FILE__) . '/../history/history.py');
my $sabotage = ($ENV{FENCING_SABOTAGE} // '') eq '1';
my $ops = $ENV{HISTORY_OPS} // 40;

my $primary = PostgreSQL::Test::Cluster->new('primary');
$primary->init(allows_streaming => 1);
$primary->append_conf('postgresql.conf', qq(
track_commit_timestamp = on
max_connections = 40
));
$primary->start;
$primary->safe_psql('postgres', 'CREATE EXTENSION fencing');
{
	local $ENV{PGHOST} = $primary->host;
	local $ENV{PGPORT} = $primary->port;
	local $ENV{PGDATABASE} = 'postgres';
	is(system('/usr/bin/python3', $history, 'setup'), 0, 'history tables set up');
}
$primary->safe_psql('postgres', q{SELECT fence_advance('before:backup', 7)});
# probes of the marks, outside the history's tables and log
$primary->safe_psql('postgres', q{
	CREATE TABLE probe (res_id int, tok fence_token);
	CREATE TRIGGER fence BEFORE INSERT OR UPDATE OR DELETE ON probe
		FOR EACH ROW EXECUTE FUNCTION fence_guard('tok', 'res:{res_id}');});

$primary->backup('base');
my $standby = PostgreSQL::Test::Cluster->new('standby');
$standby->init_from_backup($primary, 'base', has_streaming => 1);
$standby->start;

is($standby->safe_psql('postgres', q{SELECT fence_mark('before:backup')}), '7',
	'a mark taken before the base backup is on the standby');

# the history, on the primary, while the standby streams
my $outdir = PostgreSQL::Test::Utils::tempdir;
{
	local $ENV{PGHOST} = $primary->host;
	local $ENV{PGPORT} = $primary->port;
	local $ENV{PGDATABASE} = 'postgres';
	my $rc = system('/usr/bin/python3', $history, 'run', '--outdir', $outdir,
		'--clients', 8, '--ops', $ops, '--source', 'seq', '--ttl-ms', 100, '--timeout', 240);
	is($rc, 0, 'the history ran on the primary');
}
$primary->safe_psql('postgres', q{SELECT fence_advance('after:history', 99)});
# one transaction raising one mark 1,000 times: its last raise, replayed
$primary->safe_psql('postgres', q{SELECT count(fence_advance('in:place', g)) FROM generate_series(1, 1000) g});
$primary->wait_for_catchup($standby, 'replay');
is($standby->safe_psql('postgres', q{SELECT fence_mark('in:place')}), '1000',
	'a mark raised 1,000 times in one transaction is at its last raise on the standby');

my $marks_sql = q{SELECT resource, token, moved_at FROM fence_marks ORDER BY resource COLLATE "C"};
my $primary_marks = $primary->safe_psql('postgres', $marks_sql);
my $standby_marks = $standby->safe_psql('postgres', $marks_sql);
cmp_ok(scalar(split /\n/, $primary_marks), '>=', 5, 'the primary has marks');
is($standby_marks, $primary_marks, 'the standby has the same marks, with the same times');

my ($rc, $out, $err) = $standby->psql('postgres', q{SELECT fence_advance('res:1', 1000000)});
like($err, qr/read-only|recovery/, 'the standby refuses to move a mark by hand');
($rc, $out, $err) = $standby->psql('postgres',
	q{INSERT INTO probe VALUES (1, 1000000)});
like($err, qr/read-only/, 'the standby refuses a fenced write');

# promote, with the old primary gone
my %mark;
for my $line (split /\n/, $primary_marks)
{
	my ($r, $t) = split /\|/, $line;
	$mark{$r} = $t;
}
$primary->stop;
$standby->promote;
$standby->poll_query_until('postgres', 'SELECT NOT pg_is_in_recovery()')
  or die 'standby did not leave recovery';
ok(1, 'the standby was promoted');

if ($sabotage)
{
	note 'SABOTAGE: lowering mark res:1 on the promoted standby';
	$standby->safe_psql('postgres',
		q{UPDATE fence_high_water SET token = token::bigint - 5 WHERE resource = 'res:1'});
}

local $ENV{PGHOST} = $standby->host;
local $ENV{PGPORT} = $standby->port;
local $ENV{PGDATABASE} = 'postgres';

# the old primary's whole history, checked on the new primary
$rc = system('/usr/bin/python3', $history, 'check', '--outdir', $outdir,
	'--json', "$outdir/summary.json");
is($rc, 0, 'on the new primary: every acknowledged commit present, no token decrease, marks = highest tokens');
my $summary = decode_json(slurp_file("$outdir/summary.json"));
note sprintf('primary history: attempted=%d committed=%d rejected=%d violations=%d lost=%d',
	map { $summary->{$_} } qw(attempted committed rejected violations lost));

# stale tokens rejected, fresh ones accepted, on the new primary
for my $r (sort grep { /^res:/ } keys %mark)
{
	my ($id) = $r =~ /^res:(\d+)$/;
	my $m = $mark{$r};
	next if $m < 2;
	($rc, $out, $err) = $standby->psql('postgres',
		"INSERT INTO probe VALUES ($id, $m - 1)",
		extra_params => [ '-v', 'VERBOSITY=verbose' ]);
	like($err, qr/TF001.*stale fence token for resource "$r".*Token @{[$m - 1]} is below the current mark $m/s,
		"new primary: $r rejects token " . ($m - 1) . " below its mark $m");
	my $rows = $standby->safe_psql('postgres', "SELECT count(*) FROM hist_items WHERE res_id = $id");
	if ($rows > 0)
	{
		($rc, $out, $err) = $standby->psql('postgres',
			"SELECT fence_use('$r', $m - 1); DELETE FROM hist_items WHERE res_id = $id",
			extra_params => [ '-v', 'VERBOSITY=verbose' ]);
		like($err, qr/TF001/, "new primary: $r rejects a stale declared DELETE");
		is($standby->safe_psql('postgres', "SELECT count(*) FROM hist_items WHERE res_id = $id"),
			$rows, "new primary: the rejected DELETE removed nothing");
	}
	is($standby->safe_psql('postgres',
			"INSERT INTO probe VALUES ($id, $m) RETURNING tok"),
		$m, "new primary: $r accepts its mark $m (equal tokens are accepted)");
}
($rc, $out, $err) = $standby->psql('postgres', q{SELECT fence_use('after:history', 98); SELECT fence_advance('after:history', 98)});
is($standby->safe_psql('postgres', q{SELECT fence_mark('after:history')}), '99',
	'new primary: fence_advance does not lower a replicated mark');

my $outdir2 = PostgreSQL::Test::Utils::tempdir;
$rc = system('/usr/bin/python3', $history, 'run', '--outdir', $outdir2,
	'--clients', 8, '--ops', int($ops / 2), '--source', 'seq', '--ttl-ms', 100, '--timeout', 240);
is($rc, 0, 'a new history ran on the new primary');
$rc = system('/usr/bin/python3', $history, 'check', '--outdir', $outdir2, '--foreign-ok');
is($rc, 0, 'the history continued on the new primary is clean, on top of the old one');

done_testing();
