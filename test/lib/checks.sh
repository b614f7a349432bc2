# shellcheck shell=bash
# test/lib/checks.sh: the checks of the scripted suites (test/scripts/*.sh,
# test/history/scenario.sh); sourced, not run.
#
# Each check prints one "ok - DESCRIPTION" or "not ok - DESCRIPTION" line,
# with "#   ..." lines after a failure saying what differed.  A suite ends
# with checks_finish, which prints "# N checks, N failed" and the TAP plan
# "1..N" and returns non-zero if any check failed; CHECKS_FAILED counts the
# failures so far, for a suite that shows its logs when one failed.
#
# test/run counts the "ok" and "not ok" lines and compares them with the
# plan: a suite that dies before checks_finish, or whose lines and plan
# differ (a check run in a subshell, whose count is lost; a client
# printing checks of its own not run through checks_from), fails.

CHECKS_RUN=0
CHECKS_FAILED=0

ok() {
	CHECKS_RUN=$((CHECKS_RUN + 1))
	echo "ok - $*"
}

not_ok() {
	CHECKS_RUN=$((CHECKS_RUN + 1))
	CHECKS_FAILED=$((CHECKS_FAILED + 1))
	echo "not ok - $*"
}

# check DESCRIPTION COMMAND...: ok when the command succeeds.
check() {
	local desc=$1
	shift
	if "$@"; then ok "$desc"; else not_ok "$desc"; fi
}

# one_line TEXT: TEXT's lines joined with " | ", for a "#   ..." line.
one_line() { printf '%s' "${1//$'\n'/ | }"; }

# expect DESCRIPTION GOT WANT: ok when equal, else show both.
expect() {
	if [ "$2" = "$3" ]; then
		ok "$1"
	else
		not_ok "$1"
		printf '#   got:  %s\n#   want: %s\n' "$(one_line "$2")" "$(one_line "$3")"
	fi
}

# expect_match DESCRIPTION TEXT REGEX (extended; TEXT's lines are joined
# with spaces, so that a pattern can span a message and its DETAIL)
expect_match() {
	if printf '%s' "$2" | tr '\n' ' ' | grep -Eq -- "$3"; then
		ok "$1"
	else
		not_ok "$1"
		printf '#   got:  %s\n#   want: /%s/\n' "$(one_line "$2")" "$3"
	fi
}

# expect_no_match DESCRIPTION TEXT FIXED-STRING
expect_no_match() {
	if printf '%s' "$2" | grep -Fq -- "$3"; then
		not_ok "$1"
		printf '#   got:  %s\n#   want: no %s\n' "$(one_line "$2")" "$3"
	else
		ok "$1"
	fi
}

# checks_from COMMAND...: run a client that prints checks of its own
# ("ok - ..." and "not ok - ..." lines, as test/lib/checks.py does), pass
# its output (stderr too) through and count its checks; returns its status.
checks_from() {
	local line
	while IFS= read -r line; do
		printf '%s\n' "$line"
		case $line in
			"ok - "*) CHECKS_RUN=$((CHECKS_RUN + 1)) ;;
			"not ok - "*)
				CHECKS_RUN=$((CHECKS_RUN + 1))
				CHECKS_FAILED=$((CHECKS_FAILED + 1))
				;;
		esac
	done < <("$@" 2>&1)
	wait $!
}

# The suite's last command: the count, the plan, and its exit status.
checks_finish() {
	echo "# $CHECKS_RUN checks, $CHECKS_FAILED failed"
	echo "1..$CHECKS_RUN"
	[ "$CHECKS_FAILED" -eq 0 ]
}
