/*-------------------------------------------------------------------------
 *
 * marks.c
 *	  High-water marks: the highest token accepted per resource.
 *
 * The marks live in the extension's table fence_high_water, one row per
 * resource.  A write with token T to resource R finds the newest version
 * of R's row and
 *
 * - if the mark is below T, updates it to T (in place, when the current
 *   subtransaction created that version: see marks_raise);
 * - if it is at or above T, locks it (FOR NO KEY UPDATE) and compares;
 * - if there is none, inserts it.
 *
 * In every case the row stays locked by the writing transaction until it
 * ends.  Two writers of one resource therefore serialize on that row, the
 * later one sees the earlier one's committed mark, and a rollback takes
 * the raise back with it.  This is what INSERT ... ON CONFLICT DO UPDATE
 * ... WHERE mark < T does, done here on the heap and the index directly:
 * going through SPI and the executor cost several times the write being
 * checked.  As ON CONFLICT does, a mark moved by a transaction that our
 * REPEATABLE READ or SERIALIZABLE snapshot cannot see is a serialization
 * failure.
 *
 * Two first writes to one resource must not both insert: before inserting,
 * a writer takes a heavyweight lock on the resource name's hash and looks
 * again, holding the lock until its row is in the index, where the second
 * writer's look finds it and waits for the first to commit.
 *
 * The table is found through the extension, not the search path, and its
 * shape (a heap; its columns by name and type; a primary key) is checked
 * before it is read or written.
 *
 * Access to the marks table goes around its privileges on purpose: the
 * users whose writes are checked must not be able to write it, yet the
 * trigger they fire raises marks.  Nothing but this file writes it.
 *
 * Once a transaction has checked and locked a resource at token T, later
 * rows of that resource with token T cannot fail (nobody else can move the
 * mark while we hold the lock), so a per-transaction cache answers them
 * without a lookup.  An entry made in a subtransaction that rolls back is
 * dropped, because the rollback released the row lock and undid the
 * raise.  The entry also remembers the version this subtransaction wrote,
 * through which a further raise goes without a lookup.
 *
 * moved_at says when a mark was created or last raised, and also, to
 * within MARK_REFRESH_INTERVAL, when it was last written at its own token:
 * such a write refreshes it when it is older than that, so that a
 * resource written for hours at one token does not look idle to
 * fence_forget_idle().  A raise stamps the transaction's start time and a
 * refresh one microsecond less, which is how strict mode tells a mark
 * this transaction raised from one it only refreshed.
 *
 * IDENTIFICATION
 *	  src/marks.c
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
#include "access/xlog.h"
#include "catalog/index.h"
#include "catalog/indexing.h"
#include "catalog/namespace.h"
#include "catalog/pg_am.h"
#include "catalog/pg_extension.h"
#include "catalog/pg_type.h"
#include "commands/extension.h"
#include "common/hashfn.h"
#include "executor/tuptable.h"
#include "fencing_errcodes.h"
#include "fmgr.h"
#include "marks.h"
#include "miscadmin.h"
#include "pg_compat.h"
#include "resource_name.h"
#include "stale_hint.h"
#include "stats.h"
#include "storage/bufmgr.h"
#include "storage/lmgr.h"
#include "storage/lock.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"

#define MARKS_TABLE "fence_high_water"

/* Columns of the marks table. */
#define Anum_mark_resource	1
#define Anum_mark_token		2
#define Anum_mark_moved_at	3
#define Natts_mark			3

/*
 * Field 4 of the advisory lock tag that serializes first inserts of a
 * resource's mark.  pg_advisory_lock() uses 1 and 2, so ours cannot
 * collide with an application's advisory locks.
 */
#define MARK_INSERT_LOCK_FIELD4 0xFE4C

/*
 * A write at a mark's own token refreshes moved_at when it is older than
 * this: at most one HOT update of the mark a minute, instead of a lock.
 */
#define MARK_REFRESH_INTERVAL	((int64) 60 * USECS_PER_SEC)

/*
 * The per-transaction cache is direct-mapped: a fixed number of slots, a
 * resource goes in the slot its hash picks, and a newcomer evicts the
 * previous occupant, which only costs that resource a lookup later.  Bulk
 * writes repeat one resource (or a few) row after row, which this serves;
 * a statement touching a million resources once each would only fill and
 * grow a hash table for nothing.
 */
