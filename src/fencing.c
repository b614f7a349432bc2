/*-------------------------------------------------------------------------
 *
 * fencing.c
 *	  Module entry point of the fencing extension: it wires every layer
 *	  (doc/internals.md), registering each one's settings and hooks, and
 *	  the transaction and DISCARD ALL hooks that end declarations and
 *	  leases.
 *
 * IDENTIFICATION
 *	  src/fencing.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "core/pg_compat.h"
#include "fmgr.h"
#include "guard/guard.h"
#include "lock/lock.h"
#include "marks/marks.h"
#include "stats/stats.h"
#include "tcop/utility.h"
#include "utils/guc.h"

PG_MODULE_MAGIC;

void		_PG_init(void);

static ProcessUtility_hook_type prev_ProcessUtility = NULL;

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

	/* on_lost => 'error': transaction control is left to pre-commit */
	if (!IsA(parsetree, TransactionStmt))
		fenced_lock_lost_check();
	if (IsA(parsetree, DiscardStmt) &&
		((DiscardStmt *) parsetree)->target == DISCARD_ALL)
	{
		PreventInTransactionBlock(context == PROCESS_UTILITY_TOPLEVEL,
								  "DISCARD ALL");
		fenced_lock_discard_all();
		declared_discard_all();
	}
	/* DDL refuses a table this session has open: the marks table too. */
	marks_kept_close();
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
		case XACT_EVENT_PRE_COMMIT:
			/* a lease lost under on_lost => 'error' rolls it back */
			fenced_lock_lost_check();
			break;
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
			guard_merges_at_xact_end();
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
	guard_merges_init();
	prev_ProcessUtility = ProcessUtility_hook;
	ProcessUtility_hook = fencing_ProcessUtility;
	guard_conflict_init();
	guard_views_init();
	fenced_settings_init();
	fenced_lock_init();
	stats_init();
	session_state_init();
	MarkGUCPrefixReserved("fencing");
}
