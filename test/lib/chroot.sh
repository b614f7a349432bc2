# Debian chroots with a newer PostgreSQL for test/scripts/version_matrix.sh:
# sourced, not run.
#
# The host runs Debian with one PostgreSQL major; the others come from
# newer Debian suites, each in its own chroot made with debootstrap from
# the mirror the host's apt sources already use.  A chroot is kept in
# $FENCING_CHROOTS and reused by the next run when its stamp file is there
# and its pg_config runs; otherwise it is made afresh.  Everything mounted
# inside a chroot is unmounted on every exit path (chroot_umount_all, which
# the caller's EXIT trap runs).
#
# Needs root (debootstrap, mount, chroot); debootstrap is installed with
# the harness's other Debian packages (harness_install_deps) when missing.

FENCING_CHROOTS=${FENCING_CHROOTS:-/var/cache/fencing-chroots}

CHROOT_MOUNTS=()

# The packages of a chroot for PostgreSQL $1 (python3 for the fake Redis
# servers of redis_faults.sh; OpenSSL's headers, which the TLS transport
# builds against, come with postgresql-server-dev through libpq-dev, and so
# do the TAP modules, PostgreSQL::Test::Cluster, in its pgxs tree; prove
# comes with perl, IPC::Run with libipc-run-perl; psycopg2 for the history
# checker of the TAP tests and the stalled holder of redis_takeover.sh).
chroot_packages() {
	echo "postgresql-$1 postgresql-server-dev-$1 libhiredis-dev redis-server make gcc python3 perl libipc-run-perl python3-psycopg2"
}