#define CHECKED_SLOTS 256

typedef struct CheckedSlot
{
	char	   *resource;		/* NULL if the slot is free */
	uint32		hash;
	FenceToken	token;			/* the mark, locked by this transaction */
	bool		written;		/* and set by it, not found at token */
	SubTransactionId subid;		/* subtransaction that took the lock */
	ItemPointerData version;	/* the mark's version, if subid created it */
} CheckedSlot;

/* The marks table and its primary key index, open for one operation. */
typedef struct MarksRel
{
	Relation	heap;
	Relation	index;
	Datum		key;			/* the resource, as text */
	const char *resource;
} MarksRel;

/* What marks_claim should do with the mark it finds. */
typedef enum ClaimMode
{
	CLAIM_CHECK,				/* raise to the token, or reject if above */
	CLAIM_CHECK_STRICT,			/* the same, rejecting an equal mark too */
	CLAIM_ADVANCE				/* raise to the token, never reject */
} ClaimMode;

/* Marks checked and locked in this transaction; names in checked_cxt. */
static CheckedSlot checked[CHECKED_SLOTS];
static int	checked_count = 0;
static MemoryContext checked_cxt = NULL;

/*
 * The marks table, found once per backend through the extension, and
 * whether its shape has been checked; both forgotten when the table's
 * relcache entry is invalidated (DROP EXTENSION, ALTER TABLE).
 */
static Oid	marks_relid_cache = InvalidOid;
static bool marks_shape_checked = false;

PG_FUNCTION_INFO_V1(fence_mark);
PG_FUNCTION_INFO_V1(fence_advance);
PG_FUNCTION_INFO_V1(fence_forget);

/*
 * marks_at_xact_end
 *		Empty the per-transaction cache; called when a transaction ends,
 *		whichever way.
 */
void
marks_at_xact_end(void)
{
	if (checked_count > 0)
	{
		memset(checked, 0, sizeof(checked));
		checked_count = 0;
		MemoryContextReset(checked_cxt);
	}
}

/* Empty one slot of the cache. */
static void
checked_clear(CheckedSlot *slot)
{
	pfree(slot->resource);
	slot->resource = NULL;
	checked_count--;
}

/*
 * Move the entries of a committed subtransaction to its parent, and drop
 * those of one that rolled back.
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

	for (i = 0; i < CHECKED_SLOTS; i++)
	{
		if (checked[i].resource == NULL || checked[i].subid != mySubid)
			continue;
		if (event == SUBXACT_EVENT_COMMIT_SUB)
			checked[i].subid = parentSubid;
		else
			checked_clear(&checked[i]);
	}
}

/* Forget where the marks table is when its relcache entry goes. */
static void
marks_relcache_callback(Datum arg, Oid relid)
{
	if (relid == InvalidOid || relid == marks_relid_cache)
	{
		int			i;

		marks_relid_cache = InvalidOid;
		marks_shape_checked = false;

		/*
		 * The table may have been truncated or rewritten: a remembered
		 * version's address may now hold another row, so look marks up
		 * again.
		 */
		for (i = 0; i < CHECKED_SLOTS; i++)
			ItemPointerSetInvalid(&checked[i].version);
	}
}

/*
 * marks_init
 *		Register the transaction and cache callbacks; called from _PG_init.
 */
void
marks_init(void)
{
	RegisterSubXactCallback(marks_subxact_callback, NULL);
	CacheRegisterRelcacheCallback(marks_relcache_callback, (Datum) 0);
}

static uint32
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

/*
 * Remember that this transaction holds the mark of resource at token;
 * version is the version of the mark row the current subtransaction
 * created, or invalid if it only found and locked it.
 */
