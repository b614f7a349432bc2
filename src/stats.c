/*-------------------------------------------------------------------------
 *
 * stats.c
 *	  Counters of what the guard trigger did, per guarded table; the
 *	  functions behind the views fence_stat_tables and fence_stat_info,
 *	  and fence_stat_reset().  The Redis functions' counters are in
 *	  stats_redis.c.
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
 * IDENTIFICATION
 *	  src/stats.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "fmgr.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "port/atomics.h"
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
} SharedStats;

/* Counts of one table: the statistics in local mode, pending in shared. */
typedef struct LocalStatsEntry
{
	Oid			relid;
	uint64		counters[STATS_NCOUNTERS];
} LocalStatsEntry;

static shmem_request_hook_type prev_shmem_request_hook = NULL;
static shmem_startup_hook_type prev_shmem_startup_hook = NULL;

/* Set in shared mode, by the startup hook in the postmaster. */
static SharedStats *shared = NULL;
static HTAB *shared_hash = NULL;

static HTAB *local_hash = NULL;
static TimestampTz local_reset_at = 0;

/* The entry of the table whose row the guard is checking, if it is. */
static LocalStatsEntry *current = NULL;
static bool in_row = false;

/* Whether local_hash holds counts not yet added to shared memory. */
static bool pending = false;

PG_FUNCTION_INFO_V1(fence_stat_tables_data);
PG_FUNCTION_INFO_V1(fence_stat_info_data);
PG_FUNCTION_INFO_V1(fence_stat_reset);

static Size
stats_shmem_size(void)
{
	return add_size(add_size(MAXALIGN(sizeof(SharedStats)),
							 hash_estimate_size(STATS_SHARED_TABLES + 1,
												sizeof(SharedStatsEntry))),
					stats_redis_shmem_size());
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
		shared->lock = &(GetNamedLWLockTranche(STATS_LOCK_TRANCHE))->lock;
		shared->reset_at = GetCurrentTimestamp();
	}
	stats_redis_shmem_startup();
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

/*
 * stats_init
 *		Count the Redis functions' errors, and ask for shared memory when
 *		preloaded; called from _PG_init.
 */
void
stats_init(void)
{
	RegisterSubXactCallback(stats_subxact_callback, NULL);
	stats_redis_init();
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

		LWLockAcquire(shared->lock, LW_EXCLUSIVE);
		stats_redis_reset();
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
		stats_redis_reset();
	}
	local_reset_at = GetCurrentTimestamp();
	PG_RETURN_VOID();
}
