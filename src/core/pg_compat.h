/*-------------------------------------------------------------------------
 *
 * pg_compat.h
 *	  What the extension needs of the PostgreSQL version it is built
 *	  against, in one place.
 *
 * PostgreSQL 15 is the oldest supported: MarkGUCPrefixReserved(), the
 * MERGE command (CMD_MERGE) and shmem_request_hook are all new in 15.  The
 * Makefile refuses an older server with a message; this refuses a build
 * that goes around the Makefile.  15, 17 and 18 are built and tested (test/
 * scripts/version_matrix.sh); 16 goes through the same branches as 17
 * where its API already changed, and is not tested.  Each difference from
 * 15's C API is bridged here, with the version that made it.
 *
 * Macros rather than functions, where that is enough, so that including
 * this header pulls in little (the wait event header): the file that uses
 * a macro includes what it expands to, as it would for the function
 * itself.
 *
 * IDENTIFICATION
 *	  src/pg_compat.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef FENCING_PG_COMPAT_H
#define FENCING_PG_COMPAT_H

#if PG_VERSION_NUM < 150000
#error "fencing needs PostgreSQL 15 or later"
#endif

/*
 * PostgreSQL 18 replaced pg_attribute_noreturn(), written after a
 * declarator, by pg_noreturn, written before the declaration (C11's
 * _Noreturn goes there).  Older versions get pg_noreturn from the old
 * attribute, which GCC, Clang and MSVC all accept in that place.
 */
#ifndef pg_noreturn
#define pg_noreturn pg_attribute_noreturn()
#endif

/*
 * PostgreSQL 16's input functions may report bad input softly, into the
 * caller's escontext (pg_input_is_valid(), and COPY ... ON_ERROR from 17),
 * with ereturn().  Before 16 the error is a plain ERROR.
 */
#if PG_VERSION_NUM >= 160000
#define fencing_ereturn(context, dummy_value, ...) \
	ereturn((context), (dummy_value), __VA_ARGS__)
#else
#define fencing_ereturn(context, dummy_value, ...) \
	ereport(ERROR, __VA_ARGS__)
#endif

/*
 * PostgreSQL 16 replaced the per-catalog ownership checks
 * (pg_class_ownercheck() and friends) by object_ownercheck(), which takes
 * the catalog.
 */
#if PG_VERSION_NUM >= 160000
#define fencing_relation_ownercheck(relid, roleid) \
	object_ownercheck(RelationRelationId, (relid), (roleid))
#else
#define fencing_relation_ownercheck(relid, roleid) \
	pg_class_ownercheck((relid), (roleid))
#endif

/*
 * PostgreSQL 16's heap_update() also says which indexes need new entries
 * (to let a HOT update still insert into summarizing indexes such as
 * BRIN).  The marks table has only a B-tree, for which a heap-only tuple
 * is the answer already, so the callers keep asking HeapTupleIsHeapOnly()
 * and the answer is dropped.
 */
#if PG_VERSION_NUM >= 160000
#define fencing_heap_update(rel, otid, newtup, cid, crosscheck, wait, tmfd, lockmode) \
	heap_update((rel), (otid), (newtup), (cid), (crosscheck), (wait), \
				(tmfd), (lockmode), &(TU_UpdateIndexes) {TU_None})
#else
#define fencing_heap_update(rel, otid, newtup, cid, crosscheck, wait, tmfd, lockmode) \
	heap_update((rel), (otid), (newtup), (cid), (crosscheck), (wait), \
				(tmfd), (lockmode))
#endif

/*
 * PostgreSQL 18's index_beginscan() takes where to count index searches
 * for EXPLAIN ANALYZE; none here.
 */
#if PG_VERSION_NUM >= 180000
#define fencing_index_beginscan(heap, index, snapshot, nkeys, norderbys) \
	index_beginscan((heap), (index), (snapshot), NULL, (nkeys), (norderbys))
#else
#define fencing_index_beginscan(heap, index, snapshot, nkeys, norderbys) \
	index_beginscan((heap), (index), (snapshot), (nkeys), (norderbys))
#endif

/*
 * PostgreSQL 18's relcache also records a deferrable primary key, and
 * RelationGetPrimaryKeyIndex() says whether the caller accepts one.  The
 * marks table's is immediate, and earlier versions report only an
 * immediate one: not accepted.
 */
