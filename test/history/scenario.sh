#!/usr/bin/env bash
# test/history/scenario.sh: one randomized history (test/history/history.py)
# against a throwaway cluster (and redis-server), with or without a fault
# injected while it runs.  Prints the checker's figures and "ok - ..." /
# "not ok - ..." lines (test/lib/checks.sh), and "# N checks, N failed";
# exits non-zero if any check failed.
#
#   bash test/history/scenario.sh NAME [history.py run options...]
#
# NAME is one of
#   seq           tokens from a sequence + fence_use, no lock at all
#   redis         tokens from fenced_acquire (TTL 200 ms), stalls past the TTL
#   broken        a PL/pgSQL guard that checks the mark without a row lock:
#                 the checker must report violations (passes when it does)
#   pg-kill       SIGKILL of the postmaster mid-history, restart, clients
#                 reconnect and go on
#   redis-flush   FLUSHALL mid-history, then a Redis restart without
#                 persistence: tokens from the Redis clock stay above every
#                 token issued before, no repair needed
#   redis-loss    Redis restarted from an older RDB snapshot, then without
#                 data, then a failover to a replica promoted while it
#                 missed the last grants: no token is issued twice
#   redis-stop    Redis frozen (SIGSTOP) for 3 s, then resumed
#   dump-restore  pg_dump mid-history, pg_restore into a fresh database, the
#                 restored marks fence, and a history goes on there
#   sentinel-failover
#                 Sentinel mode (test/lib/topology.sh), TTL 300 ms:
#                 SENTINEL FAILOVER, then kill -9 of the primary, mid-history;
#                 prints the time from each failover to the first acquisition
#                 from the new primary
#   cluster-failover
#                 Cluster mode (a Redis Cluster of three primaries and three
#                 replicas), TTL 300 ms: CLUSTER FAILOVER, then kill -9, of
#                 the primary serving the hottest resource, mid-history
#   long          redis, 10,000+ operations (not run by test/run)
#
# Environment: HISTORY_OPS (operations per client, default 40),
# HISTORY_CLIENTS (default 8), HISTORY_SEED, HISTORY_KEEP (a directory to
# keep the outputs in).  FENCING_SABOTAGE=1 makes each scenario break
# something on purpose after its history, to show that its checks can fail.
set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
source "$here/../lib/redis_lib.sh"

name=${1:?usage: scenario.sh NAME [history.py run options...]}
shift
HISTORY=(/usr/bin/python3 "$here/history.py")
OPS=${HISTORY_OPS:-40}
CLIENTS=${HISTORY_CLIENTS:-8}
SABOTAGE=${FENCING_SABOTAGE:-0}

