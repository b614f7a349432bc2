/*-------------------------------------------------------------------------
 *
 * lock_nohiredis.c
 *	  The SQL functions of locks and tokens from Redis in a build without
 *	  hiredis (make WITH_HIREDIS=0): each checks its arguments, as the
 *	  build with Redis does, and then says Redis support is not built.
 *
 * The Makefile builds this file instead of lock.c and the lease
 * layer.  Without Redis no lease is ever taken: there is nothing to give
 * back at the end of a transaction or at DISCARD ALL, and nothing to keep
 * a transaction from being prepared.  fence_use() with a lease declares
 * its token as without one: there is no takeover to list the lease for
 * (lease_use.c in the build with Redis).
 *
 * IDENTIFICATION
 *	  src/lock/lock_nohiredis.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "core/pg_compat.h"
#include "fencing_errcodes.h"
#include "fmgr.h"
#include "funcapi.h"
#include "guard/guard.h"
#include "lock/lock.h"
#include "lock/lock_int.h"

PG_FUNCTION_INFO_V1(fenced_acquire);
PG_FUNCTION_INFO_V1(fenced_acquire_xact);
PG_FUNCTION_INFO_V1(fenced_acquire_xact_multi);
PG_FUNCTION_INFO_V1(fenced_lock_valid_until);
PG_FUNCTION_INFO_V1(fenced_extend);
PG_FUNCTION_INFO_V1(fenced_release);
PG_FUNCTION_INFO_V1(fenced_leases);
PG_FUNCTION_INFO_V1(fenced_lock_holders_data);
PG_FUNCTION_INFO_V1(fence_use_lease);

/* The error of every Redis function in a build without hiredis. */
pg_noreturn static void
fenced_not_supported(void)
{
	ereport(ERROR,
			(errcode(ERRCODE_FENCING_REDIS_NOT_BUILT),
			 errmsg("fencing was built without Redis support"),
			 errhint("Install hiredis and rebuild fencing with WITH_HIREDIS=1.")));
}

void
fenced_lock_init(void)
{
}

void
fenced_lock_at_xact_end(bool commit)
{
}

void
fenced_lock_pre_prepare(void)
{
}

void
fenced_lock_discard_all(void)
{
}

/* No lease, so none acquired with on_lost => 'error'. */
void
fenced_lock_lost_check(void)
{
}

Datum
fence_use_lease(PG_FUNCTION_ARGS)
{
	bool		has_token;
	FenceToken	token;
	bool		is_local;
	char	   *resource = declared_use_args(fcinfo, &has_token, &token,
											 &is_local);

	(void) fenced_use_lease_arg(fcinfo, 3, has_token);
	declared_use(resource, has_token, token, is_local);
	PG_RETURN_VOID();
}

/*
 * The checks of an acquisition's ttl, wait and max_hold, which a build
 * with hiredis makes before reaching Redis: bad input reports the same
 * error in both builds.
 */
static void
acquire_options_check(FunctionCallInfo fcinfo)
{
	(void) fenced_ttl_arg(fcinfo, 1);
	(void) fenced_wait_arg(fcinfo, 2);
	(void) fenced_max_hold_arg(fcinfo, 4);
}

Datum
fenced_acquire(PG_FUNCTION_ARGS)
{
	session_state_check("fenced_acquire()");
	(void) fenced_resource_arg(fcinfo);
	acquire_options_check(fcinfo);
	fenced_not_supported();
}

Datum
fenced_acquire_xact(PG_FUNCTION_ARGS)
{
	(void) fenced_resource_arg(fcinfo);
	acquire_options_check(fcinfo);
	fenced_not_supported();
}

Datum
fenced_acquire_xact_multi(PG_FUNCTION_ARGS)
{
	if (PG_ARGISNULL(0))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("resources must not be null")));
	acquire_options_check(fcinfo);
	fenced_not_supported();
}

Datum
fenced_extend(PG_FUNCTION_ARGS)
{
	(void) fenced_resource_arg(fcinfo);
	(void) fenced_ttl_arg(fcinfo, 1);
	fenced_not_supported();
}

Datum
fenced_release(PG_FUNCTION_ARGS)
{
	(void) fenced_resource_arg(fcinfo);
	fenced_not_supported();
}

Datum
fenced_leases(PG_FUNCTION_ARGS)
{
	fenced_not_supported();
}

/* No lease can be held: not held. */
Datum
fenced_lock_valid_until(PG_FUNCTION_ARGS)
{
	(void) fenced_resource_arg(fcinfo);
	PG_RETURN_NULL();
}

/* No lease can be held: fenced_lock_holders is empty. */
Datum
fenced_lock_holders_data(PG_FUNCTION_ARGS)
{
	InitMaterializedSRF(fcinfo, 0);
	return (Datum) 0;
}
