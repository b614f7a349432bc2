/*-------------------------------------------------------------------------
 *
 * lease_table.c
 *	  What this session holds, or may hold, in Redis: its leases, and the
 *	  owner strings of attempts whose outcome is unknown.
 *
 * Unknown outcomes.  When a command fails after it was sent (timeout,
 * lost connection, cancel), it may still have run.  The owner string of
 * such an attempt is kept with the resource, and the next acquisition of
 * it by this session passes it to the script, which takes over a lock
 * still held under it instead of waiting for it to expire; a release
 * deletes it too.  Each owner string is unique -- the system identifier,
 * the PID, a per-backend counter and a random part -- so this can only
 * ever take over this session's own locks.  Nothing is kept for a call
 * that never reached Redis, and what is kept is bounded
 * (FENCED_MAX_UNKNOWN_OWNERS per resource, FENCED_MAX_UNKNOWN_RESOURCES),
 * so that no failure grows the session's memory without end.
 *
 * Owners of unknown-outcome attempts of a transaction lease are kept with
 * the transaction (xact_unknown) and given back when it ends, never kept
 * for the session's later calls, which may be another client's.  They are
 * bounded the same way, so that a transaction that retries a failing
 * acquisition in a loop of EXCEPTION blocks keeps at most
 * FENCED_MAX_UNKNOWN_OWNERS owners per resource, on at most
 * FENCED_MAX_UNKNOWN_RESOURCES resources: beyond, an owner is not kept,
 * and the lock its attempt may have taken ends at its ttl.
 *
 * IDENTIFICATION
 *	  src/lock/lease_table.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "guard/guard.h"
#include "lock/lock_int.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

/*
 * Unknown-outcome owners are kept on at most FENCED_MAX_UNKNOWN_RESOURCES
 * resources.  When one more resource would pass that, the owners whose
 * locks have surely expired go, then those of the resources whose locks
 * expire soonest, down to FENCED_KEEP_UNKNOWN_RESOURCES.
 */
#define FENCED_MAX_UNKNOWN_RESOURCES	1024
#define FENCED_KEEP_UNKNOWN_RESOURCES	768

/*
 * Beyond this many entries, an acquisition prunes leases expired for
 * FENCED_PRUNE_GRACE; the next pruning waits until the map has doubled.
 */
#define FENCED_PRUNE_THRESHOLD		1024
#define FENCED_PRUNE_GRACE			1000	/* ms after expiry */

ResourceMap *leases = NULL;
static long leases_prune_at = FENCED_PRUNE_THRESHOLD;
static int	leases_unknown = 0; /* entries with unknown owners */

/* The transaction's lists live in xact_cxt, reset when it ends. */
static MemoryContext xact_cxt = NULL;
List	   *xact_resources = NIL;
ResourceMap *xact_unknown = NULL;
List	   *xact_session_acquired = NIL;

/* The entry of resource, made if need be. */
Lease *
lease_enter(const char *resource)
{
	bool		found;

	if (leases == NULL)
	{
		MemoryContext cxt = AllocSetContextCreate(TopMemoryContext,
												  "fencing leases",
												  ALLOCSET_SMALL_SIZES);

		leases = resource_map_create("fencing leases", sizeof(Lease), cxt);
	}
	/* a new entry is zeroed: not held, no unknown owners */
	return resource_map_enter(leases, resource, &found);
}

Lease *
lease_lookup(const char *resource)
{
	return leases ? resource_map_lookup(leases, resource) : NULL;
}

/* Forget every unknown owner of an entry. */
void
lease_unknown_clear(Lease *lease)
{
	if (lease->nunknown > 0)
		leases_unknown--;
	lease->nunknown = 0;
}

/* Remove an entry. */
void
lease_remove(Lease *lease)
{
	lease_shmem_unpublish(&lease->listing);
	lease_unknown_clear(lease);
	if (lease->unknown != NULL)
		pfree(lease->unknown);
	resource_map_remove(leases, lease->key.resource);
}

/* Remove an entry if nothing is left in it. */
void
lease_forget_if_empty(Lease *lease)
{
	if (!lease->held && !lease->lapsed && lease->nunknown == 0)
		lease_remove(lease);
}

/* Order entries by when their unknown owners' locks expire. */
static int
lease_cmp_unknown_until(const void *a, const void *b)
{
	TimestampTz x = (*(Lease *const *) a)->unknown_until;
	TimestampTz y = (*(Lease *const *) b)->unknown_until;

	return x < y ? -1 : x > y ? 1 : 0;
}

/*
 * leases_limit_unknown
 *		Keep the unknown-outcome owners of at most
 *		FENCED_MAX_UNKNOWN_RESOURCES resources, sparing keep's (about to get
 *		one more).
 *
 * A forgotten owner's lock, if its attempt took one, is left to expire:
 * this session no longer takes it over nor deletes it, exactly as if the
 * attempt had been made by another session.  Those whose locks have
 * surely expired go first, then those that expire soonest.
 */