#if PG_VERSION_NUM >= 180000
#define fencing_primary_key_index(rel) RelationGetPrimaryKeyIndex((rel), false)
#else
#define fencing_primary_key_index(rel) RelationGetPrimaryKeyIndex(rel)
#endif

/*
 * PostgreSQL 17 tracks wait event sets with a resource owner instead of a
 * memory context.  The extension's set lives as long as the backend: no
 * owner, which 17 allocates in TopMemoryContext, as 15 is told to.
 */
#if PG_VERSION_NUM >= 170000
#define FencingCreateWaitEventSet(nevents) CreateWaitEventSet(NULL, (nevents))
#else
#define FencingCreateWaitEventSet(nevents) \
	CreateWaitEventSet(TopMemoryContext, (nevents))
#endif

/* PostgreSQL 17 moved the local transaction id into MyProc->vxid. */
#if PG_VERSION_NUM >= 170000
#define FencingLocalTransactionId() (MyProc->vxid.lxid)
#else
#define FencingLocalTransactionId() (MyProc->lxid)
#endif

/*
 * PostgreSQL 18's ExecCheckIndexConstraints() also takes the tuple being
 * updated, to leave out of the check; an insert's check has none.
 */
#if PG_VERSION_NUM >= 180000
#define FencingExecCheckIndexConstraints(rri, slot, estate, conflict_tid, arbiters) \
	ExecCheckIndexConstraints((rri), (slot), (estate), (conflict_tid), NULL, (arbiters))
#else
#define FencingExecCheckIndexConstraints(rri, slot, estate, conflict_tid, arbiters) \
	ExecCheckIndexConstraints((rri), (slot), (estate), (conflict_tid), (arbiters))
#endif

/* PostgreSQL 18 added log_lock_failure, and an argument for it. */
#if PG_VERSION_NUM >= 180000
#define FencingConditionalXactLockTableWait(xid) \
	ConditionalXactLockTableWait((xid), false)
#else
#define FencingConditionalXactLockTableWait(xid) \
	ConditionalXactLockTableWait(xid)
#endif

/*
 * The backend status entries of a snapshot, by 1-based index: PostgreSQL
 * 17 renamed the function (utils/backend_status.h).
 */
#if PG_VERSION_NUM >= 170000
#define fencing_local_beentry(idx) pgstat_get_local_beentry_by_index(idx)
#else
#define fencing_local_beentry(idx) pgstat_fetch_stat_local_beentry(idx)
#endif

/*
 * The waits the extension reports in pg_stat_activity.  PostgreSQL 17 lets
 * an extension name its own wait events (WaitEventExtensionNew(), class
 * Extension): a backend waiting on Redis then says which wait it is.
 * Before 17 every one of them is the generic "Extension".  A name is
 * registered the first time a backend waits on it (a shared lock and a
 * hash lookup; the wait it names is a network round trip or a pause, far
 * longer), and its id is kept for the next waits.
 */
typedef enum FencingWaitEvent
{
	FENCING_WAIT_REDIS_IO,		/* "FencingRedisIO": a Redis or Sentinel
								 * socket, sending or awaiting a reply */
	FENCING_WAIT_REDIS_RETRY,	/* "FencingRedisRetry": the pause before
								 * trying Sentinel or Cluster discovery again */
	FENCING_WAIT_LOCK_BUSY,		/* "FencingLockBusy": fenced_acquire()'s
								 * pause while another holder has the lock */
} FencingWaitEvent;

#include "utils/wait_event.h"

static inline uint32
fencing_wait_event(FencingWaitEvent which)
{
#if PG_VERSION_NUM >= 170000
	static const char *const names[] = {
		[FENCING_WAIT_REDIS_IO] = "FencingRedisIO",
		[FENCING_WAIT_REDIS_RETRY] = "FencingRedisRetry",
		[FENCING_WAIT_LOCK_BUSY] = "FencingLockBusy",
	};
	static uint32 ids[lengthof(names)];

	if (ids[which] == 0)
		ids[which] = WaitEventExtensionNew(names[which]);
	return ids[which];
#else
	return PG_WAIT_EXTENSION;
#endif
}

#endif							/* FENCING_PG_COMPAT_H */
