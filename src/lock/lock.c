/*-------------------------------------------------------------------------
 *
 * lock.c
 *	  fenced_acquire() and friends: the SQL functions of locks and tokens
 *	  from Redis, and fenced_lock_holders_data().
 *
 *	  SELECT fenced_acquire('order:42');			-- token, or NULL if busy
 *	  SELECT fenced_extend('order:42', ttl => '30 s');
 *	  SELECT fenced_release('order:42');
 *	  SELECT * FROM fenced_leases();
 *	  SELECT fenced_acquire_xact('order:42');	-- until the transaction ends
 *
 * The token is declared for the session as by fence_use(), so that the
 * writes that follow are stamped and checked by fence_guard() without
 * naming it.  Session leases are not transactional: Redis does not roll
 * back with the transaction that called us, so neither do they nor the
 * session's declaration.  Transaction leases end with the transaction
 * (lease_release.c).
 *
 * The protocol is in lock_acquire.c, what the session holds in
 * lease_table.c; a build without hiredis has lock_nohiredis.c instead of
 * this file.
 *
 * fenced_lock_holders_data(), behind the view fenced_lock_holders, reads
 * one row per lease of every backend from the shared table (with the
 * library preloaded), else of the calling backend, each slot copied under
 * its spinlock.  Who sees what is pg_stat_activity's rule: a role with
 * the privileges of pg_read_all_stats (superusers have them) sees every
 * row; any other sees the rows of the backends of roles whose privileges
 * it has, and of the others only that they exist, every column NULL.
 * Leases that found the table full are not shown.  Its source column
 * tells the leases of fenced_acquire* ("redis") from those declared with
 * fence_use(..., lease => ...) ("fence_use"), which only the shared
 * table lists.
 *
 * IDENTIFICATION
 *	  src/lock/lock.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_authid.h"
#include "commands/dbcommands.h"
#include "core/core.h"
#include "funcapi.h"
#include "guard/guard.h"
#include "lock/lock.h"
#include "lock/lock_int.h"
#include "lock/lock_scripts.h"
#include "miscadmin.h"
#include "redis/redis.h"
#include "stats/stats.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"
#include "utils/tuplestore.h"

PG_FUNCTION_INFO_V1(fenced_acquire);
PG_FUNCTION_INFO_V1(fenced_acquire_xact);
PG_FUNCTION_INFO_V1(fenced_extend);
PG_FUNCTION_INFO_V1(fenced_release);
PG_FUNCTION_INFO_V1(fenced_leases);

/*
 * What the Redis client does that fence_stat_redis counts: the client
 * calls this (redis_event_hook), knowing nothing of the statistics.
 */
static void
fenced_count_redis_event(RedisEvent event)
{
	switch (event)
	{
		case REDIS_EVENT_CONNECT:
			stats_redis_count(STATS_REDIS_CONNECTS);
			break;
		case REDIS_EVENT_REDIRECT:
			stats_redis_count(STATS_REDIS_REDIRECTS);
			break;
		case REDIS_EVENT_FAILOVER:
			stats_redis_count(STATS_REDIS_FAILOVERS);
			break;
	}
}

/*
 * The shared table of lock holders and its renewer, when preloaded; what
 * the Redis client counts and says about the keys; called from _PG_init.
 */
void
fenced_lock_init(void)
{
	redis_event_hook = fenced_count_redis_event;
	redis_key_hints.noperm_hint =
		"The Redis ACL user needs EVALSHA, EVAL and WAIT, and access to the keys of fencing.redis_lock_key and fencing.redis_token_key.";
	redis_key_hints.crossslot_detail =
		"The lock key and the token key of a resource must be in one hash slot, for the script that takes both.";
	redis_key_hints.crossslot_hint =
		"Give fencing.redis_lock_key and fencing.redis_token_key the same {hash tag} around <resource>, as the default layout \"fencing:v1:{r:<resource>}:...\" does.";
	lease_shmem_init();
	lease_renewer_register();
	lease_release_init();
	lease_takeover_init();
	lock_lost_init();
}