# A figure from the checker's JSON summary.
fig() { /usr/bin/python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(eval(sys.argv[2], {}, d))' "$@"; }

harness_tmpdir work
chmod 777 "$work"

# The histories' PostgreSQL: commit timestamps on, room for the clients.
HISTORY_PG=("track_commit_timestamp = on" "max_connections = 60")

start_pg() {
	harness_start_pg "${HISTORY_PG[@]}" "$@" || exit 1
	sql -c "CREATE EXTENSION fencing" >/dev/null
}

# The free port can be taken between probe and bind: try again.
start_redis() { harness_start_redis || harness_start_redis || harness_start_redis || exit 1; }

# Kill the postmaster we started with SIGKILL, and start it again once its
# orphaned backends have gone.
pg_kill_restart() {
	local pid i
	pid=$(head -1 "$PGDATA_DIR/postmaster.pid")
	harness_log "SIGKILL postmaster $pid"
	kill -KILL "$pid"
	for i in $(seq 100); do
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.05
	done
	for i in $(seq 60); do
		if as_pg_owner pg_ctl -D "$PGDATA_DIR" -o "-p $PGPORT" -l "$PGHOST/server.log" -w -s start 2>/dev/null; then
			HARNESS_PIDS+=("$(head -1 "$PGDATA_DIR/postmaster.pid")")
			return 0
		fi
		sleep 0.5
	done
	return 1
}

# (Re)start redis-server on the same port, empty (no persistence); with an
# argument, write the time the old server was gone to that file.
redis_restart() {
	kill -TERM "$REDIS_PID" 2>/dev/null
	for _ in $(seq 100); do
		kill -0 "$REDIS_PID" 2>/dev/null || break
		sleep 0.05
	done
	[ $# -gt 0 ] && date +%s.%N >"$1"
	harness_redis_launch
}

log_rows() { sql -c "SELECT count(*) FROM hist_log" 2>/dev/null || echo 0; }

# A session kept open for probes (a lease ends with its session): start it
# with probe_open, run one statement with probe SQL, which prints its
# output (rows and messages) on one line.
probe_open() {
	coproc PROBE { psql -X -q -A -t -v ON_ERROR_STOP=0 2>&1; }
	HARNESS_PIDS+=("$PROBE_PID")
}
probe() {
	local line out=
	printf '%s\n\\echo __probe_done__\n' "$1" >&"${PROBE[1]}"
	while IFS= read -r -t 30 line <&"${PROBE[0]}"; do
		[ "$line" = __probe_done__ ] && break
		out+="$line "
	done
	echo "$out"
}

wait_for_rows() {
	local n=$1
	for _ in $(seq 600); do
		[ "$(log_rows)" -ge "$n" ] && return 0
		sleep 0.05
	done
	return 1
}

setup() { "${HISTORY[@]}" setup "$@"; }
run_bg() {
	"${HISTORY[@]}" run --outdir "$1" --clients "$CLIENTS" --ops "$OPS" --timeout 240 "${@:2}" &
	run_pid=$!
}
check_history() {
	local out=$1
	shift
	"${HISTORY[@]}" check --outdir "$out" --json "$out/summary.json" "$@"
}

sabotage() {
	[ "$SABOTAGE" = 1 ] || return 0
	harness_log "SABOTAGE: $1"
	sql -c "$2" >/dev/null
}

# check_failover_history LABEL: after the two faults of a failover
# scenario (LABEL, then kill -9), the history ran to its end and is clean:
# no violation, nothing lost, no token granted twice, and writes committed
# after each fault.
check_failover_history() {
	wait "$run_pid"
	check "clients ran to the end" test $? -eq 0
	sabotage "lose a committed write" "DELETE FROM hist_log WHERE id = (SELECT max(id) FROM hist_log)"
	check_history "$work/h" --after-file "$work/failover" --after-file "$work/killed"
	check "history is clean across both failovers (no violation, nothing lost, no token twice)" test $? -eq 0
	check "no token issued twice, written or not" test "$(fig "$work/h/summary.json" shared_grants)" -eq 0
	check "writes committed after $1" \
		test "$(fig "$work/h/summary.json" "committed_after['failover']")" -gt 0
	check "writes committed after the kill" \
		test "$(fig "$work/h/summary.json" "committed_after['killed']")" -gt 0
	echo "# error codes: $(fig "$work/h/summary.json" error_codes)"
}

case $name in
seq | redis | long)
	source=seq
	extra=()
	if [ "$name" != seq ]; then
		source=redis
		start_redis
		redis_start_pg "${HISTORY_PG[@]}" || exit 1
	else
		start_pg
	fi
	[ "$name" = long ] && extra+=(--long)
	setup
	"${HISTORY[@]}" run --outdir "$work/h" --clients "$CLIENTS" --ops "$OPS" --source "$source" \
		--timeout 3600 "${extra[@]}" "$@"
	check "clients ran to the end" test $? -eq 0
	sabotage "lower a mark behind the guard's back" \
		"UPDATE fence_high_water SET token = token::bigint - 1 WHERE resource = 'res:1'"
	check_history "$work/h"
	check "history is clean (no violation, nothing lost)" test $? -eq 0
	check "some writes were rejected as stale" test "$(fig "$work/h/summary.json" rejected)" -gt 0
	;;

broken)
	start_pg
	setup --guard broken --broken-sleep-ms 20
	"${HISTORY[@]}" run --guard broken --outdir "$work/h" --clients "${HISTORY_CLIENTS:-12}" \
		--ops "${HISTORY_OPS:-25}" --resources 1 --keys 1000 --stall-prob 0.1 --ttl-ms 50 "$@"
	check "clients ran to the end" test $? -eq 0
	if [ "$SABOTAGE" = 1 ]; then
		# swap in the real guard: the checker must now find nothing
		harness_log "SABOTAGE: the real guard instead of the broken one"
		setup
		"${HISTORY[@]}" run --outdir "$work/h" --clients 12 --ops 25 --resources 1 --keys 1000 \
			--stall-prob 0.1 --ttl-ms 50 "$@"
		check_history "$work/h" --expect-violations
	else
		check_history "$work/h" --guard broken --expect-violations
	fi
	check "the checker reports violations against the broken guard" test $? -eq 0
	;;

