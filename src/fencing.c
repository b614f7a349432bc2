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

#include "declared.h"
#include "fence_guard.h"
#include "fenced_lock.h"
#include "fmgr.h"
#include "marks.h"
#include "redis_conn.h"
#include "utils/guc.h"

PG_MODULE_MAGIC;

void		_PG_init(void);

/*
 * _PG_init
 *		Register each part's callbacks, and reserve the "fencing." prefix
 *		so that a misspelt setting is reported instead of silently kept as
 *		a placeholder.
 */
void
_PG_init(void)
{
	declared_init();
	marks_init();
	fence_guard_init();
	redis_conn_init();
	fenced_lock_init();
	MarkGUCPrefixReserved("fencing");
}
