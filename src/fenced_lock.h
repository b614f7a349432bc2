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
extern void fenced_lock_at_xact_end(bool commit);
extern void fenced_lock_pre_prepare(void);
extern void fenced_lock_discard_all(void);

#endif							/* FENCED_LOCK_H */