pg-kill)
	start_pg
	setup
	run_bg "$work/h" --source seq --ttl-ms 100
	check "the history got going before the crash" wait_for_rows 60
	check "postmaster SIGKILLed and restarted" pg_kill_restart
	date +%s.%N >"$work/restarted"
	wait "$run_pid"
	check "clients reconnected and ran to the end" test $? -eq 0
	sabotage "lose a committed write" "DELETE FROM hist_log WHERE id = (SELECT max(id) FROM hist_log)"
	check_history "$work/h" --after-file "$work/restarted"
	check "history is clean across the crash" test $? -eq 0
	check "writes committed after the restart" \
		test "$(fig "$work/h/summary.json" "committed_after['restarted']")" -gt 0
	;;

redis-flush)
	start_redis
	redis_start_pg "${HISTORY_PG[@]}" || exit 1
	setup
	run_bg "$work/h" --source redis --ttl-ms 200
	check "the history got going" wait_for_rows 40
	harness_log "FLUSHALL"
	date +%s.%N >"$work/flushed"
	check "FLUSHALL" test "$(rcli FLUSHALL)" = OK
	n=$(log_rows)
	wait_for_rows $((n + 40)) || true
	harness_log "restart redis-server without persistence"
	# (the time is taken in redis_restart, once the old server is gone)
	check "redis restarted empty" redis_restart "$work/restarted"
	wait "$run_pid"
	check "clients ran to the end" test $? -eq 0
	sabotage "lose a committed write" "DELETE FROM hist_log WHERE id = (SELECT max(id) FROM hist_log)"
	# Tokens come from the Redis clock once the counter is lost: above
	# every token issued before the fault, written or not, so no two
	# holders share a token across it, and no repair is needed.
	check_history "$work/h" --after-file "$work/flushed" --after-file "$work/restarted"
	check "history is clean across FLUSHALL and restart (no violation, no token granted twice)" test $? -eq 0
	check "no token was granted twice ($(fig "$work/h/summary.json" grants) grants)" \
		test "$(fig "$work/h/summary.json" shared_grants)" -eq 0
	check "the clock kept tokens above the marks: no repair" \
		test "$(fig "$work/h/summary.json" repairs)" -eq 0
	check "writes committed after FLUSHALL" \
		test "$(fig "$work/h/summary.json" "committed_after['flushed']")" -gt 0
	check "writes committed after the restart" \
		test "$(fig "$work/h/summary.json" "committed_after['restarted']")" -gt 0
	;;