static void
leases_limit_unknown(Lease *keep, TimestampTz now)
{
	ResourceMapIterator iter;
	Lease	   *lease;
	Lease	  **victims;
	int			n = 0;
	int			i;

	if (leases_unknown < FENCED_MAX_UNKNOWN_RESOURCES)
		return;
	victims = palloc(sizeof(Lease *) * leases_unknown);
	resource_map_iterate(leases, &iter);
	while ((lease = resource_map_next(&iter)) != NULL)
		if (lease->nunknown > 0 && lease != keep && n < leases_unknown)
			victims[n++] = lease;
	qsort(victims, n, sizeof(Lease *), lease_cmp_unknown_until);
	for (i = 0; i < n; i++)
	{
		if (leases_unknown <= FENCED_KEEP_UNKNOWN_RESOURCES &&
			TimestampTzPlusMilliseconds(victims[i]->unknown_until,
										FENCED_PRUNE_GRACE) >= now)
			break;
		lease_unknown_clear(victims[i]);
		lease_forget_if_empty(victims[i]);
	}
	pfree(victims);
}

/*
 * Remember an owner whose attempt may have taken the lock, which would
 * expire by until.
 */
void
lease_unknown_add(Lease *lease, const char *owner, TimestampTz until)
{
	TimestampTz now = GetCurrentTimestamp();
	int			i;

	if (lease->unknown == NULL)
		lease->unknown = MemoryContextAlloc(resource_map_context(leases),
											sizeof(*lease->unknown) * FENCED_MAX_UNKNOWN_OWNERS);
	if (lease->nunknown == 0)
	{
		leases_limit_unknown(lease, now);
		leases_unknown++;
		lease->unknown_until = until;
	}
	else
		lease->unknown_until = Max(lease->unknown_until, until);
	for (i = 0; i < lease->nunknown; i++)
		if (strcmp(lease->unknown[i], owner) == 0)
			return;
	if (lease->nunknown == FENCED_MAX_UNKNOWN_OWNERS)
	{
		/* drop the oldest; its lock has most likely expired by now */
		memmove(lease->unknown[0], lease->unknown[1],
				sizeof(lease->unknown[0]) * (FENCED_MAX_UNKNOWN_OWNERS - 1));
		lease->nunknown--;
	}
	strlcpy(lease->unknown[lease->nunknown++], owner, FENCED_OWNER_LEN);
}

/* The context of the transaction's part, made on first use. */
static MemoryContext
xact_context(void)
{
	if (xact_cxt == NULL)
		xact_cxt = AllocSetContextCreate(TopMemoryContext,
										 "fencing transaction leases",
										 ALLOCSET_SMALL_SIZES);
	return xact_cxt;
}

/* Append an owner on resource to a list of the transaction's. */
static List *
xact_owner_append(List *list, const char *resource, const char *owner)
{
	MemoryContext old;
	XactOwner  *x;

	old = MemoryContextSwitchTo(xact_context());
	x = palloc(sizeof(XactOwner));
	x->resource = pstrdup(resource);
	strlcpy(x->owner, owner, FENCED_OWNER_LEN);
	list = lappend(list, x);
	MemoryContextSwitchTo(old);
	return list;
}

/*
 * xact_remember
 *		Note an owner the current transaction gives back when it ends: that
 *		of an attempt whose outcome is unknown, or of a transaction lease
 *		whose release failed.
 */
void
xact_remember(const char *resource, const char *owner)
{
	XactUnknown *x;
	bool		found;
	int			i;

	if (xact_unknown == NULL)
		xact_unknown = resource_map_create("fencing transaction unknown owners",
										   sizeof(XactUnknown), xact_context());
	x = resource_map_lookup(xact_unknown, resource);
	if (x == NULL)
	{
		if (resource_map_count(xact_unknown) >= FENCED_MAX_UNKNOWN_RESOURCES)
			return;
		x = resource_map_enter(xact_unknown, resource, &found);
	}
	for (i = 0; i < x->nunknown; i++)
		if (strcmp(x->unknown[i], owner) == 0)
			return;
	if (x->nunknown == FENCED_MAX_UNKNOWN_OWNERS)
	{
		/* drop the oldest; its lock has most likely expired by now */
		memmove(x->unknown[0], x->unknown[1],
				sizeof(x->unknown[0]) * (FENCED_MAX_UNKNOWN_OWNERS - 1));
		x->nunknown--;
	}
	strlcpy(x->unknown[x->nunknown++], owner, FENCED_OWNER_LEN);
}

