# shellcheck shell=bash
# test/lib/psql.sh: the psql wrappers of the suites and benchmarks; sourced,
# not run.
#
#   sql [DBNAME] [psql options...]
#                            run SQL (-c, -f or standard input), stopping at
#                            the first error; unaligned, tuples only.  DBNAME
#                            (a name or a conninfo string) as psql takes it:
#                            without it, $PGDATABASE; -h, -p, -U... as usual
#   sqlstate_of DB STMT      the SQLSTATE STMT ends with in DB ("00000" on
#                            success); the server's message is appended to
#                            $STATEMENTS_LOG (default: discarded), which a
#                            suite shows on failure

sql() { psql -X -q -A -t -v ON_ERROR_STOP=1 "$@"; }

sqlstate_of() {
	local db=$1 stmt=$2
	{
		printf '%s;\n' "$stmt"
		printf '\\echo SQLSTATE=:SQLSTATE\n'
	} | psql -X -q -A -t -v ON_ERROR_STOP=0 -d "$db" 2>>"${STATEMENTS_LOG:-/dev/null}" |
		sed -n 's/^SQLSTATE=//p'
}
