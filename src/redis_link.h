/*-------------------------------------------------------------------------
 *
 * redis_link.h
 *	  One authenticated connection to a Redis server: open (connect, AUTH,
 *	  SELECT), exchange, close.
 *
 * IDENTIFICATION
 *	  src/redis_link.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef REDIS_LINK_H
#define REDIS_LINK_H

#ifdef USE_HIREDIS
#include "redis_hostport.h"
#include "redis_io.h"

/* A connection; all zero when closed. */
typedef struct RedisLink
{
	RedisSocket sock;
	char		host[REDIS_HOSTPORT_MAX_HOST + 1];	/* or a socket path */
	int			port;
	uint64		generation;		/* redis_settings_generation when opened */
	bool		ready;			/* connected, authenticated, selected */
} RedisLink;

extern bool redis_link_open(RedisLink *link, const char *host, int port,
							const RedisBudget *budget, RedisError *err);
extern bool redis_link_is_open(const RedisLink *link);
extern bool redis_link_usable(const RedisLink *link);
extern bool redis_link_sent(const RedisLink *link);
extern const char *redis_link_target(const RedisLink *link);
extern RedisValue *redis_link_exchange(RedisLink *link, int argc,
									   const char **argv,
									   const RedisBudget *budget,
									   RedisError *err);
extern bool redis_link_exchange_many(RedisLink *link, int ncommands,
									 const int *argc, const char ***argv,
									 RedisValue **replies,
									 const RedisBudget *budget,
									 RedisError *err);
extern void redis_link_close(RedisLink *link);

extern const char *redis_value_describe(const RedisValue *v);
extern bool redis_unexpected_reply(RedisError *err, const char *target,
								   const char *command, const char *expected,
								   const RedisValue *got);
#endif

#endif							/* REDIS_LINK_H */
