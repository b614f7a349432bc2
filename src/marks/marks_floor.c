/*-------------------------------------------------------------------------
 *
 * marks_floor.c
 *	  Acquisition floors: the tokens of acquisitions whose transaction is
 *	  in progress, shared by the backends of a server that preloads the
 *	  library, so that a write below one is stale at once without the
 *	  acquisition holding the mark's row lock (issue 31).
 *
 * Since 1.2 an acquisition raises the mark to its token in the acquiring
 * transaction, so that every older token is stale from then on.  That
 * raise held the mark's row lock for the holder's whole transaction, and
 * a holder that stalled inside it kept the next holder, already granted
 * the lock by Redis, waiting in PostgreSQL.  With a floor the acquisition
 * only records its token here: the guard rejects a write below a floor at
 * once (marks_check), and the mark itself is written by the holder's
 * first write, or else just before its transaction commits, where a
 * newer floor or mark makes it unnecessary.
 *
 * The table has fencing.max_floors entries, one per resource and
 * database, keeping the highest token recorded and the transaction that
 * recorded it.  Entries are taken out when that transaction ends, commit
 * or abort, or when the subtransaction that recorded them is rolled back;
 * a newer token recorded for the resource by another transaction takes
 * the entry over.  When the table is full, or without preloading, the
 * acquisition raises the mark as before (marks_raise_for_holder).
 *
 * An entry is found under one of FLOOR_PARTITIONS LWLocks, picked by its
 * hash; a counter of live entries lets a write skip the lookup while
 * there are none, and a one-entry memo of the last resource and token
 * found clean lets the rows of a bulk write skip it until the next
 * acquisition anywhere.
 *
 * IDENTIFICATION
 *	  src/marks/marks_floor.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "common/hashfn.h"
#include "marks/marks.h"
#include "marks/marks_int.h"
#include "miscadmin.h"
#include "port/atomics.h"
#include "storage/ipc.h"
#include "storage/lwlock.h"
#include "storage/shmem.h"
#include "utils/guc.h"
#include "utils/hsearch.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"

#define FLOOR_PARTITIONS	16

typedef struct FloorKey
{
	Oid			dbid;
	char		resource[FENCING_RESOURCE_MAX_BYTES + 1];
} FloorKey;

typedef struct FloorEntry
{
	FloorKey	key;			/* must be first */
	FenceToken	token;			/* the highest token recorded */
	int			pid;			/* the backend that recorded it */
	TransactionId xid;			/* in its top transaction */
} FloorEntry;

typedef struct FloorShared
{
	pg_atomic_uint32 live;		/* entries in the table */
	pg_atomic_uint64 generation;	/* bumped at every record */
	LWLockPadded *locks;
} FloorShared;

/* A floor this transaction recorded, for its pre-commit and its end. */
typedef struct FloorMine
{
	char	   *resource;
	FenceToken	token;
	SubTransactionId subid;
	bool		session;		/* kept for the session once committed */
} FloorMine;

/* fencing.max_floors */
static int	max_floors = 1024;

static FloorShared *floor_shared = NULL;
static HTAB *floor_table = NULL;

/* This transaction's floors (FloorMine), in TopTransactionContext. */
static List *mine = NIL;

/* Floors kept for session leases (FloorMine), in TopMemoryContext. */
static List *kept = NIL;
static bool kept_exit_registered = false;

/* The last resource found clean at memo_token, as of memo_generation. */
static char memo_resource[FENCING_RESOURCE_MAX_BYTES + 1];
static FenceToken memo_token;
static uint64 memo_generation = 0;

/* marks_raise_for_holder, given by marks.c, which calls this file */
static MarksFloorRaise floor_raise = NULL;

static shmem_request_hook_type prev_shmem_request_hook = NULL;
static shmem_startup_hook_type prev_shmem_startup_hook = NULL;

static uint32
floor_hash(const void *key, Size keysize)
{
	const FloorKey *k = key;

	return hash_combine(hash_bytes((const unsigned char *) k->resource,
								   strlen(k->resource)),
						k->dbid);
}

