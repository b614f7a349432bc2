#!/usr/bin/env bash
# test/lib/valgrind_regress.sh: the regression suite (pg_regress over
# sql/ and expected/, then the isolation specs, as `make installcheck` runs
# them) against a throwaway cluster whose postgres runs under valgrind
# memcheck; with REDIS=1 (the default) also the Redis bad-input script and a
# short fenced_acquire history, so that the hiredis paths run too, and
# leases renewed by the renewer worker.
#
# Not part of test/run: it takes several minutes.
#
#   bash test/lib/valgrind_regress.sh                # after make install
#   REDIS=0 ISOLATION=0 bash test/lib/valgrind_regress.sh
#   KEEP=1 ...                                       # keep the logs
#
# Debian's postgres is not built with USE_VALGRIND: palloc'd chunks are not
# tracked one by one, so overruns inside a memory context block go unseen;
# uninitialised-value uses, and anything in malloc'd memory (hiredis), are
# seen.  PostgreSQL's own known noise (padding bytes written to WAL, stats
# and relcache files) is suppressed by test/lib/valgrind.supp.
#
# --error-exitcode stays 0: the postmaster takes any other exit status of a
# child (the startup process, a backend) for a crash and restarts or stops,
# and the startup process always trips over PostgreSQL's WAL padding.  The
# logs are read instead.
#
# Prints every error report whose stack has a frame in fencing.so, a count
# of the other reports, and exits non-zero if fencing.so appears in any
# report or a suite failed.
set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
source "$here/harness.sh"
top=$FENCING_TOP
bindir=$("$PG_CONFIG" --bindir)
pgxs=$(cd "$(dirname "$("$PG_CONFIG" --pgxs)")/../.." && pwd)

harness_tmpdir dir
[ "${KEEP:-0}" = 1 ] && HARNESS_DIRS=("${HARNESS_DIRS[@]/$dir/}")
mkdir -p "$dir/vg" "$dir/out" "$dir/out_iso"
chmod 777 "$dir/vg" "$dir/out" "$dir/out_iso"
chown -R "$(stat -c %U "$dir")" "$dir" 2>/dev/null

as_pg_owner "$bindir/initdb" -D "$dir/data" -A trust -U postgres --no-sync -E UTF8 --locale=C \
	>"$dir/initdb.log" 2>&1 || { cat "$dir/initdb.log"; exit 1; }

extra=()
if [ "${REDIS:-1}" = 1 ]; then
	harness_start_redis || harness_start_redis || exit 1
	# the Redis settings go to the Redis part's database only, so that the
	# regression tests see the defaults
	extra=(-c "shared_preload_libraries=fencing")
fi
PGPORT=$(harness_free_port)
export PGHOST=$dir PGPORT PGUSER=postgres PGDATABASE=postgres

harness_log "starting postgres under valgrind (logs in $dir/vg)"
as_pg_owner valgrind --quiet --tool=memcheck --leak-check=no --error-exitcode=0 \
	--trace-children=yes --track-origins=yes --num-callers=40 --read-var-info=yes \
	--suppressions="$here/valgrind.supp" --log-file="$dir/vg/%p.log" \
	"$bindir/postgres" -D "$dir/data" -p "$PGPORT" -c listen_addresses= \
	-c unix_socket_directories="$dir" -c fsync=off -c max_connections=30 \
	-c track_commit_timestamp=on -c max_prepared_transactions=10 \
	-c log_min_messages=warning "${extra[@]}" >"$dir/server.log" 2>&1 &
vg_pid=$!
HARNESS_PIDS+=("$vg_pid")
for _ in $(seq 600); do
	pg_isready -q -h "$dir" -p "$PGPORT" && break
	sleep 0.5
done
pg_isready -h "$dir" -p "$PGPORT" || { cat "$dir/server.log"; exit 1; }
HARNESS_PIDS+=("$(head -1 "$dir/data/postmaster.pid")")

