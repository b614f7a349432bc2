# Crash recovery: the marks survive a SIGKILL of the postmaster in the
# middle of concurrent fenced writes (SPEC, "The promise", 4).
#
# Eight client processes (test/history/history.py, tokens from a sequence,
# written explicitly in every statement) write through fence_guard tables
# and log (resource, token, client, txid) in the same transaction; each
# client records every COMMIT it saw succeed in a file of its own.  The
# postmaster is killed with SIGKILL mid-run, restarted, and the clients
# reconnect and go on.  Then:
#
# - every resource's mark is the highest token logged for it;
# - every acknowledged commit is in the log;
# - per resource, tokens never decrease in commit order
#   (pg_xact_commit_timestamp);
# - a mark raised by a transaction still open at the crash is gone;
# - stale writes are still rejected (TF001), fresh ones accepted.
#
# FENCING_SABOTAGE=1 breaks the database after recovery (a lowered mark, a
# lost log row) to show that these checks fail when they should.

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
my $clients = 8;
my $ops = $ENV{HISTORY_OPS} // 40;

my $node = PostgreSQL::Test::Cluster->new('crash');
$node->init;
$node->append_conf('postgresql.conf', qq(
track_commit_timestamp = on
max_connections = 40
fsync = on
));
$node->start;
$node->safe_psql('postgres', 'CREATE EXTENSION fencing');

local $ENV{PGHOST} = $node->host;
local $ENV{PGPORT} = $node->port;
local $ENV{PGDATABASE} = 'postgres';

is(system('/usr/bin/python3', $history, 'setup'), 0, 'history tables set up');

my $outdir = PostgreSQL::Test::Utils::tempdir;
my ($run_out, $run_err) = ('', '');
my $run = IPC::Run::start(
	[
		'/usr/bin/python3', $history, 'run',
		'--outdir' => $outdir,
		'--clients' => $clients,
		'--ops' => $ops,
		'--source' => 'seq',
		'--token-mode' => 'explicit',
		'--ttl-ms' => 100,
		'--timeout' => 240
	],
	'>', \$run_out, '2>', \$run_err);

ok($node->poll_query_until('postgres', 'SELECT count(*) >= 80 FROM hist_log'),
	'the clients are writing');

# A transaction that raised a mark and is still open when the server dies:
# its raise must not survive recovery.
my $open = $node->background_psql('postgres', on_error_stop => 0);
$open->query_safe(q{BEGIN; INSERT INTO hist_events (res_id, val, tok) VALUES (1, 'uncommitted', 1000000000)});

# Marks raised many times in one transaction are written at the first
# raise and at commit (the raises between kept in memory): a committed
# stream of raises survives the crash at its last token, and an open one
# is undone with the version it wrote.
$node->safe_psql('postgres', q{
	SELECT fence_advance('in:place:open', 5);
	SELECT count(fence_advance('in:place:committed', g)) FROM generate_series(1, 1000) g});
$open->query_safe(q{SELECT count(fence_advance('in:place:open', g)) FROM generate_series(6, 1000) g});
is($node->safe_psql('postgres', q{SELECT count(*) FROM fence_marks WHERE token >= 1000000000}),
	'0', 'an open transaction has raised mark res:1 to 10^9, invisible to others');

my $before = $node->safe_psql('postgres', 'SELECT count(*) FROM hist_log');
my $postmaster = $node->{_pid};
$node->kill9;
note "killed the postmaster (PID $postmaster) with $before log rows committed";

# Orphaned backends notice the postmaster's death and exit; until they
# have, the old shared memory is in use and the server cannot start.
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
	# start() took the dead postmaster's pid file for a running server
	$node->{_pid} = undef;
	sleep 1;
}
ok($started, 'the server restarts after SIGKILL');
ok($node->log_contains('database system was interrupted|not properly shut down'),
	'the restart ran crash recovery');
$open->quit;

$run->finish;
is($run->result(0), 0, 'the clients reconnected and ran to the end')
  or diag($run_err);

if ($sabotage)
{
	note 'SABOTAGE: lowering mark res:1 and losing a committed log row';
	$node->safe_psql('postgres',
		q{UPDATE fence_high_water SET token = token::bigint - 1 WHERE resource = 'res:1';
		  DELETE FROM hist_log WHERE id = (SELECT max(id) FROM hist_log)});
}

is($node->safe_psql('postgres', q{SELECT count(*) FROM hist_log WHERE token >= 1000000000}),
	'0', 'the open transaction left no log row');
cmp_ok($node->safe_psql('postgres', q{SELECT fence_mark('res:1')::bigint}),
	'<', 1000000000, 'the mark raised by the open transaction was rolled back');
