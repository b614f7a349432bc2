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

#include "core/core.h"
#include "core/pg_compat.h"
#include "executor/executor.h"
#include "guard/guard.h"
#include "nodes/plannodes.h"
#include "tcop/pquery.h"
#include "utils/guc.h"
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
static ExecutorEnd_hook_type prev_ExecutorEnd = NULL;

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
		on_conflict_running++;
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
	prev_ExecutorEnd = ExecutorEnd_hook;
	ExecutorEnd_hook = conflict_ExecutorEnd;

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
 *		row conflicting under it can still go in.
 */
bool
guard_row_conflicts(Relation rel, HeapTuple tuple)
{
	EState	   *estate = CreateExecutorState();
	ResultRelInfo *rri = makeNode(ResultRelInfo);
	List	   *arbiters = NIL;
	bool		conflict = false;
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
		conflict = !FencingExecCheckIndexConstraints(rri, slot, estate,
													  &conflict_tid, arbiters);
	}
	ExecCloseIndices(rri);
	ExecResetTupleTable(estate->es_tupleTable, false);
	FreeExecutorState(estate);
	return conflict;
}