redis-loss)
	start_redis
	redis_start_pg "${HISTORY_PG[@]}" || exit 1
	setup
	run_bg "$work/h" --source redis --ttl-ms 200
	check "the history got going" wait_for_rows 40
	harness_log "SAVE, then restart redis-server from that snapshot"
	check "SAVE" test "$(rcli SAVE)" = OK
	# soon after: some tokens granted since are not written yet
	sleep 0.2
	check "redis restarted from the older snapshot" redis_restart "$work/restored"
	n=$(log_rows)
	wait_for_rows $((n + 40)) || true
	harness_log "restart redis-server without data"
	rm -f "$REDIS_DIR/dump.rdb"
	check "redis restarted empty" redis_restart "$work/emptied"
	n=$(log_rows)
	wait_for_rows $((n + 40)) || true
	harness_log "failover to a replica promoted while it missed the last grants"
	rcli CONFIG SET repl-diskless-sync-delay 0 >/dev/null
	replica_port=$(harness_free_port)
	redis-server --bind 127.0.0.1 --port "$replica_port" --dir "$REDIS_DIR" --dbfilename replica.rdb \
		--save '' --appendonly no --replicaof 127.0.0.1 "$REDIS_PORT" \
		--daemonize no --logfile "$REDIS_DIR/replica.log" &
	HARNESS_PIDS+=("$!")
	synced=no
	for _ in $(seq 200); do
		redis-cli -p "$replica_port" INFO replication 2>/dev/null | grep -q 'master_link_status:up' && { synced=yes; break; }
		sleep 0.05
	done
	check "the replica synchronized" test $synced = yes
	redis-cli -p "$replica_port" REPLICAOF NO ONE >/dev/null
	before=$(rcli INFO commandstats | sed -n 's/^cmdstat_evalsha:calls=\([0-9]*\).*/\1/p')
	sleep 0.5
	after=$(rcli INFO commandstats | sed -n 's/^cmdstat_evalsha:calls=\([0-9]*\).*/\1/p')
	check "the old primary granted on after the replica was promoted ($before -> $after EVALSHA)" \
		test "${after:-0}" -gt "${before:-0}"
	kill -TERM "$REDIS_PID"
	sql -c "ALTER SYSTEM SET fencing.redis_port = $replica_port" -c "SELECT pg_reload_conf()" >/dev/null
	date +%s.%N >"$work/failedover"
	wait "$run_pid"
	check "clients ran to the end" test $? -eq 0
	sabotage "lose a committed write" "DELETE FROM hist_log WHERE id = (SELECT max(id) FROM hist_log)"
	check_history "$work/h" --after-file "$work/restored" --after-file "$work/emptied" \
		--after-file "$work/failedover"
	check "history is clean across the three losses (no violation, no token granted twice)" test $? -eq 0
	check "no token was granted twice ($(fig "$work/h/summary.json" grants) grants)" \
		test "$(fig "$work/h/summary.json" shared_grants)" -eq 0
	for f in restored emptied failedover; do
		check "writes committed after the fault ($f)" \
			test "$(fig "$work/h/summary.json" "committed_after['$f']")" -gt 0
	done
	;;

redis-stop)
	start_redis
	redis_start_pg "${HISTORY_PG[@]}" "fencing.redis_command_timeout = 500" || exit 1
	setup
	# a short wait for busy locks and no freezes by the parent, so that an
	# acquisition's time is bounded by the wait plus one Redis command
	run_bg "$work/h" --source redis --ttl-ms 200 --wait-ms 300 --resources 6 --freeze-prob 0
	check "the history got going" wait_for_rows 40
	harness_log "SIGSTOP redis-server for 3 s"
	date +%s.%N >"$work/stopped"
	kill -STOP "$REDIS_PID"
	sleep 3
	kill -CONT "$REDIS_PID"
	date +%s.%N >"$work/resumed"
	wait "$run_pid"
	check "clients ran to the end" test $? -eq 0
	sabotage "half-write: a row without its log entry" \
		"ALTER TABLE hist_items DISABLE TRIGGER fence; UPDATE hist_items SET val = 'half' WHERE ctid = (SELECT min(ctid) FROM hist_items)"
	check_history "$work/h" --after-file "$work/resumed"
	check "history is clean; nothing half-written" test $? -eq 0
	errs=$(fig "$work/h/summary.json" acquire_errors)
	ms=$(fig "$work/h/summary.json" max_acquire_error_ms)
	check "clients got errors while Redis was frozen ($errs)" test "$errs" -gt 0
	check "each error came within the 300 ms wait + 500 ms command timeout (+ 300 ms slack): max $ms ms" \
		test "$ms" -lt 1100
	check "writes committed after Redis resumed" \
		test "$(fig "$work/h/summary.json" "committed_after['resumed']")" -gt 0
	grep -h -m2 '"acquire_error"' "$work"/h/client-*.jsonl | head -2 | cut -c1-400 | sed 's/^/# /'
	;;

