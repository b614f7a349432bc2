/*-------------------------------------------------------------------------
 *
 * fence_guard.h
 *	  The fence_guard() trigger.
 *
 * IDENTIFICATION
 *	  src/fence_guard.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef FENCE_GUARD_H
#define FENCE_GUARD_H

extern void fence_guard_init(void);
extern void fence_guard_at_xact_end(void);

#endif							/* FENCE_GUARD_H */
