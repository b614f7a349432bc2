/*-------------------------------------------------------------------------
 *
 * fencing.c
 *	  Module entry point of the fencing extension, the executor hooks
 *	  that tell the trigger whether a MERGE is running, and the
 *	  transaction and DISCARD ALL hooks that end declarations and leases.
 *
 * IDENTIFICATION
 *	  src/fencing.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "declared.h"
#include "executor/executor.h"
#include "fenced_lock.h"
#include "fenced_settings.h"
#include "fencing.h"
#include "fmgr.h"
#include "guard_config.h"
#include "guard_conflict.h"
#include "guard_views.h"
#include "marks.h"
#include "pg_compat.h"
#include "redis_settings.h"
#include "session_state.h"
#include "stats.h"
#include "tcop/pquery.h"
#include "tcop/utility.h"
#include "utils/guc.h"
#include "utils/portal.h"

PG_MODULE_MAGIC;

void		_PG_init(void);

/*
 * MERGE statements executing in this backend.  In a MERGE, tg_updatedcols
 * is the union of the columns of all its UPDATE actions, so the token
 * column can be listed when the action taken did not assign it.  Counted
 * by executor hooks; an error between start and end leaves the count too
 * high until the transaction ends, which only makes the check stricter.
 *
 * If the library was loaded while a portal ran (the first fenced write of
 * a session, without preloading), the hooks missed the start of the
 * portal's statement and of any statement running under it.
 * fencing_note_load() then counts the portal's statement if it is a MERGE
 * (its end is seen), and otherwise, since a trigger or function under it
 * may be running a MERGE, sets loaded_in_portal: a MERGE is assumed while
 * that portal runs.  A load at parse, plan or bind time (a token literal
 * or parameter) comes before the executor and misses nothing.
 */
static int	merges_running = 0;
static Portal loaded_in_portal = NULL;
static ExecutorStart_hook_type prev_ExecutorStart = NULL;
static ExecutorEnd_hook_type prev_ExecutorEnd = NULL;
static ProcessUtility_hook_type prev_ProcessUtility = NULL;

/* Count a MERGE starting. */
static void
fencing_ExecutorStart(QueryDesc *queryDesc, int eflags)
{
	if (prev_ExecutorStart)
		prev_ExecutorStart(queryDesc, eflags);
	else
		standard_ExecutorStart(queryDesc, eflags);
	if (queryDesc->operation == CMD_MERGE)
		merges_running++;
}

/* Count a MERGE ending. */
static void
fencing_ExecutorEnd(QueryDesc *queryDesc)
{
	if (queryDesc->operation == CMD_MERGE && merges_running > 0)
		merges_running--;
	if (prev_ExecutorEnd)
		prev_ExecutorEnd(queryDesc);
	else
		standard_ExecutorEnd(queryDesc);
}

/*
 * fencing_in_merge
 *		Whether the row being written may be written by a MERGE.
 */
bool
fencing_in_merge(void)
{
	if (merges_running > 0)
		return true;

	/*
	 * Loaded while this portal runs, whose start went unseen: a statement
	 * under it may be a MERGE.
	 */
	return loaded_in_portal != NULL && loaded_in_portal == ActivePortal;
}

/*
 * fencing_note_load
 *		Account for the statements whose start the executor hooks missed,
 *		the library being loaded while a portal runs.
 */
static void
fencing_note_load(void)
{
	if (ActivePortal == NULL || ActivePortal->status != PORTAL_ACTIVE)
		return;
	if (ActivePortal->commandTag == CMDTAG_MERGE)
		merges_running++;
	else
		loaded_in_portal = ActivePortal;
}

/*
 * fencing_ProcessUtility
 *		DISCARD ALL, the reset a pooler sends between clients, also ends
 *		every declaration and lease of the session, the leases' locks given
 *		back to Redis first (a failure is a WARNING: the reset succeeds).
 *		It is refused in a transaction block: so it is here, before
 *		anything is given back.
 */
static void
fencing_ProcessUtility(PlannedStmt *pstmt, const char *queryString,
					   bool readOnlyTree, ProcessUtilityContext context,
					   ParamListInfo params, QueryEnvironment *queryEnv,
					   DestReceiver *dest, QueryCompletion *qc)
{
	Node	   *parsetree = pstmt->utilityStmt;

	if (IsA(parsetree, DiscardStmt) &&
		((DiscardStmt *) parsetree)->target == DISCARD_ALL)
	{
		PreventInTransactionBlock(context == PROCESS_UTILITY_TOPLEVEL,
								  "DISCARD ALL");
		fenced_lock_discard_all();
		declared_discard_all();
	}
	if (prev_ProcessUtility)
		prev_ProcessUtility(pstmt, queryString, readOnlyTree, context,
							params, queryEnv, dest, qc);
	else
		standard_ProcessUtility(pstmt, queryString, readOnlyTree, context,
								params, queryEnv, dest, qc);
}

/*
 * fencing_xact_callback
 *		Let each part drop its per-transaction state when a transaction
 *		ends, by commit, abort or prepare (transaction leases are given
 *		back then, where nothing may throw), and refuse to prepare one that
 *		has state that cannot follow it to COMMIT PREPARED.
 */
static void
fencing_xact_callback(XactEvent event, void *arg)
{
	switch (event)
	{
		case XACT_EVENT_PRE_PREPARE:
			fenced_lock_pre_prepare();
			declared_pre_prepare();
			break;
		case XACT_EVENT_COMMIT:
		case XACT_EVENT_PARALLEL_COMMIT:
		case XACT_EVENT_ABORT:
		case XACT_EVENT_PARALLEL_ABORT:
		case XACT_EVENT_PREPARE:
			fenced_lock_at_xact_end(event != XACT_EVENT_ABORT &&
									event != XACT_EVENT_PARALLEL_ABORT);
			declared_at_xact_end();
			marks_at_xact_end();
			guard_config_at_xact_end();
			guard_conflict_at_xact_end();
			stats_at_xact_end();
			merges_running = 0;
			loaded_in_portal = NULL;
			break;
		default:
			break;
	}
}

/*
 * _PG_init
 *		Register each part's callbacks and the executor hooks, and reserve
 *		the "fencing." prefix so that a misspelt setting is reported
 *		instead of silently kept as a placeholder.
 */
void
_PG_init(void)
{
	RegisterXactCallback(fencing_xact_callback, NULL);
	marks_init();
	guard_config_init();
	prev_ExecutorStart = ExecutorStart_hook;
	ExecutorStart_hook = fencing_ExecutorStart;
	prev_ExecutorEnd = ExecutorEnd_hook;
	ExecutorEnd_hook = fencing_ExecutorEnd;
	prev_ProcessUtility = ProcessUtility_hook;
	ProcessUtility_hook = fencing_ProcessUtility;
	fencing_note_load();
	guard_conflict_init();
	guard_views_init();
	redis_settings_init();
	fenced_settings_init();
	fenced_lock_init();
	stats_init();
	session_state_init();
	MarkGUCPrefixReserved("fencing");
}
