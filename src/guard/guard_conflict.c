/*-------------------------------------------------------------------------
 *
 * guard_conflict.c
 *	  What a statement's own token may do to a mark: INSERT ... ON
 *	  CONFLICT raises only for rows that go in, and
 *	  fencing.max_token_step bounds how far a token only the statement
 *	  supplies may raise a mark.
 *
 * BEFORE ROW triggers run before ON CONFLICT arbitration.  Under DO
 * NOTHING the guard would raise the mark to the token of a row that then
 * is not inserted: a role with INSERT alone could raise any resource's
 * mark to the top through a row that exists (even one row level security
 * hides from it), and the real holder would be stale for good.  DO UPDATE
 * ... WHERE false writes nothing either.  So while a statement with ON
 * CONFLICT runs (counted by the executor hooks here), the guard first
 * looks for a row its row would conflict with, as the executor is about
 * to (guard_row_conflicts): if there is one, the row will not go
 * in, and the guard only checks its token against the mark, without
 * raising it (under DO UPDATE, the update that follows is checked, and
 * raises, as any update).
 *
 * The executor arbitrates after every BEFORE trigger, and waits then for
 * a deleter in progress of the conflicting row: a row that conflicted when
 * the guard looked goes in after all if that row was deleted in between
 * (or updated out of the way), and its token was checked but never raised
 * nor locked the mark; a writer at a newer token may even have committed
 * in between.  So the guard keeps each row it let through that way, with
 * the version it conflicted with, and when the statement has run, checks
 * whether that version is still there, live, with the same indexed
 * columns (followed along HOT updates, which change none); if not, the
 * row may have gone in, and its write is checked and raises the mark as
 * any insert's, now.  A row that did not go in because another version
 * conflicted may then raise the mark to a token that is above it anyway,
 * never past a newer writer's: that one is rejected as stale.
 *
 * A token the statement alone supplies (nothing declared) comes from
 * whoever may write the table.  fencing.max_token_step is how far above
 * the mark such a token may be (the check is in marks_claim, which has
 * the mark in hand); a declared token, an acquisition and fence_advance()
 * are the holder's or the operator's word and are not bounded.
 *
 * IDENTIFICATION
 *	  src/guard/guard_conflict.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/heapam.h"
#include "access/htup_details.h"
#include "access/xact.h"
#include "core/core.h"
#include "core/pg_compat.h"
#include "executor/executor.h"
#include "guard/guard.h"
#include "marks/marks.h"
#include "nodes/plannodes.h"
#include "storage/bufmgr.h"
#include "storage/procarray.h"
#include "tcop/pquery.h"
#include "utils/guc.h"
#include "utils/memutils.h"
#include "utils/portal.h"
#include "utils/rel.h"

/*
 * The default step, 10^15: a token that the statement alone supplies may
 * be at most that far above the mark.  Tokens of the lock services a
 * statement may carry grow by far less between two writes of a resource:
 * fenced_acquire()'s follow the Redis server's clock in microseconds
 * (10^15 is 31 years of it), a Redis INCR counter or etcd's revision by
 * the number of grants or writes, a ZooKeeper zxid by 2^32 per leader
 * election (over 200,000 of them).  A forged token at the top (2^63 - 1,
 * about 9.2 * 10^18) is refused, and one write can no longer take a
 * resource out of reach of every genuine token.
 */
#define GUARD_MAX_TOKEN_STEP_DEFAULT "1000000000000000"

static char *max_token_step_text = NULL;
static FenceToken max_token_step = INT64CONST(1000000000000000);

/*
 * INSERT ... ON CONFLICT statements running in this backend,
 * counted as fencing.c counts MERGEs; an error between start and end
 * leaves the count high until the transaction ends, which only costs the
 * lookups.  loaded_in_portal: the library was loaded while a portal ran,
 * whose statement's start went unseen: it may be one.
 */
static int	on_conflict_running = 0;
static Portal loaded_in_portal = NULL;
static ExecutorStart_hook_type prev_ExecutorStart = NULL;
static ExecutorFinish_hook_type prev_ExecutorFinish = NULL;
static ExecutorEnd_hook_type prev_ExecutorEnd = NULL;

