/*-------------------------------------------------------------------------
 *
 * marks_table.c
 *	  The marks table, fence_high_water: reading its rows through its
 *	  primary key (the newest version of a resource's mark, waiting or not
 *	  for writers in progress, the version at a remembered address, the
 *	  mark a snapshot sees).  Its relation is found and checked by
 *	  marks_relation.c, its rows written by marks_write.c.
 *
 * One row per resource holds its mark.  Rows are found through the
 * primary key index, with a dirty snapshot where uncommitted versions
 * must be seen too, and written by marks_write.c with heap_* and
 * index_insert directly: going through SPI and the executor cost several
 * times the write being checked (marks.c says what is written when).
 *
 * Access to the marks table goes around its privileges on purpose: the
 * users whose writes are checked must not be able to write it, yet the
 * trigger they fire raises marks.  Nothing but marks_write.c writes it.
 *
 * IDENTIFICATION
 *	  src/marks/marks_table.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/heapam.h"
#include "access/htup_details.h"
#include "access/relscan.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "core/core.h"
#include "core/pg_compat.h"
#include "executor/tuptable.h"
#include "marks/marks.h"
#include "marks/marks_int.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "storage/bufmgr.h"
#include "storage/latch.h"
#include "storage/lmgr.h"
#include "storage/proc.h"
#include "utils/fmgroids.h"
#include "utils/snapmgr.h"

/* One index scan of the marks of m's resource. */
typedef struct MarksScan
{
	ScanKeyData skey;
	IndexScanDesc scan;
	TupleTableSlot *slot;
} MarksScan;

/* Begin an index scan of the versions of m's mark that snapshot sees. */
static void
marks_scan_begin(MarksRel *m, MarksScan *s, Snapshot snapshot)
{
	ScanKeyInit(&s->skey, 1, BTEqualStrategyNumber, F_TEXTEQ, m->key);
	s->slot = table_slot_create(m->heap, NULL);
	s->scan = fencing_index_beginscan(m->heap, m->index, snapshot, 1, 0);
	index_rescan(s->scan, &s->skey, 1, NULL, 0);
}

/* The next version of the scan, in s->slot; false at the end. */
static bool
marks_scan_next(MarksScan *s)
{
	return index_getnext_slot(s->scan, ForwardScanDirection, s->slot);
}

static void
marks_scan_end(MarksScan *s)
{
	index_endscan(s->scan);
	ExecDropSingleTupleTableSlot(s->slot);
}

/* Whether this transaction (or one of its subtransactions) wrote tuple. */
bool
marks_written_here(HeapTuple tuple)
{
	return TransactionIdIsCurrentTransactionId(HeapTupleHeaderGetXmin(tuple->t_data));
}

TimestampTz
marks_moved_at(MarksRel *m, HeapTuple tuple)
{
	bool		isnull;
	Datum		moved_at = heap_getattr(tuple, Anum_mark_moved_at,
										RelationGetDescr(m->heap), &isnull);

	if (isnull)
		elog(ERROR, "high-water mark of resource \"%s\" has no time", m->resource);
	return DatumGetTimestampTz(moved_at);
}

/*
 * marks_set_by_of
 *		What set the token of the mark found as tuple (MARK_SET_BY_*); a
 *		table of 1.2, without the column, reads as set by a write.
 */
char
marks_set_by_of(MarksRel *m, HeapTuple tuple)
{
	bool		isnull;
	Datum		set_by;

	if (!m->has_set_by)
		return MARK_SET_BY_WRITE;
	set_by = heap_getattr(tuple, Anum_mark_set_by, RelationGetDescr(m->heap),
						  &isnull);
	return isnull ? MARK_SET_BY_WRITE : DatumGetChar(set_by);
}

FenceToken
marks_token_of(MarksRel *m, HeapTuple tuple)
{
	bool		isnull;
	Datum		token = heap_getattr(tuple, Anum_mark_token,
									 RelationGetDescr(m->heap), &isnull);

	if (isnull)
		elog(ERROR, "high-water mark of resource \"%s\" is null", m->resource);
	return DatumGetFenceToken(token);
}

/*
 * marks_raised_here
 *		Whether this transaction created or raised the mark found as tuple,
 *		as opposed to finding it at the token or only refreshing it: a
 *		raise stamps exactly the transaction's start time.
 */
