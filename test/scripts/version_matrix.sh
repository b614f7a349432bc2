#!/usr/bin/env bash
# test/scripts/version_matrix.sh MAJOR: fencing on PostgreSQL MAJOR (17 or
# 18), in a Debian chroot with that server and hiredis 1.x.
#
# The host has one PostgreSQL (15 on Debian 12); 17 comes from Debian 13
# (trixie), 18 from forky.  The chroot (test/lib/chroot.sh) is reused when a
# previous run left a valid one, made afresh otherwise.  The working tree
# as it is (tracked and untracked files, not ignored ones) is copied into
# it, and these steps run there, each printed as one line:
#
#   ok - pgMAJOR/chroot       the chroot is there (made or reused)
#   ok - pgMAJOR/build        builds with -Werror, and installs
#   ok - pgMAJOR/regress      make installcheck, the pg_regress suite
#   ok - pgMAJOR/isolation    make installcheck, the isolation specs
#   ok - pgMAJOR/upgrade      test/scripts/upgrade.sh
#   ok - pgMAJOR/redis_lock   test/scripts/redis_lock.sh, against the
#                             chroot's redis-server
#   ok - pgMAJOR/redis_faults test/scripts/redis_faults.sh: the Redis
#                             faults and broken servers, which hiredis
#                             1.x parses differently from 0.14
#   ok - pgMAJOR/dist         the "make dist" tarball builds with -Werror
#   ok - pgMAJOR/tap          the TAP tests, test/t/*.pl (crash recovery,
#                             standby, subtransactions through a crash,
#                             many raises per transaction through a crash
#                             and on a standby), with that major's
#                             PostgreSQL::Test::Cluster
#   ok - pgMAJOR/redis_takeover test/scripts/redis_takeover.sh: the
#                             takeover of a stalled holder, whose FATAL
#                             carries TF110 (set by an emit_log_hook)
#
# Each line ends with the seconds the step took, and the tap step with
# prove's count of files and tests.
#
# A failed step prints "not ok - ..." and the end of its log.  When the
# chroot cannot be had (no network, no mirror), every step is "not ok"
# with the reason.  test/run counts each line.  Exits non-zero if any step
# failed.
#
# Needs root (debootstrap, mount, chroot).  One run at a time per chroot
# (a lock file), since the chroot has one install directory.
# test/run: last alone args=17,18
set -uo pipefail

source "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/../lib/harness.sh"
source "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/../lib/chroot.sh"

major=${1:?usage: version_matrix.sh 17|18}
case $major in
	17) name=trixie suite=trixie script=trixie ;;
	18) name=forky suite=forky script=sid ;;
	*) echo "no chroot is known for PostgreSQL $major" >&2; exit 2 ;;
esac
steps=(chroot build regress isolation upgrade redis_lock redis_faults dist tap redis_takeover)
failed=0
echo "1..${#steps[@]}"

# The warnings-as-errors flags of harness_build.
werror='-Wall -Wextra -Werror -Wno-unused-parameter -Wno-sign-compare -Wno-missing-field-initializers'

# report ok|not_ok STEP [COMMENT]
report() {
	if [ "$1" = ok ]; then
		echo "ok - pg$major/$2${3:+ ($3)}"
	else
		echo "not ok - pg$major/$2${3:+ ($3)}"
		failed=$((failed + 1))
	fi
}

# Every step from the one named on is "not ok", with the reason.
fail_from() {
	local from=$1 reason=$2 s on=0
	for s in "${steps[@]}"; do
		[ "$s" = "$from" ] && on=1
		[ $on -eq 1 ] && report not_ok "$s" "$reason"
	done
	exit 1
}

if [ "$(id -u)" -ne 0 ]; then
	fail_from chroot "needs root for debootstrap, mount and chroot"
fi

mkdir -p "$FENCING_CHROOTS"
exec 9>"$FENCING_CHROOTS/$name.lock"
flock 9

trap 'chroot_umount_all; harness_cleanup' EXIT
harness_tmpdir hostdir

start=$SECONDS
was_valid=0
chroot_valid "$FENCING_CHROOTS/$name" "$major" && was_valid=1
if ! dir=$(chroot_ensure "$name" "$suite" "$major" "$script" 2>"$hostdir/chroot.err"); then
	fail_from chroot "no $suite chroot: $(tail -1 "$hostdir/chroot.err")"
fi
if [ $was_valid -eq 1 ]; then
	report ok chroot "reused $dir"
else
	report ok chroot "made or completed $dir in $((SECONDS - start)) s"
fi
chroot_mount "$dir" || fail_from build "could not mount /proc and /dev/shm in $dir"

pg_config=/usr/lib/postgresql/$major/bin/pg_config
versions=$(chroot_run "$dir" sh -c "$pg_config --version; dpkg-query -W -f='hiredis \${Version}' libhiredis-dev")
echo "# ${versions//$'\n'/, }"

# The working tree and the release tarball, in a directory of the chroot
# that is this run's alone.
work=$(mktemp -d "$dir/tmp/fencing-matrix.XXXXXX")
inner=${work#"$dir"}
HARNESS_DIRS+=("$work")
mkdir "$work/tree"
git -C "$FENCING_TOP" ls-files -co --exclude-standard -z |
	(cd "$FENCING_TOP" && tar --null -T - -cf -) | tar -xf - -C "$work/tree"
version=$(sed -n "s/^default_version *= *'\(.*\)'/\1/p" "$FENCING_TOP/fencing.control")
make -C "$FENCING_TOP" -s dist DISTFILE="$work/fencing-$version.tar.gz" >/dev/null 2>&1

# step NAME COMMAND: run COMMAND (a shell command line) in the copied tree
# inside the chroot, as root, and report it, with prove's summary if it
# printed one, and the seconds it took.
step() {
	local s=$1 cmd=$2 log=$hostdir/$1.log t0=$SECONDS note
	harness_log "PostgreSQL $major: $s"
	if chroot_run "$dir" env PG_CONFIG="$pg_config" TMPDIR=/tmp \
		timeout 900 bash -c "cd $inner/tree && $cmd" >"$log" 2>&1; then
		note=$(grep -o '^Files=[0-9]*, Tests=[0-9]*' "$log" | tail -1)
		report ok "$s" "${note:+$note; }$((SECONDS - t0)) s"
	else
		report not_ok "$s" "$((SECONDS - t0)) s"
		tail -150 "$log" | sed 's/^/#   /'
	fi
}

# A throwaway cluster for one make installcheck, as test/run has; the
# diffs shown on failure.
with_pg='source test/lib/harness.sh && harness_start_pg &&'

step build "make -s clean && make -s PG_CFLAGS='$werror' && make -s install"
step regress "$with_pg make -s installcheck ISOLATION= || { cat regression.diffs; false; }"
step isolation "$with_pg make -s installcheck REGRESS= || { cat output_iso/regression.diffs; false; }"
step upgrade "bash test/scripts/upgrade.sh"
step redis_lock "bash test/scripts/redis_lock.sh"
step redis_faults "bash test/scripts/redis_faults.sh"
step dist "cd .. && tar -xzf fencing-$version.tar.gz && make -C fencing-$version -s PG_CFLAGS='$werror'"
step tap "bash test/lib/tap.sh"
step redis_takeover "bash test/scripts/redis_takeover.sh"

[ "$failed" -eq 0 ]