static void
checked_remember(const char *resource, uint32 hash, FenceToken token,
				 bool written, ItemPointer version)
{
	CheckedSlot *slot = &checked[hash % CHECKED_SLOTS];

	if (checked_cxt == NULL)
		checked_cxt = AllocSetContextCreate(TopMemoryContext,
											"fencing checked marks",
											ALLOCSET_DEFAULT_SIZES);
	if (slot->resource != NULL &&
		(slot->hash != hash || strcmp(slot->resource, resource) != 0))
		checked_clear(slot);
	if (slot->resource == NULL)
	{
		slot->resource = MemoryContextStrdup(checked_cxt, resource);
		slot->hash = hash;
		checked_count++;
	}
	slot->token = token;
	slot->written = written;
	slot->subid = GetCurrentSubTransactionId();
	slot->version = *version;
}

static void
checked_forget(const char *resource)
{
	CheckedSlot *slot = checked_lookup(resource, checked_hash(resource));

	if (slot != NULL)
		checked_clear(slot);
}

/*
 * The schema of the installed extension.  PostgreSQL 15 keeps its own
 * get_extension_schema() private; this is the same catalog lookup.
 */
static Oid
marks_extension_schema(void)
{
	Oid			extoid = get_extension_oid("fencing", false);
	Relation	rel;
	ScanKeyData skey;
	SysScanDesc scan;
	HeapTuple	tuple;
	Oid			nsp = InvalidOid;

	rel = table_open(ExtensionRelationId, AccessShareLock);
	ScanKeyInit(&skey, Anum_pg_extension_oid, BTEqualStrategyNumber,
				F_OIDEQ, ObjectIdGetDatum(extoid));
	scan = systable_beginscan(rel, ExtensionOidIndexId, true, NULL, 1, &skey);
	tuple = systable_getnext(scan);
	if (HeapTupleIsValid(tuple))
		nsp = ((Form_pg_extension) GETSTRUCT(tuple))->extnamespace;
	systable_endscan(scan);
	table_close(rel, AccessShareLock);
	if (!OidIsValid(nsp))
		elog(ERROR, "cache lookup failed for extension %u", extoid);
	return nsp;
}

/*
 * The marks table of the installed extension, wherever its schema is.
 * Looked up on first use and after an invalidation of the table, as
 * pg_cron finds its job table.
 */
static Oid
marks_relid(void)
{
	if (!OidIsValid(marks_relid_cache))
	{
		Oid			extnsp = marks_extension_schema();

		marks_relid_cache = get_relname_relid(MARKS_TABLE, extnsp);
		if (!OidIsValid(marks_relid_cache))
			elog(ERROR, "table %s not found in schema %u", MARKS_TABLE, extnsp);
	}
	return marks_relid_cache;
}

/* Refuse a marks table whose column attnum is not named name of type typid. */
static void
marks_check_column(Relation heap, AttrNumber attnum, const char *name,
				   Oid typid)
{
	Form_pg_attribute att = TupleDescAttr(RelationGetDescr(heap), attnum - 1);

	if (att->attisdropped || strcmp(NameStr(att->attname), name) != 0 ||
		att->atttypid != typid)
		ereport(ERROR,
				(errcode(ERRCODE_FENCING_GUARD_MISCONFIGURED),
				 errmsg("table \"%s\" has an unexpected shape", MARKS_TABLE),
				 errdetail("Column %d must be \"%s\" of type %s.",
						   attnum, name, format_type_be(typid)),
				 errhint("Reinstall the extension, or restore the table as the extension's script creates it.")));
}

/*
 * Check, once per relcache entry, that the marks table is what this file
 * reads and writes with heap_* calls: a heap, its three columns by name
 * and type, a primary key.  A table altered by hand would otherwise be
 * misread or corrupted.
 */
static void
marks_check_shape(Relation heap)
{
	Oid			token_type;

	if (heap->rd_rel->relam != HEAP_TABLE_AM_OID)
		ereport(ERROR,
				(errcode(ERRCODE_FENCING_GUARD_MISCONFIGURED),
				 errmsg("table \"%s\" is not a heap table", MARKS_TABLE),
				 errhint("Run ALTER TABLE %s SET ACCESS METHOD heap.",
						 MARKS_TABLE)));
	if (RelationGetDescr(heap)->natts != Natts_mark)
		ereport(ERROR,
				(errcode(ERRCODE_FENCING_GUARD_MISCONFIGURED),
				 errmsg("table \"%s\" has an unexpected shape", MARKS_TABLE),
				 errdetail("It must have exactly %d columns.", Natts_mark),
				 errhint("Reinstall the extension, or restore the table as the extension's script creates it.")));
	token_type = fence_token_type(RelationGetNamespace(heap));
	marks_check_column(heap, Anum_mark_resource, "resource", TEXTOID);
	marks_check_column(heap, Anum_mark_token, "token", token_type);
	marks_check_column(heap, Anum_mark_moved_at, "moved_at", TIMESTAMPTZOID);
	if (!OidIsValid(fencing_primary_key_index(heap)))
		ereport(ERROR,
				(errcode(ERRCODE_FENCING_GUARD_MISCONFIGURED),
				 errmsg("table \"%s\" has no primary key", MARKS_TABLE),
				 errhint("Reinstall the extension, or restore the table as the extension's script creates it.")));
}