/*
 * A row the guard let through without raising its mark, because it
 * conflicted with the version at tid (inserted by xmin), to be checked
 * again once its statement has run.  resource is shared with the row
 * before when it is the same.
 */
typedef struct ConflictPass
{
	Oid			relid;
	ItemPointerData tid;
	TransactionId xmin;
	SubTransactionId subid;
	bool		strict;
	FenceToken	token;
	FenceToken	step;
	const char *resource;
} ConflictPass;

/* The rows let through, in TopTransactionContext; forgotten at its end. */
static ConflictPass *passes = NULL;
static int	npasses = 0;
static int	maxpasses = 0;

/*
 * The ON CONFLICT statements started in this transaction and not finished,
 * the innermost last (also those that failed, whose finish never came),
 * each with the number of rows let through when it started: the rows its
 * finish checks again are those let through since, by it or by statements
 * it ran (in TopTransactionContext).
 */
typedef struct ConflictStatement
{
	QueryDesc  *queryDesc;
	int			first;
} ConflictStatement;

static ConflictStatement *statements = NULL;
static int	nstatements = 0;
static int	maxstatements = 0;

/* Grow array, of *max elements of size bytes, in TopTransactionContext. */
static void *
conflict_grow(void *array, int *max, Size size)
{
	*max = *max == 0 ? 16 : *max * 2;
	if (array == NULL)
		return MemoryContextAlloc(TopTransactionContext, *max * size);
	return repalloc(array, *max * size);
}

/* Whether plan, a plan tree's top node, inserts with ON CONFLICT. */
static bool
conflict_plan_on_conflict(Plan *plan)
{
	return plan != NULL && IsA(plan, ModifyTable) &&
		((ModifyTable *) plan)->onConflictAction != ONCONFLICT_NONE;
}

/*
 * Whether a statement inserts with ON CONFLICT: in its main plan, or in a
 * WITH query, whose ModifyTable is one of its subplans.
 */
static bool
conflict_stmt_on_conflict(PlannedStmt *stmt)
{
	ListCell   *lc;

	if (stmt == NULL)
		return false;
	if (conflict_plan_on_conflict(stmt->planTree))
		return true;
	if (!stmt->hasModifyingCTE)
		return false;
	foreach(lc, stmt->subplans)
	{
		if (conflict_plan_on_conflict((Plan *) lfirst(lc)))
			return true;
	}
	return false;
}

static void
conflict_ExecutorStart(QueryDesc *queryDesc, int eflags)
{
	if (prev_ExecutorStart)
		prev_ExecutorStart(queryDesc, eflags);
	else
		standard_ExecutorStart(queryDesc, eflags);
	if (conflict_stmt_on_conflict(queryDesc->plannedstmt))
	{
		on_conflict_running++;
		if (nstatements == maxstatements)
			statements = conflict_grow(statements, &maxstatements,
									   sizeof(ConflictStatement));
		statements[nstatements].queryDesc = queryDesc;
		statements[nstatements].first = npasses;
		nstatements++;
	}
}

/*
 * The version at tid of rel, if it is there (a line pointer pruned away
 * is not; the statement's lock on rel keeps VACUUM from truncating the
 * table meanwhile): its inserter (xmin), and the transaction that deleted
 * or updated it, committed, in progress or ours (updater; invalid if none
 * did, or only locked it, or aborted: it is live, as the arbitration found
 * it then).  hot_next is where a HOT update put the next version, else
 * invalid.
 */
