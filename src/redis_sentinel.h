/*-------------------------------------------------------------------------
 *
 * redis_sentinel.h
 *	  Redis Sentinel discovery: which server is the primary now.
 *
 * Only the public API (redis_conn.c) uses this; nothing above it knows
 * whether the server it talks to was named by a setting or by the
 * Sentinels.
 *
 * IDENTIFICATION
 *	  src/redis_sentinel.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef REDIS_SENTINEL_H
#define REDIS_SENTINEL_H

#ifdef USE_HIREDIS
#include "redis_link.h"

extern bool redis_sentinel_connect(RedisLink *link, const RedisBudget *outer,
								   RedisError *err);
extern bool redis_sentinel_switched(void);
extern void redis_sentinel_unwatch(void);
#endif

#endif							/* REDIS_SENTINEL_H */
