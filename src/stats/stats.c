/*-------------------------------------------------------------------------
 *
 * stats.c
 *	  Counters of what the guard trigger did, per guarded table; the
 *	  function behind the view fence_stat_info, and fence_stat_reset().
 *	  The view fence_stat_tables is read in stats_tables.c, the Redis
 *	  functions' counters are in stats_redis.c, the rejected resources in
 *	  stats_resources.c, and the progress of the long calls in
 *	  stats_progress.c; their shared memory is asked for here.
 *
 * When the library is in shared_preload_libraries, the counters are
 * cluster-wide, in shared memory: a hash table with room for
 * fencing.stats_max_tables tables of all databases, plus one entry that
 * counts together every table that found it full.  A partition counts as
 * a table of its own: stats_tables.c adds partitions up to their root
 * when the counters are read, and forgets the entries of tables and
 * databases dropped since.  Otherwise each backend counts
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
 * The time of a table's last rejection is kept as the latest of those
 * added, with a compare-and-swap; it costs an accepted row nothing.
 *
 * An entry whose table is gone (DROP TABLE, a partition dropped with its
 * root), or whose database is gone, would hold its room in the shared
 * table until a reset.  Reading fence_stat_tables or fence_stat_info
 * forgets them: those of this database's tables that its catalogs no
 * longer have, and those of databases that no longer exist.
 *
 * IDENTIFICATION
 *	  src/stats/stats.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "fmgr.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "port/atomics.h"
#include "stats/stats.h"
#include "storage/ipc.h"
#include "storage/lwlock.h"
#include "storage/shmem.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/hsearch.h"
#include "utils/memutils.h"
#include "utils/syscache.h"
#include "utils/timestamp.h"

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
	pg_atomic_uint64 last_rejected; /* a TimestampTz; 0: none */
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
	TimestampTz last_rejected;	/* 0: none */
} LocalStatsEntry;

/*
 * fencing.stats_max_tables: tables the shared hash table has room for,
 * besides the overflow entry.
 */
static int	stats_max_tables = 1000;

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

PG_FUNCTION_INFO_V1(fence_stat_info_data);
PG_FUNCTION_INFO_V1(fence_stat_reset);