is($node->safe_psql('postgres', q{SELECT fence_mark('in:place:committed')}), '1000',
	'a committed mark raised 1,000 times in one transaction is at its last raise');
is($node->safe_psql('postgres', q{SELECT fence_mark('in:place:open')}), '5',
	'the raises of the open transaction were rolled back');

# marks == highest token logged, per resource
my $mismatch = $node->safe_psql(
	'postgres', q{
	SELECT string_agg(format('%s: mark %s, log %s', coalesce(m.resource, l.resource), m.token, l.max), '; ')
	  FROM (SELECT resource, token::bigint FROM fence_marks WHERE resource LIKE 'res:%') m
	  FULL JOIN (SELECT resource, max(token) FROM hist_log GROUP BY resource) l USING (resource)
	 WHERE m.token IS DISTINCT FROM l.max});
is($mismatch, '', 'every mark is the highest token logged for its resource');

# no token decrease per resource in commit order
my $decreases = $node->safe_psql(
	'postgres', q{
	SELECT count(*) FROM (
		SELECT token, max(token) OVER (PARTITION BY resource
		                               ORDER BY pg_xact_commit_timestamp(xmin), token
		                               ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS before
		  FROM hist_log) s
	 WHERE token < before});
is($decreases, '0', 'no token decreases per resource in commit order');
is($node->safe_psql('postgres',
		'SELECT count(*) FROM hist_log WHERE pg_xact_commit_timestamp(xmin) IS NULL'),
	'0', 'every log row has a commit timestamp');

# every acknowledged commit is in the log
my $run_id = decode_json(slurp_file("$outdir/run.json"))->{run_id};
my %logged;
for my $line (split /\n/,
	$node->safe_psql('postgres', "SELECT client, op, count(*) FROM hist_log WHERE run = '$run_id' GROUP BY 1, 2"))
{
	my ($c, $o, $n) = split /\|/, $line;
	$logged{"$c/$o"} = $n;
}
my ($acked, $lost, $after) = (0, 0, 0);
for my $file (glob "$outdir/client-*.jsonl")
{
	my ($c) = $file =~ /client-(\d+)\.jsonl$/;
	for my $line (split /\n/, slurp_file($file))
	{
		my $rec = decode_json($line);
		next unless $rec->{outcome} eq 'committed';
		$acked++;
		my $want = scalar @{ $rec->{rows} };
		my $got = $logged{ ($c + 0) . "/$rec->{op}" } // 0;
		if ($got != $want)
		{
			$lost++;
			diag("client $c op $rec->{op}: acknowledged $want rows, log has $got");
		}
	}
}
cmp_ok($acked, '>', $before, "commits were acknowledged before and after the crash ($acked in all)");
is($lost, 0, "every acknowledged commit survived ($acked)");

# the independent checker agrees
my $check = system('/usr/bin/python3', $history, 'check', '--outdir', $outdir,
	'--json', "$outdir/summary.json");
is($check, 0, 'history.py check finds the history clean');
my $summary = decode_json(slurp_file("$outdir/summary.json"));
note sprintf('attempted=%d committed=%d rejected=%d violations=%d lost=%d aborted=%d indeterminate=%d',
	map { $summary->{$_} } qw(attempted committed rejected violations lost aborted indeterminate));

# stale writes are still rejected, fresh ones accepted
for my $r (1 .. 3)
{
	my $mark = $node->safe_psql('postgres', "SELECT fence_mark('res:$r')");
	next if $mark eq '' || $mark < 2;
	my ($rc, $out, $err) = $node->psql('postgres',
		"INSERT INTO hist_events (res_id, val, tok) VALUES ($r, 'stale', $mark - 1)",
		extra_params => [ '-v', 'VERBOSITY=verbose' ]);
	like($err, qr/TF001.*stale fence token for resource "res:$r"/s,
		"after recovery res:$r rejects token " . ($mark - 1) . " below mark $mark");
	($rc, $out, $err) = $node->psql('postgres',
		"SELECT fence_use('res:$r', $mark - 1); DELETE FROM hist_items WHERE res_id = $r",
		extra_params => [ '-v', 'VERBOSITY=verbose' ]);
	my $rows = $node->safe_psql('postgres', "SELECT count(*) FROM hist_items WHERE res_id = $r");
	like($err, qr/TF001/, "after recovery res:$r rejects a stale declared DELETE") if $rows > 0;
	is($node->safe_psql('postgres',
			"INSERT INTO hist_events (res_id, val, tok) VALUES ($r, 'fresh', $mark + 1) RETURNING tok"),
		$mark + 1, "after recovery res:$r accepts token " . ($mark + 1));
}

done_testing();
