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

#include "fmgr.h"
#include "utils/guc.h"

PG_MODULE_MAGIC;

void		_PG_init(void);

/*
 * _PG_init
 *		Reserve the "fencing." prefix, so that a misspelt setting is
 *		reported instead of silently kept as a placeholder.
 */
void
_PG_init(void)
{
	MarkGUCPrefixReserved("fencing");
}
