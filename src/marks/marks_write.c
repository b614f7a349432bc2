/*-------------------------------------------------------------------------
 *
 * marks_write.c
 *	  Writing the rows of the marks table: insert, raise, lock, delete.
 *
 * Rows are written with heapam's public functions (heap_insert,
 * heap_update, heap_lock_tuple, heap_delete, each reporting its TM_Result)
 * and index_insert with a uniqueness check, as the executor writes them
 * for INSERT, UPDATE, SELECT ... FOR NO KEY UPDATE and DELETE, without its
 * cost.  Nothing here writes WAL itself or changes a stored tuple: heapam
 * logs and undoes each write as for any table's.  This is the only file
 * of the extension that calls heapam's writing functions (doc/design.md,
 * "What the marks rely on").  What is written when is marks.c's to
 * decide; these primitives only write, and report what they found.
 *
 * IDENTIFICATION
 *	  src/marks/marks_write.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/heapam.h"
#include "access/htup_details.h"
#include "access/table.h"
#include "access/xact.h"
#include "access/xlog.h"
#include "catalog/index.h"
#include "common/hashfn.h"
#include "core/pg_compat.h"
#include "marks/marks_int.h"
#include "miscadmin.h"
#include "storage/bufmgr.h"
#include "storage/lmgr.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"

/*
 * Field 4 of the advisory lock tag that serializes first inserts of a
 * resource's mark.  pg_advisory_lock() uses 1 and 2, so ours cannot
 * collide with an application's advisory locks.
 */
#define MARK_INSERT_LOCK_FIELD4 0xFE4C

/* A version of m's mark; set_by is dropped where the table lacks it (1.2). */
static HeapTuple
marks_form(MarksRel *m, FenceToken token, TimestampTz moved_at, char set_by)
{
	Datum		values[Natts_mark];
	bool		nulls[Natts_mark] = {false, false, false, false};

	values[Anum_mark_resource - 1] = m->key;
	values[Anum_mark_token - 1] = FenceTokenGetDatum(token);
	values[Anum_mark_moved_at - 1] = TimestampTzGetDatum(moved_at);
	values[Anum_mark_set_by - 1] = CharGetDatum(set_by);
	return heap_form_tuple(RelationGetDescr(m->heap), values, nulls);
}

/*
 * Add the index entry of the mark version tuple: of a new mark, or of a
 * raise that could not stay on the old version's page (not HOT), with a
 * uniqueness check, as the executor adds a row's.  For a raise the check
 * meets the entry of the version it replaces, deleted by this transaction,
 * and passes; indexUnchanged tells the btree so, as the executor does.
 * The check visits the versions of the key: a handful, since a
 * transaction writes each mark at most twice (marks.c).
 */
static void
marks_index_insert(MarksRel *m, HeapTuple tuple, bool unchanged)
{
	static Oid	info_indexid = InvalidOid;
	static IndexInfo *info = NULL;
	bool		isnull = false;

	if (info_indexid != RelationGetRelid(m->index))
	{
		MemoryContext oldcxt = MemoryContextSwitchTo(CacheMemoryContext);

		info = BuildIndexInfo(m->index);
		info_indexid = RelationGetRelid(m->index);
		MemoryContextSwitchTo(oldcxt);
	}
	index_insert(m->index, &m->key, &isnull, &tuple->t_self, m->heap,
				 UNIQUE_CHECK_YES, unchanged, info);
}

/*
 * marks_insert_lock
 *		Take the lock that serializes the first insert of m's resource's
 *		mark, unless held already; true if it was taken now, and the caller
 *		must look again before inserting.
 */
bool
marks_insert_lock(MarksRel *m, MarksInsertLock *lock)
{
	uint64		h;

	if (lock->held)
		return false;
	h = hash_bytes_extended((const unsigned char *) m->resource,
							strlen(m->resource), 0);
	SET_LOCKTAG_ADVISORY(lock->tag, MyDatabaseId, (uint32) (h >> 32),
						 (uint32) h, MARK_INSERT_LOCK_FIELD4);
	(void) LockAcquire(&lock->tag, ExclusiveLock, false, false);
	lock->held = true;
	return true;
}

/*
 * marks_insert_unlock
 *		Release the first-insert lock, if held.  Once our row is in the
 *		index a second inserter's dirty look finds it and waits for our
 *		transaction, so the lock has done its work; held to the end, one
 *		lock per new resource would exhaust the lock table in a bulk load.
 */
void
marks_insert_unlock(MarksInsertLock *lock)
{
	if (lock->held)
		LockRelease(&lock->tag, ExclusiveLock, false);
	lock->held = false;
}