# The Debian archive the host's apt sources use (not the security one):
# the first URI of a deb822 .sources file or a one-line .list entry.
chroot_mirror() {
	local f uri
	for f in /etc/apt/sources.list.d/*.sources; do
		[ -f "$f" ] || continue
		uri=$(awk '/^URIs:/ { for (i = 2; i <= NF; i++) print $i }' "$f" |
			grep -E '/debian/?$' | head -1)
		[ -n "$uri" ] && { echo "${uri%/}"; return 0; }
	done
	for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
		[ -f "$f" ] || continue
		uri=$(awk '$1 == "deb" { for (i = 2; i <= NF; i++) if ($i ~ /^[a-z]+:\/\//) { print $i; break } }' "$f" |
			grep -E '/debian/?$' | head -1)
		[ -n "$uri" ] && { echo "${uri%/}"; return 0; }
	done
	return 1
}

# Mount what PostgreSQL needs inside chroot $1: /proc, and a tmpfs on
# /dev/shm for its dynamic shared memory.
chroot_mount() {
	local dir=$1
	mkdir -p "$dir/proc" "$dir/dev/shm"
	mount -t proc proc "$dir/proc" && CHROOT_MOUNTS+=("$dir/proc") || return 1
	mount -t tmpfs -o mode=1777 shm "$dir/dev/shm" && CHROOT_MOUNTS+=("$dir/dev/shm") || return 1
}

# Unmount everything chroot_mount mounted, newest first.  Never fails.
chroot_umount_all() {
	local i
	for ((i = ${#CHROOT_MOUNTS[@]} - 1; i >= 0; i--)); do
		umount "${CHROOT_MOUNTS[$i]}" 2>/dev/null || umount -l "${CHROOT_MOUNTS[$i]}" 2>/dev/null
	done
	CHROOT_MOUNTS=()
	return 0
}

# Unmount what a run killed before its trap left mounted under $1.
chroot_umount_stale() {
	local m
	awk -v d="$1/" 'index($2, d) == 1 { print $2 }' /proc/mounts | sort -r |
		while read -r m; do umount "$m" 2>/dev/null || umount -l "$m"; done
	return 0
}

# Run a command as root inside chroot $1, with a plain environment.
chroot_run() {
	local dir=$1
	shift
	env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8 \
		DEBIAN_FRONTEND=noninteractive chroot "$dir" "$@"
}

# Whether chroot $1 has a PostgreSQL $2 whose pg_config runs.
chroot_has_pg() {
	chroot_run "$1" "/usr/lib/postgresql/$2/bin/pg_config" --version 2>/dev/null |
		grep -q "^PostgreSQL $2\."
}

# Whether chroot $1 is complete for PostgreSQL $2: its stamp names the
# packages, and its pg_config runs and is that major.
chroot_valid() {
	local dir=$1 major=$2
	[ -f "$dir/.fencing-chroot" ] &&
		[ "$(cat "$dir/.fencing-chroot")" = "$(chroot_packages "$major")" ] &&
		chroot_has_pg "$dir" "$major"
}

# Install the packages of chroot_packages that chroot $1, made for
# PostgreSQL $2 by an earlier version of this file (its stamp names
# fewer), lacks, and stamp it: cheaper than making it afresh.  Returns 1,
# the log in $3, if apt-get fails.
chroot_top_up() {
	local dir=$1 major=$2 log=$3
	chroot_mount "$dir" || { chroot_umount_all; return 1; }
	# shellcheck disable=SC2046
	if ! { chroot_run "$dir" apt-get -o Acquire::Check-Valid-Until=false update &&
		chroot_run "$dir" apt-get install -y --no-install-recommends $(chroot_packages "$major"); } >"$log" 2>&1; then
		chroot_umount_all
		return 1
	fi
	chroot_umount_all
	chroot_packages "$major" >"$dir/.fencing-chroot"
}

# Make sure $FENCING_CHROOTS/$1 is a chroot of Debian suite $2 with
# PostgreSQL $3 (debootstrap script $4, the suite's name by default), and
# print where it is.  Reuses a valid one; otherwise makes it afresh, next
# to it, and moves it into place only once complete; one whose PostgreSQL
# runs but that lacks packages added since it was made gets them
# (chroot_top_up).  On failure prints the reason on stderr and returns 1.
chroot_ensure() {
	local name=$1 suite=$2 major=$3 script=${4:-$2}
	local dir=$FENCING_CHROOTS/$name new mirror start log
	if chroot_valid "$dir" "$major"; then
		echo "$dir"
		return 0
	fi
	if [ -f "$dir/.fencing-chroot" ] && chroot_has_pg "$dir" "$major"; then
		chroot_umount_stale "$dir"
		harness_log "installing the packages the $suite chroot lacks"
		if chroot_top_up "$dir" "$major" "$FENCING_CHROOTS/$name.log"; then
			echo "$dir"
			return 0
		fi
		harness_log "apt-get install in the $suite chroot failed: making it afresh"
	fi
	mirror=$(chroot_mirror) || { echo "no Debian mirror in the host's apt sources" >&2; return 1; }
	command -v debootstrap >/dev/null || harness_install_deps debootstrap >&2
	command -v debootstrap >/dev/null ||
		{ echo "debootstrap is not installed, and apt-get install debootstrap failed" >&2; return 1; }
	new=$dir.new
	log=$FENCING_CHROOTS/$name.log
	mkdir -p "$FENCING_CHROOTS"
	chroot_umount_stale "$dir"
	chroot_umount_stale "$new"
	rm -rf --one-file-system "$dir" "$new"
	start=$SECONDS
	harness_log "making the $suite chroot for PostgreSQL $major in $dir"
	if ! debootstrap --variant=minbase "$suite" "$new" "$mirror" \
		"/usr/share/debootstrap/scripts/$script" >"$log" 2>&1; then
		echo "debootstrap $suite from $mirror failed: $(grep -E '^(E|W):' "$log" | tail -1) (see $log)" >&2
		rm -rf --one-file-system "$new"
		return 1
	fi
	chroot_mount "$new" || { chroot_umount_all; rm -rf --one-file-system "$new"; return 1; }
	# A suite still in development may carry a Release file past its
	# Valid-Until date.
	# shellcheck disable=SC2046
	if ! { chroot_run "$new" apt-get -o Acquire::Check-Valid-Until=false update &&
		chroot_run "$new" apt-get install -y --no-install-recommends $(chroot_packages "$major"); } >>"$log" 2>&1; then
		echo "apt-get install in the $suite chroot failed: $(grep -E '^(E|W):' "$log" | tail -1) (see $log)" >&2
		chroot_umount_all
		rm -rf --one-file-system "$new"
		return 1
	fi
	chroot_umount_all
	chroot_packages "$major" >"$new/.fencing-chroot"
	mv "$new" "$dir"
	harness_log "made the $suite chroot in $((SECONDS - start)) s"
	echo "$dir"
}