bool
marks_raised_here(MarksRel *m, HeapTuple tuple)
{
	return marks_written_here(tuple) &&
		marks_moved_at(m, tuple) == GetCurrentTransactionStartTimestamp();
}

/*
 * marks_serialization_failure
 *		Report the concurrent update of a mark under a transaction
 *		snapshot.
 */
void
marks_serialization_failure(MarksRel *m)
{
	ereport(ERROR,
			(errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
			 errmsg("could not serialize access due to concurrent update of the mark of resource \"%s\"",
					m->resource)));
}

/*
 * Wait for transaction xid to end, polling until deadline rather than
 * queueing on its lock, so that the wait ends when the deadline passes;
 * false if it had not ended by then.
 */
static bool
marks_wait_until(TransactionId xid, TimestampTz deadline)
{
	while (!FencingConditionalXactLockTableWait(xid))
	{
		if (GetCurrentTimestamp() >= deadline)
			return false;
		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 MARKS_POLL_MS,
						 fencing_wait_event(FENCING_WAIT_LOCK_BUSY));
		ResetLatch(MyLatch);
		CHECK_FOR_INTERRUPTS();
	}
	return true;
}

/* Set by the lock layer: see marks_wait_stalled. */
MarksStalledHook marks_stalled_hook = NULL;

/*
 * marks_wait_stalled
 *		A write of wait->token waits for transaction xid, which holds the
 *		mark: if marks_stalled_hook says that transaction is being ended
 *		(a lock holder stalled past its lease, lease_takeover.c), poll for
 *		its end, asking again at each poll; true once it has ended, false
 *		as soon as the hook says to wait for it as for any writer.
 */
static bool
marks_wait_stalled(MarksRel *m, const MarksWait *wait, TransactionId xid)
{
	int			poll_ms;

	while (marks_stalled_hook != NULL &&
		   (poll_ms = marks_stalled_hook(m->resource, wait->token, xid)) > 0)
	{
		if (FencingConditionalXactLockTableWait(xid))
			return true;
		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 poll_ms, fencing_wait_event(FENCING_WAIT_LOCK_BUSY));
		ResetLatch(MyLatch);
		CHECK_FOR_INTERRUPTS();
	}
	return false;
}

/* Whether the version in slot carries a token above wait's. */
static bool
marks_slot_newer(TupleTableSlot *slot, const MarksWait *wait)
{
	bool		isnull;

	return DatumGetFenceToken(slot_getattr(slot, Anum_mark_token, &isnull)) >
		wait->token;
}

/*
 * marks_look
 *		Find the newest version of the resource's mark, with a dirty
 *		snapshot so that uncommitted versions are seen too, and wait for
 *		any transaction still writing it.  On MARKS_FOUND, tuple is a copy
 *		of the row's latest committed (or our own) version.
 *
 * With wait given, a version another transaction is writing with a token
 * above wait->token is reported at once (MARKS_NEWER_IN_PROGRESS, tuple
 * its copy), without waiting for that transaction: the writer whose token
 * it is holds the lock, and the write being checked is stale whether or
 * not it commits.  Waiting instead could deadlock a stale writer, which
 * locked its data row before the mark, with the new holder, whose
 * acquisition locked the mark before its rows (doc/lock-failures.md, "Reads
 * and the acquisition").  With wait->deadline set, a writer in progress is waited
 * for until then only (MARKS_TIMED_OUT).  NULL wait: wait as long as it
 * takes.
 *
 * Under REPEATABLE READ or SERIALIZABLE, a mark our snapshot cannot see
 * was written by a transaction that committed after it began, which is a
 * serialization failure as for any row updated concurrently -- unless
 * wait->serializable is false: a raise at acquisition rejects nothing, so
 * it may act on a mark its snapshot cannot see.  That is checked here, on
 * the buffer's tuple while it is pinned, because the visibility check may
 * set hint bits on it.
 */
