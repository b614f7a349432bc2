# Part of test/bench/acquire, sourced at the end of its default run (its
# functions, $WORK, $REDIS_PORT): waiters woken on release.
#
# 1. The release's notice: the hiredis loop with fencing's release script
#    announcing each release (PUBLISH, as fencing sends it) against the
#    same script told to announce nothing (the cost 1.1's release did not
#    pay), alternating rounds; the median ratio (goal >= 0.95).
# 2. Wake-up latency: a holder takes a lock, holds it 0.3 to 0.6 s and
#    releases it; a waiter, already waiting, holds it how many ms after
#    (the PostgreSQL server's clock, just before the release to just after
#    the waiter's fenced_acquire)?  fencing.lock_wait_wakeup = 'release'
#    against 'poll' (1.1's back-off), alternating trials; p50 and p99
#    (goal on loopback: p50 <= 2 ms, p99 <= 10 ms).
# 3. Starvation: a client that releases and re-takes one lock in a loop
#    (pgbench, one statement each) against a waiter that tries to get it
#    now and then: how long the waiter waits, and how many of the hog's
#    releases it misses meanwhile (its wait times the hog's rate).

WAKE_TRIALS=${WAKE_TRIALS:-$([ "$QUICK" -eq 1 ] && echo 15 || echo 60)}

harness_log "the release's notice: hiredis loop, announced against silent"
NOTICE_RATIOS=""
printf '%-6s %12s %12s %8s\n' round announced silent ratio
for ((round = 1; round <= ROUNDS; round++)); do
	if [ $((round % 2)) = 1 ]; then
		a=$(measure redis)
		s=$("$WORK/loop" 127.0.0.1 "$REDIS_PORT" "$SECONDS_PER_RUN" "$RESOURCES" silent)
	else
		s=$("$WORK/loop" 127.0.0.1 "$REDIS_PORT" "$SECONDS_PER_RUN" "$RESOURCES" silent)
		a=$(measure redis)
	fi
	r=$(awk -v a="$a" -v s="$s" 'BEGIN { printf "%.3f", a / s }')
	NOTICE_RATIOS+="$r"$'\n'
	printf '%-6s %12.0f %12.0f %8s\n' "$round" "$a" "$s" "$r"
done
echo "(acquire+release pairs per second, one client, Redis alone)"
echo

# wake_trial MODE N: the ms from the release to the waiter holding the lock
wake_trial() {
	local r="wake:$1:$2" lock t0 t1
	lock="fencing:v1:{r:$r}:lock"
	sql -c "SELECT fenced_acquire('$r', ttl => '30 s') IS NOT NULL" \
		-c "SELECT pg_sleep(0.3 + random() * 0.3)" \
		-c "SELECT (extract(epoch FROM clock_timestamp()) * 1000)::numeric(20, 3), fenced_release('$r')" \
		>"$WORK/holder.out" 2>&1 &
	local holder=$!
	for _ in $(seq 400); do
		[ "$(redis-cli -p "$REDIS_PORT" EXISTS "$lock")" = 1 ] && break
		sleep 0.005
	done
	PGOPTIONS="-c fencing.lock_wait_wakeup=$1" sql \
		-c "SELECT fenced_acquire('$r', ttl => '30 s', wait => '20 s') IS NOT NULL, (extract(epoch FROM clock_timestamp()) * 1000)::numeric(20, 3)" \
		-c "SELECT fenced_release('$r')" >"$WORK/waiter.out" 2>&1
	wait "$holder"
	t0=$(sed -n 's/^\([0-9.]*\)|t$/\1/p' "$WORK/holder.out")
	t1=$(sed -n 's/^t|//p' "$WORK/waiter.out")
	[ -n "$t0" ] && [ -n "$t1" ] || { echo "wake-up trial failed: $(cat "$WORK/holder.out" "$WORK/waiter.out")" >&2; exit 1; }
	awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.2f\n", b - a }'
}