/*
 * The module's transaction and session ends (fencing.c), carried out by the
 * release batches of lease_release.c; a build without hiredis has its own
 * (lock_nohiredis.c).
 */
void
fenced_lock_at_xact_end(bool commit)
{
	lease_release_at_xact_end(commit);
	use_leases_at_xact_end();
}

void
fenced_lock_pre_prepare(void)
{
	lease_release_pre_prepare();
}

void
fenced_lock_discard_all(void)
{
	lease_release_discard_all();
	use_leases_forget_all();
}

static RedisScript extend_script = {"fencing extend script", FENCED_EXTEND_LUA, ""};
static RedisScript extend_counter_script = {"fencing counter extend script", FENCED_EXTEND_COUNTER_LUA, ""};

/*
 * fenced_acquire_common
 *		fenced_acquire(), or with xact fenced_acquire_xact(): take the lock
 *		on resource and a new token, declared for the session or the
 *		transaction; NULL if the lock is still busy after wait.
 */
static Datum
fenced_acquire_common(FunctionCallInfo fcinfo, bool xact)
{
	char	   *resource = fenced_resource_arg(fcinfo);
	FencedAcquireOptions opts;
	FenceToken	token;

	fenced_options_args(fcinfo, xact, &opts);
	if (!fenced_acquire_lease(resource, &opts, &token))
		PG_RETURN_NULL();
	PG_RETURN_FENCE_TOKEN(token);
}

/*
 * fenced_acquire(resource text, ttl interval, wait interval,
 *				  renew boolean, max_hold interval) returns fence_token
 *
 * Take the lock on resource for ttl and return a new token, declared for
 * the session; NULL if the lock is still busy after wait.  A NULL ttl or
 * wait means fencing.default_ttl or fencing.default_wait.  Acquiring a
 * lock this session already holds takes it again, with a new token.  With
 * renew, the lease is renewed while the session works (lease_renewer.c),
 * up to max_hold after the acquisition (NULL: fencing.lease_max_hold).
 */
Datum
fenced_acquire(PG_FUNCTION_ARGS)
{
	session_state_check("fenced_acquire()");
	return fenced_acquire_common(fcinfo, false);
}

/*
 * fenced_acquire_xact(resource text, ttl interval, wait interval,
 *					   renew boolean, max_hold interval) returns fence_token
 *
 * As fenced_acquire, but the token is declared for the current transaction
 * only, and the lock is given back when the transaction ends, commit or
 * abort (pg_advisory_xact_lock's convention).  Outside a transaction block
 * that is the end of the statement.
 */
Datum
fenced_acquire_xact(PG_FUNCTION_ARGS)
{
	return fenced_acquire_common(fcinfo, true);
}

/*
 * fenced_extend(resource text, ttl interval) returns boolean
 *
 * Make this session's lock on resource expire ttl from now (NULL:
 * fencing.default_ttl).  True if it was still ours; false if it was lost,
 * and then the lease ends and its token is no longer declared.  The token
 * counter is extended first, on its own (fenced_counter_lifetime), so that
 * a failure leaves the lock as it was.
 */
Datum
fenced_extend(PG_FUNCTION_ARGS)
{
	char	   *resource = fenced_resource_arg(fcinfo);
	int			ttl_ms = fenced_ttl_arg(fcinfo, 1);
	Lease	   *lease = lease_lookup(resource);
	char	   *lock_key;
	char	   *token_key;
	char		ttl[12];
	char		lifetime[24];
	TimestampTz sent;
	const char *args[2];
	RedisValue *reply;

	if (lease == NULL || !lease->held)
		PG_RETURN_BOOL(false);

	lock_key = fenced_keys(resource, &token_key);
	if (fenced_counter_lifetime(ttl_ms, lifetime, sizeof(lifetime)))
	{
		args[0] = lifetime;
		reply = redis_eval(&extend_counter_script, 1,
						   (const char **) &token_key, 1, args);
		if (reply->type != REDIS_VALUE_INTEGER)
			redis_unexpected(extend_counter_script.name, "an integer", reply);
	}
	snprintf(ttl, sizeof(ttl), "%d", ttl_ms);
	args[0] = lease->owner;
	args[1] = ttl;
	sent = GetCurrentTimestamp();	/* counted from here, as at acquisition */
	reply = redis_eval(&extend_script, 1, (const char **) &lock_key, 2, args);
	if (reply->type != REDIS_VALUE_INTEGER)
		redis_unexpected(extend_script.name, "an integer", reply);

	if (reply->integer == 1)
	{
		lease->expires = TimestampTzPlusMilliseconds(sent, ttl_ms);
		lease_shmem_set_expires(&lease->listing, lease->expires);
		PG_RETURN_BOOL(true);
	}
	lease_end(lease);
	lease_forget_if_empty(lease);
	PG_RETURN_BOOL(false);
}

