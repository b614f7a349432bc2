/*-------------------------------------------------------------------------
 *
 * redis_subscribe.h
 *	  A subscriber connection: a second link, to the server that ran the
 *	  last command, subscribed to one channel, and the wait for a message.
 *
 * IDENTIFICATION
 *	  src/redis_subscribe.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef REDIS_SUBSCRIBE_H
#define REDIS_SUBSCRIBE_H

#ifdef USE_HIREDIS
#include "datatype/timestamp.h"

/* How a wait on the subscriber connection ended. */
typedef enum RedisSubscribeWake
{
	REDIS_WAKE_MESSAGE,			/* a message on the channel */
	REDIS_WAKE_TIMEOUT,			/* the time passed */
	REDIS_WAKE_LOST				/* the subscription is gone: closed */
} RedisSubscribeWake;

/* Why a subscription could not be made. */
typedef enum RedisSubscribeFailure
{
	REDIS_SUBSCRIBE_OK,
	REDIS_SUBSCRIBE_UNREACHABLE,	/* no connection: try again later */
	REDIS_SUBSCRIBE_REFUSED		/* the server said no (ACL, no such command) */
} RedisSubscribeFailure;

extern RedisSubscribeFailure redis_subscribe(const char *channel,
											 TimestampTz deadline);
extern bool redis_subscribed(void);
extern bool redis_subscribed_to_last_server(void);
extern RedisSubscribeWake redis_subscribe_wait(long timeout_ms);
extern void redis_subscribe_close(void);
#endif

#endif							/* REDIS_SUBSCRIBE_H */
