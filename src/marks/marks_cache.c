/*-------------------------------------------------------------------------
 *
 * marks_cache.c
 *	  Where marks were last seen: the address of each mark's live version,
 *	  shared by the backends of a server that preloads the library (the
 *	  marks this transaction holds are marks_held.c's).
 *
 * The first write of a resource in a transaction finds its mark through
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