/*
 * Open the marks table and its primary key index.  Locks are kept to the
 * end of the transaction, as for any table written.  The index is found
 * through the open table, whose relcache entry is kept current by the
 * lock.
 */
static void
marks_open(MarksRel *m, const char *resource, LOCKMODE lockmode)
{
	m->heap = table_open(marks_relid(), lockmode);
	if (!marks_shape_checked)
	{
		marks_check_shape(m->heap);
		marks_shape_checked = true;
	}
	m->index = index_open(fencing_primary_key_index(m->heap), lockmode);
	m->resource = resource;
	m->key = CStringGetTextDatum(resource);
}

static void
marks_close(MarksRel *m)
{
	index_close(m->index, NoLock);
	table_close(m->heap, NoLock);
}

/* Whether this transaction (or one of its subtransactions) wrote tuple. */
static bool
marks_written_here(HeapTuple tuple)
{
	return TransactionIdIsCurrentTransactionId(HeapTupleHeaderGetXmin(tuple->t_data));
}

static TimestampTz
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
 * Whether this transaction created or raised the mark found as tuple, as
 * opposed to finding it at the token or only refreshing it: a raise
 * stamps exactly the transaction's start time.
 */
static bool
marks_raised_here(MarksRel *m, HeapTuple tuple)
{
	return marks_written_here(tuple) &&
		marks_moved_at(m, tuple) == GetCurrentTransactionStartTimestamp();
}

/* The concurrent update of a mark under a transaction snapshot. */
static void
marks_serialization_failure(MarksRel *m)
{
	ereport(ERROR,
			(errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
			 errmsg("could not serialize access due to concurrent update of the mark of resource \"%s\"",
					m->resource)));
}

/*
 * Find the newest version of the resource's mark, with a dirty snapshot so
 * that uncommitted versions are seen too, and wait for any transaction
 * still writing it.  On true, tuple is a copy of the row's latest
 * committed (or our own) version.
 *
 * Under REPEATABLE READ or SERIALIZABLE, a mark our snapshot cannot see
 * was written by a transaction that committed after it began, which is a
 * serialization failure as for any row updated concurrently.  That is
 * checked here, on the buffer's tuple while it is pinned, because the
 * visibility check may set hint bits on it.
 */
static bool
marks_find(MarksRel *m, HeapTuple *tuple)
{
	for (;;)
	{
		SnapshotData dirty;
		ScanKeyData skey;
		IndexScanDesc scan;
		TupleTableSlot *slot;
		TransactionId wait_for = InvalidTransactionId;
		ItemPointerData tid;
		bool		found;
		bool		invisible = false;

		InitDirtySnapshot(dirty);
		ScanKeyInit(&skey, 1, BTEqualStrategyNumber, F_TEXTEQ, m->key);
		slot = table_slot_create(m->heap, NULL);
		scan = fencing_index_beginscan(m->heap, m->index, &dirty, 1, 0);
		index_rescan(scan, &skey, 1, NULL, 0);
		found = index_getnext_slot(scan, ForwardScanDirection, slot);
		if (found)
		{
			tid = slot->tts_tid;
			if (TransactionIdIsValid(dirty.xmin))
				wait_for = dirty.xmin;
			else if (TransactionIdIsValid(dirty.xmax))
				wait_for = dirty.xmax;
			else
			{
				*tuple = ExecCopySlotHeapTuple(slot);
				invisible = IsolationUsesXactSnapshot() &&
					!marks_written_here(*tuple) &&
					!table_tuple_satisfies_snapshot(m->heap, slot,
													GetActiveSnapshot());
			}
		}
		index_endscan(scan);
		ExecDropSingleTupleTableSlot(slot);

		if (invisible)
			marks_serialization_failure(m);
		if (!TransactionIdIsValid(wait_for))
			return found;
		XactLockTableWait(wait_for, m->heap, &tid, XLTW_None);
	}
}

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

