/*-------------------------------------------------------------------------
 *
 * lock_acquire.c
 *	  The acquire protocol: one attempt, WAIT, give-back, the raise of the
 *	  mark, back-off and the wait loop, in which a waiter is woken on
 *	  release: its subscription to the release notices of a resource, and
 *	  its sleep.
 *
 * Each attempt is one round trip (lock_attempt.c); a busy lock is tried
 * again until the caller's deadline, when its release is announced
 * (below), or at its expiry, or after a back-off where no
 * announcement can be heard.
 *
 * An attempt that fails after it was sent may have taken the lock: its
 * owner is kept (lease_table.c).  A failure after the lock was taken gives
 * it back.
 *
 * The release script announces a lock it deleted on the resource's
 * channel (fenced_release_channel, lock_settings.c).  A waiter
 * subscribes on a second connection (redis_subscribe.c) after its first
 * attempt found the lock busy, by the acquisition's deadline, tries once
 * more (a release before the subscription was made would go unheard),
 * and then sleeps until a notice, the lock's PTTL, FENCED_WAKE_MAX_SLEEP
 * or its deadline, whichever comes first, and tries again.  The PTTL wake covers an
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
 *	  src/lock/lock_acquire.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "common/pg_prng.h"
#include "core/core.h"
#include "core/pg_compat.h"
#include "fencing_errcodes.h"
#include "guard/guard.h"
#include "lock/lock_int.h"
#include "marks/marks.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "redis/redis.h"
#include "stats/stats.h"
#include "storage/latch.h"
#include "tcop/utility.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

/* Back-off between attempts on a busy lock, in ms, before jitter. */
#define FENCED_BACKOFF_MIN			4
#define FENCED_BACKOFF_MAX			128

/*
 * Times an acquisition whose raise found the mark at or above its token
 * (recorded after the script read the mark) gives the lock back and tries
 * again; the next attempt's script reads the newer mark and repairs past
 * it.
 */
#define FENCED_RAISE_ROUNDS			3

/*
 * fenced_give_back
 *		Best effort, after an acquisition failed past taking the lock:
 *		release it, on a new connection if need be.  If that fails too, the
 *		owner is kept as an unknown owner, for the next acquisition or
 *		release of the resource to take over, and the TTL ends the lock
 *		meanwhile.
 *		Never an error of its own.
 */
static void
fenced_give_back(const char *resource, const char *lock_key,
				 const char *owner, int ttl_ms, bool xact)
{
	MemoryContext cxt = CurrentMemoryContext;
	const char *args[FENCED_NOTICE_NARGS + 1];
	volatile bool done = false;

	fenced_release_notice(lock_key, args);
	args[FENCED_NOTICE_NARGS] = owner;
	PG_TRY();
	{
		RedisValue *reply = redis_eval(&release_script, 1, &lock_key,
									   FENCED_NOTICE_NARGS + 1, args);

		done = reply->type == REDIS_VALUE_INTEGER;
	}
	PG_CATCH();
	{
		/*
		 * Swallowed: no lock, buffer or other backend resource is held
		 * across this call, and the connection was dropped on the way out.
		 * The caller reports the error that brought us here.
		 */
		MemoryContextSwitchTo(cxt);
		FlushErrorState();
	}
	PG_END_TRY();
	if (!done)
		lease_remember_unknown(resource, owner, ttl_ms, xact);
}
/*
 * fenced_wait_replicas
 *		WAIT for fencing.redis_wait_replicas replicas to have the lock and
 *		the token; if too few do in time, or WAIT fails, give the lock back
 *		and fail.
 *
 * WAIT must be its own command: inside a script it does not block (Redis
 * 7.0 and later).  It narrows the window in which a failover loses the
 * acquisition; it does not close it, and the high-water marks still guard
 * the writes.
 */
