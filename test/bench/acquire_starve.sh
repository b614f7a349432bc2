# Part of test/bench/acquire, sourced by acquire_wake.sh (and alone by
# `test/bench/acquire --starvation`): a client that releases and re-takes
# one lock in a loop (the hog: pgbench, one acquire and one release per
# transaction) against a waiter that tries to get it now and then (every
# 0.2 s, waiting up to 5 s, one session throughout), in three modes:
#
#   release  fencing.lock_wait_wakeup = 'release' (the default), unfair
#   poll     fencing.lock_wait_wakeup = 'poll' (1.1's back-off), unfair
#   fair     'release', hog and waiter both with fair => true
#
# Per mode: the hog's rate; the waiter's wait from its call to holding the
# lock, p50 and max, and the tries not served in 5 s; and the hog's grants
# between a waiter's call and its grant, counted from pgbench's
# per-transaction log (hog transactions that started after the waiter's
# call and ended before it held the lock): p50 and the longest run.  Fair
# mode lets through only those that slip in before the waiter's first
# attempt reaches Redis (its mark read, its time off the CPU); the order
# among waiters already in line is checked by test/scripts/redis_fair.sh.
# Uses $WORK, $QUICK and sql.

sql <<'SQL'
CREATE TABLE starve_tries (mode text, t0 numeric, t1 numeric, got int);
-- the waiter: one session, tries every 0.2 s until the hog has stopped
CREATE PROCEDURE starve_waiter(m text, r text, fair boolean, seconds float8) LANGUAGE plpgsql AS $$
DECLARE
	stop timestamptz := clock_timestamp() + seconds * interval '1 s';
	t0 timestamptz;
	got boolean;
BEGIN
	WHILE clock_timestamp() < stop LOOP
		t0 := clock_timestamp();
		got := fenced_acquire(r, ttl => '5 s', wait => '5 s', fair => fair) IS NOT NULL;
		INSERT INTO starve_tries VALUES (m, 1000 * extract(epoch FROM t0),
			1000 * extract(epoch FROM clock_timestamp()), got::int);
		PERFORM fenced_release(r);
		COMMIT;
		PERFORM pg_sleep(0.2);
	END LOOP;
END
$$;
SQL
STARVE_SECONDS=$([ "$QUICK" -eq 1 ] && echo 8 || echo 20)
STARVE_SUMMARY=""
for mode in release poll fair; do
	wakeup=$mode fair=false
	[ "$mode" = fair ] && wakeup=release fair=true
	cat >"$WORK/hog.$mode.sql" <<SQL
SELECT fenced_acquire('hot-$mode', ttl => '5 s', wait => '5 s', fair => $fair);
SELECT fenced_release('hot-$mode');
SQL
	harness_log "starvation, $mode: a hog loop for $STARVE_SECONDS s against a waiter's tries"
	: >"$WORK/starve.$mode"
	rm -f "$WORK/hoglog.$mode".*
	PGOPTIONS="-c fencing.lock_wait_wakeup=$wakeup" pgbench -n -M prepared -c 1 -j 1 \
		-l --log-prefix="$WORK/hoglog.$mode" \
		-T "$STARVE_SECONDS" -f "$WORK/hog.$mode.sql" >"$WORK/hog.$mode" 2>&1 &
	hog=$!
	sleep 0.5
	PGOPTIONS="-c fencing.lock_wait_wakeup=$wakeup" sql \
		-c "CALL starve_waiter('$mode', 'hot-$mode', $fair, $STARVE_SECONDS - 1.5)"
	wait "$hog" || { cat "$WORK/hog.$mode" >&2; exit 1; }
	sql -c "SELECT t0, t1, got FROM starve_tries WHERE mode = '$mode' ORDER BY t0" | tr '|' ' ' >"$WORK/starve.$mode"
	hog_rate=$(sed -n 's/^tps = \([0-9.]*\).*/\1/p' "$WORK/hog.$mode")
	# pgbench's log: client, transaction, latency us, script, end s, end us
	STARVE_SUMMARY+=$(cat "$WORK/hoglog.$mode".* | awk -v m="$mode" -v h="${hog_rate:-0}" -v tries="$WORK/starve.$mode" '
		function sorted(a, n,    i, j, t) {
			for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
		}
		{ end_ms[NR] = $5 * 1000 + $6 / 1000; start_ms[NR] = end_ms[NR] - $3 / 1000 }
		END {
			n = 0
			while ((getline line < tries) > 0) {
				split(line, f, " ")
				if (f[3] != 1) { unserved++; continue }
				n++
				w[n] = f[2] - f[1]
				c = 0
				for (i = 1; i <= NR; i++) if (start_ms[i] > f[1] && end_ms[i] < f[2]) c++
				l[n] = c
			}
			sorted(w, n); sorted(l, n)
			printf "starvation, %s: the hog at %.0f pairs/s; the waiter (%d tries, %d not served in 5 s) waited p50 %.1f ms, max %.1f ms; hog grants between its call and its grant: p50 %d, longest run %d\n", m, h, n + unserved, unserved + 0, w[int((n + 1) / 2)], w[n], l[int((n + 1) / 2)], l[n]
		}')$'\n'
done