MarksLook
marks_look(MarksRel *m, const MarksWait *wait, HeapTuple *tuple)
{
	for (;;)
	{
		SnapshotData dirty;
		MarksScan	s;
		TransactionId wait_for = InvalidTransactionId;
		ItemPointerData tid;
		bool		found;
		bool		invisible = false;
		bool		newer = false;

		InitDirtySnapshot(dirty);
		marks_scan_begin(m, &s, &dirty);
		found = marks_scan_next(&s);
		if (found)
		{
			tid = s.slot->tts_tid;
			wait_for = TransactionIdIsValid(dirty.xmin) ? dirty.xmin : dirty.xmax;

			/*
			 * Written by a transaction in progress: the version it is
			 * writing may come later, further down the HOT chain or under
			 * an index entry of its own (one per raise that was not in
			 * place), which the dirty scan goes on to return.
			 */
			newer = TransactionIdIsValid(dirty.xmin) && wait != NULL &&
				marks_slot_newer(s.slot, wait);
			while (TransactionIdIsValid(wait_for) && wait != NULL && !newer &&
				   marks_scan_next(&s))
				newer = TransactionIdIsValid(dirty.xmin) &&
					marks_slot_newer(s.slot, wait);
			if (!TransactionIdIsValid(wait_for) || newer)
			{
				*tuple = ExecCopySlotHeapTuple(s.slot);
				invisible = !newer && (wait == NULL || wait->serializable) &&
					IsolationUsesXactSnapshot() &&
					!marks_written_here(*tuple) &&
					!table_tuple_satisfies_snapshot(m->heap, s.slot,
													GetActiveSnapshot());
			}
		}
		marks_scan_end(&s);

		if (invisible)
			marks_serialization_failure(m);
		if (newer)
			return MARKS_NEWER_IN_PROGRESS;
		if (!TransactionIdIsValid(wait_for))
			return found ? MARKS_FOUND : MARKS_NONE;
		if (wait == NULL || wait->deadline == 0)
		{
			if (wait == NULL || !marks_wait_stalled(m, wait, wait_for))
				XactLockTableWait(wait_for, m->heap, &tid, XLTW_None);
		}
		else if (!marks_wait_until(wait_for, wait->deadline))
			return MARKS_TIMED_OUT;
	}
}

/*
 * marks_find
 *		marks_look, waiting for writers in progress as long as it takes;
 *		true if there is a mark.
 */
bool
marks_find(MarksRel *m, HeapTuple *tuple)
{
	return marks_look(m, NULL, tuple) == MARKS_FOUND;
}


/* Whether the resource of the mark version tuple is m's. */
static bool
marks_key_equal(MarksRel *m, HeapTuple tuple)
{
	bool		isnull;
	Datum		stored = heap_getattr(tuple, Anum_mark_resource,
									  RelationGetDescr(m->heap), &isnull);
	text	   *a;
	text	   *b;

	if (isnull)
		return false;
	a = DatumGetTextPP(stored);
	b = DatumGetTextPP(m->key);
	return VARSIZE_ANY_EXHDR(a) == VARSIZE_ANY_EXHDR(b) &&
		memcmp(VARDATA_ANY(a), VARDATA_ANY(b), VARSIZE_ANY_EXHDR(a)) == 0;
}

/*
 * Whether the version at tid is the newest version of m's mark, live, with
 * no transaction in progress inserting or deleting it (marks_fetch says
 * why); if so, fetched is it, in buffer, pinned.
 */
static bool
marks_fetch_live(MarksRel *m, ItemPointer tid, bool anywhere,
				 HeapTupleData *fetched, Buffer *buffer)
{
	SnapshotData dirty;

	if (anywhere && ItemPointerGetBlockNumber(tid) >= marks_nblocks(m))
		return false;
	InitDirtySnapshot(dirty);
	fetched->t_self = *tid;
	if (!heap_fetch(m->heap, &dirty, fetched, buffer, false))
		return false;
	if (TransactionIdIsValid(dirty.xmin) || TransactionIdIsValid(dirty.xmax) ||
		!marks_key_equal(m, fetched))
	{
		ReleaseBuffer(*buffer);
		return false;
	}
	return true;
}