static int
floor_match(const void *key1, const void *key2, Size keysize)
{
	const FloorKey *a = key1;
	const FloorKey *b = key2;

	return a->dbid != b->dbid || strcmp(a->resource, b->resource) != 0;
}

static void *
floor_keycopy(void *dest, const void *src, Size keysize)
{
	FloorKey   *d = dest;
	const FloorKey *s = src;

	d->dbid = s->dbid;
	strlcpy(d->resource, s->resource, sizeof(d->resource));
	return dest;
}

static Size
floor_shmem_bytes(void)
{
	return add_size(MAXALIGN(sizeof(FloorShared)),
					hash_estimate_size(max_floors, sizeof(FloorEntry)));
}

static void
floor_shmem_request(void)
{
	if (prev_shmem_request_hook)
		prev_shmem_request_hook();
	RequestAddinShmemSpace(floor_shmem_bytes());
	RequestNamedLWLockTranche("fencing floors", FLOOR_PARTITIONS);
}

static void
floor_shmem_startup(void)
{
	HASHCTL		info;
	bool		found;

	if (prev_shmem_startup_hook)
		prev_shmem_startup_hook();
	LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
	floor_shared = ShmemInitStruct("fencing floors", sizeof(FloorShared),
								   &found);
	if (!found)
	{
		pg_atomic_init_u32(&floor_shared->live, 0);
		pg_atomic_init_u64(&floor_shared->generation, 1);
		floor_shared->locks = GetNamedLWLockTranche("fencing floors");
	}
	info.keysize = sizeof(FloorKey);
	info.entrysize = sizeof(FloorEntry);
	info.hash = floor_hash;
	info.match = floor_match;
	info.keycopy = floor_keycopy;
	info.num_partitions = FLOOR_PARTITIONS;
	floor_table = ShmemInitHash("fencing floor table", max_floors, max_floors,
								&info,
								HASH_ELEM | HASH_FUNCTION | HASH_COMPARE |
								HASH_KEYCOPY | HASH_PARTITION | HASH_FIXED_SIZE);
	LWLockRelease(AddinShmemInitLock);
}

/* The key of resource in this database. */
static void
floor_key(FloorKey *key, const char *resource)
{
	key->dbid = MyDatabaseId;
	strlcpy(key->resource, resource, sizeof(key->resource));
}

static LWLock *
floor_lock(uint32 hash)
{
	return &floor_shared->locks[hash % FLOOR_PARTITIONS].lock;
}

/*
 * marks_floor_enabled
 *		Whether acquisitions can record floors: the library is preloaded
 *		and fencing.max_floors is not 0.
 */
bool
marks_floor_enabled(void)
{
	return floor_table != NULL;
}

/*
 * marks_floor_record
 *		Record token as the floor of resource, for the current transaction,
 *		which must hold a transaction ID; with session (a session lease),
 *		for the session once the transaction commits, until the lease ends
 *		(marks_floor_forget).
 *
 * FLOOR_ABOVE if a floor at or above token is recorded already (another
 * acquisition in progress holds a token no older); FLOOR_FULL if the
 * table has no room, or there is no table: then the caller raises the mark
 * instead.
 */
MarksFloorResult
marks_floor_record(const char *resource, FenceToken token, bool session)
{
	FloorKey	key;
	uint32		hash;
	FloorEntry *entry;
	bool		found;
	MemoryContext old;
	FloorMine  *m;

	if (floor_table == NULL)
		return FLOOR_FULL;
	floor_key(&key, resource);
	hash = get_hash_value(floor_table, &key);
	LWLockAcquire(floor_lock(hash), LW_EXCLUSIVE);
	entry = hash_search_with_hash_value(floor_table, &key, hash,
										HASH_ENTER_NULL, &found);
	if (entry == NULL)
	{
		LWLockRelease(floor_lock(hash));
		return FLOOR_FULL;
	}
	if (found && entry->token >= token)
	{
		LWLockRelease(floor_lock(hash));
		return FLOOR_ABOVE;
	}
	if (!found)
		pg_atomic_fetch_add_u32(&floor_shared->live, 1);
	entry->token = token;
	entry->pid = MyProcPid;
	entry->xid = GetTopTransactionId();
	pg_atomic_fetch_add_u64(&floor_shared->generation, 1);
	LWLockRelease(floor_lock(hash));

	old = MemoryContextSwitchTo(TopTransactionContext);
	m = palloc(sizeof(FloorMine));
	m->resource = pstrdup(resource);
	m->token = token;
	m->subid = GetCurrentSubTransactionId();
	m->session = session;
	mine = lappend(mine, m);
	MemoryContextSwitchTo(old);
	return FLOOR_RECORDED;
}