/* Insert the first mark of m's resource, at token set by set_by, as version. */
void
marks_insert(MarksRel *m, FenceToken token, char set_by, ItemPointer version)
{
	HeapTuple	tuple = marks_form(m, token, GetCurrentTransactionStartTimestamp(),
								   set_by);

	heap_insert(m->heap, tuple, GetCurrentCommandId(true), 0, NULL);
	marks_index_insert(m, tuple, false);
	*version = tuple->t_self;
}

/*
 * Under logical decoding, write a raise as a delete of the version found
 * as tuple and an insert of newtuple.  A logical subscriber applies an
 * UPDATE only to a row it has: one that lacks the mark (it forgot it, or
 * subscribed without copying the data) skips the change, and fires no
 * trigger.  An INSERT always reaches the marks table's ENABLE ALWAYS
 * trigger there, which turns it into a raise (marks_sql.c).
 *
 * To every other writer this looks like an update that is not HOT: the
 * old version is deleted by a transaction in progress, which a look waits
 * for, and the new one follows under an index entry of its own.  A delete
 * that fails leaves nothing written.
 */
static TM_Result
marks_replace(MarksRel *m, HeapTuple tuple, HeapTuple newtuple,
			  ItemPointer version)
{
	TM_FailureData tmfd;
	TM_Result	result;

	result = heap_delete(m->heap, &tuple->t_self, GetCurrentCommandId(true),
						 InvalidSnapshot, true, &tmfd, false);
	if (result != TM_Ok)
		return result;
	heap_insert(m->heap, newtuple, GetCurrentCommandId(true), 0, NULL);
	marks_index_insert(m, newtuple, true);
	*version = newtuple->t_self;
	return TM_Ok;
}

/*
 * marks_raise
 *		Raise the mark found as tuple to token, stamping moved_at and what
 *		set it (set_by); or, with the same token, refresh its moved_at or
 *		record that a write used it.  *version is the version written.
 *
 * An update of the row, as the executor's UPDATE makes it (HOT when the
 * new version fits on the page), which keeps the old value for a rollback
 * to return to; under wal_level = logical, a delete and an insert
 * (marks_replace).  The caller must have made the version it found
 * visible to the current command (CommandCounterIncrement) if this
 * transaction wrote it.
 */
TM_Result
marks_raise(MarksRel *m, HeapTuple tuple, FenceToken token,
			TimestampTz moved_at, char set_by, ItemPointer version)
{
	HeapTuple	newtuple;
	TM_FailureData tmfd;
	LockTupleMode lockmode;
	TM_Result	result;

	newtuple = marks_form(m, token, moved_at, set_by);
	if (XLogLogicalInfoActive())
		return marks_replace(m, tuple, newtuple, version);
	result = fencing_heap_update(m->heap, &tuple->t_self, newtuple,
								 GetCurrentCommandId(true), InvalidSnapshot,
								 true, &tmfd, &lockmode);
	if (result == TM_Ok && !HeapTupleIsHeapOnly(newtuple))
		marks_index_insert(m, newtuple, true);
	*version = newtuple->t_self;
	return result;
}

/*
 * marks_lock
 *		Lock the mark found as tuple, at or above the token being checked.
 */
TM_Result
marks_lock(MarksRel *m, HeapTuple tuple)
{
	TM_FailureData tmfd;
	HeapTupleData locked;
	Buffer		buffer;
	TM_Result	result;

	locked.t_self = tuple->t_self;
	result = heap_lock_tuple(m->heap, &locked, GetCurrentCommandId(true),
							 LockTupleNoKeyExclusive, LockWaitBlock, false,
							 &buffer, &tmfd);
	if (BufferIsValid(buffer))
		ReleaseBuffer(buffer);
	return result;
}

/*
 * marks_delete
 *		Delete the mark found as tuple.
 */
TM_Result
marks_delete(MarksRel *m, HeapTuple tuple)
{
	TM_FailureData tmfd;

	return heap_delete(m->heap, &tuple->t_self, GetCurrentCommandId(true),
					   InvalidSnapshot, true, &tmfd, false);
}

/*
 * marks_before_retry
 *		Someone moved or deleted the mark between our look and our write:
 *		look again, unless our snapshot must not see the change.
 */
void
marks_before_retry(MarksRel *m, TM_Result result)
{
	if (result != TM_Updated && result != TM_Deleted)
		elog(ERROR, "unexpected result %d writing high-water mark of resource \"%s\"",
			 (int) result, m->resource);
	if (IsolationUsesXactSnapshot())
		marks_serialization_failure(m);
}