/*
 * fenced_release(resource text) returns boolean
 *
 * Give back this session's lock on resource: true if it was still ours
 * and is now free, false if it was not ours any more.  Only a lock held
 * under one of our owner strings is ever deleted.  The lease ends and its
 * token is no longer declared, whatever Redis answers.
 */
Datum
fenced_release(PG_FUNCTION_ARGS)
{
	char	   *resource = fenced_resource_arg(fcinfo);
	Lease	   *lease = lease_lookup(resource);
	char	   *lock_key;
	const char *args[FENCED_NOTICE_NARGS + 1 + FENCED_MAX_UNKNOWN_OWNERS];
	char		xact_owner[FENCED_OWNER_LEN];
	int			nargs;
	int			i;
	RedisValue *volatile reply = NULL;

	if (lease == NULL)
		PG_RETURN_BOOL(false);

	/*
	 * A lapsed lease expired long ago: Redis has nothing of it, but its
	 * token is still declared.
	 */
	if (!lease->held && lease->nunknown == 0)
	{
		lease_end(lease);
		lease_remove(lease);
		PG_RETURN_BOOL(false);
	}

	/*
	 * From here on the lease is over.  A session lease's owner joins the
	 * unknown owners until Redis answers, so that a release that fails can
	 * be retried, and a later acquisition takes the lock over if it is
	 * still there.  A transaction lease's is given back at the end of the
	 * transaction if this release fails, and never kept beyond it.
	 */
	lock_key = fenced_keys(resource, NULL);
	fenced_release_notice(lock_key, args);
	nargs = FENCED_NOTICE_NARGS;
	xact_owner[0] = '\0';
	if (lease->held && lease->xact)
	{
		strlcpy(xact_owner, lease->owner, FENCED_OWNER_LEN);
		args[nargs++] = xact_owner;
		lease_end(lease);
	}
	else if (lease->held)
	{
		lease_shmem_refresh(&lease->listing, &lease->expires);
		lease_unknown_add(lease, lease->owner, lease->expires);
		lease_end(lease);
	}
	else if (lease->lapsed)
		lease_end(lease);
	for (i = 0; i < lease->nunknown; i++)
		args[nargs++] = lease->unknown[i];

	PG_TRY();
	{
		reply = redis_eval(&release_script, 1, (const char **) &lock_key,
						   nargs, args);
		if (reply->type != REDIS_VALUE_INTEGER)
			redis_unexpected(release_script.name, "an integer", reply);
	}
	PG_CATCH();
	{
		if (xact_owner[0] != '\0')
		{
			xact_remember(resource, xact_owner);
			lease_forget_if_empty(lease);
		}
		PG_RE_THROW();
	}
	PG_END_TRY();

	/* Nothing of ours is left in Redis. */
	lease_remove(lease);
	PG_RETURN_BOOL(reply->integer > 0);
}

/*
 * fenced_leases()
 *		The locks this session holds, as far as it knows: resource, token,
 *		owner, acquired, expires (by this server's clock).
 */
