# shellcheck shell=bash
# test/lib/job_holder.sh: a previous holder of a fenced job's lock, for the
# suites that run doc/clients.md's job shapes (test/scripts/job_shapes.sh,
# test/scripts/java_clients.sh); sourced after harness.sh, not run.  Uses
# table accounts (id int, balance bigint, ...) and lock acct:1.
#
#   hold waiter   take acct:1 in a transaction of its own, add 100 to
#                 account 1, and commit once another session is running
#                 a fenced_acquire_xact(..., wait => '10s') (it waits for
#                 that up to 30 s): the commit lands while the other
#                 acquisition waits for the lock.  Returns once the lock
#                 is held.
#   hold 5        the same, committing after 5 s
#   holder_done   wait for the holder; true if it committed

hold_lock_key='fencing:v1:{r:acct:1}:lock'
holder_pid=

hold() {
	local until
	if [ "$1" = waiter ]; then
		# pg_stat_activity is read once a transaction unless cleared
		until="DO \$\$ BEGIN FOR i IN 1..3000 LOOP
			PERFORM pg_stat_clear_snapshot();
			EXIT WHEN EXISTS (SELECT FROM pg_stat_activity WHERE pid <> pg_backend_pid()
				AND state = 'active' AND query LIKE '%fenced_acquire_xact(%wait => ''10s''%');
			PERFORM pg_sleep(0.01);
		END LOOP; END \$\$"
		until+="; SELECT pg_sleep(0.2)"
	else
		until="SELECT pg_sleep($1)"
	fi
	psql -X -q -v ON_ERROR_STOP=1 -c "BEGIN" \
		-c "SELECT fenced_acquire_xact('acct:1')" \
		-c "UPDATE accounts SET balance = balance + 100 WHERE id = 1" \
		-c "$until" -c "COMMIT" >/dev/null &
	holder_pid=$!
	for _ in $(seq 500); do
		[ "$(redis-cli -p "$REDIS_PORT" EXISTS "$hold_lock_key")" = 1 ] && return 0
		sleep 0.02
	done
	return 1
}

holder_done() {
	local rc=0
	wait "$holder_pid" || rc=$?
	[ "$rc" -eq 0 ]
}