/* Note a resource the transaction took a transaction lease on. */
void
xact_note_resource(const char *resource)
{
	MemoryContext old;

	old = MemoryContextSwitchTo(xact_context());
	xact_resources = lappend(xact_resources, pstrdup(resource));
	MemoryContextSwitchTo(old);
}

/*
 * Note a session lease the transaction acquired with a raise of the mark:
 * if it aborts, the raise is undone, and a token the marks have no record
 * of must not stay with a holder, so the lease is given back too.
 */
void
xact_note_session_acquired(const char *resource, const char *owner)
{
	xact_session_acquired = xact_owner_append(xact_session_acquired,
											  resource, owner);
}

/* Forget the transaction's part. */
void
xact_forget(void)
{
	xact_resources = NIL;
	xact_unknown = NULL;		/* in xact_cxt */
	xact_session_acquired = NIL;
	if (xact_cxt != NULL)
		MemoryContextReset(xact_cxt);
}

/*
 * lease_remember_unknown
 *		An attempt under owner was sent and not answered: it may have taken
 *		the lock on resource for ttl_ms.  A session attempt's owner is kept
 *		for the session's next acquisition or release of the resource; a
 *		transaction's is given back when the transaction ends.
 */
void
lease_remember_unknown(const char *resource, const char *owner, int ttl_ms,
					   bool xact)
{
	if (xact)
		xact_remember(resource, owner);
	else
		lease_unknown_add(lease_enter(resource), owner,
						  TimestampTzPlusMilliseconds(GetCurrentTimestamp(), ttl_ms));
}

/*
 * lease_end
 *		The lease on resource is over: withdraw the declaration of its
 *		token (the session's, or the transaction's for a transaction
 *		lease), unless something else has been declared since.
 */
void
lease_end(Lease *lease)
{
	FenceToken	declared;

	if ((lease->held || lease->lapsed) &&
		declared_get(lease->key.resource, lease->xact, &declared) &&
		declared == lease->token)
		declared_clear(lease->key.resource, lease->xact);
	lease_shmem_unpublish(&lease->listing);
	lease->held = false;
	lease->lapsed = false;
	lease->xact = false;
}

/*
 * leases_prune
 *		Keep the map of a session that acquires many resources and lets
 *		them expire from growing without bound.
 *
 * A lease Redis has surely expired (by our clock, with a margin) would make
 * fenced_release and fenced_extend say false anyway: its bookkeeping goes.
 * Its declared token stays, as it would for a lease kept until release,
 * and so does the entry, lapsed, while that token is declared, so that
 * fenced_release still withdraws it; the declaration itself takes as much
 * memory.  Transaction leases are left alone: they end with it.  Unknown
 * owners whose locks have surely expired go too.  Each pruning scans the
 * map, so the next one waits until the map has doubled, which keeps the
 * cost per acquisition constant.
 */
void
leases_prune(TimestampTz now)
{
	ResourceMapIterator iter;
	Lease	   *lease;

	if (resource_map_count(leases) < leases_prune_at)
		return;
	resource_map_iterate(leases, &iter);
	while ((lease = resource_map_next(&iter)) != NULL)
	{
		FenceToken	declared;

		if (lease->nunknown > 0 &&
			TimestampTzPlusMilliseconds(lease->unknown_until, FENCED_PRUNE_GRACE) < now)
			lease_unknown_clear(lease);
		if (lease->held && !lease->xact)
			lease_shmem_refresh(&lease->listing, &lease->expires);
		if (lease->held && !lease->xact &&
			TimestampTzPlusMilliseconds(lease->expires, FENCED_PRUNE_GRACE) < now)
		{
			lease_shmem_unpublish(&lease->listing);
			lease->held = false;
			lease->lapsed = true;
		}
		if (lease->lapsed &&
			!(declared_get(lease->key.resource, false, &declared) &&
			  declared == lease->token))
			lease->lapsed = false;
		lease_forget_if_empty(lease);
	}
	leases_prune_at = Max(FENCED_PRUNE_THRESHOLD,
						  2 * resource_map_count(leases));
}

/*
 * Take every lease out of the shared table, and give back the slot kept
 * for the next: before the releases of DISCARD ALL and exit are sent.
 */
void
leases_unlist_all(void)
{
	ResourceMapIterator iter;
	Lease	   *lease;

	if (leases != NULL)
	{
		resource_map_iterate(leases, &iter);
		while ((lease = resource_map_next(&iter)) != NULL)
			lease_shmem_unpublish(&lease->listing);
	}
	lease_shmem_free_reserved();
}

/* Forget every entry (DISCARD ALL, after their releases were sent). */
void
leases_forget_all(void)
{
	if (leases == NULL)
		return;
	/* the map and its unknown-owner slots live in a context of its own */
	MemoryContextDelete(resource_map_context(leases));
	leases = NULL;
	leases_prune_at = FENCED_PRUNE_THRESHOLD;
	leases_unknown = 0;
}
