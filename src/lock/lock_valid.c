/*-------------------------------------------------------------------------
 *
 * lock_valid.c
 *	  fenced_lock_valid_until(resource): until when this session holds the
 *	  lock of resource as far as it knows, without asking Redis.
 *
 *	  SELECT fenced_lock_valid_until('order:42') > now() + '1 s';
 *
 * The answer is the lease's expiry by this server's clock, as
 * fenced_leases() shows it: from the session's table of leases, or, with
 * the library preloaded, from the lease's slot in the shared table, where
 * the renewer writes each renewal.  NULL when the session holds no lease
 * of resource, when that expiry has passed (a renewal that failed moves
 * nothing, so the lease runs out here as it runs out in Redis), or when
 * the renewer found the lock held by another owner: lost at once.  It is an estimate, not Redis's word: the
 * expiry of an acquisition is counted from when its reply was recorded,
 * and a lock deleted in Redis behind the session's back is not seen
 * (fenced_extend() asks Redis).
 *
 * IDENTIFICATION
 *	  src/lock/lock_valid.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "lock/lock_int.h"
#include "utils/timestamp.h"

PG_FUNCTION_INFO_V1(fenced_lock_valid_until);

/*
 * fenced_lock_valid_until(resource text) returns timestamptz
 *
 * See the header.  No round trip, and nothing is written.
 */
Datum
fenced_lock_valid_until(PG_FUNCTION_ARGS)
{
	char	   *resource = fenced_resource_arg(fcinfo);
	Lease	   *lease = lease_lookup(resource);
	TimestampTz expires;

	if (lease == NULL || !lease->held)
		PG_RETURN_NULL();
	expires = lease->expires;
	lease_shmem_refresh(&lease->listing, &expires);
	if (expires <= GetCurrentTimestamp() || lease_shmem_lost(&lease->listing))
		PG_RETURN_NULL();
	PG_RETURN_TIMESTAMPTZ(expires);
}
