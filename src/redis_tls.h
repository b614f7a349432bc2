/*-------------------------------------------------------------------------
 *
 * redis_tls.h
 *	  TLS on a Redis socket: the handshake, writes and reads, driven on
 *	  the caller's waits, and the staleness check.
 *
 * IDENTIFICATION
 *	  src/redis_tls.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef REDIS_TLS_H
#define REDIS_TLS_H

#ifdef USE_HIREDIS
#include "redis_tls_config.h"

struct redisReader;

/*
 * Sleep until the socket is ready for event (WL_SOCKET_READABLE or
 * WL_SOCKET_WRITEABLE); false once the caller's deadline has passed.
 */
typedef bool (*RedisTlsWait) (void *arg, int event);

/* How a call ended; on REDIS_TLS_ERROR its RedisError says why. */
typedef enum RedisTlsOutcome
{
	REDIS_TLS_OK,
	REDIS_TLS_ERROR,
	REDIS_TLS_TIMEOUT
} RedisTlsOutcome;

extern RedisTlsOutcome redis_tls_connect(struct ssl_st *ssl,
										 RedisTlsWait wait, void *arg,
										 const char *target, RedisError *err);
extern RedisTlsOutcome redis_tls_send(struct ssl_st *ssl, int ncommands,
									  const int *argc, const char ***argv,
									  bool secret, bool *sent,
									  RedisTlsWait wait, void *arg,
									  const char *target, RedisError *err);
extern RedisTlsOutcome redis_tls_receive(struct ssl_st *ssl,
										 struct redisReader *reader,
										 size_t *nread, RedisTlsWait wait,
										 void *arg, const char *target,
										 RedisError *err);
extern bool redis_tls_stale(struct ssl_st *ssl);
extern void redis_tls_end(struct ssl_st **ssl);
#endif

#endif							/* REDIS_TLS_H */