static void
fenced_wait_replicas(const char *resource, const char *lock_key,
					 const char *owner, int ttl_ms, bool xact)
{
	MemoryContext cxt = CurrentMemoryContext;
	char		replicas[12];
	char		timeout[12];
	const char *argv[3];
	long long	acked = 0;

	snprintf(replicas, sizeof(replicas), "%d", fencing_redis_wait_replicas);
	snprintf(timeout, sizeof(timeout), "%d", fencing_redis_wait_timeout);
	argv[0] = "WAIT";
	argv[1] = replicas;
	argv[2] = timeout;
	PG_TRY();
	{
		RedisValue *reply = redis_command(3, argv, fencing_redis_wait_timeout);

		if (reply->type == REDIS_VALUE_ERROR)
			redis_refused("WAIT", reply);
		if (reply->type != REDIS_VALUE_INTEGER)
			redis_unexpected("WAIT", "an integer", reply);
		acked = reply->integer;
	}
	PG_CATCH();
	{
		ErrorData  *edata;

		/*
		 * WAIT refused, timed out or lost its connection: the lock is ours
		 * all the same, and must go back.  Not on a cancel or a shutdown,
		 * which must act now: the owner is then kept for the next call.
		 */
		MemoryContextSwitchTo(cxt);
		edata = CopyErrorData();
		FlushErrorState();
		if (edata->sqlerrcode == ERRCODE_QUERY_CANCELED ||
			edata->sqlerrcode == ERRCODE_ADMIN_SHUTDOWN ||
			ProcDiePending)
			lease_remember_unknown(resource, owner, ttl_ms, xact);
		else
			fenced_give_back(resource, lock_key, owner, ttl_ms, xact);
		ReThrowError(edata);
	}
	PG_END_TRY();

	if (acked >= fencing_redis_wait_replicas)
		return;
	fenced_give_back(resource, lock_key, owner, ttl_ms, xact);
	ereport(ERROR,
			(errcode(ERRCODE_FENCING_REDIS_NOT_REPLICATED),
			 errmsg("only %lld of %d Redis replicas acknowledged the lock on resource \"%s\"",
					acked, fencing_redis_wait_replicas, resource),
			 errdetail("The lock was given back."),
			 errhint("Check the replicas of the Redis server; the number required is fencing.redis_wait_replicas, the wait fencing.redis_wait_timeout.")));
}
/*
 * fenced_backoff
 *		Sleep before the next attempt on a busy lock: "equal jitter" around
 *		an exponentially growing step, never past the lock's remaining TTL
 *		nor the caller's deadline.  The latch wakes us for interrupts, so
 *		statement_timeout and cancel end the wait.
 */
static void
fenced_backoff(int step, long long pttl, long remaining)
{
	long		delay;

	delay = step / 2 + (long) (pg_prng_double(&pg_global_prng_state) * (step - step / 2));
	if (pttl >= 0)
		delay = Min(delay, (long) pttl + 1);
	delay = Max(Min(delay, remaining), 1);

	(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
					 delay, fencing_wait_event(FENCING_WAIT_LOCK_BUSY));
	ResetLatch(MyLatch);
	CHECK_FOR_INTERRUPTS();
}
/*
 * fenced_record_token
 *		Make every token older than the one just issued under owner stale
 *		for resource from the acquisition on (doc/lock-failures.md, "Reads
 *		and the acquisition"): record it as the resource's floor for the
 *		calling transaction (marks_floor.c), which locks nothing, so that a
 *		holder stalled in its transaction does not keep this one waiting;
 *		where no floor can be recorded (no preloading, a full table), raise
 *		the mark in the calling transaction.
 *
 * If the mark, or a floor, is already at or above the token (a token
 * recorded since the script read the mark), or a raise finds the mark
 * held by an older writer's open transaction for longer than the
 * acquisition may wait, the lock is given back and the result says
 * which.  A failure leaves the owner with the transaction, which gives
 * the lock back when it aborts.
 */