dump-restore)
	start_pg
	sql -c "CREATE DATABASE src" -c "CREATE DATABASE dst TEMPLATE template0" >/dev/null
	PGDATABASE=src sql -c "CREATE EXTENSION fencing" >/dev/null
	PGDATABASE=src setup
	PGDATABASE=src run_bg "$work/src" --source seq --ttl-ms 100
	PGDATABASE=src check "the history got going" wait_for_rows 80
	harness_log "pg_dump -Fc src, mid-history"
	check "pg_dump -Fc src" pg_dump -Fc -f "$work/src.dump" src
	wait "$run_pid"
	check "clients on src ran to the end" test $? -eq 0
	PGDATABASE=src check_history "$work/src"
	check "history on src is clean" test $? -eq 0

	check "pg_restore -d dst" pg_restore --exit-on-error -d dst "$work/src.dump"
	PGDATABASE=dst sabotage "forget a restored mark" "SELECT fence_forget('res:1')"
	# every resource of the restored log rejects the token below its highest
	# logged token, on delete and insert
	stale=$(PGDATABASE=dst sql -c "SELECT count(DISTINCT resource) FROM hist_log WHERE token > 1")
	rejected=0
	for rt in $(PGDATABASE=dst sql -F ' ' -c "SELECT substr(resource, 5) || ':' || max(token) FROM hist_log GROUP BY resource HAVING max(token) > 1"); do
		r=${rt%%:*} t=${rt##*:}
		n=$(PGDATABASE=dst sql -c "SELECT count(*) FROM hist_items WHERE res_id = $r")
		st=$(PGDATABASE=dst psql -X -q -A -t -v ON_ERROR_STOP=0 2>/dev/null -c "SELECT fence_use('res:$r', $t - 1)" \
			-c "DELETE FROM hist_items WHERE res_id = $r" -c '\echo :SQLSTATE' \
			-c "INSERT INTO hist_events (res_id, val, tok) VALUES ($r, 'stale', $t - 1)" \
			-c '\echo :SQLSTATE' | tail -2 | tr '\n' ' ')
		if [ "$n" -gt 0 ]; then want="TF001 TF001 "; else want="00000 TF001 "; fi
		if [ "$st" = "$want" ]; then rejected=$((rejected + 1)); else echo "# res:$r: got $st, want $want"; fi
	done
	check "restored marks reject tokens below them ($rejected of $stale resources)" \
		test "$rejected" -eq "$stale" -a "$stale" -gt 0
	# the history goes on in dst, on top of the restored marks and log
	PGDATABASE=dst "${HISTORY[@]}" run --outdir "$work/dst" --clients "$CLIENTS" --ops $((OPS / 2)) \
		--source seq --ttl-ms 100 --timeout 240 "$@"
	check "clients on dst ran to the end" test $? -eq 0
	PGDATABASE=dst check_history "$work/dst" --foreign-ok
	check "history on dst, continuing the restored one, is clean" test $? -eq 0
	;;

sentinel-failover)
	source "$here/../lib/topology.sh"
	topology_start_sentinel || exit 1
	start_pg "shared_preload_libraries = 'fencing'" \
		"fencing.redis_sentinels = '$SENTINEL_LIST'" \
		"fencing.redis_sentinel_master = '$SENTINEL_MASTER'" \
		"fencing.redis_sentinel_password_file = '$SENTINEL_PASSWORD_FILE'"
	setup
	run_bg "$work/h" --source redis --ttl-ms 300 --wait-ms 300 --ops $((OPS * 2))

	# first_acquisition NAME OLD: acquire a probe lock until it is taken on
	# a primary other than port OLD; print the time since the failover
	first_acquisition() {
		local t0=$1 old=$2 i=0 np
		# up to a minute: on a loaded machine an election can fail and is
		# retried after twice the failover-timeout
		while [ $(($(date +%s%3N) - t0)) -lt 60000 ]; do
			i=$((i + 1))
			if [[ "$(probe "SELECT fenced_acquire('probe:$i', ttl => '2s');")" =~ ^[0-9]+\ $ ]]; then
				np=$(topology_sentinel_primary)
				if [ -n "$np" ] && [ "$np" != "$old" ] &&
					[ "$(redis-cli -p "$np" EXISTS "fencing:v1:{r:probe:$i}:lock")" = 1 ]; then
					echo "$(($(date +%s%3N) - t0))"
					return 0
				fi
			fi
			sleep 0.02
		done
		return 1
	}

	probe_open
	check "the history got going" wait_for_rows 40
	old=$SENTINEL_PRIMARY
	harness_log "SENTINEL FAILOVER (primary $old)"
	date +%s.%N >"$work/failover"
	t0=$(date +%s%3N)
	check "SENTINEL FAILOVER: a new primary named" topology_sentinel_failover "$old"
	ms=$(first_acquisition "$t0" "$old")
	check "acquisitions from the new primary after SENTINEL FAILOVER" test -n "$ms"
	echo "# SENTINEL FAILOVER: first acquisition from the new primary after ${ms:-?} ms"
	check "the topology settled" topology_sentinel_settled
	n=$(log_rows)
	wait_for_rows $((n + 40)) || true

	old=$SENTINEL_PRIMARY
	harness_log "kill -9 of the primary $old"
	date +%s.%N >"$work/killed"
	t0=$(date +%s%3N)
	check "primary killed" topology_node_kill "$old"
	ms=$(first_acquisition "$t0" "$old")
	check "acquisitions from the new primary after kill -9" test -n "$ms"
	echo "# kill -9 of the primary: first acquisition from the new primary after ${ms:-?} ms"
	check "the killed node restarts" topology_node_restart "$old"
	check_failover_history "SENTINEL FAILOVER"
	;;

