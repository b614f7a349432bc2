/*-------------------------------------------------------------------------
 *
 * redis_hostport.h
 *	  Lists of host:port, as fencing.redis_sentinels and
 *	  fencing.redis_cluster_nodes take them, and the checks of the
 *	  addresses servers hand out.
 *
 * IDENTIFICATION
 *	  src/redis_hostport.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef REDIS_HOSTPORT_H
#define REDIS_HOSTPORT_H

#include "utils/guc.h"

#define REDIS_MAX_HOSTPORTS			16
#define REDIS_HOSTPORT_MAX_HOST		253

/* One entry of a list: a host name, an IPv4 or IPv6 address, and a port. */
typedef struct RedisHostPort
{
	char		host[REDIS_HOSTPORT_MAX_HOST + 1];
	int			port;
} RedisHostPort;

extern bool redis_parse_hostports(const char *list, RedisHostPort *addrs,
								  int *naddrs, const char **why);
extern bool redis_check_discovered(const char *host, int port,
								   bool allow_names, const char **why);
extern void redis_format_target(char *buf, size_t size, const char *host,
								int port);
extern bool check_redis_hostport_list(char **newval, void **extra,
									  GucSource source);

#endif							/* REDIS_HOSTPORT_H */