harness_log "wake-up latency: $WAKE_TRIALS trials each, woken on release against polling"
: >"$WORK/wake.release"
: >"$WORK/wake.poll"
for ((i = 1; i <= WAKE_TRIALS; i++)); do
	if [ $((i % 2)) = 1 ]; then order=(release poll); else order=(poll release); fi
	for mode in "${order[@]}"; do
		wake_trial "$mode" "$i" >>"$WORK/wake.$mode"
	done
done

# starvation: the hog's pgbench against a waiter's tries
cat >"$WORK/hog.sql" <<'SQL'
SELECT fenced_acquire('hot', ttl => '5 s', wait => '5 s');
SELECT fenced_release('hot');
SQL
sql <<'SQL'
CREATE FUNCTION wake_bench_wait(r text) RETURNS float8 LANGUAGE plpgsql AS $$
DECLARE
	t0 timestamptz := clock_timestamp();
BEGIN
	IF fenced_acquire(r, ttl => '5 s', wait => '5 s') IS NULL THEN
		RETURN 5000;
	END IF;
	RETURN 1000 * extract(epoch FROM clock_timestamp() - t0);
END
$$;
SQL
STARVE_SECONDS=$([ "$QUICK" -eq 1 ] && echo 8 || echo 20)
STARVE_SUMMARY=""
for mode in release poll; do
	harness_log "starvation, fencing.lock_wait_wakeup = $mode: a hog loop for $STARVE_SECONDS s against a waiter's tries"
	: >"$WORK/starve.$mode"
	PGOPTIONS="-c fencing.lock_wait_wakeup=$mode" pgbench -n -M prepared -c 1 -j 1 \
		-T "$STARVE_SECONDS" -f "$WORK/hog.sql" >"$WORK/hog.$mode" 2>&1 &
	hog=$!
	sleep 0.5
	while kill -0 "$hog" 2>/dev/null; do
		out=$(PGOPTIONS="-c fencing.lock_wait_wakeup=$mode" sql \
			-c "SELECT wake_bench_wait('hot')" -c "SELECT fenced_release('hot')")
		echo "${out%%$'\n'*}" >>"$WORK/starve.$mode"
		sleep 0.2
	done
	wait "$hog"
	hog_rate=$(sed -n 's/^tps = \([0-9.]*\).*/\1/p' "$WORK/hog.$mode")
	STARVE_SUMMARY+=$(sort -n "$WORK/starve.$mode" | awk -v m="$mode" -v h="${hog_rate:-0}" '
		{ v[NR] = $1; if ($1 >= 5000) lost++ }
		END {
			p50 = v[int((NR + 1) / 2)]
			printf "starvation, %s: the hog at %.0f pairs/s; the waiter waited p50 %.1f ms, max %.1f ms (%d of %d tries not served in 5 s), missing about %.0f (p50) and %.0f (max) of the hog'"'"'s releases in a row", m, h, p50, v[NR], lost + 0, NR, p50 * h / 1000, v[NR] * h / 1000
		}')$'\n'
done

# percentile P of a column of numbers, to 0.1
wpct() { sort -n | awk -v p="$1" '{ v[NR] = $1 } END { i = int(NR * p / 100 + 0.5); if (i < 1) i = 1; printf "%.1f", v[i] }'; }

echo "release's notice, the hiredis loop announced / silent: $(printf '%s' "$NOTICE_RATIOS" | median) (goal >= 0.95)"
for mode in release poll; do
	printf 'wake-up latency, fencing.lock_wait_wakeup = %s (%d trials): p50 %s ms, p99 %s ms\n' "$mode" \
		"$(wc -l <"$WORK/wake.$mode")" "$(wpct 50 <"$WORK/wake.$mode")" "$(wpct 99 <"$WORK/wake.$mode")"
done
printf '%s' "$STARVE_SUMMARY"
