# Shared set-up for test/run, test/demo and the benchmarks: sourced, not run.
#
# Installs what is missing (Debian packages), builds and installs the
# extension, and starts a throwaway PostgreSQL cluster and redis-server in a
# private directory.  Everything started here is stopped by PID on exit,
# whatever the exit path.

FENCING_TOP=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
PG_CONFIG=${PG_CONFIG:-pg_config}

harness_log() { printf '== %s\n' "$*" >&2; }

# Run a command as root: directly, or through sudo for a developer account.
as_root() {
	if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi
}

# Run a command as the OS user that owns the throwaway cluster; initdb
# refuses to run as root, so root hands it to "postgres".
as_pg_owner() {
	if [ "$(id -u)" -eq 0 ]; then
		runuser -u postgres -- "$@"
	else
		"$@"
	fi
}

# The major version of the PostgreSQL to build for: $PG_CONFIG's, or, on a
# machine with a server but no pg_config yet (no libpq-dev), the newest
# server installed.
harness_pg_major() {
	local v
	v=$("$PG_CONFIG" --version 2>/dev/null | sed 's/^[^0-9]*\([0-9]*\).*/\1/')
	if [ -z "$v" ]; then
		v=$(find /usr/lib/postgresql -mindepth 3 -maxdepth 3 -path '*/bin/postgres' 2>/dev/null |
			sed 's|^/usr/lib/postgresql/\([0-9]*\)/.*|\1|' | sort -n | tail -1)
	fi
	[ -n "$v" ] || { echo "no PostgreSQL found: install postgresql-15 (or newer), or set PG_CONFIG" >&2; return 1; }
	echo "$v"
}

# Install the Debian packages the build and the tests need, if missing.
harness_install_deps() {
	local major pkgs=() p
	major=$(harness_pg_major) || return 1
	for p in "postgresql-server-dev-$major" "postgresql-client-$major" \
		libhiredis-dev libssl-dev openssl redis-server clang "clang-$(harness_clang_major)" \
		libclang-rt-dev libipc-run-perl python3-psycopg2 "$@"; do
		dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'ok installed' || pkgs+=("$p")
	done
	# One install at a time (test/run runs suites side by side), and
	# apt-get waits for another apt's lock rather than failing.
	if [ ${#pkgs[@]} -gt 0 ]; then
		harness_log "installing ${pkgs[*]}"
		{
			flock 8
			as_root apt-get -o DPkg::Lock::Timeout=600 update -qq
			DEBIAN_FRONTEND=noninteractive as_root apt-get -o DPkg::Lock::Timeout=600 install -y -qq \
				--no-install-recommends "${pkgs[@]}" >/dev/null
		} 8>>"${TMPDIR:-/tmp}/fencing-apt.lock"
	fi
}

# The clang PostgreSQL was built with (it compiles the JIT bitcode).
harness_clang_major() {
	local cc
	cc=$(sed -n 's/^CLANG = //p' "$("$PG_CONFIG" --pgxs | sed 's|src/makefiles/pgxs.mk|src/Makefile.global|')" 2>/dev/null)
	case "$cc" in
		*clang-[0-9]*) echo "${cc##*clang-}" ;;
		*) echo 14 ;;
	esac
}

# Build with warnings as errors and install into the server's directories.
harness_build() {
	harness_log "building and installing fencing"
	make -C "$FENCING_TOP" -s clean
	make -C "$FENCING_TOP" -s \
		PG_CFLAGS="-Wall -Wextra -Werror -Wno-unused-parameter -Wno-sign-compare -Wno-missing-field-initializers" "$@"
	as_root make -C "$FENCING_TOP" -s install "$@"
}

HARNESS_PIDS=()
HARNESS_DIRS=()

