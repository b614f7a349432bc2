/*-------------------------------------------------------------------------
 *
 * lease_release.c
 *	  Lock releases sent where nothing may throw: at the end of a
 *	  transaction, at DISCARD ALL, at backend exit.
 *
 * Transaction leases (fenced_acquire_xact) are declared for the
 * transaction only and given back when it ends, commit or abort, for
 * pooled connections where session state would pass to the next client.
 * That release runs where PostgreSQL allows no error and no cancel (after
 * commit, interrupts held): redis_commands_noerror, bounded by
 * fencing.redis_release_timeout, a failure being a WARNING and the lock
 * left to its TTL.  So do DISCARD ALL (a pooler's reset) for every lease
 * of the session, and backend exit, from a before_shmem_exit callback;
 * each sends its releases together, one pipeline within that time.
 *
 * IDENTIFICATION
 *	  src/lock/lease_release.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "lock/lock_int.h"
#include "lock/lock_scripts.h"
#include "redis/redis.h"
#include "storage/ipc.h"
#include "utils/memutils.h"

RedisScript release_script = {"fencing release script", FENCED_RELEASE_LUA, ""};

/* Releases being sent where nothing may throw; reset after each batch. */
static MemoryContext release_cxt = NULL;

static bool exit_registered = false;

/*
 * The resources of the releases that release_batch_post sent, whose
 * replies are not read yet, oldest first (in owed_cxt).
 */
static MemoryContext owed_cxt = NULL;
static List *owed = NIL;

/*
 * An acquisition made inside a subtransaction, given back if that
 * subtransaction is rolled back (in TopTransactionContext).
 */
typedef struct SubAcquired
{
	char	   *resource;
	char		owner[FENCED_OWNER_LEN];
	SubTransactionId subid;
} SubAcquired;

static List *sub_acquired = NIL;
static void fenced_lock_at_exit(int code, Datum arg);

/*
 * Releases sent together where nothing may throw: one EVALSHA of the
 * release script per resource (EVAL while its SHA1 is not known yet), with
 * the owners its lock may be held under; the ones a server refuses with
 * NOSCRIPT go again as EVAL.  Everything is in release_cxt.
 */
typedef struct ReleaseBatch
{
	int			n;
	int			size;
	const char **resources;
	int		   *argc;
	const char ***argv;
} ReleaseBatch;

/* Start an empty batch. */
static void
release_batch_init(ReleaseBatch *batch)
{
	if (release_cxt == NULL)
		release_cxt = AllocSetContextCreate(TopMemoryContext,
											"fencing releases",
											ALLOCSET_SMALL_SIZES);
	batch->n = 0;
	batch->size = 8;
	batch->resources = MemoryContextAlloc(release_cxt, sizeof(char *) * batch->size);
	batch->argc = MemoryContextAlloc(release_cxt, sizeof(int) * batch->size);
	batch->argv = MemoryContextAlloc(release_cxt, sizeof(char **) * batch->size);
}

/* Add the release of resource's lock if held under one of owners. */
static void
release_batch_add(ReleaseBatch *batch, const char *resource, int nowners,
				  const char *const *owners)
{
	MemoryContext old = MemoryContextSwitchTo(release_cxt);
	const char **argv = palloc(sizeof(char *) * (4 + FENCED_NOTICE_NARGS + nowners));
	int			nfixed = 4 + FENCED_NOTICE_NARGS;
	int			i;

	if (batch->n == batch->size)
	{
		batch->size *= 2;
		batch->resources = repalloc(batch->resources, sizeof(char *) * batch->size);
		batch->argc = repalloc(batch->argc, sizeof(int) * batch->size);
		batch->argv = repalloc(batch->argv, sizeof(char **) * batch->size);
	}
	/* the SHA1 is computed at acquisition, where an error may be thrown */
	if (release_script.sha[0] != '\0')
	{
		argv[0] = "EVALSHA";
		argv[1] = release_script.sha;
	}
	else
	{
		argv[0] = "EVAL";
		argv[1] = release_script.text;
	}
	argv[2] = "1";
	argv[3] = fenced_keys(resource, NULL);
	fenced_release_notice(argv[3], argv + 4);
	for (i = 0; i < nowners; i++)
		argv[nfixed + i] = pstrdup(owners[i]);
	batch->resources[batch->n] = pstrdup(resource);
	batch->argc[batch->n] = nfixed + nowners;
	batch->argv[batch->n] = argv;
	batch->n++;
	MemoryContextSwitchTo(old);
}

