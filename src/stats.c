/*-------------------------------------------------------------------------
 *
 * stats.c
 *	  Counters of what the guard trigger did, per guarded table, and of
 *	  what the Redis functions did; the functions behind the views
 *	  fence_stat_tables, fence_stat_redis and fence_stat_info.
 *
 * When the library is in shared_preload_libraries, the counters are
 * cluster-wide, in shared memory: a hash table with room for
 * STATS_SHARED_TABLES tables of all databases, plus one entry that counts
 * together every table that found it full.  Otherwise each backend counts
 * its own writes, in local memory, and the views show that backend's.
 * Either way the counters start from zero when the server (or backend)
 * starts: PostgreSQL 15 has no custom cumulative statistics to keep them
 * in across restarts (those arrive in 18).
 *
 * The trigger counts into an entry in local memory, which it finds again
 * without a lookup while rows of one table follow each other.  In shared
 * mode that entry holds pending counts, added to the shared entry with
 * atomic additions when the transaction ends, committed or not (a
 * rejected write aborts it); the lock is taken exclusively only to create
 * an entry.  So the views show a transaction's counts once it has ended.
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
 *	  src/stats.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <math.h>

#include "access/xact.h"
#include "fencing_errcodes.h"
#include "fmgr.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "port/atomics.h"
#include "port/pg_bitutils.h"
#include "stats.h"
#include "storage/ipc.h"
#include "storage/lwlock.h"
#include "storage/shmem.h"
#include "utils/builtins.h"
#include "utils/hsearch.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

/* Tables the shared hash table has room for, besides the overflow entry. */
#define STATS_SHARED_TABLES 1000

#define STATS_LOCK_TRANCHE "fencing stats"

/* Buckets of the acquisition time histogram: up to 2^32 us (71 minutes). */
#define STATS_LATENCY_BUCKETS 128

/* A guarded table; relid InvalidOid is the shared overflow entry. */
typedef struct StatsKey
{
	Oid			dbid;
	Oid			relid;
} StatsKey;

typedef struct SharedStatsEntry
{
	StatsKey	key;
	pg_atomic_uint64 counters[STATS_NCOUNTERS];
} SharedStatsEntry;

typedef struct SharedStats
{
	LWLock	   *lock;			/* entry creation and reset */
	TimestampTz reset_at;		/* under lock */
	pg_atomic_uint64 redis[STATS_REDIS_NCOUNTERS];
	pg_atomic_uint64 latency[STATS_LATENCY_BUCKETS];
} SharedStats;

/* Counts of one table: the statistics in local mode, pending in shared. */
typedef struct LocalStatsEntry
{
	Oid			relid;
	uint64		counters[STATS_NCOUNTERS];
} LocalStatsEntry;

static shmem_request_hook_type prev_shmem_request_hook = NULL;
static shmem_startup_hook_type prev_shmem_startup_hook = NULL;
static emit_log_hook_type prev_emit_log_hook = NULL;

/* Set in shared mode, by the startup hook in the postmaster. */
static SharedStats *shared = NULL;
static HTAB *shared_hash = NULL;

static HTAB *local_hash = NULL;
static TimestampTz local_reset_at = 0;
static uint64 local_redis[STATS_REDIS_NCOUNTERS];
static uint64 local_latency[STATS_LATENCY_BUCKETS];

/* The entry of the table whose row the guard is checking, if it is. */
static LocalStatsEntry *current = NULL;
static bool in_row = false;

/* Whether local_hash holds counts not yet added to shared memory. */
static bool pending = false;

PG_FUNCTION_INFO_V1(fence_stat_tables_data);
PG_FUNCTION_INFO_V1(fence_stat_redis_data);
PG_FUNCTION_INFO_V1(fence_stat_info_data);
PG_FUNCTION_INFO_V1(fence_stat_reset);

static Size
stats_shmem_size(void)
{
	return add_size(MAXALIGN(sizeof(SharedStats)),
					hash_estimate_size(STATS_SHARED_TABLES + 1,
									   sizeof(SharedStatsEntry)));
}

