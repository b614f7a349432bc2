/*-------------------------------------------------------------------------
 *
 * guard_conflict.h
 *	  INSERT ... ON CONFLICT DO NOTHING and fencing.max_token_step.
 *
 * IDENTIFICATION
 *	  src/guard_conflict.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef GUARD_CONFLICT_H
#define GUARD_CONFLICT_H

#include "access/htup.h"
#include "fence_token.h"
#include "utils/relcache.h"

extern void guard_conflict_init(void);
extern void guard_conflict_at_xact_end(void);
extern FenceToken guard_max_token_step(void);
extern bool guard_do_nothing_running(void);
extern bool guard_row_conflicts(Relation rel, HeapTuple tuple);

#endif							/* GUARD_CONFLICT_H */