/*
 * Add the release of everything the session may hold of an entry, with
 * the transaction's unknown owners of the same resource, taken out of
 * xact_unknown: one release per resource, and one resource in a WARNING.
 */
static void
release_batch_add_lease(ReleaseBatch *batch, Lease *lease)
{
	const char *owners[1 + 2 * FENCED_MAX_UNKNOWN_OWNERS];
	XactUnknown *x = NULL;
	int			n = 0;
	int			i;

	if (lease->held)
		owners[n++] = lease->owner;
	for (i = 0; i < lease->nunknown; i++)
		owners[n++] = lease->unknown[i];
	if (xact_unknown != NULL)
		x = resource_map_lookup(xact_unknown, lease->key.resource);
	for (i = 0; x != NULL && i < x->nunknown; i++)
		owners[n++] = x->unknown[i];
	if (n > 0)
		release_batch_add(batch, lease->key.resource, n, owners);
	if (x != NULL)
		resource_map_remove(xact_unknown, lease->key.resource);
}

/*
 * release_batch_resend_unknown_script
 *		Send again, with EVAL and the script's text, the releases that the
 *		server refused with NOSCRIPT (its script cache emptied by a restart,
 *		a failover or SCRIPT FLUSH); such a release ran nothing.  Their
 *		replies replace the NOSCRIPT ones, whether or not the other
 *		releases got theirs (a Cluster node that failed), and within what
 *		is left of the first sending's budget: the whole takes at most
 *		fencing.redis_release_timeout.  A failure is left in *failure if
 *		there is none yet.
 */
static void
release_batch_resend_unknown_script(ReleaseBatch *batch, RedisValue **replies,
									const RedisBudget *budget, char **failure)
{
	int		   *which = palloc(sizeof(int) * batch->n);
	int		   *argc = palloc(sizeof(int) * batch->n);
	const char ***argv = palloc(sizeof(char **) * batch->n);
	RedisValue **again = palloc(sizeof(RedisValue *) * batch->n);
	char	   *again_failure;
	int			n = 0;
	int			i;

	for (i = 0; i < batch->n; i++)
	{
		if (replies[i] == NULL || replies[i]->type != REDIS_VALUE_ERROR ||
			strncmp(replies[i]->str, "NOSCRIPT", 8) != 0)
			continue;
		batch->argv[i][0] = "EVAL";
		batch->argv[i][1] = release_script.text;
		which[n] = i;
		argc[n] = batch->argc[i];
		argv[n] = batch->argv[i];
		n++;
	}
	if (n == 0)
		return;
	if (!redis_commands_noerror_within(budget, n, argc, argv, again,
									   &again_failure) && *failure == NULL)
		*failure = again_failure;
	for (i = 0; i < n; i++)
		replies[which[i]] = again[i];
}

/* What a release's reply that is not an integer means, for a WARNING. */
static char *
release_reply_failure(const RedisValue *reply)
{
	return reply->type == REDIS_VALUE_ERROR ?
		psprintf("The Redis server refused the %s: %s",
				 release_script.name, reply->str) :
		psprintf("The Redis server answered the %s with something other than an integer.",
				 release_script.name);
}

/* The WARNING of nfailed releases, first among them, that failed. */
static void
release_warn(int nfailed, const char *first, const char *failure)
{
	if (nfailed == 1)
		ereport(WARNING,
				(errmsg("could not release the Redis lock on resource \"%s\"",
						first),
				 errdetail_internal("%s", failure),
				 errhint("The lock expires at the end of its ttl.")));
	else if (nfailed > 1)
		ereport(WARNING,
				(errmsg("could not release the Redis locks on %d resources, \"%s\" among them",
						nfailed, first),
				 errdetail_internal("%s", failure),
				 errhint("The locks expire at the end of their ttl.")));
}