static FenceToken
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
 * Take the lock that serializes the first insert of m's resource's mark,
 * unless held already; true if it was taken now, and the caller must look
 * again before inserting.
 */
static bool
marks_insert_lock(MarksRel *m, LOCKTAG *tag, bool *held)
{
	uint64		h;

	if (*held)
		return false;
	h = hash_bytes_extended((const unsigned char *) m->resource,
							strlen(m->resource), 0);
	SET_LOCKTAG_ADVISORY(*tag, MyDatabaseId, (uint32) (h >> 32), (uint32) h,
						 MARK_INSERT_LOCK_FIELD4);
	(void) LockAcquire(tag, ExclusiveLock, false, false);
	*held = true;
	return true;
}

/*
 * Release the first-insert lock, if held.  Once our row is in the index a
 * second inserter's dirty look finds it and waits for our transaction, so
 * the lock has done its work; held to the end, one lock per new resource
 * would exhaust the lock table in a bulk load.
 */
static void
marks_insert_unlock(LOCKTAG *tag, bool *held)
{
	if (*held)
		LockRelease(tag, ExclusiveLock, false);
	*held = false;
}

/* Insert the first mark of m's resource, at token, as version. */
static void
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
 * Raise the mark found as tuple to token, stamping moved_at; or, with the
 * same token, refresh its moved_at.  *version is the version written.
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
 * as usual, which keeps its old value for a rollback to return to.
 */
static TM_Result
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
	result = fencing_heap_update(m->heap, &tuple->t_self, newtuple,
								 GetCurrentCommandId(true), InvalidSnapshot,
								 true, &tmfd, &lockmode);
	if (result == TM_Ok && !HeapTupleIsHeapOnly(newtuple))
		marks_index_insert(m, newtuple, true);
	*version = newtuple->t_self;
	return result;
}

/* Lock the mark found as tuple, at or above the token being checked. */
static TM_Result
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
 * Someone moved or deleted the mark between our look and our write: look
 * again, unless our snapshot must not see the change.
 */
static void
marks_before_retry(MarksRel *m, TM_Result result)
{
	if (result != TM_Updated && result != TM_Deleted)
		elog(ERROR, "unexpected result %d writing high-water mark of resource \"%s\"",
			 (int) result, m->resource);
	if (IsolationUsesXactSnapshot())
		marks_serialization_failure(m);
}

/*
 * marks_claim
 *		Create, raise or lock the mark of m's resource for token.
 *
 * Returns true when the write is accepted, with the mark at token and
 * locked by this transaction; false when the mark is above token (or
 * equal, in strict mode), with *mark set and the row still locked.
 * *written says whether this transaction set the mark it found or made;
 * *version is the version this subtransaction created, invalid if it
 * only locked one.
 *
 * One loop, as execReplication.c's RelationFindReplTupleByIndex: look
 * (waiting for writers in progress), act on what was found, and look
 * again if the row changed in between.
 */
