/*-------------------------------------------------------------------------
 *
 * marks_cache.c
 *	  Where marks were last seen: those this transaction holds, per
 *	  subtransaction level, and the address of each mark's live version,
 *	  shared by the backends of a server that preloads the library.
 *
 * Held marks.  Once a transaction has checked and locked a resource's mark at token T,
 * later rows of that resource with token T cannot fail (nobody else can
 * move the mark while we hold the lock), so marks.c answers them from
 * here without a lookup, and raises the mark from the live version
 * remembered here.
 *
 * What is held depends on the subtransaction: a rollback releases the
 * row locks the subtransaction took and undoes its raises.  So a slot
 * keeps one level per subtransaction that changed what is held, its
 * subtransaction ID ascending: a committed subtransaction's level replaces
 * its parent's, a rolled-back one's is dropped, and the parent's is then
 * what is held again, version included.
 *
 * Hints.  The first write of a resource in a transaction finds its mark through
 * the primary key: a btree descent, which on a write of one row per mark
 * (an UPDATE of many rows, each its own resource) is a large part of the
 * guard's cost.  With the library in shared_preload_libraries, every
 * backend records here the address of the mark version it found or
 * wrote, by the resource name's hash, and a later first write, in any
 * backend, tries that address before the index (marks_fetch).
 *
 * An entry is only a hint, never trusted: marks_fetch takes the version at
 * the address for the mark only if it is within the table, is the newest
 * live version as the index scan would find it, and holds the resource's
 * name; anything else, a version since updated, pruned, moved by VACUUM
 * FULL, or a line pointer reused by another row, sends the write to the
 * index.  So entries are written and read without a lock, each one atomic
 * 64-bit word (16 bits of the name's hash, the block and the offset), and
 * a newcomer simply overwrites the slot its hash picks; the table is
 * cluster-wide, and a database's entries only cost another database's
 * writes a lookup.
 *
 * IDENTIFICATION
 *	  src/marks/marks_cache.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "common/hashfn.h"
#include "marks/marks_int.h"
#include "miscadmin.h"
#include "port/atomics.h"
#include "storage/ipc.h"
#include "storage/lwlock.h"
#include "storage/shmem.h"
#include "utils/guc.h"
#include "utils/memutils.h"

/*
 * The per-transaction cache is direct-mapped: a fixed number of slots, a
 * resource goes in the slot its hash picks, and a newcomer evicts the
 * previous occupant, which only costs that resource a lookup later.  Bulk
 * writes repeat one resource (or a few) row after row, which this serves;
 * a statement touching a million resources once each would only fill and
 * grow a hash table for nothing.
 */
#define CHECKED_SLOTS 256

/*
 * How many nested subtransaction levels a slot remembers.  A deeper
 * level pushes out the outermost one, and a rollback past it then only
 * costs that resource a lookup.
 */
#define CHECKED_LEVELS 3

typedef struct CheckedSlot
{
	char	   *resource;		/* NULL if the slot is free */
	uint32		hash;
	bool		listed;			/* in checked_used */
	int			nlevels;		/* levels[nlevels - 1] is the current one */
	CheckedLevel levels[CHECKED_LEVELS];	/* subids ascending */
} CheckedSlot;

/*
 * Marks checked and locked in this transaction; names in checked_cxt.
 * checked_used lists the slots used since the transaction began, so that
 * ending it and ending a subtransaction visit those alone.
 */
static CheckedSlot checked[CHECKED_SLOTS];
static uint16 checked_used[CHECKED_SLOTS];
static int	checked_nused = 0;
static int	checked_count = 0;
static MemoryContext checked_cxt = NULL;

/*
 * marks_cache_at_xact_end
 *		Empty the per-transaction cache; called when a transaction ends,
 *		whichever way.
 */
void
marks_cache_at_xact_end(void)
{
	int			i;

	if (checked_nused == 0)
		return;
	for (i = 0; i < checked_nused; i++)
		memset(&checked[checked_used[i]], 0, sizeof(CheckedSlot));
	checked_nused = 0;
	checked_count = 0;
	MemoryContextReset(checked_cxt);
}