/*
 * release_batch_post
 *		Send the releases of a transaction's end, pipelined, without
 *		waiting for their replies, on the connection the acquisition used
 *		(single-server and Sentinel modes): with
 *		EVAL, so that no NOSCRIPT can refuse one that nobody would send
 *		again.  They are in the socket, whole, before COMMIT returns, and
 *		the server runs them before any later command of the session; their
 *		replies are read before its next command (release_owed_reply).
 *		Saves the commit the wait for the server's answer.  A failure to
 *		send them is one WARNING, as release_batch_send's.
 */
static void
release_batch_post(ReleaseBatch *batch)
{
	MemoryContext old;
	RedisBudget budget = redis_release_budget();
	char	   *failure;
	int			i;

	for (i = 0; i < batch->n; i++)
	{
		batch->argv[i][0] = "EVAL";
		batch->argv[i][1] = release_script.text;
	}
	old = MemoryContextSwitchTo(release_cxt);
	if (!redis_commands_post_noerror_within(&budget, batch->n, batch->argc,
											batch->argv, &failure))
	{
		MemoryContextSwitchTo(old);
		release_warn(batch->n, batch->resources[0], failure);
		MemoryContextReset(release_cxt);
		return;
	}
	if (owed_cxt == NULL)
		owed_cxt = AllocSetContextCreate(TopMemoryContext,
										 "fencing releases owed a reply",
										 ALLOCSET_SMALL_SIZES);
	MemoryContextSwitchTo(owed_cxt);
	for (i = 0; i < batch->n; i++)
		owed = lappend(owed, pstrdup(batch->resources[i]));
	MemoryContextSwitchTo(old);
	MemoryContextReset(release_cxt);
}

/*
 * release_owed_reply
 *		The reply to the oldest release that release_batch_post sent, read
 *		before the session's next Redis command (redis_owed_hook), or NULL
 *		if its connection closed first: the release was in the socket, and
 *		the lock, if not deleted, expires with its ttl.  A refusal is a
 *		WARNING then, naming the resource.  Must not throw on NULL (error
 *		cleanup closes connections).
 */
static void
release_owed_reply(const RedisValue *reply)
{
	char	   *resource;

	if (owed == NIL)
		return;
	resource = linitial(owed);
	owed = list_delete_first(owed);
	if (reply != NULL && reply->type != REDIS_VALUE_INTEGER)
		ereport(WARNING,
				(errmsg("could not release the Redis lock on resource \"%s\"",
						resource),
				 errdetail_internal("%s", release_reply_failure(reply)),
				 errhint("The release was sent when an earlier transaction of this session ended; the lock expires at the end of its ttl.")));
	pfree(resource);
	if (owed == NIL)
		MemoryContextReset(owed_cxt);
}

/*
 * release_batch_send
 *		Send the releases, pipelined, under one command timeout; a failure
 *		is one WARNING, never an error.  The batch is gone afterwards.
 *		With post, release_batch_post sends them where it can (on the open
 *		connection of an earlier call, outside Cluster mode).
 */
static void
release_batch_send(ReleaseBatch *batch, bool post)
{
	MemoryContext old;
	RedisBudget budget;
	RedisValue **replies;
	char	   *failure = NULL;
	const char *first = NULL;
	int			nfailed = 0;
	int			i;

	if (batch->n == 0)
	{
		MemoryContextReset(release_cxt);
		return;
	}
	if (post && redis_commands_post_ready())
	{
		release_batch_post(batch);
		return;
	}
	old = MemoryContextSwitchTo(release_cxt);
	replies = palloc(sizeof(RedisValue *) * batch->n);
	budget = redis_release_budget();
	(void) redis_commands_noerror_within(&budget, batch->n, batch->argc,
										 batch->argv, replies, &failure);
	release_batch_resend_unknown_script(batch, replies, &budget, &failure);
	for (i = 0; i < batch->n; i++)
	{
		if (replies[i] != NULL && replies[i]->type == REDIS_VALUE_INTEGER)
			continue;
		if (first == NULL)
			first = batch->resources[i];
		if (failure == NULL && replies[i] != NULL)
			failure = release_reply_failure(replies[i]);
		nfailed++;
	}
	MemoryContextSwitchTo(old);
	release_warn(nfailed, first, failure);
	MemoryContextReset(release_cxt);
}

