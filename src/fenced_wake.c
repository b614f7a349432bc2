/*-------------------------------------------------------------------------
 *
 * fenced_wake.c
 *	  Waiters woken on release: the release notice of a resource, and a
 *	  waiter's subscription and sleep.
 *
 * The release script announces a lock it deleted on the resource's
 * channel, the lock key followed by ":released", the lock key in braces
 * if it has no {tag} (so that the channel is in the lock key's hash
 * slot): SPUBLISH in Cluster mode, where a shard channel stays within the
 * slot's shard, PUBLISH otherwise.  A waiter subscribes on a second
 * connection (redis_subscribe.c) after its first attempt found the lock
 * busy, by the acquisition's deadline, tries once more (a release before
 * the subscription was made would go unheard), and then sleeps until a
 * notice, the lock's PTTL, FENCED_WAKE_MAX_SLEEP or its deadline,
 * whichever comes first, and tries again.  The PTTL wake covers an
 * expiry, which nobody announces, and any notice missed; the longest
 * sleep covers locks released by other clients of a shared key layout,
 * which announce nothing.
 *
 * A subscription that is refused (an ACL without the channel, a server
 * without SSUBSCRIBE) leaves the waiter polling, as
 * fencing.lock_wait_wakeup = 'poll' does; one that cannot be made or is
 * lost (a failover, a slot moved) is made again after
 * FENCED_WAKE_RETRY_MS, then twice that, polling in between, and after
 * the server of the data connection changed; after
 * FENCED_WAKE_MAX_FAILURES such failures the acquisition polls to its
 * end, rather than open connections to a server that takes none (each
 * counts against its maxclients).  The connection is closed once the
 * acquisition ends, taken or not, and on the way out of an error.
 *
 * IDENTIFICATION
 *	  src/fenced_wake.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "fenced_settings.h"
#include "fenced_wake.h"
#include "miscadmin.h"
#include "redis/redis.h"
#include "utils/timestamp.h"

/* The longest sleep on a busy lock between two attempts, in ms. */
#define FENCED_WAKE_MAX_SLEEP		1000

/* The first pause before subscribing again, in ms; it doubles. */
#define FENCED_WAKE_RETRY_MS		200

/* The subscriptions failed or lost after which an acquisition polls. */
#define FENCED_WAKE_MAX_FAILURES	3

/*
 * The channel of the release notices of the lock at lock_key: in its hash
 * slot, which is the slot of its {tag}, or of the whole key without one.
 */
static char *
fenced_release_channel(const char *lock_key)
{
	const char *open = strchr(lock_key, '{');
	const char *close = open != NULL ? strchr(open, '}') : NULL;

	if (close != NULL && close > open + 1)
		return psprintf("%s:released", lock_key);
	return psprintf("{%s}:released", lock_key);
}

/*
 * A subscription that could not be made or was lost: the next one after a
 * pause that doubles each time, or none in this acquisition.
 */
static void
fenced_wake_failed(FencedWake *wake)
{
	if (++wake->failures >= FENCED_WAKE_MAX_FAILURES)
		wake->refused = true;
	else
		wake->retry_at = TimestampTzPlusMilliseconds(GetCurrentTimestamp(),
													 FENCED_WAKE_RETRY_MS << (wake->failures - 1));
}

/*
 * fenced_release_notice
 *		Into args[0] and args[1], the release script's arguments that name
 *		the command and channel of its notice.
 */
void
fenced_release_notice(const char *lock_key, const char **args)
{
	args[0] = redis_cluster_enabled() ? "SPUBLISH" : "PUBLISH";
	args[1] = fenced_release_channel(lock_key);
}

/* Start the waits of one acquisition of the lock at lock_key. */
void
fenced_wake_start(FencedWake *wake, const char *lock_key)
{
	wake->channel = fenced_release_channel(lock_key);
	wake->refused = fencing_lock_wait_wakeup == FENCED_WAKEUP_POLL;
	wake->retry_at = 0;
	wake->failures = 0;
}

/*
 * fenced_wake_subscribe
 *		Subscribe to the lock's notices if not yet subscribed, and if a
 *		subscription may be tried now, by the deadline; true if it was
 *		just made, and the caller must try the lock again before it sleeps.
 */
bool
fenced_wake_subscribe(FencedWake *wake, TimestampTz deadline)
{
	TimestampTz now;

	if (redis_subscribed() && !redis_subscribed_to_last_server())
		redis_subscribe_close();
	if (redis_subscribed() || wake->refused)
		return false;
	now = GetCurrentTimestamp();
	if (now < wake->retry_at)
		return false;
	switch (redis_subscribe(wake->channel, deadline))
	{
		case REDIS_SUBSCRIBE_OK:
			return true;
		case REDIS_SUBSCRIBE_REFUSED:
			wake->refused = true;
			break;
		case REDIS_SUBSCRIBE_UNREACHABLE:
			fenced_wake_failed(wake);
			break;
	}
	return false;
}

/*
 * fenced_wake_sleep
 *		Sleep until the lock's release notice, its PTTL or the deadline
 *		(remaining ms); false, without sleeping, if there is no
 *		subscription to sleep on.
 */
bool
fenced_wake_sleep(FencedWake *wake, long long pttl, long remaining)
{
	long		timeout = Min(remaining, FENCED_WAKE_MAX_SLEEP);

	if (!redis_subscribed())
		return false;
	if (pttl >= 0)
		timeout = Min(timeout, (long) pttl + 1);
	if (redis_subscribe_wait(Max(timeout, 1)) == REDIS_WAKE_LOST)
		fenced_wake_failed(wake);
	CHECK_FOR_INTERRUPTS();
	return true;
}

/* Close the subscription, if any.  Safe in error cleanup. */
void
fenced_wake_end(void)
{
	redis_subscribe_close();
}
