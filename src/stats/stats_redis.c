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
 * Per Redis target (the server, the Sentinels' primary or the Cluster that
 * the session's settings name: STATS_REDIS_TARGETS of them, the one used
 * least recently making room for a new one), the time of the last
 * acquisition Redis answered (the lock taken, or busy) and of the last
 * error of the Redis functions (TF101 to TF107), with its SQLSTATE.  The
 * target is read from the settings when the event is counted, in
 * emit_log_hook too: the client below does not tell which it used, and
 * the settings do not change during a call.
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
#include "storage/spin.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/timestamp.h"

/* Buckets of the acquisition time histogram: up to 2^32 us (71 minutes). */
#define STATS_LATENCY_BUCKETS 128

/* Redis targets whose last success and error are kept, and their names. */
#define STATS_REDIS_TARGETS 16
#define STATS_TARGET_LEN 256

typedef struct RedisTarget
{
	char		name[STATS_TARGET_LEN];	/* "": a free entry */
	TimestampTz last_success;	/* 0: none */
	TimestampTz last_error;		/* 0: none */
	int			last_sqlstate;	/* of the last error */
} RedisTarget;

typedef struct SharedRedisStats
{
	pg_atomic_uint64 redis[STATS_REDIS_NCOUNTERS];
	pg_atomic_uint64 latency[STATS_LATENCY_BUCKETS];
	slock_t		targets_mutex;
	RedisTarget targets[STATS_REDIS_TARGETS];
} SharedRedisStats;

static emit_log_hook_type prev_emit_log_hook = NULL;

/* Set in shared mode, by the startup hook in the postmaster. */
static SharedRedisStats *shared = NULL;

static uint64 local_redis[STATS_REDIS_NCOUNTERS];
static uint64 local_latency[STATS_LATENCY_BUCKETS];
static RedisTarget local_targets[STATS_REDIS_TARGETS];

PG_FUNCTION_INFO_V1(fence_stat_redis_data);
PG_FUNCTION_INFO_V1(fence_stat_redis_targets_data);

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
		SpinLockInit(&shared->targets_mutex);
		memset(shared->targets, 0, sizeof(shared->targets));
	}
}

/*
 * The Redis target the session's settings name, into buf: "cluster
 * <nodes>", "sentinel <master> at <sentinels>", or the server's
 * "<host>:<port>" (a Unix socket's path alone).  Reads the settings by
 * name, with no allocation and no error: it runs in emit_log_hook too.
 */
static void
stats_redis_target_name(char *buf, size_t len)
{
	const char *cluster = GetConfigOption("fencing.redis_cluster_nodes", true, false);
	const char *sentinels = GetConfigOption("fencing.redis_sentinels", true, false);
	const char *host = GetConfigOption("fencing.redis_host", true, false);

	if (cluster != NULL && cluster[0] != '\0')
		snprintf(buf, len, "cluster %s", cluster);
	else if (sentinels != NULL && sentinels[0] != '\0')
	{
		const char *master = GetConfigOption("fencing.redis_sentinel_master", true, false);

		snprintf(buf, len, "sentinel %s at %s", master ? master : "", sentinels);
	}
	else if (host != NULL && host[0] == '/')
		snprintf(buf, len, "%s", host);
	else
	{
		const char *port = GetConfigOption("fencing.redis_port", true, false);

		snprintf(buf, len, "%s:%s", host ? host : "", port ? port : "");
	}
}

/*
 * Note a success (sqlstate 0) or an error of the current target, in its
 * entry, made if need be in a free one or in the one used least recently.
 * Must not fail: it runs in emit_log_hook.
 */
static void
stats_redis_target_event(int sqlstate)
{
	char		name[STATS_TARGET_LEN];
	RedisTarget *targets = shared != NULL ? shared->targets : local_targets;
	RedisTarget *entry = NULL;
	TimestampTz now = GetCurrentTimestamp();
	int			i;

	stats_redis_target_name(name, sizeof(name));
	if (shared != NULL)
		SpinLockAcquire(&shared->targets_mutex);
	for (i = 0; i < STATS_REDIS_TARGETS; i++)
	{
		RedisTarget *t = &targets[i];

		if (strcmp(t->name, name) == 0)
		{
			entry = t;
			break;
		}
		if (entry == NULL || t->name[0] == '\0' ||
			(entry->name[0] != '\0' &&
			 Max(t->last_success, t->last_error) <
			 Max(entry->last_success, entry->last_error)))
			entry = t;
	}
	if (strcmp(entry->name, name) != 0)
	{
		memset(entry, 0, sizeof(RedisTarget));
		strlcpy(entry->name, name, sizeof(entry->name));
	}
	if (sqlstate == 0)
		entry->last_success = now;
	else
	{
		entry->last_error = now;
		entry->last_sqlstate = sqlstate;
	}
	if (shared != NULL)
		SpinLockRelease(&shared->targets_mutex);
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
			case ERRCODE_FENCING_REDIS_BUSY:
			case ERRCODE_FENCING_REDIS_CLUSTER_CHANGING:
			case ERRCODE_FENCING_REDIS_REFUSED:
			case ERRCODE_FENCING_REDIS_PROTOCOL:
			case ERRCODE_FENCING_REDIS_NOT_REPLICATED:
			case ERRCODE_FENCING_REDIS_TLS:
				stats_redis_target_event(edata->sqlerrcode);
				break;
			default:
				break;
		}
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
	if (counter == STATS_REDIS_BUSY)
		stats_redis_target_event(0);
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
	stats_redis_target_event(0);
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
		SpinLockAcquire(&shared->targets_mutex);
		memset(shared->targets, 0, sizeof(shared->targets));
		SpinLockRelease(&shared->targets_mutex);
	}
	else
	{
		memset(local_redis, 0, sizeof(local_redis));
		memset(local_latency, 0, sizeof(local_latency));
		memset(local_targets, 0, sizeof(local_targets));
	}
}

/*
 * fence_stat_redis_targets_data()
 *		Per Redis target: its name, the times of the last success and of
 *		the last error, and that error's SQLSTATE.
 */
Datum
fence_stat_redis_targets_data(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	RedisTarget targets[STATS_REDIS_TARGETS];
	int			i;

	InitMaterializedSRF(fcinfo, 0);
	if (shared != NULL)
	{
		SpinLockAcquire(&shared->targets_mutex);
		memcpy(targets, shared->targets, sizeof(targets));
		SpinLockRelease(&shared->targets_mutex);
	}
	else
		memcpy(targets, local_targets, sizeof(targets));
	for (i = 0; i < STATS_REDIS_TARGETS; i++)
	{
		Datum		values[4];
		bool		nulls[4] = {0};

		if (targets[i].name[0] == '\0')
			continue;
		values[0] = CStringGetTextDatum(targets[i].name);
		values[1] = TimestampTzGetDatum(targets[i].last_success);
		nulls[1] = targets[i].last_success == 0;
		values[2] = TimestampTzGetDatum(targets[i].last_error);
		nulls[2] = targets[i].last_error == 0;
		values[3] = CStringGetTextDatum(unpack_sql_state(targets[i].last_sqlstate));
		nulls[3] = targets[i].last_error == 0;
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	return (Datum) 0;
}