cluster-failover)
	source "$here/../lib/topology.sh"
	topology_start_cluster || exit 1
	start_pg "shared_preload_libraries = 'fencing'" \
		"fencing.redis_cluster_nodes = '$CLUSTER_SEEDS'"
	setup
	run_bg "$work/h" --source redis --ttl-ms 300 --wait-ms 300 --resources 6 --ops $((OPS * 2))

	lock_key() { echo "fencing:v1:{r:$1}:lock"; }
	# a probe resource served by the primary on port $1
	probe_on() {
		local i
		for i in $(seq 1 1000); do
			[ "$(topology_cluster_node_of "$(lock_key "probe:$i")")" = "$1" ] && { echo "probe:$i"; return 0; }
		done
		return 1
	}
	# first_acquisition T0 OLD PROBE: acquire PROBE until its lock is taken
	# on a primary other than port OLD; print the time since T0
	first_acquisition() {
		local t0=$1 old=$2 probe=$3 np
		while [ $(($(date +%s%3N) - t0)) -lt 60000 ]; do
			if [[ "$(probe "SELECT fenced_acquire('$probe', ttl => '100ms');")" =~ ^[0-9]+\ $ ]]; then
				np=$(topology_cluster_node_of "$(lock_key "$probe")")
				if [ -n "$np" ] && [ "$np" != "$old" ] &&
					[ "$(redis-cli -p "$np" EXISTS "$(lock_key "$probe")")" = 1 ]; then
					echo "$(($(date +%s%3N) - t0))"
					return 0
				fi
			fi
			sleep 0.02
		done
		return 1
	}
	replica_of() {
		redis-cli -p "$1" CLUSTER NODES |
			awk -v id="$(redis-cli -p "$1" CLUSTER MYID)" '$4 == id { split($2, a, "[:@]"); print a[2]; exit }'
	}

	probe_open
	check "the history got going" wait_for_rows 40
	old=$(topology_cluster_node_of "$(lock_key res:1)")
	probe=$(probe_on "$old")
	harness_log "CLUSTER FAILOVER of primary $old (serving res:1)"
	date +%s.%N >"$work/failover"
	t0=$(date +%s%3N)
	check "CLUSTER FAILOVER" test "$(redis-cli -p "$(replica_of "$old")" CLUSTER FAILOVER)" = OK
	ms=$(first_acquisition "$t0" "$old" "$probe")
	check "acquisitions from the new primary after CLUSTER FAILOVER" test -n "$ms"
	echo "# CLUSTER FAILOVER: first acquisition from the new primary after ${ms:-?} ms"
	check "the cluster settled" topology_cluster_settled
	n=$(log_rows)
	wait_for_rows $((n + 40)) || true

	old=$(topology_cluster_node_of "$(lock_key res:1)")
	probe=$(probe_on "$old")
	harness_log "kill -9 of primary $old (serving res:1)"
	date +%s.%N >"$work/killed"
	t0=$(date +%s%3N)
	check "primary killed" topology_node_kill "$old"
	ms=$(first_acquisition "$t0" "$old" "$probe")
	check "acquisitions from the new primary after kill -9" test -n "$ms"
	echo "# kill -9 of a primary: first acquisition from the new primary after ${ms:-?} ms"
	check "the killed node restarts" topology_node_restart "$old"
	check_failover_history "CLUSTER FAILOVER"
	;;

*)
	echo "unknown scenario $name" >&2
	exit 2
	;;
esac

if [ -n "${HISTORY_KEEP:-}" ]; then
	mkdir -p "$HISTORY_KEEP" && cp -r "$work"/. "$HISTORY_KEEP"/ && echo "# outputs kept in $HISTORY_KEEP"
fi
echo "# scenario $name"
checks_finish
