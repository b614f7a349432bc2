/*-------------------------------------------------------------------------
 *
 * redis_cluster.h
 *	  Redis Cluster: hash slots of keys, and the map of which primary
 *	  serves which slot.
 *
 * Only the connection module (redis_conn.c) uses this; nothing above it
 * knows that the keys of a call may be served by different servers.
 *
 * IDENTIFICATION
 *	  src/redis_cluster.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef REDIS_CLUSTER_H
#define REDIS_CLUSTER_H

#include "redis_hostport.h"

#define REDIS_CLUSTER_SLOTS		16384

extern void redis_cluster_init(void);
extern bool redis_cluster_enabled(void);
extern int	redis_cluster_key_slot(const char *key, size_t len);

#ifdef USE_HIREDIS
#include "redis_conn.h"

extern const RedisHostPort *redis_cluster_node_of(int slot);
extern void redis_cluster_set_slot(int slot, const char *host, int port);
extern bool redis_cluster_map_stale(void);
extern void redis_cluster_forget_map(bool keep_nodes);
extern bool redis_cluster_load_map(const RedisValue *slots,
								   const char *queried_host,
								   const char **why);
extern int	redis_cluster_candidates(RedisHostPort *nodes, int max);
#endif

#endif							/* REDIS_CLUSTER_H */
