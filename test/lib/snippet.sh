# shellcheck shell=bash
# test/lib/snippet.sh: the documentation's code blocks, for the suites that
# run them as written; sourced after harness.sh, not run.
#
#   snippet NAME   print the code block after the line
#                  "<!-- snippet: NAME (run by SCRIPT) -->" of README.md or
#                  doc/*.md.  test/scripts/docs.sh checks that the SCRIPT
#                  of every marker has a line starting "snippet NAME", and
#                  that every such line has its marker.

snippet() {
	awk -v name="$1" '
		index($0, "<!-- snippet: " name " ") == 1 { want = 1; next }
		want && /^```/ { if (inside) exit; inside = 1; next }
		inside { print }
	' "$FENCING_TOP"/README.md "$FENCING_TOP"/doc/*.md
}
