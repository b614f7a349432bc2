# Shared psql wrappers for the scripted suites: sourced, not run.
#
#   sql DB [psql args...]    run SQL in DB, stopping at the first error;
#                            unaligned, tuples only
#   sqlstate_of DB STMT      the SQLSTATE STMT ends with in DB ("00000" on
#                            success); the server's message is appended to
#                            $STATEMENTS_LOG (default: discarded), which a
#                            suite shows on failure

sql() {
	local db=$1
	shift
	psql -X -q -A -t -v ON_ERROR_STOP=1 -d "$db" "$@"
}

sqlstate_of() {
	local db=$1 stmt=$2
	{
		printf '%s;\n' "$stmt"
		printf '\\echo SQLSTATE=:SQLSTATE\n'
	} | psql -X -q -A -t -v ON_ERROR_STOP=0 -d "$db" 2>>"${STATEMENTS_LOG:-/dev/null}" |
		sed -n 's/^SQLSTATE=//p'
}
