#!/usr/bin/env bash
# test/lib/tap.sh: run TAP tests (test/t/*.pl, PostgreSQL::Test::Cluster)
# with prove, against the installed extension.
#
#   bash test/lib/tap.sh                          every test in test/t
#   bash test/lib/tap.sh test/t/002_standby.pl
#
# initdb refuses to run as root, so as root the tests run as the "postgres"
# OS user, in a temporary directory it can write (removed afterwards unless
# KEEP_TAP=1), from a copy of test/t and test/history there: the tree may
# be where "postgres" cannot read (a clone in /root).  Needs postgresql-client-15 (Cluster.pm), libipc-run-perl and
# python3-psycopg2; `make install` first.
set -uo pipefail

top=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
PG_CONFIG=${PG_CONFIG:-pg_config}
bindir=$("$PG_CONFIG" --bindir)
pgxs=$(cd "$(dirname "$("$PG_CONFIG" --pgxs)")/../.." && pwd)
perl_lib=$pgxs/src/test/perl

if [ $# -eq 0 ]; then
	set -- "$top"/test/t/*.pl
fi
tests=()
for t in "$@"; do tests+=("$(cd "$(dirname "$t")" && pwd)/$(basename "$t")"); done

dir=$(mktemp -d "${TMPDIR:-/tmp}/fencing-tap.XXXXXX")
chmod 755 "$dir"
cleanup() { [ "${KEEP_TAP:-0}" = 1 ] || rm -rf "$dir"; }
trap cleanup EXIT

run=()
if [ "$(id -u)" -eq 0 ]; then
	mkdir "$dir/src"
	cp -R "$top/test/t" "$top/test/history" "$dir/src/"
	for i in "${!tests[@]}"; do
		case ${tests[$i]} in
			"$top"/test/t/*) tests[i]=$dir/src/t/${tests[$i]#"$top"/test/t/} ;;
		esac
	done
	chown -R postgres: "$dir"
	run=(runuser -u postgres --)
fi

cd "$dir" || exit 1
"${run[@]}" env -u PGUSER -u PGHOST -u PGPORT -u PGDATABASE \
	PATH="$bindir:$PATH" PERL5LIB="$perl_lib${PERL5LIB:+:$PERL5LIB}" \
	TESTDIR="$dir" PG_REGRESS="$pgxs/src/test/regress/pg_regress" \
	FENCING_SABOTAGE="${FENCING_SABOTAGE:-0}" HISTORY_OPS="${HISTORY_OPS:-40}" \
	prove ${PROVE_FLAGS:--v} "${tests[@]}"
rc=$?
if [ $rc -ne 0 ] && [ -d "$dir/tmp_check/log" ]; then
	for f in "$dir"/tmp_check/log/*; do
		echo "# ---- $(basename "$f") (last 40 lines)"
		tail -40 "$f" | sed 's/^/# /'
	done
fi
exit $rc