/* Add the owners of the transaction's unknown-outcome attempts. */
static void
release_batch_add_xact_unknown(ReleaseBatch *batch)
{
	ResourceMapIterator iter;
	XactUnknown *x;

	if (xact_unknown == NULL)
		return;
	resource_map_iterate(xact_unknown, &iter);
	while ((x = resource_map_next(&iter)) != NULL)
	{
		const char *owners[FENCED_MAX_UNKNOWN_OWNERS];
		int			i;

		for (i = 0; i < x->nunknown; i++)
			owners[i] = x->unknown[i];
		release_batch_add(batch, x->key.resource, x->nunknown, owners);
	}
}

/*
 * lease_release_at_xact_end
 *		Give back the transaction's leases, and any lock its unknown-outcome
 *		attempts took; called when a transaction ends, whichever way, where
 *		nothing may throw.  The declarations of their tokens end with the
 *		transaction too (declared.c).
 */
void
lease_release_at_xact_end(bool commit)
{
	ReleaseBatch batch;
	ListCell   *lc;

	sub_acquired = NIL;			/* TopTransactionContext goes with it */
	if (xact_resources == NIL && xact_unknown == NULL &&
		(commit || xact_session_acquired == NIL))
	{
		xact_session_acquired = NIL;
		return;
	}
	release_batch_init(&batch);
	foreach(lc, commit ? NIL : xact_session_acquired)
	{
		XactOwner  *x = lfirst(lc);
		Lease	   *lease = lease_lookup(x->resource);

		if (lease == NULL || !lease->held || lease->xact ||
			strcmp(lease->owner, x->owner) != 0)
			continue;			/* released or taken again meanwhile */
		release_batch_add_lease(&batch, lease);
		lease_end(lease);
		lease_unknown_clear(lease);
		lease_forget_if_empty(lease);
	}
	foreach(lc, xact_resources)
	{
		Lease	   *lease = lease_lookup(lfirst(lc));

		if (lease == NULL || !lease->held || !lease->xact)
			continue;			/* released or lost meanwhile */
		lease_shmem_unpublish(&lease->listing);
		release_batch_add_lease(&batch, lease);
		lease->held = false;
		lease->xact = false;
		lease_unknown_clear(lease);
		lease_forget_if_empty(lease);
	}
	release_batch_add_xact_unknown(&batch);
	xact_forget();
	release_batch_send(&batch, true);
}

/*
 * lease_release_note_sub
 *		Note an acquisition under owner made inside a subtransaction: its
 *		lease ends, and its lock is given back, if the subtransaction is
 *		rolled back, as pg_advisory_xact_lock's lock is released with its
 *		savepoint.  The floor or the raise of the mark that fenced older
 *		holders out is undone by that rollback: a lock kept would let them
 *		in while its holder believes itself the only one.
 */
void
lease_release_note_sub(const char *resource, const char *owner)
{
	MemoryContext old;
	SubAcquired *x;

	if (GetCurrentTransactionNestLevel() <= 1)
		return;
	old = MemoryContextSwitchTo(TopTransactionContext);
	x = palloc(sizeof(SubAcquired));
	x->resource = pstrdup(resource);
	strlcpy(x->owner, owner, FENCED_OWNER_LEN);
	x->subid = GetCurrentSubTransactionId();
	sub_acquired = lappend(sub_acquired, x);
	MemoryContextSwitchTo(old);
}

/*
 * A committed subtransaction's acquisitions become its parent's; a
 * rolled-back one's leases end and their locks are given back, sent
 * together, where nothing may throw (as at the transaction's end).
 */
