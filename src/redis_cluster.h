/*-------------------------------------------------------------------------
 *
 * redis_cluster.h
 *	  Redis Cluster: a link per node, each command routed to the primary
 *	  of its keys' slot, redirects followed.
 *
 * Only the public API (redis_conn.c) uses this; nothing above it knows
 * that the keys of a call may be served by different servers.
 *
 * IDENTIFICATION
 *	  src/redis_cluster.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef REDIS_CLUSTER_H
#define REDIS_CLUSTER_H

#ifdef USE_HIREDIS
#include "redis_link.h"

extern RedisValue *redis_cluster_send(int argc, const char **argv,
									  const RedisBudget *outer,
									  long command_ms, RedisError *err);
extern RedisLink *redis_cluster_active(void);
extern void redis_cluster_close_all(void);
#endif

#endif							/* REDIS_CLUSTER_H */