/*
 * marks_fetch
 *		Whether the version at tid is still the newest version of the
 *		mark of m's resource, as marks_find would find it without waiting;
 *		if so, tuple is a copy of it.
 *
 * The dirty snapshot accepts exactly what the dirty index scan does on
 * its HOT chain: a live version, committed or ours, or one that a
 * transaction in progress inserts or deletes, which is refused here
 * (marks_find waits for that transaction).  A version updated or deleted
 * by anyone, an aborted one, an unused or reused line pointer all fail
 * it, or the key comparison; then the caller looks the mark up.  tid must
 * be within the table: the callers' addresses are of versions this
 * transaction holds, and a truncation or rewrite of the table makes them
 * forget every address (marks_table_init).  An address from elsewhere
 * (anywhere) is first checked to be within the table.
 */
bool
marks_fetch(MarksRel *m, ItemPointer tid, bool anywhere, HeapTuple *tuple)
{
	HeapTupleData fetched;
	Buffer		buffer;
	bool		invisible = false;

	if (!marks_fetch_live(m, tid, anywhere, &fetched, &buffer))
		return false;
	if (IsolationUsesXactSnapshot() && !marks_written_here(&fetched))
	{
		LockBuffer(buffer, BUFFER_LOCK_SHARE);
		invisible = !HeapTupleSatisfiesVisibility(&fetched, GetActiveSnapshot(),
												  buffer);
		LockBuffer(buffer, BUFFER_LOCK_UNLOCK);
	}
	*tuple = heap_copytuple(&fetched);
	ReleaseBuffer(buffer);
	if (invisible)
		marks_serialization_failure(m);
	return true;
}

/*
 * marks_fetch_visible
 *		The mark of m's resource as the active snapshot sees it; false if
 *		it has none.
 */
bool
marks_fetch_visible(MarksRel *m, FenceToken *mark)
{
	MarksScan	s;
	bool		found;

	marks_scan_begin(m, &s, GetActiveSnapshot());
	found = marks_scan_next(&s);
	if (found)
	{
		bool		isnull;

		*mark = DatumGetFenceToken(slot_getattr(s.slot, Anum_mark_token, &isnull));
	}
	marks_scan_end(&s);
	return found;
}

/*
 * marks_fetch_newest_version
 *		Whether the version at tid, an address from anywhere, is the newest
 *		version of m's mark (see marks_fetch_newest_at); if so, tuple is a
 *		copy of it.  Unlike marks_fetch, whatever the snapshot sees: for a
 *		raise that rejects nothing.
 */
bool
marks_fetch_newest_version(MarksRel *m, ItemPointer tid, HeapTuple *tuple)
{
	HeapTupleData fetched;
	Buffer		buffer;

	if (!marks_fetch_live(m, tid, true, &fetched, &buffer))
		return false;
	*tuple = heap_copytuple(&fetched);
	ReleaseBuffer(buffer);
	return true;
}

/*
 * marks_fetch_newest_at
 *		marks_fetch_newest, looking first at tid, an address from anywhere
 *		(the shared table of mark addresses), or invalid.
 *
 * A version there that marks_fetch_live accepts is live, and neither
 * inserted nor updated or deleted by a transaction in progress: no newer
 * version of the mark exists, committed or not (an update would have
 * marked this one), and no second row of the resource (the primary key),
 * so its token is the highest the dirty index scan would find, and the
 * index is not searched.
 */
bool
marks_fetch_newest_at(MarksRel *m, ItemPointer tid, FenceToken *mark)
{
	HeapTuple	tuple;

	if (ItemPointerIsValid(tid) && marks_fetch_newest_version(m, tid, &tuple))
	{
		*mark = marks_token_of(m, tuple);
		heap_freetuple(tuple);
		return true;
	}
	return marks_fetch_newest(m, mark);
}

/*
 * marks_fetch_newest
 *		The highest token among the live versions of m's mark, committed
 *		or not, without waiting; false if it has none.
 */
bool
marks_fetch_newest(MarksRel *m, FenceToken *mark)
{
	SnapshotData dirty;
	MarksScan	s;
	bool		found = false;

	InitDirtySnapshot(dirty);
	marks_scan_begin(m, &s, &dirty);
	while (marks_scan_next(&s))
	{
		bool		isnull;
		FenceToken	token;

		token = DatumGetFenceToken(slot_getattr(s.slot, Anum_mark_token, &isnull));
		if (!isnull && (!found || token > *mark))
		{
			*mark = token;
			found = true;
		}
	}
	marks_scan_end(&s);
	return found;
}