/* Empty one slot of the cache. */
static void
checked_clear(CheckedSlot *slot)
{
	pfree(slot->resource);
	slot->resource = NULL;
	slot->nlevels = 0;
	checked_count--;
}

/*
 * Move what a committed subtransaction holds to its parent, replacing
 * what the parent held before; forget what one that rolled back took,
 * returning to what its parent held.  Only the current level of a slot
 * can belong to the subtransaction ending, as its subtransactions have
 * ended before it.
 */
static void
marks_subxact_callback(SubXactEvent event, SubTransactionId mySubid,
					   SubTransactionId parentSubid, void *arg)
{
	int			i;

	if (checked_count == 0)
		return;
	if (event != SUBXACT_EVENT_COMMIT_SUB && event != SUBXACT_EVENT_ABORT_SUB)
		return;

	for (i = 0; i < checked_nused; i++)
	{
		CheckedSlot *slot = &checked[checked_used[i]];
		CheckedLevel *top;

		if (slot->resource == NULL)
			continue;
		top = &slot->levels[slot->nlevels - 1];
		if (top->subid != mySubid)
			continue;
		if (event == SUBXACT_EVENT_ABORT_SUB)
		{
			if (--slot->nlevels == 0)
				checked_clear(slot);
		}
		else if (slot->nlevels > 1 && top[-1].subid == parentSubid)
		{
			top[-1] = *top;
			slot->nlevels--;
		}
		else
			top->subid = parentSubid;
	}
}

/*
 * The marks table may have been truncated or rewritten: a remembered
 * version's address may now hold another row, so look marks up again.
 */
static void
checked_forget_versions(void)
{
	int			i;
	int			j;

	for (i = 0; i < checked_nused; i++)
	{
		CheckedSlot *slot = &checked[checked_used[i]];

		for (j = 0; j < CHECKED_LEVELS; j++)
			ItemPointerSetInvalid(&slot->levels[j].version);
	}
}

/*
 * marks_cache_init
 *		Register the subtransaction and table callbacks.
 */
void
marks_cache_init(void)
{
	RegisterSubXactCallback(marks_subxact_callback, NULL);
	marks_table_init(checked_forget_versions);
}

uint32
checked_hash(const char *resource)
{
	return hash_bytes((const unsigned char *) resource, strlen(resource));
}

/* The cache slot holding resource, or NULL. */
static CheckedSlot *
checked_lookup(const char *resource, uint32 hash)
{
	CheckedSlot *slot = &checked[hash % CHECKED_SLOTS];

	if (slot->resource != NULL && slot->hash == hash &&
		strcmp(slot->resource, resource) == 0)
		return slot;
	return NULL;
}

/* What the current subtransaction level holds of slot's mark. */
static inline CheckedLevel *
checked_current(CheckedSlot *slot)
{
	return &slot->levels[slot->nlevels - 1];
}

/*
 * checked_held
 *		What this transaction holds of the mark of resource, of hash; NULL
 *		if nothing.
 */
CheckedLevel *
checked_held(const char *resource, uint32 hash)
{
	CheckedSlot *slot = checked_lookup(resource, hash);

	return slot != NULL ? checked_current(slot) : NULL;
}

/*
 * checked_remember
 *		Remember that this transaction holds the mark of resource at token,
 *		in its live version version, as of the current subtransaction.
 */
void
checked_remember(const char *resource, uint32 hash, FenceToken token,
				 bool written, ItemPointer version)
{
	int			index = hash % CHECKED_SLOTS;
	CheckedSlot *slot = &checked[index];
	SubTransactionId subid = GetCurrentSubTransactionId();
	CheckedLevel *level;

	if (checked_cxt == NULL)
		checked_cxt = AllocSetContextCreate(TopMemoryContext,
											"fencing checked marks",
											ALLOCSET_DEFAULT_SIZES);
	if (!slot->listed)
	{
		checked_used[checked_nused++] = index;
		slot->listed = true;
	}
	if (slot->resource != NULL &&
		(slot->hash != hash || strcmp(slot->resource, resource) != 0))
		checked_clear(slot);
	if (slot->resource == NULL)
	{
		slot->resource = MemoryContextStrdup(checked_cxt, resource);
		slot->hash = hash;
		checked_count++;
	}

	/* A deeper subtransaction than the current level's gets a level. */
	if (slot->nlevels == 0 || checked_current(slot)->subid != subid)
	{
		if (slot->nlevels == CHECKED_LEVELS)
		{
			memmove(&slot->levels[0], &slot->levels[1],
					(CHECKED_LEVELS - 1) * sizeof(CheckedLevel));
			slot->nlevels--;
		}
		slot->nlevels++;
	}
	level = checked_current(slot);
	level->subid = subid;
	level->token = token;
	level->written = written;
	level->version = *version;
}