static MarksAcquireResult
fenced_record_token(const char *resource, const char *lock_key,
					const char *owner, int ttl_ms, bool xact, FenceToken token,
					TimestampTz deadline)
{
	MarksAcquireResult result;

	PG_TRY();
	{
		FenceToken	mark;

		switch (marks_floor_record(resource, token, !xact))
		{
			case FLOOR_RECORDED:
				result = marks_read_newest(resource, &mark) && mark >= token ?
					MARKS_ACQUIRE_ABOVE : MARKS_ACQUIRE_RAISED;
				break;
			case FLOOR_ABOVE:
				result = MARKS_ACQUIRE_ABOVE;
				break;
			default:
				result = marks_raise_for_holder(resource, token, deadline);
				break;
		}
	}
	PG_CATCH();
	{
		xact_remember(resource, owner);
		PG_RE_THROW();
	}
	PG_END_TRY();
	if (result != MARKS_ACQUIRE_RAISED)
		fenced_give_back(resource, lock_key, owner, ttl_ms, xact);
	return result;
}

/*
 * fenced_take
 *		Attempt to take the lock on resource under owner until it is taken
 *		or the deadline has passed; true with *token set if it was taken,
 *		and *sent to when the attempt that took it was sent.  With a
 *		waiter, fair: a wait that ends without the lock, or is cancelled,
 *		leaves the queue.
 *
 * The lease is counted from the sending, not from the reply: Redis set
 * the key's expiry at some moment between the two, so a lease counted from
 * the reply could be believed held after Redis let it go.
 *
 * Each attempt runs in a memory context of its own, emptied before the
 * next: the longest wait allowed makes millions of attempts, and what one
 * allocates (the mark read, the arguments, the reply) is of no use after
 * it.
 */
static bool
fenced_take(const char *resource, const char *lock_key, const char *token_key,
			const char *owner, const char *waiter, int ttl_ms, Lease *lease,
			bool xact, TimestampTz deadline, FenceToken *token,
			TimestampTz *sent)
{
	MemoryContext cxt = CurrentMemoryContext;
	MemoryContext attempt_cxt;
	volatile bool taken = false;

	attempt_cxt = AllocSetContextCreate(cxt, "fencing attempt",
										ALLOCSET_SMALL_SIZES);
	fenced_attempt_start();
	PG_TRY();
	{
		FencedWake	wake;
		long long	pttl;
		int			step = FENCED_BACKOFF_MIN;

		fenced_wake_start(&wake, lock_key);
		MemoryContextSwitchTo(attempt_cxt);
		for (;;)
		{
			long		remaining;

			*sent = GetCurrentTimestamp();
			taken = fenced_try_acquire(resource, lock_key, token_key, owner,
									   waiter, ttl_ms, lease, token, &pttl);
			MemoryContextReset(attempt_cxt);
			if (taken)
				break;
			remaining = TimestampDifferenceMilliseconds(GetCurrentTimestamp(),
														deadline);
			if (remaining <= 0)
				break;
			if (fenced_wake_subscribe(&wake, deadline))
				continue;		/* a release before it went unheard */
			remaining = TimestampDifferenceMilliseconds(GetCurrentTimestamp(),
														deadline);
			if (remaining <= 0)
				break;			/* the subscription took the time left */
			if (fenced_wake_sleep(&wake, pttl, remaining))
				continue;
			fenced_backoff(step, pttl, remaining);
			step = Min(step * 2, FENCED_BACKOFF_MAX);
		}
	}
	PG_CATCH();
	{
		ErrorData  *edata;

		/*
		 * An attempt that may have reached Redis may have taken the lock:
		 * its owner is kept for the next acquisition or release of the
		 * resource to take over, or for the transaction's end to give
		 * back.  Nothing is kept for one that did not.  The subscription
		 * goes with the wait.
		 */
		fenced_wake_end();
		MemoryContextSwitchTo(cxt);
		MemoryContextDelete(attempt_cxt);
		edata = CopyErrorData();
		if (fenced_attempt_may_have_run(edata))
			lease_remember_unknown(resource, owner, ttl_ms, xact);

		/*
		 * A fair wait cancelled (statement_timeout, a cancel request)
		 * leaves the queue before the error is reported, so that those
		 * behind need not wait for the waiter's timeout.  Other errors
		 * (Redis unreachable, most often) leave it to that timeout rather
		 * than delay their report by another call.
		 */
		if (waiter != NULL && edata->sqlerrcode == ERRCODE_QUERY_CANCELED)
		{
			FlushErrorState();
			fenced_leave_queue(lock_key, waiter);
			ReThrowError(edata);
		}
		FreeErrorData(edata);
		PG_RE_THROW();
	}
	PG_END_TRY();
	fenced_wake_end();
	MemoryContextSwitchTo(cxt);
	MemoryContextDelete(attempt_cxt);
	if (!taken && waiter != NULL)
		fenced_leave_queue(lock_key, waiter);
	return taken;
}

