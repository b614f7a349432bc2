/*-------------------------------------------------------------------------
 *
 * guard_views.h
 *	  A DEFAULT on a view's column over a guard's token column.
 *
 * IDENTIFICATION
 *	  src/guard_views.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef GUARD_VIEWS_H
#define GUARD_VIEWS_H

extern void guard_views_init(void);

#endif							/* GUARD_VIEWS_H */