static bool
conflict_version_at(Relation rel, ItemPointer tid, TransactionId *xmin,
					TransactionId *updater, ItemPointer hot_next)
{
	HeapTupleData tuple;
	Buffer		buffer;
	HeapTupleHeader htup;

	tuple.t_self = *tid;
	if (!heap_fetch(rel, SnapshotAny, &tuple, &buffer, false))
		return false;
	LockBuffer(buffer, BUFFER_LOCK_SHARE);
	htup = tuple.t_data;
	*xmin = HeapTupleHeaderGetRawXmin(htup);
	*updater = InvalidTransactionId;
	if (!(htup->t_infomask & HEAP_XMAX_INVALID) &&
		!HEAP_XMAX_IS_LOCKED_ONLY(htup->t_infomask))
	{
		TransactionId xmax = HeapTupleHeaderGetUpdateXid(htup);

		if (TransactionIdIsCurrentTransactionId(xmax) ||
			TransactionIdIsInProgress(xmax) || TransactionIdDidCommit(xmax))
			*updater = xmax;
	}
	if (TransactionIdIsValid(*updater) && HeapTupleHeaderIsHotUpdated(htup))
		*hot_next = htup->t_ctid;
	else
		ItemPointerSetInvalid(hot_next);
	LockBuffer(buffer, BUFFER_LOCK_UNLOCK);
	ReleaseBuffer(buffer);
	return true;
}

/* What became of the row a row let through conflicted with. */
typedef enum ConflictRowFate
{
	CONFLICT_ROW_STAYED,		/* there, with the same indexed values */
	CONFLICT_ROW_GONE,			/* deleted or changed, or not found */
	CONFLICT_ROW_CHANGED_HERE	/* deleted or changed by this transaction */
} ConflictRowFate;

/*
 * Whether the row that pass conflicted with is still there, live, with
 * the same values in every indexed column: its version, or one that HOT
 * updates made from it (a HOT update changes no indexed column).  Then
 * it conflicted at the arbitration too (a version deleted by a
 * transaction that committed does not come back to life), and the row let
 * through did not go in.
 */
static ConflictRowFate
conflict_row_fate(Relation rel, const ConflictPass *pass)
{
	ItemPointerData tid = pass->tid;
	TransactionId expect = pass->xmin;

	for (;;)
	{
		TransactionId xmin;
		TransactionId updater;
		ItemPointerData next;

		if (!conflict_version_at(rel, &tid, &xmin, &updater, &next) ||
			!TransactionIdEquals(xmin, expect))
			return CONFLICT_ROW_GONE;
		if (!TransactionIdIsValid(updater))
			return CONFLICT_ROW_STAYED;
		if (!ItemPointerIsValid(&next))
			return TransactionIdIsCurrentTransactionId(updater) ?
				CONFLICT_ROW_CHANGED_HERE : CONFLICT_ROW_GONE;
		tid = next;
		expect = updater;
	}
}

/*
 * Check again the rows let through from first on: by a statement that has
 * run, and by those it ran.  Each whose conflicting row is gone may have gone
 * in: it is checked, and raises the mark, as any insert is, and a stale
 * one fails the statement, which takes the row back.  One whose
 * conflicting row this transaction changed (most often by the DO UPDATE
 * of that very row, when the update was not HOT) is checked only when the
 * transaction does not hold the mark at or above its token already: the
 * write that changed the row checked the mark, and holds it.
 */
static void
conflict_check_passes(int first)
{
	int			i;

	for (i = first; i < npasses; i++)
	{
		ConflictPass *pass = &passes[i];
		Relation	rel = table_open(pass->relid, AccessShareLock);
		ConflictRowFate fate = conflict_row_fate(rel, pass);
		FenceToken	held;

		table_close(rel, AccessShareLock);
		if (fate == CONFLICT_ROW_STAYED ||
			(fate == CONFLICT_ROW_CHANGED_HERE &&
			 marks_read_held(pass->resource, &held) && held >= pass->token))
			continue;
		marks_check(pass->resource, pass->token, pass->strict, pass->step);
	}
	npasses = first;
}

static void
conflict_ExecutorFinish(QueryDesc *queryDesc)
{
	if (prev_ExecutorFinish)
		prev_ExecutorFinish(queryDesc);
	else
		standard_ExecutorFinish(queryDesc);

	/*
	 * After the standard finish, which runs to completion the ON CONFLICT
	 * of a WITH query that was not read to its end.
	 */
	if (conflict_stmt_on_conflict(queryDesc->plannedstmt))
	{
		int			first = 0;	/* its start unseen: the library loaded in it */
		int			i;

		for (i = nstatements - 1; i >= 0; i--)
		{
			if (statements[i].queryDesc == queryDesc)
			{
				first = Min(statements[i].first, npasses);
				nstatements = i;
				break;
			}
		}
		conflict_check_passes(first);
	}
}

