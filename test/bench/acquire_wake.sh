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
#    against a waiter that tries to get it now and then, unfair and fair
#    (test/bench/acquire_starve.sh).

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

. "$(dirname "${BASH_SOURCE[0]}")/acquire_starve.sh"

# percentile P of a column of numbers, to 0.1
wpct() { sort -n | awk -v p="$1" '{ v[NR] = $1 } END { i = int(NR * p / 100 + 0.5); if (i < 1) i = 1; printf "%.1f", v[i] }'; }

echo "release's notice, the hiredis loop announced / silent: $(printf '%s' "$NOTICE_RATIOS" | median) (goal >= 0.95)"
for mode in release poll; do
	printf 'wake-up latency, fencing.lock_wait_wakeup = %s (%d trials): p50 %s ms, p99 %s ms\n' "$mode" \
		"$(wc -l <"$WORK/wake.$mode")" "$(wpct 50 <"$WORK/wake.$mode")" "$(wpct 99 <"$WORK/wake.$mode")"
done
printf '%s' "$STARVE_SUMMARY"