static bool
marks_claim(MarksRel *m, FenceToken token, ClaimMode mode, FenceToken *mark,
			bool *written, ItemPointer version)
{
	LOCKTAG		insert_tag;
	bool		insert_locked = false;
	HeapTuple	tuple;
	TM_Result	result;

	for (;;)
	{
		if (!marks_find(m, &tuple))
		{
			/* No mark yet: lock out other first inserters, and look again. */
			if (marks_insert_lock(m, &insert_tag, &insert_locked))
				continue;
			marks_insert(m, token, version);
			marks_insert_unlock(&insert_tag, &insert_locked);
			*mark = token;
			*written = true;
			stats_count(STATS_MARKS_RAISED);
			break;
		}
		marks_insert_unlock(&insert_tag, &insert_locked);

		*mark = marks_token_of(m, tuple);
		if (*mark < token)
		{
			result = marks_raise(m, tuple, token,
								 GetCurrentTransactionStartTimestamp(), version);
			if (result == TM_Ok)
			{
				*mark = token;
				*written = true;
				stats_count(STATS_MARKS_RAISED);
				break;
			}
		}
		else if (mode == CLAIM_CHECK && *mark == token &&
				 marks_moved_at(m, tuple) <
				 GetCurrentTransactionStartTimestamp() - MARK_REFRESH_INTERVAL)
		{
			/* A write at the mark's token: refresh it, which locks it too. */
			result = marks_raise(m, tuple, token,
								 GetCurrentTransactionStartTimestamp() - 1,
								 version);
			if (result == TM_Ok)
			{
				*written = false;
				break;
			}
		}
		else
		{
			result = marks_lock(m, tuple);
			if (result == TM_Ok)
			{
				*written = marks_raised_here(m, tuple);
				ItemPointerSetInvalid(version);
				break;
			}
		}
		marks_before_retry(m, result);
	}

	/* Later lookups in this transaction must see what we wrote or locked. */
	CommandCounterIncrement();

	/*
	 * In strict mode an equal mark fences out every other holder of that
	 * token, but not the transaction that set it, which may write many
	 * rows with it.
	 */
	return *mark == token && (mode != CLAIM_CHECK_STRICT || *written);
}

/*
 * Raise the mark of slot's resource, which this subtransaction holds at a
 * lower token in a version it created, to token; false if that version is
 * no longer the mark, and the caller must look it up.  No lookup is
 * needed otherwise: no one else can write the row while we hold it, and
 * the version stays where it is, raised in place.  Only a statement of
 * our own transaction writing the marks table by hand can have updated or
 * deleted it.
 */
static bool
marks_raise_held(CheckedSlot *slot, FenceToken token)
{
	Relation	heap = table_open(marks_relid(), RowExclusiveLock);
	HeapTupleData tuple;
	HeapTuple	copy;
	Buffer		buffer;
	bool		current;

	tuple.t_self = slot->version;
	if (!heap_fetch(heap, SnapshotAny, &tuple, &buffer, true))
		elog(ERROR, "high-water mark of resource \"%s\" not found at (%u,%u)",
			 slot->resource, ItemPointerGetBlockNumber(&slot->version),
			 ItemPointerGetOffsetNumber(&slot->version));
	copy = heap_copytuple(&tuple);
	ReleaseBuffer(buffer);
	current = marks_may_overwrite(copy) &&
		((copy->t_data->t_infomask & HEAP_XMAX_INVALID) ||
		 HEAP_XMAX_IS_LOCKED_ONLY(copy->t_data->t_infomask));
	if (current)
		marks_overwrite(heap, copy, token,
						GetCurrentTransactionStartTimestamp());
	table_close(heap, NoLock);
	return current;
}

/*
 * marks_report_stale
 *		Reject a write of token because the mark is above it (or equal to
 *		it, under a strict trigger).
 *
 * resource names the resource of a resource-scope mark; in row scope it
 * is NULL, and the mark is the row's own token in table, checked by
 * trigger.
 */
void
marks_report_stale(const char *resource, const char *table,
				   const char *trigger, FenceToken token, FenceToken mark)
{
	char		offered[FENCE_TOKEN_TEXT_LEN];
	char		current[FENCE_TOKEN_TEXT_LEN];

	stats_count(STATS_REJECTED_STALE);
	fence_token_to_cstring(token, offered);
	fence_token_to_cstring(mark, current);
	if (resource == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_FENCING_STALE_TOKEN),
				 errmsg("stale fence token for a row of table \"%s\"", table),
				 token == mark ?
				 errdetail("Token %s is not above the row's token %s, and trigger \"%s\" requires strictly increasing tokens.",
						   offered, current, trigger) :
				 errdetail("Token %s is below the row's token %s.",
						   offered, current),
				 errhint("A newer lock holder has written this row; acquire the lock again for a new token."),
				 stale_hint_token_sources(token, mark)));
	ereport(ERROR,
			(errcode(ERRCODE_FENCING_STALE_TOKEN),
			 errmsg("stale fence token for resource \"%s\"", resource),
			 token == mark ?
			 errdetail("Token %s is not above the current mark %s, and this table requires strictly increasing tokens.",
					   offered, current) :
			 errdetail("Token %s is below the current mark %s.",
					   offered, current),
			 errhint("A newer lock holder has written to this resource; acquire the lock again for a new token."),
			 stale_hint_token_sources(token, mark)));
}