static void
conflict_ExecutorEnd(QueryDesc *queryDesc)
{
	if (on_conflict_running > 0 &&
		conflict_stmt_on_conflict(queryDesc->plannedstmt))
		on_conflict_running--;
	if (prev_ExecutorEnd)
		prev_ExecutorEnd(queryDesc);
	else
		standard_ExecutorEnd(queryDesc);
}

/* Parse a step: a fence_token literal; 0 turns the bound off. */
static bool
conflict_step_check_hook(char **newval, void **extra, GucSource source)
{
	FenceToken	value;

	if (!fence_token_from_cstring(*newval, &value))
	{
		GUC_check_errdetail("fencing.max_token_step must be a fence token: 0 to 9223372036854775807.");
		return false;
	}
	/* GUC frees an extra with free() */
	*extra = malloc(sizeof(FenceToken));
	if (*extra == NULL)
		return false;
	*(FenceToken *) *extra = value;
	return true;
}

static void
conflict_step_assign_hook(const char *newval, void *extra)
{
	max_token_step = *(FenceToken *) extra;
}

/*
 * Rows let through in a subtransaction rolled back were taken back:
 * forget them.  (A statement that failed there never finished, and an
 * enclosing statement still running checks only the rows let through
 * since it started.)
 */
static void
conflict_subxact_callback(SubXactEvent event, SubTransactionId mySubid,
						  SubTransactionId parentSubid, void *arg)
{
	if (event != SUBXACT_EVENT_ABORT_SUB)
		return;
	while (npasses > 0 && passes[npasses - 1].subid >= mySubid)
		npasses--;
}

/*
 * guard_conflict_init
 *		Define fencing.max_token_step and install the executor hooks;
 *		called from _PG_init.
 *
 * PGC_SUSET: set per role or database by a superuser (or a role granted
 * SET on it), so that the writer whose tokens it bounds cannot raise it.
 */
void
guard_conflict_init(void)
{
	DefineCustomStringVariable("fencing.max_token_step",
							   "How far above a resource's mark a token only the statement supplies may be.",
							   "A declared token, an acquisition and fence_advance() are not bounded; 0 bounds nothing.",
							   &max_token_step_text,
							   GUARD_MAX_TOKEN_STEP_DEFAULT,
							   PGC_SUSET, 0,
							   conflict_step_check_hook,
							   conflict_step_assign_hook, NULL);
	prev_ExecutorStart = ExecutorStart_hook;
	ExecutorStart_hook = conflict_ExecutorStart;
	prev_ExecutorFinish = ExecutorFinish_hook;
	ExecutorFinish_hook = conflict_ExecutorFinish;
	prev_ExecutorEnd = ExecutorEnd_hook;
	ExecutorEnd_hook = conflict_ExecutorEnd;
	RegisterSubXactCallback(conflict_subxact_callback, NULL);

	/*
	 * Loaded by the trigger of an INSERT whose start went unseen (no
	 * preloading, the session's first fenced write): it may have ON
	 * CONFLICT.  Other statements are not assumed to, so that a
	 * first COPY or UPDATE does not pay for the look; one that runs such
	 * an INSERT inside a function is missed, as doc/guard.md says.
	 */
	if (ActivePortal != NULL && ActivePortal->status == PORTAL_ACTIVE &&
		ActivePortal->commandTag == CMDTAG_INSERT)
		loaded_in_portal = ActivePortal;
}

/*
 * guard_conflict_at_xact_end
 *		Forget the statements counted; called when a transaction ends.
 */
void
guard_conflict_at_xact_end(void)
{
	on_conflict_running = 0;
	loaded_in_portal = NULL;
	passes = NULL;				/* freed with TopTransactionContext */
	npasses = maxpasses = 0;
	statements = NULL;
	nstatements = maxstatements = 0;
}