static void
stats_shmem_request(void)
{
	if (prev_shmem_request_hook)
		prev_shmem_request_hook();
	RequestAddinShmemSpace(stats_shmem_size());
	RequestNamedLWLockTranche(STATS_LOCK_TRANCHE, 1);
}

static void
stats_entry_init(SharedStatsEntry *entry)
{
	int			i;

	for (i = 0; i < STATS_NCOUNTERS; i++)
		pg_atomic_init_u64(&entry->counters[i], 0);
}

/* Create or attach to the shared counters, as pg_stat_statements does. */
static void
stats_shmem_startup(void)
{
	bool		found;
	HASHCTL		info;

	if (prev_shmem_startup_hook)
		prev_shmem_startup_hook();

	LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
	shared = ShmemInitStruct("fencing stats", sizeof(SharedStats), &found);
	if (!found)
	{
		int			i;

		shared->lock = &(GetNamedLWLockTranche(STATS_LOCK_TRANCHE))->lock;
		shared->reset_at = GetCurrentTimestamp();
		for (i = 0; i < STATS_REDIS_NCOUNTERS; i++)
			pg_atomic_init_u64(&shared->redis[i], 0);
		for (i = 0; i < STATS_LATENCY_BUCKETS; i++)
			pg_atomic_init_u64(&shared->latency[i], 0);
	}
	info.keysize = sizeof(StatsKey);
	info.entrysize = sizeof(SharedStatsEntry);
	shared_hash = ShmemInitHash("fencing stats tables",
								STATS_SHARED_TABLES + 1, STATS_SHARED_TABLES + 1,
								&info, HASH_ELEM | HASH_BLOBS);
	if (!found)
	{
		StatsKey	key = {InvalidOid, InvalidOid};

		stats_entry_init(hash_search(shared_hash, &key, HASH_ENTER, NULL));
	}
	LWLockRelease(AddinShmemInitLock);
}