/*
 * marks_check
 *		Accept a write of token to resource, or reject it with
 *		ERRCODE_FENCING_STALE_TOKEN.
 *
 * On return the mark is at token and locked by this transaction.  With
 * strict, a token equal to a mark left by another transaction is stale
 * too.
 */
void
marks_check(const char *resource, FenceToken token, bool strict)
{
	uint32		hash = checked_hash(resource);
	CheckedSlot *slot = checked_lookup(resource, hash);
	MarksRel	m;
	FenceToken	mark;
	bool		written;
	bool		accepted;
	ItemPointerData version;

	if (slot != NULL)
	{
		/*
		 * Strict mode accepts an equal mark only from the transaction that
		 * set it, which a check that merely found the mark at the token
		 * did not.
		 */
		if (slot->token == token && (slot->written || !strict))
			return;

		/* A raise of a version this subtransaction created needs no lookup. */
		if (token > slot->token && ItemPointerIsValid(&slot->version) &&
			slot->subid == GetCurrentSubTransactionId() &&
			marks_raise_held(slot, token))
		{
			slot->token = token;
			slot->written = true;
			stats_count(STATS_MARKS_RAISED);
			return;
		}
	}

	/* A temporary table is writable in a read-only transaction; marks are not. */
	PreventCommandIfReadOnly("fence_guard()");

	marks_open(&m, resource, RowExclusiveLock);
	accepted = marks_claim(&m, token, strict ? CLAIM_CHECK_STRICT : CLAIM_CHECK,
						   &mark, &written, &version);
	marks_close(&m);

	if (!accepted)
		marks_report_stale(resource, NULL, NULL, token, mark);
	checked_remember(resource, hash, token, written, &version);
}

/*
 * marks_read
 *		The mark of resource as the current snapshot sees it, without a
 *		lock; false if it has none.
 */
bool
marks_read(const char *resource, FenceToken *mark)
{
	MarksRel	m;
	ScanKeyData skey;
	IndexScanDesc scan;
	TupleTableSlot *slot;
	bool		found;

	marks_open(&m, resource, AccessShareLock);
	ScanKeyInit(&skey, 1, BTEqualStrategyNumber, F_TEXTEQ, m.key);
	slot = table_slot_create(m.heap, NULL);
	scan = fencing_index_beginscan(m.heap, m.index, GetActiveSnapshot(), 1, 0);
	index_rescan(scan, &skey, 1, NULL, 0);
	found = index_getnext_slot(scan, ForwardScanDirection, slot);
	if (found)
	{
		bool		isnull;

		*mark = DatumGetFenceToken(slot_getattr(slot, Anum_mark_token, &isnull));
	}
	index_endscan(scan);
	ExecDropSingleTupleTableSlot(slot);
	marks_close(&m);
	return found;
}

/*
 * fence_mark(resource text) returns fence_token
 *		The current mark of resource, NULL if it has none.
 */
Datum
fence_mark(PG_FUNCTION_ARGS)
{
	FenceToken	mark;

	if (!marks_read(text_to_cstring(PG_GETARG_TEXT_PP(0)), &mark))
		PG_RETURN_NULL();
	PG_RETURN_FENCE_TOKEN(mark);
}

/* fence_advance and fence_forget write the marks table: refuse where a write could not happen. */
static void
marks_prevent_readonly(const char *cmdname)
{
	PreventCommandIfReadOnly(cmdname);
	PreventCommandIfParallelMode(cmdname);
	PreventCommandDuringRecovery(cmdname);
}

/*
 * fence_advance(resource text, token fence_token) returns fence_token
 *		Raise the mark of resource to token, fencing out every holder of
 *		an older token; never lowers it.  Returns the mark.
 */
