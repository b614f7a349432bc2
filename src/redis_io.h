/*-------------------------------------------------------------------------
 *
 * redis_io.h
 *	  The transport of every Redis connection: one socket, its waits, one
 *	  capped exchange of commands and replies, and the replies copied out
 *	  of hiredis.
 *
 * Data connections, Sentinels, Cluster nodes and the Sentinel watch all
 * go through here, so that they all get the same non-blocking connect,
 * the same interruptible waits, the same TLS (fencing.redis_tls) and
 * the same caps on what a server may send.  Nothing here knows about AUTH, SELECT or which server to use.
 *
 * IDENTIFICATION
 *	  src/redis_io.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef REDIS_IO_H
#define REDIS_IO_H

#include "redis_value.h"

#ifdef USE_HIREDIS
#include "redis_budget.h"
#include "redis_error.h"
#include "storage/latch.h"

/* Room for "[v6addr]:port" or a Unix socket path, for messages. */
#define REDIS_TARGET_LEN	272

/* One socket to a Redis server, Sentinel or node; all zero when closed. */
typedef struct RedisSocket
{
	struct redisContext *ctx;
	struct ssl_st *ssl;			/* TLS on the socket, or NULL */
	WaitEventSet *wes;			/* latch, postmaster death, socket */
	int			wes_io;			/* the socket event wes waits for */
	bool		fd_reserved;
	bool		in_flight;		/* commands sent, replies not all read */
	bool		sent;			/* the last exchange reached the socket */
	bool		answered;		/* a reply was read on this socket */
	size_t		max_bytes;		/* cap on one reply */
	char		target[REDIS_TARGET_LEN];	/* as messages name it */
} RedisSocket;

/* Position of the socket in wes (after latch, postmaster). */
#define REDIS_WES_SOCKET_POS 2

/* The cap on one reply's bytes on a data connection. */
#define REDIS_MAX_REPLY_BYTES		(32 * 1024 * 1024)

extern bool redis_io_connect(RedisSocket *s, const char *host, int port,
							 size_t max_bytes, const RedisBudget *budget,
							 RedisError *err);
extern bool redis_io_exchange(RedisSocket *s, int ncommands, const int *argc,
							  const char ***argv, RedisValue **replies,
							  const RedisBudget *budget, bool secret,
							  RedisError *err);
extern bool redis_io_read(RedisSocket *s, RedisValue **reply,
						  const RedisBudget *budget, bool secret,
						  RedisError *err);
extern bool redis_io_stale(const RedisSocket *s);
extern void redis_io_close(RedisSocket *s);
#endif

#endif							/* REDIS_IO_H */