static void
lease_release_subxact_callback(SubXactEvent event, SubTransactionId mySubid,
							   SubTransactionId parentSubid, void *arg)
{
	ReleaseBatch batch;
	ListCell   *lc;
	bool		any = false;

	if (event != SUBXACT_EVENT_COMMIT_SUB && event != SUBXACT_EVENT_ABORT_SUB)
		return;
	foreach(lc, sub_acquired)
	{
		SubAcquired *x = lfirst(lc);
		Lease	   *lease;

		if (x->subid != mySubid)
			continue;
		if (event == SUBXACT_EVENT_COMMIT_SUB)
		{
			x->subid = parentSubid;
			continue;
		}
		sub_acquired = foreach_delete_current(sub_acquired, lc);
		lease = lease_lookup(x->resource);
		if (lease == NULL || !lease->held || strcmp(lease->owner, x->owner) != 0)
			continue;			/* released or taken again meanwhile */
		if (!any)
			release_batch_init(&batch);
		any = true;
		release_batch_add_lease(&batch, lease);
		lease_end(lease);
		lease_unknown_clear(lease);
		lease_forget_if_empty(lease);
	}
	if (any)
		release_batch_send(&batch, false);
}

/* Called from _PG_init. */
void
lease_release_init(void)
{
	RegisterSubXactCallback(lease_release_subxact_callback, NULL);
	redis_owed_hook = release_owed_reply;
}

/*
 * lease_release_pre_prepare
 *		Refuse to PREPARE a transaction that holds a transaction lease: its
 *		lock would have to outlive the transaction's end in this session,
 *		and COMMIT PREPARED may come from another.
 */
void
lease_release_pre_prepare(void)
{
	ListCell   *lc;

	foreach(lc, xact_resources)
	{
		Lease	   *lease = lease_lookup(lfirst(lc));

		if (lease != NULL && lease->held && lease->xact)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_TRANSACTION_STATE),
					 errmsg("cannot PREPARE a transaction that holds a Redis lock taken by fenced_acquire_xact()"),
					 errdetail("The lock on resource \"%s\" ends with the transaction, not with COMMIT PREPARED.",
							   lease->key.resource),
					 errhint("Release it with fenced_release() first, or take it with fenced_acquire().")));
	}
	if (xact_session_acquired != NIL)
	{
		XactOwner  *x = linitial(xact_session_acquired);

		ereport(ERROR,
				(errcode(ERRCODE_INVALID_TRANSACTION_STATE),
				 errmsg("cannot PREPARE a transaction that took a Redis lock with fenced_acquire()"),
				 errdetail("The acquisition raised the mark of resource \"%s\", and the lock must be given back if that raise is rolled back, which COMMIT PREPARED or ROLLBACK PREPARED would decide in another session.",
						   x->resource),
				 errhint("Take the lock before the transaction, or with fencing.acquire_raises_mark off.")));
	}
}

/*
 * fenced_lock_release_all
 *		Give back every lock the session holds or may hold, sent together;
 *		never an error.
 */
static void
fenced_lock_release_all(void)
{
	ReleaseBatch batch;
	ResourceMapIterator iter;
	Lease	   *lease;

	leases_unlist_all();
	if (leases == NULL && xact_unknown == NULL)
		return;
	release_batch_init(&batch);
	if (leases != NULL)
	{
		resource_map_iterate(leases, &iter);
		while ((lease = resource_map_next(&iter)) != NULL)
			release_batch_add_lease(&batch, lease);
	}
	release_batch_add_xact_unknown(&batch);
	xact_forget();
	release_batch_send(&batch, false);
}

/*
 * lease_release_discard_all
 *		DISCARD ALL: give back every lock of the session and forget every
 *		lease, so that the pooler's next client starts clean.  A failed
 *		release is a WARNING: the reset must succeed.
 */
void
lease_release_discard_all(void)
{
	fenced_lock_release_all();
	leases_forget_all();
}

/*
 * fenced_lock_at_exit
 *		Backend exit: give back every lock of the session, best effort,
 *		within one connect and one command timeout.
 */
static void
fenced_lock_at_exit(int code, Datum arg)
{
	fenced_lock_release_all();
}

/*
 * lease_release_register_exit
 *		Make backend exit give back the session's locks.  Called before the
 *		first acquisition: in a backend and after InitPostgres, so that it
 *		runs before ShutdownPostgres aborts an open transaction, and before
 *		the connection module's on_proc_exit callback closes the connection.
 */
void
lease_release_register_exit(void)
{
	if (exit_registered)
		return;
	before_shmem_exit(fenced_lock_at_exit, (Datum) 0);
	exit_registered = true;
}