# Stop what we started, newest first, and remove our directories.  Runs as
# the EXIT trap, possibly under the caller's "set -e": nothing here may fail.
harness_cleanup() {
	local rc=$? i pid d
	set +e
	for ((i = ${#HARNESS_PIDS[@]} - 1; i >= 0; i--)); do
		pid=${HARNESS_PIDS[$i]}
		if kill -0 "$pid" 2>/dev/null; then
			kill -CONT "$pid" 2>/dev/null
			kill -TERM "$pid" 2>/dev/null
			for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
			kill -KILL "$pid" 2>/dev/null
		fi
	done
	HARNESS_PIDS=()
	for d in "${HARNESS_DIRS[@]}"; do
		[ -n "$d" ] && rm -rf "$d"
	done
	HARNESS_DIRS=()
	return $rc
}
trap harness_cleanup EXIT
trap 'exit 130' INT TERM

# Make a private directory that the cluster's OS user can write, store its
# path in the variable named by $1, and remove it on exit.  (A variable and
# not command substitution, which would register it in a subshell.)
harness_tmpdir() {
	local d
	d=$(mktemp -d "${TMPDIR:-/tmp}/fencing.XXXXXX")
	chmod 755 "$d"
	if [ "$(id -u)" -eq 0 ]; then chown postgres: "$d"; fi
	HARNESS_DIRS+=("$d")
	printf -v "$1" '%s' "$d"
}

# A TCP port on 127.0.0.1 that nothing listens on, below the kernel's
# range for outgoing connections, so that a server restarted on it does not
# find it taken by a client's ephemeral port.
harness_free_port() {
	local port low
	low=$(cut -f1 /proc/sys/net/ipv4/ip_local_port_range 2>/dev/null || echo 32768)
	for _ in $(seq 200); do
		port=$((20000 + RANDOM % (low - 20000)))
		if ! (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
			echo "$port"
			return 0
		fi
	done
	return 1
}

# Start a throwaway cluster listening only on a Unix socket in its own
# directory, so it cannot collide with another server on this machine.
# Extra postgresql.conf lines may be given as arguments.  Sets PGHOST,
# PGPORT, PGUSER, PGDATABASE and PGDATA_DIR.
harness_start_pg() {
	local dir bindir line
	bindir=$("$PG_CONFIG" --bindir)
	harness_tmpdir dir
	as_pg_owner "$bindir/initdb" -D "$dir/data" -A trust -U postgres --no-sync -E UTF8 --locale=C >"$dir/initdb.log" 2>&1 ||
		{ cat "$dir/initdb.log" >&2; return 1; }
	{
		echo "listen_addresses = ''"
		echo "unix_socket_directories = '$dir'"
		echo "fsync = off"
		echo "max_connections = 40"
		echo "max_prepared_transactions = 10"
		echo "log_min_messages = warning"
		for line in "$@"; do echo "$line"; done
	} >>"$dir/data/postgresql.conf"
	PGPORT=$(harness_free_port)
	as_pg_owner "$bindir/pg_ctl" -D "$dir/data" -o "-p $PGPORT" -l "$dir/server.log" -w -s start ||
		{ cat "$dir/server.log" >&2; return 1; }
	HARNESS_PIDS+=("$(head -1 "$dir/data/postmaster.pid")")
	export PGHOST=$dir PGPORT PGUSER=postgres PGDATABASE=postgres
	PGDATA_DIR=$dir/data
	export PATH="$bindir:$PATH"
}

# Start a throwaway redis-server on 127.0.0.1 and a Unix socket, without
# persistence.  Sets REDIS_PORT, REDIS_SOCKET, REDIS_DIR and REDIS_PID.
harness_start_redis() {
	harness_tmpdir REDIS_DIR
	REDIS_PORT=$(harness_free_port)
	REDIS_SOCKET=$REDIS_DIR/redis.sock
	harness_redis_launch "$@"
}

# (Re)start redis-server with the settings chosen by harness_start_redis.
harness_redis_launch() {
	redis-server --bind 127.0.0.1 --port "$REDIS_PORT" --unixsocket "$REDIS_SOCKET" \
		--unixsocketperm 777 --dir "$REDIS_DIR" --save '' --appendonly no \
		--daemonize no --logfile "$REDIS_DIR/redis.log" "$@" &
	REDIS_PID=$!
	HARNESS_PIDS+=("$REDIS_PID")
	for _ in $(seq 100); do
		redis-cli -s "$REDIS_SOCKET" ping >/dev/null 2>&1 && return 0
		sleep 0.05
	done
	cat "$REDIS_DIR/redis.log" >&2
	return 1
}

# Start a throwaway pgbouncer in transaction mode on 127.0.0.1:PORT (no Unix
# socket), trusting USER, its files in DIR (pgbouncer.ini, users.txt, its
# pid and log files): harness_start_pgbouncer DIR PORT USER DATABASES
# [SETTING...].  DATABASES is the [databases] section's text; each SETTING
# is a further line of [pgbouncer] ("default_pool_size = 2").  As root it
# runs as postgres.
harness_start_pgbouncer() {
	local dir=$1 port=$2 user=$3 databases=$4
	shift 4
	printf '"%s" ""\n' "$user" >"$dir/users.txt"
	{
		printf '[databases]\n%s\n\n[pgbouncer]\n' "$databases"
		printf '%s\n' "listen_addr = 127.0.0.1" "listen_port = $port" "unix_socket_dir =" \
			"auth_type = trust" "auth_file = $dir/users.txt" "pool_mode = transaction" "$@" \
			"pidfile = $dir/pgbouncer.pid" "logfile = $dir/pgbouncer.log"
	} >"$dir/pgbouncer.ini"
	chmod 644 "$dir/users.txt" "$dir/pgbouncer.ini"
	if [ "$(id -u)" -eq 0 ]; then
		chown postgres: "$dir/users.txt" "$dir/pgbouncer.ini"
		pgbouncer -d -u postgres "$dir/pgbouncer.ini"
	else
		pgbouncer -d "$dir/pgbouncer.ini"
	fi
	for _ in $(seq 100); do
		[ -s "$dir/pgbouncer.pid" ] && break
		sleep 0.05
	done
	if [ ! -s "$dir/pgbouncer.pid" ]; then
		cat "$dir/pgbouncer.log" >&2
		return 1
	fi
	HARNESS_PIDS+=("$(cat "$dir/pgbouncer.pid")")
}
