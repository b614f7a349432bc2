/*-------------------------------------------------------------------------
 *
 * stats_redis.c
 *	  Counters of what the Redis functions did, and the function behind
 *	  the view fence_stat_redis.
 *
 * In shared memory when the library is in shared_preload_libraries (the
 * space is asked for by stats.c, with the guard's), else per backend, as
 * the guard's counters are (stats.c).
 *
 * How long fenced_acquire() took to take a lock, waits for a busy lock
 * included, goes into a histogram of STATS_LATENCY_BUCKETS buckets, four
 * to each power of two of microseconds, so that a percentile read from it
 * is at most a quarter above the true one.
 *
 * The Redis counters are counted at once (in shared memory, with an
 * atomic addition: a Redis round trip costs far more).  Its errors are
 * counted by SQLSTATE as they are reported, in emit_log_hook, as
 * pg_stat_monitor counts errors: so an error a PL/pgSQL exception block
 * catches, or one that log_min_messages keeps out of the server log, is
 * not counted.
 *
 * IDENTIFICATION
 *	  src/stats/stats_redis.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <math.h>

#include "fencing_errcodes.h"
#include "fmgr.h"
#include "funcapi.h"
#include "port/atomics.h"
#include "port/pg_bitutils.h"
#include "stats/stats.h"
#include "storage/shmem.h"
#include "utils/timestamp.h"

/* Buckets of the acquisition time histogram: up to 2^32 us (71 minutes). */
#define STATS_LATENCY_BUCKETS 128

typedef struct SharedRedisStats
{
	pg_atomic_uint64 redis[STATS_REDIS_NCOUNTERS];
	pg_atomic_uint64 latency[STATS_LATENCY_BUCKETS];
} SharedRedisStats;

static emit_log_hook_type prev_emit_log_hook = NULL;

/* Set in shared mode, by the startup hook in the postmaster. */
static SharedRedisStats *shared = NULL;

static uint64 local_redis[STATS_REDIS_NCOUNTERS];
static uint64 local_latency[STATS_LATENCY_BUCKETS];

PG_FUNCTION_INFO_V1(fence_stat_redis_data);

/*
 * stats_redis_shmem_size
 *		The shared memory the counters need, asked for by stats.c.
 */
Size
stats_redis_shmem_size(void)
{
	return MAXALIGN(sizeof(SharedRedisStats));
}

/*
 * stats_redis_shmem_startup
 *		Create or attach to the shared counters; called by stats.c's
 *		startup hook, under AddinShmemInitLock.
 */
void
stats_redis_shmem_startup(void)
{
	bool		found;

	shared = ShmemInitStruct("fencing stats redis", sizeof(SharedRedisStats),
							 &found);
	if (!found)
	{
		int			i;

		for (i = 0; i < STATS_REDIS_NCOUNTERS; i++)
			pg_atomic_init_u64(&shared->redis[i], 0);
		for (i = 0; i < STATS_LATENCY_BUCKETS; i++)
			pg_atomic_init_u64(&shared->latency[i], 0);
	}
}

/* Count the Redis functions' errors by SQLSTATE as they are reported. */
static void
stats_emit_log(ErrorData *edata)
{
	if (edata->elevel >= ERROR)
	{
		switch (edata->sqlerrcode)
		{
			case ERRCODE_FENCING_REDIS_UNAVAILABLE:
				stats_redis_count(STATS_REDIS_UNAVAILABLE);
				break;
			case ERRCODE_FENCING_REDIS_BUSY:
				stats_redis_count(STATS_REDIS_BUSY_ERRORS);
				break;
			case ERRCODE_FENCING_REDIS_CLUSTER_CHANGING:
				stats_redis_count(STATS_REDIS_CLUSTER_CHANGING);
				break;
			case ERRCODE_FENCING_REDIS_REFUSED:
				stats_redis_count(STATS_REDIS_REFUSED);
				break;
			case ERRCODE_FENCING_REDIS_PROTOCOL:
				stats_redis_count(STATS_REDIS_PROTOCOL);
				break;
			case ERRCODE_FENCING_REDIS_NOT_REPLICATED:
				stats_redis_count(STATS_REDIS_NOT_REPLICATED);
				break;
			default:
				break;
		}
	}
	if (prev_emit_log_hook)
		prev_emit_log_hook(edata);
}

/*
 * stats_redis_init
 *		Count the Redis functions' errors; called from stats_init().
 */
