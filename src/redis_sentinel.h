/*-------------------------------------------------------------------------
 *
 * redis_sentinel.h
 *	  Redis Sentinel discovery: which server is the primary now.
 *
 * Only the connection module (redis_conn.c) uses this; nothing above it
 * knows whether the server it talks to was named by a setting or by the
 * Sentinels.
 *
 * IDENTIFICATION
 *	  src/redis_sentinel.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef REDIS_SENTINEL_H
#define REDIS_SENTINEL_H

#include "datatype/timestamp.h"
#include "redis_conn.h"

extern void redis_sentinel_init(void);
extern bool redis_sentinel_enabled(void);
extern const char *redis_sentinel_master_name(void);

#ifdef USE_HIREDIS
extern char *redis_sentinel_resolve(TimestampTz deadline, int connect_timeout_ms,
									 int command_timeout_ms, bool interruptible,
									 int *port, RedisError *err);
extern void redis_sentinel_distrust(void);
extern bool redis_sentinel_switched(void);
extern void redis_sentinel_unwatch(void);
#endif

#endif							/* REDIS_SENTINEL_H */