Datum
fenced_leases(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	ResourceMapIterator iter;
	Lease	   *lease;

	InitMaterializedSRF(fcinfo, 0);
	if (leases == NULL)
		return (Datum) 0;
	resource_map_iterate(leases, &iter);
	while ((lease = resource_map_next(&iter)) != NULL)
	{
		Datum		values[5];
		bool		nulls[5] = {false, false, false, false, false};

		if (!lease->held)
			continue;
		lease_shmem_refresh(&lease->listing, &lease->expires);
		values[0] = CStringGetTextDatum(lease->key.resource);
		values[1] = FenceTokenGetDatum(lease->token);
		values[2] = CStringGetTextDatum(lease->owner);
		values[3] = TimestampTzGetDatum(lease->acquired);
		values[4] = TimestampTzGetDatum(lease->expires);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	return (Datum) 0;
}


PG_FUNCTION_INFO_V1(fenced_lock_holders_data);

#define HOLDERS_COLS	11

/* The values of one row (every column NULL when not visible). */
static void
holders_put(ReturnSetInfo *rsinfo, const LeaseSlot *l, bool visible)
{
	Datum		values[HOLDERS_COLS];
	bool		nulls[HOLDERS_COLS];
	char	   *role;
	char	   *db;
	int			i;

	for (i = 0; i < HOLDERS_COLS; i++)
		nulls[i] = !visible;
	if (visible)
	{
		role = GetUserNameFromId(l->roleid, true);
		db = get_database_name(l->dbid);
		values[0] = Int32GetDatum(l->pid);
		if (role != NULL)
			values[1] = DirectFunctionCall1(namein, CStringGetDatum(role));
		nulls[1] = role == NULL;
		if (db != NULL)
			values[2] = DirectFunctionCall1(namein, CStringGetDatum(db));
		nulls[2] = db == NULL;
		values[3] = CStringGetTextDatum(l->resource);
		values[4] = FenceTokenGetDatum(l->token);
		values[5] = CStringGetTextDatum(l->xact ? "transaction" : "session");
		values[6] = TimestampTzGetDatum(l->acquired);
		values[7] = TimestampTzGetDatum(l->expires);
		values[8] = BoolGetDatum(l->renewing);
		values[9] = BoolGetDatum(l->lost);
		values[10] = CStringGetTextDatum(l->declared ? "fence_use" : "redis");
	}
	tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
}

/* Without the shared table: this backend's leases. */
static void
holders_local(ReturnSetInfo *rsinfo)
{
	ResourceMapIterator iter;
	Lease	   *lease;
	LeaseSlot  *l;

	if (leases == NULL)
		return;
	l = palloc0(sizeof(LeaseSlot));
	l->pid = MyProcPid;
	l->roleid = GetSessionUserId();
	l->dbid = MyDatabaseId;
	resource_map_iterate(leases, &iter);
	while ((lease = resource_map_next(&iter)) != NULL)
	{
		if (!lease->held)
			continue;
		strlcpy(l->resource, lease->key.resource, sizeof(l->resource));
		l->token = lease->token;
		l->xact = lease->xact;
		l->acquired = lease->acquired;
		l->expires = lease->expires;
		holders_put(rsinfo, l, true);
	}
	pfree(l);
}

/*
 * fenced_lock_holders_data()
 *		pid, role, database, resource, token, kind, acquired_at,
 *		expires_at, renewing, lost, source: see the header.
 */
Datum
fenced_lock_holders_data(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	LeaseSlot  *copy;
	bool		all;
	int			n = lease_shmem_size();
	int			i;

	InitMaterializedSRF(fcinfo, 0);
	if (!lease_shmem_enabled())
	{
		holders_local(rsinfo);
		return (Datum) 0;
	}
	all = has_privs_of_role(GetUserId(), ROLE_PG_READ_ALL_STATS);
	copy = palloc(sizeof(LeaseSlot));
	for (i = 0; i < n; i++)
	{
		LeaseSlot  *slot = lease_shmem_slot(i);

		SpinLockAcquire(&slot->mutex);
		if (slot->in_use)
			memcpy(copy, slot, sizeof(LeaseSlot));
		else
			copy->in_use = false;
		SpinLockRelease(&slot->mutex);
		if (copy->in_use)
			holders_put(rsinfo, copy,
						all || has_privs_of_role(GetUserId(), copy->roleid));
	}
	pfree(copy);
	return (Datum) 0;
}
