/*-------------------------------------------------------------------------
 *
 * marks_kept.c
 *	  The marks table and its primary key, kept open by the transaction
 *	  that writes marks, from its first write to its pre-commit.
 *
 * Without the shared table of mark addresses (marks_cache.c), every first
 * write of a mark in a transaction opens the marks table and its primary
 * key, locking both, and closes them: a relcache and a lock table lookup
 * each, row after row, in a statement that writes many resources.  So the
 * first open for a write opens them once more, for the transaction: under
 * its top resource owner, which neither a statement's end nor a
 * subtransaction's rollback releases, and locked as marks_open locks them
 * (RowExclusiveLock, held to the end of the transaction anyway).  Later
 * opens take them from here.
 *
 * They are closed before the transaction's own commit or PREPARE
 * releases its resource owner, which would report the references as
 * leaked (at XACT_EVENT_PRE_COMMIT and PRE_PREPARE; what is opened after
 * that, by the writes kept in memory, is opened and closed each time),
 * and before any utility command (marks_kept_close, from the library's
 * ProcessUtility hook): DROP EXTENSION, ALTER TABLE, TRUNCATE and the
 * like refuse a table that this session has open.  An abort releases
 * them with its resource owner, and they are only forgotten here.
 *
 * IDENTIFICATION
 *	  src/marks/marks_kept.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/table.h"
#include "access/xact.h"
#include "marks/marks.h"
#include "marks/marks_int.h"
#include "utils/resowner.h"

static Relation kept_heap = NULL;
static Relation kept_index = NULL;

/* The transaction is committing or preparing: keep nothing more. */
static bool kept_closing = false;

/*
 * marks_kept_get
 *		The marks table relid and its primary key, if kept open; false if
 *		not.
 */
bool
marks_kept_get(Oid relid, Relation *heap, Relation *index)
{
	if (kept_heap == NULL || RelationGetRelid(kept_heap) != relid)
		return false;
	*heap = kept_heap;
	*index = kept_index;
	return true;
}

/*
 * marks_keep
 *		Keep the marks table relid and its primary key indexid, just opened
 *		and locked with RowExclusiveLock, open to the transaction's
 *		pre-commit.
 */
void
marks_keep(Oid relid, Oid indexid)
{
	ResourceOwner saved = CurrentResourceOwner;

	if (kept_heap != NULL || kept_closing || !IsTransactionState() ||
		TopTransactionResourceOwner == NULL)
		return;
	CurrentResourceOwner = TopTransactionResourceOwner;
	PG_TRY();
	{
		kept_heap = table_open(relid, RowExclusiveLock);
		kept_index = index_open(indexid, RowExclusiveLock);
	}
	PG_FINALLY();
	{
		CurrentResourceOwner = saved;
	}
	PG_END_TRY();
}

/*
 * marks_kept_close
 *		Close what is kept open; nothing is kept until the next write.
 */
void
marks_kept_close(void)
{
	ResourceOwner saved = CurrentResourceOwner;

	if (kept_heap == NULL)
		return;
	CurrentResourceOwner = TopTransactionResourceOwner;
	if (kept_index != NULL)
		index_close(kept_index, NoLock);
	table_close(kept_heap, NoLock);
	CurrentResourceOwner = saved;
	kept_heap = kept_index = NULL;
}

static void
marks_kept_xact_callback(XactEvent event, void *arg)
{
	switch (event)
	{
		case XACT_EVENT_PRE_COMMIT:
		case XACT_EVENT_PARALLEL_PRE_COMMIT:
		case XACT_EVENT_PRE_PREPARE:
			marks_kept_close();
			kept_closing = true;
			break;
		case XACT_EVENT_COMMIT:
		case XACT_EVENT_PARALLEL_COMMIT:
		case XACT_EVENT_PREPARE:
			marks_kept_close();
			kept_closing = false;
			break;
		case XACT_EVENT_ABORT:
		case XACT_EVENT_PARALLEL_ABORT:
			/* released with the transaction's resource owner */
			kept_heap = kept_index = NULL;
			kept_closing = false;
			break;
	}
}

/*
 * marks_kept_init
 *		Register the transaction callback; called from _PG_init.
 */
void
marks_kept_init(void)
{
	RegisterXactCallback(marks_kept_xact_callback, NULL);
}