static Size
stats_shmem_size(void)
{
	return add_size(add_size(MAXALIGN(sizeof(SharedStats)),
							 hash_estimate_size(stats_max_tables + 1,
												sizeof(SharedStatsEntry))),
					add_size(add_size(stats_redis_shmem_size(),
									  stats_progress_shmem_size()),
							 stats_resources_shmem_size()));
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
	pg_atomic_init_u64(&entry->last_rejected, 0);
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
	stats_progress_shmem_startup();
	stats_resources_shmem_startup();
	info.keysize = sizeof(StatsKey);
	info.entrysize = sizeof(SharedStatsEntry);
	shared_hash = ShmemInitHash("fencing stats tables",
								stats_max_tables + 1, stats_max_tables + 1,
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
	stats_progress_init();
	if (!process_shared_preload_libraries_in_progress)
		return;
	DefineCustomIntVariable("fencing.stats_max_tables",
							"Guarded tables the shared counters have room for, in all databases.",
							"Each partition takes an entry; the tables beyond are counted together.",
							&stats_max_tables,
							1000, 10, 1000000,
							PGC_POSTMASTER,
							0,
							NULL, NULL, NULL);
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
	{
		memset(entry->counters, 0, sizeof(entry->counters));
		entry->last_rejected = 0;
	}
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
	if (!in_row)
		return;
	current->counters[counter]++;
	if (counter == STATS_REJECTED_STALE || counter == STATS_REJECTED_NO_TOKEN)
		current->last_rejected = GetCurrentTimestamp();
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
		if (!any && local->last_rejected == 0)
			continue;

		entry = hash_search(shared_hash, &key, HASH_FIND, NULL);
		if (entry == NULL && create &&
			hash_get_num_entries(shared_hash) <= stats_max_tables)
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
		if (local->last_rejected != 0)
		{
			uint64		seen = pg_atomic_read_u64(&entry->last_rejected);

			/* the latest wins; a failed exchange leaves seen updated */
			while (seen < (uint64) local->last_rejected &&
				   !pg_atomic_compare_exchange_u64(&entry->last_rejected, &seen,
												   (uint64) local->last_rejected))
				;
			local->last_rejected = 0;
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

/* Append one row to *rows, growing it as needed. */
static StatsRow *
stats_row_add(StatsRow **rows, int *nrows, int *room)
{
	if (*nrows == *room)
	{
		*room *= 2;
		*rows = repalloc(*rows, sizeof(StatsRow) * *room);
	}
	return &(*rows)[(*nrows)++];
}

/*
 * stats_read
 *		A copy of the counters, in the current memory context: in shared
 *		mode those of this database's tables (with all_databases, of every
 *		database's), and the overflow entry if it counted anything; else
 *		this backend's.
 */
StatsRow *
stats_read(bool all_databases, int *nrows)
{
	int			room = 64;
	StatsRow   *rows = palloc(sizeof(StatsRow) * room);
	HASH_SEQ_STATUS seq;
	int			i;

	*nrows = 0;
	if (shared != NULL)
	{
		SharedStatsEntry *entry;

		LWLockAcquire(shared->lock, LW_SHARED);
		hash_seq_init(&seq, shared_hash);
		while ((entry = hash_seq_search(&seq)) != NULL)
		{
			StatsRow   *row;
			bool		any = false;

			if (!all_databases && entry->key.dbid != MyDatabaseId &&
				OidIsValid(entry->key.relid))
				continue;
			row = stats_row_add(&rows, nrows, &room);
			row->dbid = entry->key.dbid;
			row->relid = entry->key.relid;
			for (i = 0; i < STATS_NCOUNTERS; i++)
			{
				row->counters[i] = pg_atomic_read_u64(&entry->counters[i]);
				any |= row->counters[i] > 0;
			}
			row->last_rejected = (TimestampTz) pg_atomic_read_u64(&entry->last_rejected);
			if (!OidIsValid(entry->key.relid) && !any)
				(*nrows)--;
		}
		LWLockRelease(shared->lock);
	}
	else if (local_hash != NULL)
	{
		LocalStatsEntry *entry;

		hash_seq_init(&seq, local_hash);
		while ((entry = hash_seq_search(&seq)) != NULL)
		{
			StatsRow   *row = stats_row_add(&rows, nrows, &room);

			row->dbid = MyDatabaseId;
			row->relid = entry->relid;
			memcpy(row->counters, entry->counters, sizeof(row->counters));
			row->last_rejected = entry->last_rejected;
		}
	}
	return rows;
}

/*
 * stats_forget
 *		Drop the entries of the tables of rows whose dead[] is set: from
 *		shared memory, or this backend's.
 */
static void
stats_forget(const StatsRow *rows, const bool *dead, int nrows)
{
	int			i;

	if (shared != NULL)
	{
		LWLockAcquire(shared->lock, LW_EXCLUSIVE);
		for (i = 0; i < nrows; i++)
		{
			StatsKey	key = {rows[i].dbid, rows[i].relid};

			if (dead[i] && OidIsValid(key.relid))
				hash_search(shared_hash, &key, HASH_REMOVE, NULL);
		}
		LWLockRelease(shared->lock);
	}
	else if (local_hash != NULL)
	{
		for (i = 0; i < nrows; i++)
		{
			if (!dead[i] || !OidIsValid(rows[i].relid))
				continue;
			if (current != NULL && current->relid == rows[i].relid)
				current = NULL;
			hash_search(local_hash, &rows[i].relid, HASH_REMOVE, NULL);
		}
	}
}

/* Whether the entry of row is of a table or database that is gone. */
bool
stats_row_dropped(const StatsRow *row)
{
	if (!OidIsValid(row->relid))
		return false;			/* the overflow entry */
	if (row->dbid == MyDatabaseId)
		return !SearchSysCacheExists1(RELOID, ObjectIdGetDatum(row->relid));
	return !SearchSysCacheExists1(DATABASEOID, ObjectIdGetDatum(row->dbid));
}

/*
 * stats_forget_dropped
 *		Forget the counters of tables and databases dropped since they
 *		were counted.
 */
void
stats_forget_dropped(void)
{
	int			nrows;
	StatsRow   *rows = stats_read(true, &nrows);
	bool	   *dead = palloc0(sizeof(bool) * Max(nrows, 1));
	bool		any = false;
	int			i;

	for (i = 0; i < nrows; i++)
	{
		dead[i] = stats_row_dropped(&rows[i]);
		any |= dead[i];
	}
	if (any)
		stats_forget(rows, dead, nrows);
	pfree(dead);
	pfree(rows);
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

	stats_forget_dropped();
	if (shared != NULL)
	{
		LWLockAcquire(shared->lock, LW_SHARED);
		values[0] = CStringGetTextDatum("shared");
		values[1] = Int32GetDatum(stats_max_tables);
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
 *		Set every counter back to zero, the Redis and resource ones too: in
 *		shared mode, those of every database, dropping the entries, so that
 *		tables dropped since free their room; otherwise this backend's.
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
		stats_resources_reset();
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
		stats_resources_reset();
	}
	local_reset_at = GetCurrentTimestamp();
	PG_RETURN_VOID();
}