/*
 * The raise at acquisition writes the marks table, which a read-only
 * transaction or a standby cannot: refuse there, before Redis is asked for
 * a lock whose token could not be recorded.
 */
static void
fenced_prevent_read_only(void)
{
	PreventCommandIfReadOnly("fenced_acquire()");
	PreventCommandIfParallelMode("fenced_acquire()");
	PreventCommandDuringRecovery("fenced_acquire()");
}

/* One call of fenced_acquire or fenced_acquire_xact, through its steps. */
typedef struct Acquisition
{
	const char *resource;
	char	   *lock_key;
	char	   *token_key;
	int			ttl_ms;
	bool		xact;
	bool		renew;			/* renewed while its owner works */
	int			max_hold_ms;	/* renewed no longer after acquisition */
	bool		on_lost_error;	/* fail the next statement once lost */
	char	   *waiter;			/* fair: its place in the queue; else NULL */
	Lease	   *lease;			/* the session's entry of resource, if any */
	bool		had_xact_lease; /* the transaction holds it already */
	TimestampTz started;
	TimestampTz deadline;
	TimestampTz sent;			/* the attempt that took the lock */
	char		owner[FENCED_OWNER_LEN];
	FenceToken	token;
} Acquisition;

/*
 * acquire_begin
 *		Check that the acquisition may be made, before Redis is asked.
 *
 * A lock is held for the session or for a transaction, never both: the
 * one would end the other's lease, or outlive it, behind its back.  The
 * raise writes the marks table: refuse where it cannot be written.
 */
static void
acquire_begin(Acquisition *a, const char *resource,
			  const FencedAcquireOptions *opts)
{
	bool		xact = opts->xact;

	a->resource = resource;
	a->lock_key = fenced_keys(resource, &a->token_key);
	a->ttl_ms = opts->ttl_ms;
	a->xact = xact;
	a->renew = opts->renew;
	a->max_hold_ms = opts->max_hold_ms;
	a->on_lost_error = opts->on_lost_error;
	a->waiter = NULL;
	if (opts->fair)
	{
		/* one place in the queue for every round of the acquisition */
		a->waiter = palloc(FENCED_OWNER_LEN);
		fenced_make_owner(a->waiter);
	}
	a->lease = lease_lookup(resource);
	a->token = 0;
	if (a->lease != NULL && a->lease->held && a->lease->xact != xact)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 xact ?
				 errmsg("resource \"%s\" is already locked by this session with fenced_acquire()",
						resource) :
				 errmsg("resource \"%s\" is already locked by this transaction with fenced_acquire_xact()",
						resource),
				 errdetail("A lock is held either for the session or for a transaction, not both."),
				 errhint("Release it with fenced_release() first.")));
	a->had_xact_lease = a->lease != NULL && a->lease->held && a->lease->xact;
	if (fencing_acquire_raises_mark)
		fenced_prevent_read_only();
	lease_release_register_exit();
	redis_script_prepare(&release_script);
	lease_shmem_reserve(a->lease ? &a->lease->listing : NULL, opts->renew);
	a->started = GetCurrentTimestamp();
	a->deadline = TimestampTzPlusMilliseconds(a->started, opts->wait_ms);
}

/*
 * acquire_rounds
 *		Take the lock and a token, have the replicas acknowledge it, raise
 *		the mark to it; true if all of that was done by the deadline.
 *
 * A raise that finds the mark at or above the token (recorded after the
 * script read the mark) gives the lock back, and the next round's script
 * reads the newer mark and repairs past it.
 */