void
checked_forget(const char *resource)
{
	CheckedSlot *slot = checked_lookup(resource, checked_hash(resource));

	if (slot != NULL)
		checked_clear(slot);
}


/* fencing.mark_hint_slots: entries of the table; 0 turns it off. */
static int	hint_slots = 262144;

static pg_atomic_uint64 *hints = NULL;

static shmem_request_hook_type prev_shmem_request_hook = NULL;
static shmem_startup_hook_type prev_shmem_startup_hook = NULL;

static void
marks_hint_shmem_request(void)
{
	if (prev_shmem_request_hook)
		prev_shmem_request_hook();
	RequestAddinShmemSpace(mul_size(hint_slots, sizeof(pg_atomic_uint64)));
}

static void
marks_hint_shmem_startup(void)
{
	bool		found;

	if (prev_shmem_startup_hook)
		prev_shmem_startup_hook();
	LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
	hints = ShmemInitStruct("fencing mark hints",
							mul_size(hint_slots, sizeof(pg_atomic_uint64)),
							&found);
	if (!found)
	{
		int			i;

		for (i = 0; i < hint_slots; i++)
			pg_atomic_init_u64(&hints[i], 0);
	}
	LWLockRelease(AddinShmemInitLock);
}

/*
 * marks_hint_init
 *		When the library is preloaded, define fencing.mark_hint_slots and
 *		reserve the table; called from _PG_init.  A setting that sizes
 *		shared memory can only be defined then.
 */
void
marks_hint_init(void)
{
	if (!process_shared_preload_libraries_in_progress)
		return;
	DefineCustomIntVariable("fencing.mark_hint_slots",
							"Entries of the shared table of mark addresses.",
							"Used only with the library in shared_preload_libraries; 0 turns the table off.",
							&hint_slots,
							262144, 0, 64 * 1024 * 1024,
							PGC_POSTMASTER, 0,
							NULL, NULL, NULL);
	if (hint_slots == 0)
		return;
	prev_shmem_request_hook = shmem_request_hook;
	shmem_request_hook = marks_hint_shmem_request;
	prev_shmem_startup_hook = shmem_startup_hook;
	shmem_startup_hook = marks_hint_shmem_startup;
}

/* The hash of a resource name in this database. */
static inline uint32
marks_hint_hash(uint32 hash)
{
	return hash_combine(hash, MyDatabaseId);
}

/*
 * marks_hint_get
 *		The address last recorded for the resource of hash, if any.
 */
bool
marks_hint_get(uint32 hash, ItemPointer tid)
{
	uint32		h;
	uint64		entry;

	if (hints == NULL)
		return false;
	h = marks_hint_hash(hash);
	entry = pg_atomic_read_u64(&hints[h % hint_slots]);
	if (entry == 0 || (uint16) (entry >> 48) != (uint16) (h >> 16))
		return false;
	ItemPointerSet(tid, (BlockNumber) (entry >> 16), (OffsetNumber) entry);
	return true;
}

/*
 * marks_hint_put
 *		Record tid as the address of the live version of the mark of the
 *		resource of hash.
 */
void
marks_hint_put(uint32 hash, ItemPointer tid)
{
	uint32		h;

	if (hints == NULL || !ItemPointerIsValid(tid))
		return;
	h = marks_hint_hash(hash);
	pg_atomic_write_u64(&hints[h % hint_slots],
						((uint64) (uint16) (h >> 16) << 48) |
						((uint64) ItemPointerGetBlockNumber(tid) << 16) |
						ItemPointerGetOffsetNumber(tid));
}
