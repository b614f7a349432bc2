/*-------------------------------------------------------------------------
 *
 * marks_write.c
 *	  Writing the rows of the marks table: insert, raise, lock, delete.
 *
 * Rows are written with heap_* and index_insert directly, as the
 * executor would for INSERT, UPDATE, SELECT ... FOR NO KEY UPDATE and
 * DELETE, without its cost.  What is written when is marks.c's to decide;
 * these primitives only write, and report what they found.
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

static HeapTuple
marks_form(MarksRel *m, FenceToken token, TimestampTz moved_at)
{
	Datum		values[Natts_mark];
	bool		nulls[Natts_mark] = {false, false, false};

	values[Anum_mark_resource - 1] = m->key;
	values[Anum_mark_token - 1] = FenceTokenGetDatum(token);
	values[Anum_mark_moved_at - 1] = TimestampTzGetDatum(moved_at);
	return heap_form_tuple(RelationGetDescr(m->heap), values, nulls);
}

/*
 * Add the index entry of the mark version tuple: of a new mark, or of a
 * raise that could not stay on the old version's page (not HOT).
 *
 * Only a new mark is checked for uniqueness.  A raise writes the key of
 * the version it updates, which was the live one and is now ours: any
 * other row with that key would have met that version's entry in its own
 * check, as that version met any such row's entry in the check of its
 * first insert.  Checking again would only cost, and more for every
 * version before it: the check visits each equal entry's HOT chain, and a
 * transaction raising one mark in many subtransactions leaves a chain of
 * versions none of which can be pruned before it ends.
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
				 unchanged ? UNIQUE_CHECK_NO : UNIQUE_CHECK_YES, unchanged, info);
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

/* Insert the first mark of m's resource, at token, as version. */
void
marks_insert(MarksRel *m, FenceToken token, ItemPointer version)
{
	HeapTuple	tuple = marks_form(m, token, GetCurrentTransactionStartTimestamp());

	heap_insert(m->heap, tuple, GetCurrentCommandId(true), 0, NULL);
	marks_index_insert(m, tuple, false);
	*version = tuple->t_self;
}

/*
 * Whether this subtransaction, or one already committed into it, created
 * the version of the mark found as tuple.  Transaction IDs are assigned
 * parents first, so the versions created by the current subtransaction
 * and its descendants are exactly those of our own transaction whose xmin
 * is not older than the current subtransaction's ID.
 */
static bool
marks_created_in_subxact(HeapTuple tuple)
{
	TransactionId xmin = HeapTupleHeaderGetXmin(tuple->t_data);
	TransactionId mine = GetCurrentTransactionIdIfAny();

	return TransactionIdIsValid(mine) &&
		TransactionIdFollowsOrEquals(xmin, mine) &&
		TransactionIdIsCurrentTransactionId(xmin);
}

/*
 * Whether a raise may overwrite the mark version tuple in place: this
 * subtransaction created it, and logical decoding, which skips in-place
 * updates, is off (wal_level below logical), so that a publication of the
 * marks table carries every raise.
 */
static bool
marks_may_overwrite(HeapTuple tuple)
{
	return !XLogLogicalInfoActive() && marks_created_in_subxact(tuple);
}

/*
 * Overwrite the token and time of the mark version tuple, which this
 * subtransaction created, in place.  The stored copy is modified rather
 * than a new tuple formed: the stored name may be compressed, and the
 * overwrite must keep the length.
 */
static void
marks_overwrite(Relation heap, HeapTuple tuple, FenceToken token,
				TimestampTz moved_at)
{
	int			cols[2] = {Anum_mark_token, Anum_mark_moved_at};
	Datum		values[2];
	bool		nulls[2] = {false, false};
	HeapTuple	newtuple;

	values[0] = FenceTokenGetDatum(token);
	values[1] = TimestampTzGetDatum(moved_at);
	newtuple = heap_modify_tuple_by_cols(tuple, RelationGetDescr(heap),
										 2, cols, values, nulls);
	newtuple->t_self = tuple->t_self;
	fencing_heap_inplace_update(heap, newtuple);
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
 * for, and the new one follows under an index entry of its own, inserted
 * without a unique check for the reason given at marks_index_insert.  A
 * delete that fails leaves nothing written.
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
 *		Raise the mark found as tuple to token, stamping moved_at; or, with
 *		the same token, refresh its moved_at.  *version is the version
 *		written.
 *
 * A version this subtransaction created is overwritten in place (WAL-logged
 * as an in-place update): an in-place write is not undone by an abort, but
 * an abort of this subtransaction, or of any transaction it belongs to,
 * discards the whole version anyway, and the version before it, which was
 * not touched, is the mark again.  So a transaction that raises one mark
 * many times writes one version per subtransaction, not one per raise,
 * and each raise costs the same however many came before: new versions
 * that no one else can see yet, and that no pruning can remove before we
 * end, would lengthen every later lookup.  Any other version is updated
 * as usual, which keeps its old value for a rollback to return to; under
 * wal_level = logical, replaced by a new row (marks_replace).
 */
TM_Result
marks_raise(MarksRel *m, HeapTuple tuple, FenceToken token,
			TimestampTz moved_at, ItemPointer version)
{
	HeapTuple	newtuple;
	TM_FailureData tmfd;
	LockTupleMode lockmode;
	TM_Result	result;

	if (marks_may_overwrite(tuple))
	{
		marks_overwrite(m->heap, tuple, token, moved_at);
		*version = tuple->t_self;
		return TM_Ok;
	}

	newtuple = marks_form(m, token, moved_at);
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
 * marks_raise_held
 *		Raise in place, to token, the mark of resource that the current
 *		subtransaction holds in the version it created at *version; false
 *		if that version is no longer the mark, and the caller must look it
 *		up.  No lookup is needed otherwise: no one else can write the row
 *		while we hold it, and the version stays where it is, raised in
 *		place.  Only a statement of our own transaction writing the marks
 *		table by hand can have updated or deleted it.
 */
bool
marks_raise_held(const char *resource, ItemPointer version, FenceToken token,
				 TimestampTz moved_at)
{
	Relation	heap = table_open(marks_relid(), RowExclusiveLock);
	HeapTupleData tuple;
	HeapTuple	copy;
	Buffer		buffer;
	bool		current;

	tuple.t_self = *version;
	if (!heap_fetch(heap, SnapshotAny, &tuple, &buffer, true))
		elog(ERROR, "high-water mark of resource \"%s\" not found at (%u,%u)",
			 resource, ItemPointerGetBlockNumber(version),
			 ItemPointerGetOffsetNumber(version));
	copy = heap_copytuple(&tuple);
	ReleaseBuffer(buffer);
	current = marks_may_overwrite(copy) &&
		((copy->t_data->t_infomask & HEAP_XMAX_INVALID) ||
		 HEAP_XMAX_IS_LOCKED_ONLY(copy->t_data->t_infomask));
	if (current)
		marks_overwrite(heap, copy, token, moved_at);
	table_close(heap, NoLock);
	return current;
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