static bool
acquire_rounds(Acquisition *a)
{
	int			round;

	for (round = 0;; round++)
	{
		MarksAcquireResult raised;

		fenced_make_owner(a->owner);
		if (!fenced_take(a->resource, a->lock_key, a->token_key, a->owner,
						 a->waiter, a->ttl_ms, a->lease, a->xact, a->deadline,
						 &a->token, &a->sent))
			return false;
		if (fencing_redis_wait_replicas > 0)
			fenced_wait_replicas(a->resource, a->lock_key, a->owner,
								 a->ttl_ms, a->xact);
		if (!fencing_acquire_raises_mark)
			return true;
		raised = fenced_record_token(a->resource, a->lock_key, a->owner,
								   a->ttl_ms, a->xact, a->token, a->deadline);
		if (raised == MARKS_ACQUIRE_RAISED)
			return true;

		/* The lock was given back; an earlier lease taken over went too. */
		if (a->lease != NULL && a->lease->held)
			lease_end(a->lease);
		if (raised == MARKS_ACQUIRE_BUSY || round >= FENCED_RAISE_ROUNDS)
			return false;
	}
}

/* List the new lease in the shared table of lock holders. */
static void
acquire_list(Acquisition *a, Lease *lease)
{
	LeaseListed listed;

	listed.resource = a->resource;
	listed.owner = a->owner;
	listed.token = a->token;
	listed.xact = a->xact;
	listed.acquired = lease->acquired;
	listed.expires = lease->expires;
	listed.ttl_ms = a->ttl_ms;
	listed.renew = a->renew;
	listed.max_hold_ms = a->max_hold_ms;
	listed.declared = false;
	lease_shmem_publish(&lease->listing, &listed);
}

/*
 * acquire_record
 *		Keep the new lease, with the transaction's part of it, and declare
 *		its token for the session or the transaction.
 */
static void
acquire_record(Acquisition *a)
{
	Lease	   *lease = lease_enter(a->resource);

	if (a->xact && lease->lapsed)
		lease_end(lease);		/* its session declaration ends with it */
	if (a->xact && !a->had_xact_lease)
		xact_note_resource(a->resource);
	if (!a->xact && fencing_acquire_raises_mark)
		xact_note_session_acquired(a->resource, a->owner);
	lease_release_note_sub(a->resource, a->owner);
	lease->held = true;
	lease->xact = a->xact;
	lease->lapsed = false;
	lease->token = a->token;
	/* both from the sending of the attempt that took it: see fenced_take */
	lease->acquired = a->sent;
	lease->expires = TimestampTzPlusMilliseconds(a->sent, a->ttl_ms);
	strlcpy(lease->owner, a->owner, FENCED_OWNER_LEN);
	lease->on_lost_error = a->on_lost_error;
	lease->lost_reported = false;
	if (a->on_lost_error)
		lock_lost_watch();
	lease_unknown_clear(lease);
	acquire_list(a, lease);
	declared_set(a->resource, a->token, a->xact);
	leases_prune(GetCurrentTimestamp());
}

/*
 * fenced_acquire_lease
 *		Take the lock on resource for ttl_ms and a new token, declared for
 *		the session or, with xact, the transaction; false if the lock is
 *		still busy after wait_ms.  With renew, the renewer extends it while
 *		its owner works (lease_renewer.c), up to max_hold_ms after the
 *		acquisition.  With fair, in turn among fair waiters; with
 *		on_lost_error, watched by lock_lost.c.
 */
bool
fenced_acquire_lease(const char *resource, const FencedAcquireOptions *opts,
					 FenceToken *token)
{
	Acquisition a;

	acquire_begin(&a, resource, opts);
	if (!acquire_rounds(&a))
	{
		stats_redis_count(STATS_REDIS_BUSY);
		return false;
	}
	acquire_record(&a);
	stats_redis_acquired(a.started);
	*token = a.token;
	return true;
}


/* The longest sleep on a busy lock between two attempts, in ms. */
#define FENCED_WAKE_MAX_SLEEP		1000

/* The first pause before subscribing again, in ms; it doubles. */
#define FENCED_WAKE_RETRY_MS		200

/* The subscriptions failed or lost after which an acquisition polls. */
#define FENCED_WAKE_MAX_FAILURES	3

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