void
stats_redis_init(void)
{
	prev_emit_log_hook = emit_log_hook;
	emit_log_hook = stats_emit_log;
}

/*
 * stats_redis_count
 *		Count an event of the Redis functions.  Must not fail: it runs in
 *		emit_log_hook too.
 */
void
stats_redis_count(StatsRedisCounter counter)
{
	if (shared != NULL)
		pg_atomic_fetch_add_u64(&shared->redis[counter], 1);
	else
		local_redis[counter]++;
}

/*
 * The histogram bucket of a time of us microseconds: 0 to 3 exactly, then
 * four buckets to each power of two.
 */
static int
stats_latency_bucket(uint64 us)
{
	int			msb;

	if (us < 4)
		return (int) us;
	msb = pg_leftmost_one_pos64(us);
	return Min(4 * (msb - 1) + (int) ((us >> (msb - 2)) & 3),
			   STATS_LATENCY_BUCKETS - 1);
}

/* The upper bound of a histogram bucket, in microseconds. */
static uint64
stats_latency_upper(int bucket)
{
	if (bucket < 4)
		return (uint64) bucket + 1;
	return (uint64) (4 + bucket % 4 + 1) << (bucket / 4 - 1);
}

/*
 * stats_redis_acquired
 *		Count a lock fenced_acquire() took, in a call that began at
 *		started.
 */
void
stats_redis_acquired(TimestampTz started)
{
	TimestampTz now = GetCurrentTimestamp();
	int			bucket = stats_latency_bucket(now > started ? now - started : 0);

	stats_redis_count(STATS_REDIS_ACQUIRED);
	if (shared != NULL)
		pg_atomic_fetch_add_u64(&shared->latency[bucket], 1);
	else
		local_latency[bucket]++;
}

/*
 * The upper bound, in milliseconds, of the histogram bucket holding the
 * fraction p of total; null if the histogram is empty.
 */
static void
stats_percentile(const uint64 *latency, uint64 total, double p,
				 Datum *value, bool *isnull)
{
	uint64		rank = (uint64) ceil(p * total);
	uint64		seen = 0;
	int			i;

	*isnull = total == 0;
	if (total == 0)
		return;
	for (i = 0; i < STATS_LATENCY_BUCKETS - 1; i++)
	{
		seen += latency[i];
		if (seen >= rank)
			break;
	}
	*value = Float8GetDatum(stats_latency_upper(i) / 1000.0);
}

/*
 * fence_stat_redis_data()
 *		The counters of the Redis functions, in StatsRedisCounter order.
 */
Datum
fence_stat_redis_data(PG_FUNCTION_ARGS)
{
	TupleDesc	tupdesc;
	Datum		values[STATS_REDIS_NCOUNTERS + 2];
	bool		nulls[STATS_REDIS_NCOUNTERS + 2] = {0};
	uint64		latency[STATS_LATENCY_BUCKETS];
	uint64		total = 0;
	int			i;

	if (get_call_result_type(fcinfo, NULL, &tupdesc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "return type must be a row type");
	for (i = 0; i < STATS_REDIS_NCOUNTERS; i++)
		values[i] = Int64GetDatum((int64) (shared != NULL ?
										   pg_atomic_read_u64(&shared->redis[i]) :
										   local_redis[i]));
	for (i = 0; i < STATS_LATENCY_BUCKETS; i++)
	{
		latency[i] = shared != NULL ?
			pg_atomic_read_u64(&shared->latency[i]) : local_latency[i];
		total += latency[i];
	}
	stats_percentile(latency, total, 0.50, &values[STATS_REDIS_NCOUNTERS],
					 &nulls[STATS_REDIS_NCOUNTERS]);
	stats_percentile(latency, total, 0.99, &values[STATS_REDIS_NCOUNTERS + 1],
					 &nulls[STATS_REDIS_NCOUNTERS + 1]);
	PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(tupdesc, values, nulls)));
}

/*
 * stats_redis_reset
 *		Set the counters back to zero: the shared ones, or this backend's.
 */
void
stats_redis_reset(void)
{
	int			i;

	if (shared != NULL)
	{
		for (i = 0; i < STATS_REDIS_NCOUNTERS; i++)
			pg_atomic_write_u64(&shared->redis[i], 0);
		for (i = 0; i < STATS_LATENCY_BUCKETS; i++)
			pg_atomic_write_u64(&shared->latency[i], 0);
	}
	else
	{
		memset(local_redis, 0, sizeof(local_redis));
		memset(local_latency, 0, sizeof(local_latency));
	}
}
