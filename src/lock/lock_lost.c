/*-------------------------------------------------------------------------
 *
 * lock_lost.c
 *	  on_lost => 'error': a statement run while a lease acquired with it is
 *	  lost fails (TF131).
 *
 *	  BEGIN;
 *	  SELECT fenced_acquire_xact('order:42', renew => true, on_lost => 'error');
 *	  ...		-- the renewer finds the lock taken: the next statement fails
 *
 * A lease is lost when fenced_lock_valid_until() would say NULL: the
 * renewer found its lock held by another owner, or its expiry by this
 * server's clock has passed (a renewal that failed, Redis unreachable,
 * moves nothing; a lease without renew runs out at its TTL).  The check
 * reads the session's leases and, preloaded, their slots in the shared
 * table, where the renewer writes; no round trip.  It runs before every
 * statement the executor starts (functions' statements included; the
 * executor hook below), every utility statement but transaction control,
 * and at COMMIT (pre-commit, so that the transaction is rolled back; both
 * from fencing.c's utility hook and transaction callback, which dispatch
 * to every part), and only while the session holds a lease acquired with
 * the option.
 *
 * Each lost lease fails one statement: the transaction it fails is
 * aborted (a transaction lease then ends with it), and a session that
 * carries on with a session lease must release it (fenced_release says
 * false).  Without preloading there is no renewer: a lease is then lost
 * only when its TTL has passed, and the check works all the same, the
 * hooks being installed when the library is loaded.
 *
 * IDENTIFICATION
 *	  src/lock/lock_lost.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "executor/executor.h"
#include "fencing_errcodes.h"
#include "lock/lock.h"
#include "lock/lock_int.h"
#include "utils/timestamp.h"

static ExecutorStart_hook_type prev_ExecutorStart = NULL;

/* Whether the session may hold a lease acquired with on_lost => 'error'. */
static bool watching = false;

/* A lease was acquired with on_lost => 'error': check from now on. */
void
lock_lost_watch(void)
{
	watching = true;
}

/*
 * fenced_lock_lost_check
 *		Fail if a lease acquired with on_lost => 'error' is lost and has
 *		not yet failed a statement.  Stops watching once the session holds
 *		no such lease.  Called before every statement the executor starts
 *		(here), and from fencing.c's utility hook and pre-commit callback.
 */
void
fenced_lock_lost_check(void)
{
	ResourceMapIterator iter;
	Lease	   *lease;
	Lease	   *lost = NULL;
	bool		taken = false;
	bool		any = false;
	TimestampTz now;

	if (!watching || leases == NULL)
		return;
	now = GetCurrentTimestamp();
	resource_map_iterate(leases, &iter);
	while ((lease = resource_map_next(&iter)) != NULL)
	{
		TimestampTz expires;

		if (!lease->held || !lease->on_lost_error || lease->lost_reported)
			continue;
		any = true;
		if (lost != NULL)
			continue;			/* the scan runs to its end */
		expires = lease->expires;
		lease_shmem_refresh(&lease->listing, &expires);
		if (lease_shmem_lost(&lease->listing))
			taken = true;
		else if (expires > now)
			continue;
		lost = lease;
	}
	watching = any;
	if (lost == NULL)
		return;
	lost->lost_reported = true;
	ereport(ERROR,
			(errcode(ERRCODE_FENCING_LOCK_LOST),
			 errmsg("lock on resource \"%s\" was lost", lost->key.resource),
			 taken ?
			 errdetail("The lease's renewal found the lock held by another owner.") :
			 errdetail("The lease ran out without renewal; Redis may have given the lock to another client since."),
			 errhint("The lock was acquired with on_lost => 'error'; its token " UINT64_FORMAT " may be stale.  Release it and acquire it again.",
					 (uint64) lost->token)));
}

static void
lost_ExecutorStart(QueryDesc *queryDesc, int eflags)
{
	if (!(eflags & EXEC_FLAG_EXPLAIN_ONLY))
		fenced_lock_lost_check();
	if (prev_ExecutorStart)
		prev_ExecutorStart(queryDesc, eflags);
	else
		standard_ExecutorStart(queryDesc, eflags);
}

/* Install the executor's check; from fenced_lock_init. */
void
lock_lost_init(void)
{
	prev_ExecutorStart = ExecutorStart_hook;
	ExecutorStart_hook = lost_ExecutorStart;
}