/*
 * marks_floor_get
 *		The floor of resource recorded by a transaction in progress, if
 *		any.
 */
bool
marks_floor_get(const char *resource, FenceToken *token)
{
	FloorKey	key;
	uint32		hash;
	FloorEntry *entry;

	if (floor_table == NULL || pg_atomic_read_u32(&floor_shared->live) == 0)
		return false;
	floor_key(&key, resource);
	hash = get_hash_value(floor_table, &key);
	LWLockAcquire(floor_lock(hash), LW_SHARED);
	entry = hash_search_with_hash_value(floor_table, &key, hash, HASH_FIND,
										NULL);
	if (entry != NULL)
		*token = entry->token;
	LWLockRelease(floor_lock(hash));
	return entry != NULL;
}

/*
 * marks_floor_stale
 *		Whether a write of token to resource is below the floor of an
 *		acquisition in progress; then *floor is that floor.
 */
bool
marks_floor_stale(const char *resource, FenceToken token, FenceToken *floor)
{
	uint64		generation;

	if (floor_table == NULL || pg_atomic_read_u32(&floor_shared->live) == 0)
		return false;
	generation = pg_atomic_read_u64(&floor_shared->generation);
	if (generation == memo_generation && token >= memo_token &&
		strcmp(resource, memo_resource) == 0)
		return false;
	if (marks_floor_get(resource, floor) && token < *floor)
		return true;
	memo_generation = generation;
	memo_token = token;
	strlcpy(memo_resource, resource, sizeof(memo_resource));
	return false;
}

/*
 * Take out the entry of m, if this backend's transaction still owns it: a
 * newer token recorded by another transaction is that one's.
 */
static void
floor_remove(FloorMine *m)
{
	FloorKey	key;
	uint32		hash;
	FloorEntry *entry;

	if (floor_table == NULL)
		return;
	floor_key(&key, m->resource);
	hash = get_hash_value(floor_table, &key);
	LWLockAcquire(floor_lock(hash), LW_EXCLUSIVE);
	entry = hash_search_with_hash_value(floor_table, &key, hash, HASH_FIND,
										NULL);
	if (entry != NULL && entry->pid == MyProcPid && entry->token == m->token)
	{
		hash_search_with_hash_value(floor_table, &key, hash, HASH_REMOVE,
									NULL);
		pg_atomic_fetch_sub_u32(&floor_shared->live, 1);
	}
	LWLockRelease(floor_lock(hash));
}

/*
 * floor_write_marks
 *		Before this transaction commits, write the mark of every resource
 *		it recorded a floor for, unless a newer floor makes it unnecessary:
 *		the token was heard of, and must outlive the transaction.
 *
 * Without waiting: a writer of the mark in progress (an older holder, who
 * may be stalled) must not hold up this commit.  Then the floor of a
 * session lease still fences older tokens out, kept for the session (see
 * marks_floor_record), and the holder's first write raises the mark; a
 * transaction lease ends with the transaction, and its floor with it.
 */
static void
floor_write_marks(void)
{
	ListCell   *lc;

	if (mine == NIL)
		return;
	PushActiveSnapshot(GetTransactionSnapshot());
	foreach(lc, mine)
	{
		FloorMine  *m = lfirst(lc);
		FenceToken	floor;

		if (marks_floor_get(m->resource, &floor) && floor > m->token)
			continue;
		(void) floor_raise(m->resource, m->token, GetCurrentTimestamp());
	}
	PopActiveSnapshot();
}

