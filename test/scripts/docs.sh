#!/usr/bin/env bash
# test/scripts/docs.sh: README.md and doc/*.md hold together.
#
# - every relative link between them, and its #anchor, resolves by GitHub's
#   rules (test/lib/doc_links.py);
# - every "<!-- snippet: NAME (run by SCRIPT) -->" block is extracted by
#   the SCRIPT it names, and every snippet a suite extracts exists, once;
# - doc/ has its eight files: guard, redis (the operator's guide),
#   lock-reference, lock-failures, clients, operations, design, internals;
# - both SQLSTATE tables (README.md's short one, doc/operations.md's full
#   one, with doc/lock-reference.md's for class TF1) name every code of
#   src/fencing_errcodes.h and no other of class TF;
# - README.md's "Getting started", pasted in order into fresh psql
#   sessions against a real server and redis-server, prints what it shows,
#   its application role's part in a session of that role (no superuser);
#   so does doc/clients.md's example of a declared token that wins.
#
#   bash test/scripts/docs.sh
set -euo pipefail

source "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/../lib/harness.sh"
source "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/../lib/checks.sh"
cd "$FENCING_TOP"
shopt -s nullglob
docs=(README.md doc/*.md)

# the reference's files, one a subject (other documents link to them)
expect "doc/ holds the reference, one file a subject" \
	"${docs[*]:1}" "doc/clients.md doc/design.md doc/guard.md doc/internals.md doc/lock-failures.md doc/lock-reference.md doc/operations.md doc/redis.md"

# links and anchors
while IFS= read -r line; do
	case "$line" in
		"ok - "*) ok "${line#ok - }" ;;
		"not ok - "*) not_ok "${line#not ok - }" ;;
		*) echo "$line" ;;
	esac
done < <(python3 test/lib/doc_links.py "$FENCING_TOP" || true)

# snippets: the marker names a suite that extracts it, and the reverse.  A
# suite extracts one by a call "snippet NAME" (test/lib/snippet.sh; or
# "run_snippet NAME"...) at the start of a line or of a command substitution.
calls='(^|\$\()[[:space:]]*([a-z_]+_)?snippet'
markers=$(grep -ho '^<!-- snippet: [^ ]* (run by [^ )]*' "${docs[@]}" |
	sed 's/^<!-- snippet: \([^ ]*\) (run by \(.*\)$/\1 \2/')
check "the docs mark snippets to run" test -n "$markers"
dups=$(cut -d' ' -f1 <<<"$markers" | sort | uniq -d | tr '\n' ' ')
expect "no two snippets share a name" "$dups" ""
while read -r name script; do
	check "snippet $name is run by $script" grep -qE "$calls $name([[:space:];|>)]|\$)" "$script"
done <<<"$markers"
for script in test/scripts/*.sh test/demo; do
	for name in $(grep -oE "$calls [a-z0-9-]+" "$script" | awk '{print $NF}' | sort -u); do
		check "$script's snippet $name is marked in the docs" \
			grep -qxF "$name $script" <<<"$markers"
	done
done

# the SQLSTATE tables against src/fencing_errcodes.h
defined=$(sed -n "s/.*MAKE_SQLSTATE('T','F','\(.\)','\(.\)','\(.\)').*/TF\1\2\3/p" src/fencing_errcodes.h | sort)
check "src/fencing_errcodes.h defines codes of class TF" test -n "$defined"
# table_codes FILE HEADING: the TF codes of the first column of the table
# under HEADING, a range "TFa–TFb" written out
table_codes() {
	awk -v h="$2" '
		$0 == h { on = 1; next }
		on && /^#/ { exit }
		on && /^\| `/ { print $2 }
	' "$1" | python3 -c '
import re, sys
for cell in sys.stdin:
    for a, b in re.findall(r"TF(\d{3})(?:`?\s*–\s*`?TF(\d{3}))?", cell):
        for n in range(int(a), int(b or a) + 1):
            print("TF%03d" % n)
' | sort -u
}
expect "README.md's SQLSTATE table names every TF code, and only those" \
	"$(table_codes README.md '### SQLSTATEs')" "$defined"
expect "doc/operations.md's SQLSTATE table names every TF code, and only those" \
	"$(table_codes doc/operations.md '## SQLSTATEs')" "$defined"
expect "doc/lock-reference.md's table names every TF1 code of src/fencing_errcodes.h" \
	"$(table_codes doc/lock-reference.md '## SQLSTATEs of the Redis functions' | grep '^TF1')" "$(grep '^TF1' <<<"$defined")"

# "Getting started", each snippet in a session of its own
harness_start_pg
harness_start_redis
harness_tmpdir workdir
psql -X -q -c "ALTER DATABASE postgres SET fencing.redis_port = $REDIS_PORT"

# block NAME N [FILE]: the Nth code block after the "<!-- snippet: NAME"
# line of FILE (README.md)
block() {
	awk -v name="$1" -v want="$2" '
		index($0, "<!-- snippet: " name " ") == 1 { on = 1; next }
		on && /^```/ { if (inside) { inside = 0; if (++n == want) exit; next } inside = 1; next }
		on && inside && n + 1 == want { print }
	' "${3:-README.md}"
}

# run_snippet NAME [ROLE]: run the SQL block in a new session (of ROLE,
# if given) and compare what psql prints with the block after it.  A token
# from Redis is the time in microseconds: any number of 16 digits stands
# for another.  Redis's default port stands for the test's redis-server.
run_snippet() {
	local name=$1 got want
	block "$name" 1 "${3:-README.md}" | sed -E "s/\b6379\b/$REDIS_PORT/g" >"$workdir/$name.sql"
	got=$(psql -X ${2:+-U "$2"} <"$workdir/$name.sql" 2>&1 | sed -E 's/[[:space:]]+$//; s/\b[0-9]{16}\b/<token>/g') || true
	want=$(block "$name" 2 "${3:-README.md}" | sed -E 's/[[:space:]]+$//; s/\b[0-9]{16}\b/<token>/g')
	check "${3:-README.md}'s snippet $name and its output are there" test -s "$workdir/$name.sql" -a -n "$want"
	expect "${3:-README.md}, $name: the output shown" "$got" "$want"
}

run_snippet start-table
run_snippet start-b
run_snippet start-a
run_snippet start-redis
run_snippet start-role
run_snippet start-app app
expect "README.md, start-app: the application role is no superuser, and wrote order 44" \
	"$(psql -X -A -t -c "SELECT rolsuper FROM pg_roles WHERE rolname = 'app'" -c "SELECT status, tok > 0 FROM orders WHERE order_id = 44")" \
	$'f\npaid|t'
# a declared token replaces the statement's, silently (doc/clients.md)
run_snippet declared-wins "" doc/clients.md

checks_finish