/*
 * guard_max_token_step
 *		How far above the mark a token only the statement supplies may
 *		be; 0 for no bound.
 */
FenceToken
guard_max_token_step(void)
{
	return max_token_step;
}

/*
 * guard_on_conflict_running
 *		Whether the row being inserted may be one of an INSERT ... ON
 *		CONFLICT.
 */
bool
guard_on_conflict_running(void)
{
	return on_conflict_running > 0 ||
		(loaded_in_portal != NULL && loaded_in_portal == ActivePortal);
}

/*
 * guard_row_conflicts
 *		Whether tuple, about to be inserted into rel, conflicts with a row
 *		there under an immediate unique or exclusion constraint: the check
 *		ON CONFLICT makes before inserting, with its wait for an inserter
 *		in progress.  Every such constraint of rel counts, whichever the
 *		statement names: a conflict under one it does not name fails the
 *		insert, which writes nothing either.  A deferrable one does not: a
 *		row conflicting under it can still go in.  conflict, if not NULL, is
 *		set to the address of the row it conflicts with.
 */
bool
guard_row_conflicts(Relation rel, HeapTuple tuple, ItemPointer conflict)
{
	EState	   *estate = CreateExecutorState();
	ResultRelInfo *rri = makeNode(ResultRelInfo);
	List	   *arbiters = NIL;
	bool		found = false;
	int			i;

	InitResultRelInfo(rri, rel, 1, NULL, 0);
	ExecOpenIndices(rri, true);
	for (i = 0; i < rri->ri_NumIndices; i++)
	{
		IndexInfo  *info = rri->ri_IndexRelationInfo[i];
		Relation	index = rri->ri_IndexRelationDescs[i];

		if ((info->ii_Unique || info->ii_ExclusionOps != NULL) &&
			info->ii_ReadyForInserts && index->rd_index->indimmediate)
			arbiters = lappend_oid(arbiters, RelationGetRelid(index));
	}
	if (arbiters != NIL)
	{
		TupleTableSlot *slot = ExecInitExtraTupleSlot(estate,
													  RelationGetDescr(rel),
													  &TTSOpsHeapTuple);
		ItemPointerData conflict_tid;

		ExecStoreHeapTuple(tuple, slot, false);
		found = !FencingExecCheckIndexConstraints(rri, slot, estate,
												   &conflict_tid, arbiters);
		if (found && conflict != NULL)
			*conflict = conflict_tid;
	}
	ExecCloseIndices(rri);
	ExecResetTupleTable(estate->es_tupleTable, false);
	FreeExecutorState(estate);
	return found;
}

/*
 * guard_conflict_pass
 *		Keep a row of resource, written at token, that the guard let through
 *		without raising the mark because it conflicted with the row at
 *		conflict of rel, to be checked again when its statement has run.
 */
void
guard_conflict_pass(Relation rel, ItemPointer conflict, const char *resource,
					FenceToken token, bool strict, FenceToken step)
{
	ConflictPass *pass;
	TransactionId updater;
	ItemPointerData next;

	if (npasses == maxpasses)
		passes = conflict_grow(passes, &maxpasses, sizeof(ConflictPass));
	pass = &passes[npasses];
	pass->relid = RelationGetRelid(rel);
	pass->tid = *conflict;

	/*
	 * The version found cannot have been pruned since: the statement's
	 * snapshot, taken before its deleter (if any) committed, holds it.
	 */
	if (!conflict_version_at(rel, conflict, &pass->xmin, &updater, &next))
		pass->xmin = InvalidTransactionId;
	pass->subid = GetCurrentSubTransactionId();
	pass->strict = strict;
	pass->token = token;
	pass->step = step;
	if (npasses > 0 && strcmp(passes[npasses - 1].resource, resource) == 0)
		pass->resource = passes[npasses - 1].resource;
	else
		pass->resource = MemoryContextStrdup(TopTransactionContext, resource);
	npasses++;
}
