/*-------------------------------------------------------------------------
 *
 * redis_cluster_map.h
 *	  Redis Cluster: hash slots of keys, and the map of which primary
 *	  serves which slot.
 *
 * Only the routing module (redis_cluster.c) uses this.
 *
 * IDENTIFICATION
 *	  src/redis_cluster_map.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef REDIS_CLUSTER_MAP_H
#define REDIS_CLUSTER_MAP_H

#include "redis_hostport.h"

#define REDIS_CLUSTER_SLOTS		16384

extern int	redis_cluster_key_slot(const char *key, size_t len);

#ifdef USE_HIREDIS
#include "redis_io.h"

extern const RedisHostPort *redis_cluster_node_of(int slot);
extern void redis_cluster_set_slot(int slot, const char *host, int port);
extern void redis_cluster_forget_map(bool keep_nodes);
extern bool redis_cluster_load_map(const RedisValue *slots,
								   const char *queried_host,
								   const char **why);
extern int	redis_cluster_candidates(RedisHostPort *nodes, int max);
#endif

#endif							/* REDIS_CLUSTER_MAP_H */
