/*-------------------------------------------------------------------------
 *
 * lease_release.h
 *	  Lock releases sent where nothing may throw (the hooks themselves are
 *	  in fenced_lock.h).
 *
 * IDENTIFICATION
 *	  src/lease_release.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef LEASE_RELEASE_H
#define LEASE_RELEASE_H

#include "redis/redis.h"

extern RedisScript release_script;

extern void lease_release_register_exit(void);
extern void lease_release_at_xact_end(bool commit);
extern void lease_release_pre_prepare(void);
extern void lease_release_discard_all(void);

#endif							/* LEASE_RELEASE_H */
