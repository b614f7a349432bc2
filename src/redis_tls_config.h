/*-------------------------------------------------------------------------
 *
 * redis_tls_config.h
 *	  The TLS configuration of every Redis connection (fencing.redis_tls*).
 *
 * IDENTIFICATION
 *	  src/redis_tls_config.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef REDIS_TLS_CONFIG_H
#define REDIS_TLS_CONFIG_H

#ifdef USE_HIREDIS
#include "redis_error.h"

struct ssl_st;

extern bool redis_tls_wanted(const char *host);
extern bool redis_tls_begin(struct ssl_st **ssl, int fd, const char *host,
							const char *target, RedisError *err);
extern char *redis_tls_queued_error(void);
#endif

#endif							/* REDIS_TLS_CONFIG_H */