/* Forget, at a subtransaction's abort, a row left half-counted by its error. */
static void
stats_subxact_callback(SubXactEvent event, SubTransactionId mySubid,
					   SubTransactionId parentSubid, void *arg)
{
	if (event == SUBXACT_EVENT_ABORT_SUB)
		in_row = false;
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
 * stats_init
 *		Count the Redis functions' errors, and ask for shared memory when
 *		preloaded; called from _PG_init.
 */
void
stats_init(void)
{
	RegisterSubXactCallback(stats_subxact_callback, NULL);
	prev_emit_log_hook = emit_log_hook;
	emit_log_hook = stats_emit_log;
	if (!process_shared_preload_libraries_in_progress)
		return;
	prev_shmem_request_hook = shmem_request_hook;
	shmem_request_hook = stats_shmem_request;
	prev_shmem_startup_hook = shmem_startup_hook;
	shmem_startup_hook = stats_shmem_startup;
}

/* The local entry of relid, created at zero if need be. */
static LocalStatsEntry *
stats_local_entry(Oid relid)
{
	LocalStatsEntry *entry;
	bool		found;

	if (local_hash == NULL)
	{
		HASHCTL		info;

		info.keysize = sizeof(Oid);
		info.entrysize = sizeof(LocalStatsEntry);
		info.hcxt = TopMemoryContext;
		local_hash = hash_create("fencing stats", 64, &info,
								 HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
		if (local_reset_at == 0)
			local_reset_at = GetCurrentTimestamp();
	}
	entry = hash_search(local_hash, &relid, HASH_ENTER, &found);
	if (!found)
		memset(entry->counters, 0, sizeof(entry->counters));
	return entry;
}

/*
 * stats_row_start
 *		Count a row the guard is about to check in table relid; the
 *		counts that follow, until stats_row_accepted, are this row's.
 */
void
stats_row_start(Oid relid)
{
	if (current == NULL || current->relid != relid)
		current = stats_local_entry(relid);
	current->counters[STATS_CHECKED]++;
	in_row = true;
	pending = true;
}

/*
 * stats_row_accepted
 *		Count the row started last as accepted; returns result, the
 *		trigger's, so that the call can wrap its return value.
 */
Datum
stats_row_accepted(Datum result)
{
	current->counters[STATS_ACCEPTED]++;
	in_row = false;
	return result;
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
 * stats_count
 *		Count an event of the row being checked; nothing outside a row
 *		(fence_advance() raising a mark by hand, say).
 */
void
stats_count(StatsCounter counter)
{
	if (in_row)
		current->counters[counter]++;
}

/*
 * Add the pending counts of this database's tables to their shared
 * entries, under shared->lock.  Without create (a shared lock), a table
 * without an entry is left pending and the result is false; with create
 * (the exclusive lock), its entry is made, or once the table is full the
 * overflow entry counts it.
 */
static bool
stats_flush(bool create)
{
	HASH_SEQ_STATUS seq;
	LocalStatsEntry *local;
	bool		done = true;

	hash_seq_init(&seq, local_hash);
	while ((local = hash_seq_search(&seq)) != NULL)
	{
		StatsKey	key = {MyDatabaseId, local->relid};
		SharedStatsEntry *entry = NULL;
		bool		any = false;
		int			i;

		for (i = 0; i < STATS_NCOUNTERS; i++)
			any |= local->counters[i] > 0;
		if (!any)
			continue;

		entry = hash_search(shared_hash, &key, HASH_FIND, NULL);
		if (entry == NULL && create &&
			hash_get_num_entries(shared_hash) <= STATS_SHARED_TABLES)
		{
			entry = hash_search(shared_hash, &key, HASH_ENTER_NULL, NULL);
			if (entry != NULL)
				stats_entry_init(entry);
		}
		if (entry == NULL && create)
		{
			StatsKey	overflow = {InvalidOid, InvalidOid};

			entry = hash_search(shared_hash, &overflow, HASH_FIND, NULL);
		}
		if (entry == NULL)
		{
			done = false;
			continue;
		}
		for (i = 0; i < STATS_NCOUNTERS; i++)
		{
			if (local->counters[i] > 0)
				pg_atomic_fetch_add_u64(&entry->counters[i], local->counters[i]);
			local->counters[i] = 0;
		}
	}
	return done;
}

/*
 * stats_at_xact_end
 *		In shared mode, add the transaction's counts to shared memory.
 *		Called at commit, abort and prepare, where it must not fail: it
 *		allocates nothing, and a full table falls back on the overflow
 *		entry.  The lock is held while adding, so that a reset cannot
 *		remove an entry under our feet; exclusively only if an entry must
 *		be made.
 */
void
stats_at_xact_end(void)
{
	bool		done;

	in_row = false;
	if (shared == NULL || !pending)
		return;
	pending = false;

	LWLockAcquire(shared->lock, LW_SHARED);
	done = stats_flush(false);
	LWLockRelease(shared->lock);
	if (!done)
	{
		LWLockAcquire(shared->lock, LW_EXCLUSIVE);
		(void) stats_flush(true);
		LWLockRelease(shared->lock);
	}
}

/*
 * fence_stat_tables_data()
 *		The counters of every guarded table of this database, and in
 *		shared mode the overflow entry (relid 0) if it counted anything.
 */
Datum
fence_stat_tables_data(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	Datum		values[1 + STATS_NCOUNTERS];
	bool		nulls[1 + STATS_NCOUNTERS] = {0};
	HASH_SEQ_STATUS seq;
	int			i;

	InitMaterializedSRF(fcinfo, 0);

	if (shared != NULL)
	{
		SharedStatsEntry *entry;

		LWLockAcquire(shared->lock, LW_SHARED);
		hash_seq_init(&seq, shared_hash);
		while ((entry = hash_seq_search(&seq)) != NULL)
		{
			bool		any = false;

			if (entry->key.dbid != MyDatabaseId && OidIsValid(entry->key.relid))
				continue;
			values[0] = ObjectIdGetDatum(entry->key.relid);
			for (i = 0; i < STATS_NCOUNTERS; i++)
			{
				uint64		n = pg_atomic_read_u64(&entry->counters[i]);

				values[1 + i] = Int64GetDatum((int64) n);
				any |= n > 0;
			}
			if (OidIsValid(entry->key.relid) || any)
				tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc,
									 values, nulls);
		}
		LWLockRelease(shared->lock);
	}
	else if (local_hash != NULL)
	{
		LocalStatsEntry *entry;

		hash_seq_init(&seq, local_hash);
		while ((entry = hash_seq_search(&seq)) != NULL)
		{
			values[0] = ObjectIdGetDatum(entry->relid);
			for (i = 0; i < STATS_NCOUNTERS; i++)
				values[1 + i] = Int64GetDatum((int64) entry->counters[i]);
			tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc,
								 values, nulls);
		}
	}
	return (Datum) 0;
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
 * fence_stat_info_data()
 *		Where the counters are kept, how many tables the shared table holds
 *		and has room for, and when the counters were last reset.
 */
Datum
fence_stat_info_data(PG_FUNCTION_ARGS)
{
	TupleDesc	tupdesc;
	Datum		values[4];
	bool		nulls[4] = {0};

	if (get_call_result_type(fcinfo, NULL, &tupdesc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "return type must be a row type");

	if (shared != NULL)
	{
		LWLockAcquire(shared->lock, LW_SHARED);
		values[0] = CStringGetTextDatum("shared");
		values[1] = Int32GetDatum(STATS_SHARED_TABLES);
		values[2] = Int32GetDatum((int32) hash_get_num_entries(shared_hash) - 1);
		values[3] = TimestampTzGetDatum(shared->reset_at);
		LWLockRelease(shared->lock);
	}
	else
	{
		values[0] = CStringGetTextDatum("backend");
		nulls[1] = true;
		values[2] = Int32GetDatum(local_hash ? (int32) hash_get_num_entries(local_hash) : 0);
		if (local_reset_at == 0)
			local_reset_at = GetCurrentTimestamp();
		values[3] = TimestampTzGetDatum(local_reset_at);
	}
	PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(tupdesc, values, nulls)));
}

/*
 * fence_stat_reset()
 *		Set every counter back to zero, the Redis ones too: in shared mode,
 *		those of every database, dropping the entries, so that tables dropped since free
 *		their room; otherwise this backend's.
 */
Datum
fence_stat_reset(PG_FUNCTION_ARGS)
{
	if (shared != NULL)
	{
		HASH_SEQ_STATUS seq;
		SharedStatsEntry *entry;
		int			i;

		LWLockAcquire(shared->lock, LW_EXCLUSIVE);
		for (i = 0; i < STATS_REDIS_NCOUNTERS; i++)
			pg_atomic_write_u64(&shared->redis[i], 0);
		for (i = 0; i < STATS_LATENCY_BUCKETS; i++)
			pg_atomic_write_u64(&shared->latency[i], 0);
		hash_seq_init(&seq, shared_hash);
		while ((entry = hash_seq_search(&seq)) != NULL)
		{
			if (OidIsValid(entry->key.relid))
				hash_search(shared_hash, &entry->key, HASH_REMOVE, NULL);
			else
				stats_entry_init(entry);
		}
		shared->reset_at = GetCurrentTimestamp();
		LWLockRelease(shared->lock);
	}
	else
	{
		if (local_hash != NULL)
			hash_destroy(local_hash);
		local_hash = NULL;
		current = NULL;
		in_row = false;
		memset(local_redis, 0, sizeof(local_redis));
		memset(local_latency, 0, sizeof(local_latency));
	}
	local_reset_at = GetCurrentTimestamp();
	PG_RETURN_VOID();
}