rc=0
harness_log "pg_regress (sql/, expected/)"
tests=$(cd "$top/sql" && ls ./*.sql | sed 's|^\./||; s/\.sql$//' | grep -v '^fencing--')
# shellcheck disable=SC2086
"$pgxs/src/test/regress/pg_regress" --inputdir="$top" --outputdir="$dir/out" \
	--bindir="$bindir" --load-extension=fencing --dbname=contrib_regression $tests || rc=1
[ -f "$dir/out/regression.diffs" ] && head -100 "$dir/out/regression.diffs"

if [ "${ISOLATION:-1}" = 1 ]; then
	harness_log "pg_isolation_regress (test/isolation)"
	specs=$(cd "$top/test/isolation/specs" && ls ./*.spec | sed 's|^\./||; s/\.spec$//')
	# shellcheck disable=SC2086
	PGISOLATIONTIMEOUT=600 "$pgxs/src/test/isolation/pg_isolation_regress" \
		--inputdir="$top/test/isolation" --outputdir="$dir/out_iso" --bindir="$bindir" \
		--load-extension=fencing --dbname=isolation_regression $specs || rc=1
	[ -f "$dir/out_iso/regression.diffs" ] && head -100 "$dir/out_iso/regression.diffs"
fi

if [ "${REDIS:-1}" = 1 ]; then
	harness_log "Redis bad input, and a short fenced_acquire history"
	psql -X -q -c "CREATE DATABASE vg_redis" \
		-c "ALTER DATABASE vg_redis SET fencing.redis_host = '127.0.0.1'" \
		-c "ALTER DATABASE vg_redis SET fencing.redis_port = $REDIS_PORT" \
		-c "ALTER DATABASE vg_redis SET fencing.redis_command_timeout = '10s'" \
		-c "ALTER DATABASE vg_redis SET fencing.redis_connect_timeout = '10s'" &&
		PGDATABASE=vg_redis psql -X -q -c "CREATE EXTENSION fencing"
	PGDATABASE=vg_redis REDIS_SOCKET=$REDIS_SOCKET /usr/bin/python3 "$here/bad_input_redis.py" |
		grep -v '^ok' || true
	PGDATABASE=vg_redis /usr/bin/python3 "$top/test/history/history.py" all --outdir "$dir/hist" \
		--clients 4 --ops 15 --source redis --ttl-ms 2000 --wait-ms 5000 --freeze-prob 0 \
		--stall-prob 0.1 || rc=1
	# the renewer and the shared table of lock holders: the worker reads
	# the server's settings, so they go to postgresql.auto.conf now that
	# the regression tests are done
	psql -X -q -c "ALTER SYSTEM SET fencing.redis_port = $REDIS_PORT" \
		-c "ALTER SYSTEM SET fencing.redis_release_timeout = '10s'" -c "SELECT pg_reload_conf()" >/dev/null
	sleep 2
	PGDATABASE=vg_redis psql -X -q -A -t \
		-c "SELECT fenced_acquire('vg:renew', ttl => '2 s', renew => true) IS NOT NULL, pg_sleep(4)::text = ''" \
		-c "BEGIN" -c "SELECT fenced_acquire_xact('vg:xact', ttl => '2 s', renew => true) IS NOT NULL" \
		-c "SELECT pg_sleep(3)" -c "SELECT resource, kind, renewing FROM fenced_lock_holders" -c "COMMIT" \
		-c "SELECT fenced_acquire('vg:discard', ttl => '30 s', renew => true) IS NOT NULL" -c "DISCARD ALL" || rc=1
fi

harness_log "stopping postgres"
as_pg_owner "$bindir/pg_ctl" -D "$dir/data" -m fast -w -t 300 stop >/dev/null
wait "$vg_pid" 2>/dev/null

# One report per error: the lines between two blank lines, starting with
# "==PID== <kind>".  Group them by their first fencing.so frame.
python3 - "$dir/vg" <<'EOF'
import glob, re, sys, collections
ours, theirs = [], collections.Counter()
for path in sorted(glob.glob(sys.argv[1] + "/*.log")):
    text = open(path, errors="replace").read()
    blocks = re.split(r"\n==\d+== \n", text)
    for b in blocks:
        lines = [re.sub(r"^==\d+== ", "", l) for l in b.splitlines()]
        if not lines or not re.match(r"(Invalid|Conditional|Use of uninit|Syscall param|Source and destination|Mismatched|Argument)", lines[0]):
            continue
        if any("fencing.so" in l or "/src/" in l and ".c:" in l and "fencing" in l for l in lines):
            ours.append((path, "\n".join(lines)))
        else:
            top = next((l.strip() for l in lines[1:] if l.strip().startswith(("at ", "by "))), "?")
            theirs[lines[0] + " | " + top] += 1
print("valgrind: %d error reports with a frame in fencing.so, %d elsewhere" % (len(ours), sum(theirs.values())))
for k, n in theirs.most_common(15):
    print("  elsewhere %4d x %s" % (n, k))
seen = set()
for path, rep in ours:
    key = rep.split("\n")[0] + rep.split("\n")[1]
    if key in seen:
        continue
    seen.add(key)
    print("---- " + path)
    print(rep)
sys.exit(1 if ours else 0)
EOF
vg_rc=$?
echo "valgrind_regress: suites rc=$rc, fencing.so in valgrind reports: $([ $vg_rc = 0 ] && echo no || echo YES)"
[ $rc -eq 0 ] && [ $vg_rc -eq 0 ]
