/*-------------------------------------------------------------------------
 *
 * redis_subscribe.c
 *	  A subscriber connection: a second link, to the server that ran the
 *	  last command, subscribed to one channel, and the wait for a message.
 *
 * A connection in subscribed mode carries nothing else, so a backend that
 * waits for a message opens a second link for it, under the same settings
 * as the first (TLS, user and password, database): to the server the last
 * command went to, which is the primary the Sentinels named, or the
 * Cluster node that serves the command's slot.  In Cluster mode the
 * subscription is SSUBSCRIBE, a shard channel, whose messages stay within
 * the slot's shard; otherwise SUBSCRIBE.
 *
 * One subscription at a time in a backend.  The caller closes it after
 * its wait, and on the way out of an error (PG_CATCH), as the data links
 * are; a wait that fails closes it too, for the caller to subscribe again
 * (a failover, a slot moved: Redis then ends a shard subscription with
 * "sunsubscribe").  A subscription refused (an ACL without the channel, a
 * server without SSUBSCRIBE) is no error: the caller polls instead.
 *
 * IDENTIFICATION
 *	  src/redis/redis_subscribe.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "core/pg_compat.h"
#include "miscadmin.h"
#include "redis/redis.h"
#include "redis/redis_int.h"
#include "utils/timestamp.h"

#ifdef USE_HIREDIS

static RedisLink subscriber;

/* Whether a reply is a push of kind ("message", "ssubscribe"...). */
static bool
redis_push_is(const RedisValue *v, const char *kind)
{
	return v->type == REDIS_VALUE_ARRAY && v->nelements == 3 &&
		v->elements[0]->type == REDIS_VALUE_STRING &&
		strcmp(v->elements[0]->str, kind) == 0;
}

/*
 * redis_subscribe
 *		Open the subscriber connection to the server of the last command
 *		and subscribe it to channel, by the waiter's deadline (a server
 *		slow to accept or to answer must not make the wait outlast it);
 *		what went wrong if it could not be done, with nothing left open.
 *		Throws only for interrupts.
 */
RedisSubscribeFailure
redis_subscribe(const char *channel, TimestampTz deadline)
{
	bool		sharded = redis_cluster_enabled();
	const char *argv[2] = {sharded ? "SSUBSCRIBE" : "SUBSCRIBE", channel};
	long		left = TimestampDifferenceMilliseconds(GetCurrentTimestamp(),
													   deadline);
	RedisBudget outer = redis_budget_start(Max(left, 1), "the wait's deadline",
										   true);
	RedisBudget budget;
	RedisError	err = {0};
	RedisValue *reply;
	const char *host;
	int			port;

	redis_subscribe_close();
	if (!redis_last_server(&host, &port) ||
		!redis_link_open(&subscriber, host, port, &outer, &err))
		return REDIS_SUBSCRIBE_UNREACHABLE;
	budget = redis_budget_within(&outer, redis_command_timeout,
								 "fencing.redis_command_timeout");
	reply = redis_link_exchange(&subscriber, 2, argv, &budget, &err);
	if (reply == NULL)
		return REDIS_SUBSCRIBE_UNREACHABLE;
	if (!redis_push_is(reply, sharded ? "ssubscribe" : "subscribe"))
	{
		redis_subscribe_close();
		return REDIS_SUBSCRIBE_REFUSED;
	}
	return REDIS_SUBSCRIBE_OK;
}

/* Whether the subscriber connection is open. */
bool
redis_subscribed(void)
{
	return redis_link_is_open(&subscriber);
}

/*
 * redis_subscribed_to_last_server
 *		Whether the subscription is on the server of the last command: not
 *		after a failover, nor after the slot moved to another node.
 */
bool
redis_subscribed_to_last_server(void)
{
	const char *host;
	int			port;

	return redis_last_server(&host, &port) && port == subscriber.port &&
		strcmp(host, subscriber.host) == 0;
}

/*
 * redis_subscribe_await
 *		Sleep until the subscriber connection has something to read,
 *		unasked (a message, or the server closing it), or until end; false
 *		at end.  Cancel, statement_timeout and termination are served at
 *		once (an error, for the caller to close the connection).  The wait
 *		shows as FencingLockBusy, as the back-off between attempts does.
 */
static bool
redis_subscribe_await(TimestampTz end)
{
	RedisSocket *s = &subscriber.sock;

	for (;;)
	{
		WaitEvent	event;
		long		remaining;

		CHECK_FOR_INTERRUPTS();
		if (redis_io_stale(s))
			return true;
		remaining = TimestampDifferenceMilliseconds(GetCurrentTimestamp(), end);
		if (remaining <= 0)
			return false;
		if (s->wes_io != WL_SOCKET_READABLE)
		{
			ModifyWaitEvent(s->wes, REDIS_WES_SOCKET_POS, WL_SOCKET_READABLE, NULL);
			s->wes_io = WL_SOCKET_READABLE;
		}
		if (WaitEventSetWait(s->wes, remaining, &event, 1,
							 fencing_wait_event(FENCING_WAIT_LOCK_BUSY)) > 0 &&
			(event.events & WL_LATCH_SET))
			ResetLatch(MyLatch);
	}
}

/*
 * redis_subscribe_wait
 *		Sleep until a message arrives on the subscription or timeout_ms
 *		have passed.  Any other push than a message, or a connection that
 *		fails, ends the subscription.
 *
 * The messages already there when the first is read are read too, all of
 * them making one wake: the releases announced while the waiter was
 * trying are behind it, and a waiter woken once for each would send as
 * many commands as the lock has releases.
 */
RedisSubscribeWake
redis_subscribe_wait(long timeout_ms)
{
	RedisBudget budget;
	RedisError	err = {0};
	RedisValue *push;

	Assert(redis_subscribed());
	if (!redis_subscribe_await(TimestampTzPlusMilliseconds(GetCurrentTimestamp(),
														   timeout_ms)))
		return REDIS_WAKE_TIMEOUT;
	budget = redis_budget_start(redis_command_timeout,
								"fencing.redis_command_timeout", true);
	do
	{
		if (!redis_io_read(&subscriber.sock, &push, &budget, false, &err) ||
			!(redis_push_is(push, "message") || redis_push_is(push, "smessage")))
		{
			redis_subscribe_close();
			return REDIS_WAKE_LOST;
		}
	} while (redis_io_stale(&subscriber.sock));
	return REDIS_WAKE_MESSAGE;
}

/* Close the subscriber connection, if open.  Safe in error cleanup. */
void
redis_subscribe_close(void)
{
	redis_link_close(&subscriber);
}

#endif							/* USE_HIREDIS */
