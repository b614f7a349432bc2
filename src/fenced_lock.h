/*-------------------------------------------------------------------------
 *
 * fenced_lock.h
 *	  fenced_acquire() and friends: locks and tokens from Redis.
 *
 * IDENTIFICATION
 *	  src/fenced_lock.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef FENCED_LOCK_H
#define FENCED_LOCK_H

extern void fenced_lock_init(void);

#endif							/* FENCED_LOCK_H */
