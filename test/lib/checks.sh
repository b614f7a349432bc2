# shellcheck shell=bash
# test/lib/checks.sh: the checks of the scripted suites (test/scripts/*.sh);
# sourced, not run.
#
# Each check prints one "ok - DESCRIPTION" or "not ok - DESCRIPTION" line,
# with "#   ..." lines after a failure saying what differed.  A suite ends
# with checks_finish, which prints "# N checks, N failed" and returns
# non-zero if any check failed; CHECKS_FAILED counts the failures so far,
# for a suite that shows its logs when one failed.

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

# expect_eq DESCRIPTION WANT GOT: ok when equal, else show both (their
# lines joined with " | ").
expect_eq() {
	local desc=$1 want=$2 got=$3
	if [ "$want" = "$got" ]; then
		ok "$desc"
	else
		not_ok "$desc"
		printf '#   expected: %s\n#        got: %s\n' "${want//$'\n'/ | }" "${got//$'\n'/ | }"
	fi
}

# The suite's last command: the count, and its exit status.
checks_finish() {
	echo "# $CHECKS_RUN checks, $CHECKS_FAILED failed"
	[ "$CHECKS_FAILED" -eq 0 ]
}
