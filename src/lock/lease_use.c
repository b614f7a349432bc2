/*-------------------------------------------------------------------------
 *
 * lease_use.c
 *	  Leases for tokens from any lock service (issue 31, part 4):
 *	  fence_use(resource, token, is_local, lease) declares the token, as
 *	  declared.c's fence_use does, and with a lease lists it in the shared
 *	  table of leases (lease_shmem.c), ending lease after the call by this
 *	  server's clock, where the takeover (lease_takeover.c) finds it.
 *
 * The takeover then treats the holder as it treats one of fenced_acquire:
 * a newer holder of the resource whose write waits for this holder's
 * transaction ends it once the lease has ended by our clock (plus the
 * takeover's margin).  The lock service cannot be asked here: the newer,
 * higher token declared for the resource is the proof that the lock moved
 * on.  Without a lease, or without the library preloaded (no shared
 * table), or with the table full, nothing is listed and no one is ended:
 * the holder is waited for, as in 1.2.
 *
 * A backend lists one lease per resource.  It ends when fence_use is
 * called again for the resource (with a lease, a new one is listed), with
 * the transaction for is_local, at DISCARD ALL, and at exit.
 *
 * IDENTIFICATION
 *	  src/lock/lease_use.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "core/core.h"
#include "fmgr.h"
#include "guard/guard.h"
#include "lock/lock_int.h"
#include "storage/ipc.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

typedef struct UseLease
{
	ResourceMapKey key;
	bool		xact;			/* ends with the transaction */
	LeaseListing listing;
} UseLease;

/* This backend's listed leases of fence_use(), NULL before the first. */
static ResourceMap *use_leases = NULL;

PG_FUNCTION_INFO_V1(fence_use_lease);

/* Take the lease of resource, if listed, out of the shared table. */
static void
use_lease_end(const char *resource)
{
	UseLease   *u;

	if (use_leases == NULL ||
		(u = resource_map_lookup(use_leases, resource)) == NULL)
		return;
	lease_shmem_unpublish(&u->listing);
	resource_map_remove(use_leases, resource);
}

/* End the listed leases, every one or with xact_only the transaction's. */
static void
use_leases_end(bool xact_only)
{
	ResourceMapIterator iter;
	UseLease   *u;
	List	   *ended = NIL;
	ListCell   *lc;

	if (use_leases == NULL)
		return;
	resource_map_iterate(use_leases, &iter);
	while ((u = resource_map_next(&iter)) != NULL)
		if (u->xact || !xact_only)
			ended = lappend(ended, u->key.resource);
	foreach(lc, ended)
		use_lease_end(lfirst(lc));
	list_free(ended);
}

/* At exit: the slots of the session's leases go back. */
static void
use_leases_at_exit(int code, Datum arg)
{
	use_leases_end(false);
}

/*
 * use_leases_at_xact_end
 *		The transaction-local leases end with the transaction; called when
 *		it ends, whichever way.  Never an error.
 */
void
use_leases_at_xact_end(void)
{
	use_leases_end(true);
}

/*
 * use_leases_forget_all
 *		DISCARD ALL: every lease of fence_use ends with its declaration.
 */
void
use_leases_forget_all(void)
{
	use_leases_end(false);
}

/* List a lease of lease_ms from now on resource at token. */
static void
use_lease_list(const char *resource, FenceToken token, bool xact,
			   int lease_ms)
{
	UseLease   *u;
	LeaseListed listed = {0};
	bool		found;

	if (!lease_shmem_enabled())
		return;
	if (use_leases == NULL)
	{
		MemoryContext cxt = AllocSetContextCreate(TopMemoryContext,
												  "fencing fence_use leases",
												  ALLOCSET_SMALL_SIZES);

		use_leases = resource_map_create("fencing fence_use leases",
										 sizeof(UseLease), cxt);
		before_shmem_exit(use_leases_at_exit, (Datum) 0);
	}
	u = resource_map_enter(use_leases, resource, &found);
	u->xact = xact;
	u->listing.slot = 0;
	u->listing.generation = 0;
	lease_shmem_reserve(NULL, false);
	listed.resource = resource;
	listed.owner = "";
	listed.token = token;
	listed.xact = xact;
	listed.acquired = GetCurrentTimestamp();
	listed.expires = TimestampTzPlusMilliseconds(listed.acquired, lease_ms);
	listed.ttl_ms = lease_ms;
	listed.declared = true;
	lease_shmem_publish(&u->listing, &listed);
	if (u->listing.slot == 0)
		resource_map_remove(use_leases, resource);	/* table full */
}

/*
 * use_lease_newer_holder
 *		Whether this backend declared newer for resource (fence_use, an
 *		acquisition): a newer holder, for the takeover.
 */
bool
use_lease_newer_holder(const char *resource, FenceToken newer)
{
	FenceToken	declared;

	return declared_lookup(resource, &declared) && declared == newer;
}

/*
 * fence_use(resource text, token fence_token, is_local boolean,
 *			 lease interval)
 *		Declare the token, as declared.c's fence_use; with lease, the
 *		holder's lease ends that long after the call by this server's clock
 *		(see the header).
 */
Datum
fence_use_lease(PG_FUNCTION_ARGS)
{
	bool		has_token;
	FenceToken	token;
	bool		is_local;
	char	   *resource = declared_use_args(fcinfo, &has_token, &token,
											 &is_local);
	int			lease_ms = fenced_use_lease_arg(fcinfo, 3, has_token);

	declared_use(resource, has_token, token, is_local);
	use_lease_end(resource);
	if (lease_ms > 0)
		use_lease_list(resource, token, is_local, lease_ms);
	PG_RETURN_VOID();
}