/* At exit: the floors kept for the session's leases go. */
static void
floor_exit(int code, Datum arg)
{
	ListCell   *lc;

	foreach(lc, kept)
		floor_remove(lfirst(lc));
	kept = NIL;
}

/* Keep m, committed, for the session (marks_floor_record). */
static void
floor_keep(FloorMine *m)
{
	MemoryContext old = MemoryContextSwitchTo(TopMemoryContext);
	FloorMine  *k = palloc(sizeof(FloorMine));

	*k = *m;
	k->resource = pstrdup(m->resource);
	kept = lappend(kept, k);
	MemoryContextSwitchTo(old);
	if (!kept_exit_registered)
	{
		before_shmem_exit(floor_exit, 0);
		kept_exit_registered = true;
	}
}

/*
 * marks_floor_forget
 *		The session's lease on resource has ended: a floor kept for it goes.
 */
void
marks_floor_forget(const char *resource)
{
	ListCell   *lc;

	foreach(lc, kept)
	{
		FloorMine  *k = lfirst(lc);

		if (strcmp(k->resource, resource) != 0)
			continue;
		floor_remove(k);
		pfree(k->resource);
		pfree(k);
		kept = foreach_delete_current(kept, lc);
	}
}

static void
floor_xact_callback(XactEvent event, void *arg)
{
	ListCell   *lc;

	switch (event)
	{
		case XACT_EVENT_PRE_COMMIT:
		case XACT_EVENT_PRE_PREPARE:
			floor_write_marks();
			break;
		case XACT_EVENT_COMMIT:
		case XACT_EVENT_ABORT:
		case XACT_EVENT_PREPARE:
			foreach(lc, mine)
			{
				FloorMine  *m = lfirst(lc);

				if (event == XACT_EVENT_COMMIT && m->session)
					floor_keep(m);
				else
					floor_remove(m);
			}
			mine = NIL;			/* TopTransactionContext goes with it */
			break;
		default:
			break;
	}
}

/* A rolled-back subtransaction's floors go; a committed one's move up. */
static void
floor_subxact_callback(SubXactEvent event, SubTransactionId mySubid,
					   SubTransactionId parentSubid, void *arg)
{
	ListCell   *lc;

	if (event != SUBXACT_EVENT_COMMIT_SUB && event != SUBXACT_EVENT_ABORT_SUB)
		return;
	foreach(lc, mine)
	{
		FloorMine  *m = lfirst(lc);

		if (m->subid != mySubid)
			continue;
		if (event == SUBXACT_EVENT_COMMIT_SUB)
			m->subid = parentSubid;
		else
		{
			floor_remove(m);
			mine = foreach_delete_current(mine, lc);
		}
	}
}

/*
 * marks_floor_init
 *		When the library is preloaded, define fencing.max_floors and
 *		reserve the table; called from _PG_init.  A setting that sizes
 *		shared memory can only be defined then.  raise writes a mark before
 *		a transaction commits (marks_raise_for_holder).
 */
void
marks_floor_init(MarksFloorRaise raise)
{
	floor_raise = raise;
	if (!process_shared_preload_libraries_in_progress)
		return;
	DefineCustomIntVariable("fencing.max_floors",
							"Entries of the shared table of acquisitions in progress.",
							"Used only with the library in shared_preload_libraries; 0 turns the table off, and acquisitions then hold the mark's row lock.",
							&max_floors,
							1024, 0, 1024 * 1024,
							PGC_POSTMASTER, 0,
							NULL, NULL, NULL);
	if (max_floors == 0)
		return;
	prev_shmem_request_hook = shmem_request_hook;
	shmem_request_hook = floor_shmem_request;
	prev_shmem_startup_hook = shmem_startup_hook;
	shmem_startup_hook = floor_shmem_startup;
	RegisterXactCallback(floor_xact_callback, NULL);
	RegisterSubXactCallback(floor_subxact_callback, NULL);
}
