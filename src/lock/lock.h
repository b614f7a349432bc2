/*-------------------------------------------------------------------------
 *
 * lock.h
 *	  The public face of the lock layer, fenced_acquire() and friends
 *	  (locks and tokens from Redis), for the module's init: its settings
 *	  (the Redis client's with them), and what ends with a transaction or
 *	  at DISCARD ALL.  The lock layer is the one user of src/redis/, and
 *	  may use every layer below it.
 *
 * IDENTIFICATION
 *	  src/lock/lock.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef FENCING_LOCK_LOCK_H
#define FENCING_LOCK_LOCK_H

extern void fenced_settings_init(void);
extern void fenced_lock_init(void);
extern void fenced_lock_at_xact_end(bool commit);
extern void fenced_lock_pre_prepare(void);
extern void fenced_lock_discard_all(void);
extern void fenced_lock_lost_check(void);

#endif							/* FENCING_LOCK_LOCK_H */