Datum
fence_advance(PG_FUNCTION_ARGS)
{
	char	   *resource;
	FenceToken	mark;
	bool		written;
	ItemPointerData version;
	MarksRel	m;

	if (PG_ARGISNULL(0) || PG_ARGISNULL(1))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("resource and token must not be null")));
	marks_prevent_readonly("fence_advance()");
	resource = text_to_cstring(PG_GETARG_TEXT_PP(0));
	resource_name_check(resource, strlen(resource));

	marks_open(&m, resource, RowExclusiveLock);
	(void) marks_claim(&m, PG_GETARG_FENCE_TOKEN(1), CLAIM_ADVANCE, &mark,
					   &written, &version);
	marks_close(&m);

	/* A cached check at an older token no longer describes the mark. */
	checked_forget(resource);
	PG_RETURN_FENCE_TOKEN(mark);
}

/*
 * fence_forget(resource text) returns boolean
 *		Delete the mark of a retired resource; true if it had one.
 */
Datum
fence_forget(PG_FUNCTION_ARGS)
{
	char	   *resource;
	MarksRel	m;
	HeapTuple	tuple;
	bool		found;

	if (PG_ARGISNULL(0))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("resource must not be null")));
	marks_prevent_readonly("fence_forget()");
	resource = text_to_cstring(PG_GETARG_TEXT_PP(0));

	marks_open(&m, resource, RowExclusiveLock);
	for (;;)
	{
		TM_Result	result;
		TM_FailureData tmfd;

		found = marks_find(&m, &tuple);
		if (!found)
			break;
		result = heap_delete(m.heap, &tuple->t_self, GetCurrentCommandId(true),
							 InvalidSnapshot, true, &tmfd, false);
		if (result == TM_Ok)
			break;
		if (result != TM_Updated && result != TM_Deleted)
			elog(ERROR, "unexpected result %d deleting high-water mark of resource \"%s\"",
				 (int) result, resource);
		if (IsolationUsesXactSnapshot())
			marks_serialization_failure(&m);
	}
	marks_close(&m);
	CommandCounterIncrement();

	checked_forget(resource);
	PG_RETURN_BOOL(found);
}

/*
 * marks_read_newest
 *		The newest mark of resource, committed or written by a transaction
 *		still in progress, whatever this transaction's snapshot is; without
 *		a lock and without waiting.  False if it has none.
 *
 * For a floor that a new token must exceed (fenced_acquire), a snapshot's
 * mark is not enough: under REPEATABLE READ, or in a statement that waited
 * for a busy lock, a mark raised since the snapshot was taken is missed.
 * A dirty snapshot sees every live version of the row, including those
 * of writers that have not committed (and may yet abort); the highest of
 * them is returned, as a floor can only err on the high side.
 */
bool
marks_read_newest(const char *resource, FenceToken *mark)
{
	MarksRel	m;
	SnapshotData dirty;
	ScanKeyData skey;
	IndexScanDesc scan;
	TupleTableSlot *slot;
	bool		found = false;

	marks_open(&m, resource, AccessShareLock);
	InitDirtySnapshot(dirty);
	ScanKeyInit(&skey, 1, BTEqualStrategyNumber, F_TEXTEQ, m.key);
	slot = table_slot_create(m.heap, NULL);
	scan = fencing_index_beginscan(m.heap, m.index, &dirty, 1, 0);
	index_rescan(scan, &skey, 1, NULL, 0);
	while (index_getnext_slot(scan, ForwardScanDirection, slot))
	{
		Buffer		buffer = ((BufferHeapTupleTableSlot *) slot)->buffer;
		bool		isnull;
		FenceToken	token;

		/*
		 * A raise in place rewrites an in-progress version's token under an
		 * exclusive lock on its buffer; read it under a share lock, so that
		 * it is never seen half written.
		 */
		LockBuffer(buffer, BUFFER_LOCK_SHARE);
		token = DatumGetFenceToken(slot_getattr(slot, Anum_mark_token, &isnull));
		LockBuffer(buffer, BUFFER_LOCK_UNLOCK);
		if (!isnull && (!found || token > *mark))
		{
			*mark = token;
			found = true;
		}
	}
	index_endscan(scan);
	ExecDropSingleTupleTableSlot(slot);
	marks_close(&m);
	return found;
}
