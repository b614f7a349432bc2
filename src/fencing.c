/*-------------------------------------------------------------------------
 *
 * fencing.c
 *	  Module entry point of the fencing extension.
 *
 * IDENTIFICATION
 *	  src/fencing.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "declared.h"
#include "fence_guard.h"
#include "fenced_lock.h"
#include "fmgr.h"
#include "marks.h"
#include "redis_settings.h"
#include "utils/guc.h"

PG_MODULE_MAGIC;

void		_PG_init(void);

/*
 * fencing_xact_callback
 *		Let each part drop its per-transaction state when a transaction
 *		ends, by commit, abort or prepare.
 */
static void
fencing_xact_callback(XactEvent event, void *arg)
{
	switch (event)
	{
		case XACT_EVENT_COMMIT:
		case XACT_EVENT_PARALLEL_COMMIT:
		case XACT_EVENT_ABORT:
		case XACT_EVENT_PARALLEL_ABORT:
		case XACT_EVENT_PREPARE:
			declared_at_xact_end();
			marks_at_xact_end();
			fence_guard_at_xact_end();
			break;
		default:
			break;
	}
}

/*
 * _PG_init
 *		Register each part's callbacks, and reserve the "fencing." prefix
 *		so that a misspelt setting is reported instead of silently kept as
 *		a placeholder.
 */
void
_PG_init(void)
{
	RegisterXactCallback(fencing_xact_callback, NULL);
	marks_init();
	fence_guard_init();
	redis_settings_init();
	fenced_lock_init();
	MarkGUCPrefixReserved("fencing");
}
