/*-------------------------------------------------------------------------
 *
 * fenced_lock.c
 *	  fenced_acquire() and friends: locks and tokens from Redis.
 *
 *	  SELECT fenced_acquire('order:42');			-- token, or NULL if busy
 *	  SELECT fenced_extend('order:42', ttl => '30 s');
 *	  SELECT fenced_release('order:42');
 *	  SELECT * FROM fenced_leases();
 *	  SELECT fenced_acquire_xact('order:42');	-- until the transaction ends
 *
 * One acquisition is one round trip: a Lua script (fenced_lock_scripts.h)
 * that takes the lock with the caller's owner string and a TTL and issues
 * the next token, atomically.  The token is declared for the session as by
 * fence_use(), so that the writes that follow are stamped and checked by
 * fence_guard() without naming it.
 *
 * Tokens.  Redis can lose the counter's latest value (restart without
 * persistence or from an older snapshot, failover to a replica that was
 * behind, FLUSHALL).  A plain counter would then hand the next holder a
 * token already handed out, or below tokens the database has accepted,
 * and fencing would turn upside down: the new holder rejected, the stale
 * one let through.  So a token is max(counter + 1, microseconds of the
 * Redis server's clock): after a loss the clock, not the lost counter,
 * puts it above every token issued before, as long as the clocks of the
 * Redis servers agree to within a failover's duration (README, "Tokens").
 *
 * Counter regression.  In case that clock is behind, every acquisition
 * passes the resource's newest high-water mark (committed or in progress,
 * never a snapshot's) to the script, which raises the counter past it,
 * under the lock, before issuing the token; a WARNING says it happened.
 *
 * Unknown outcomes.  When a command fails after it was sent (timeout,
 * lost connection, cancel), it may still have run.  The owner string of
 * such an attempt is kept with the resource, and the next acquisition of
 * it by this session passes it to the script, which takes over a lock
 * still held under it instead of waiting for it to expire; a release
 * deletes it too.  Each owner string is unique -- the system identifier,
 * the PID, a per-backend counter and a random part -- so this can only
 * ever take over this session's own locks.  Nothing is kept for a call
 * that never reached Redis, and what is kept is bounded (FENCED_MAX_MAYBE,
 * FENCED_MAX_UNKNOWN), so that no failure grows the session's memory
 * without end.  A failure after the lock was taken gives it back.
 *
 * Session leases are not transactional: Redis does not roll back with the
 * transaction that called us, so neither do they nor the session's
 * declaration.  Transaction leases (fenced_acquire_xact) are declared for
 * the transaction only and given back when it ends, commit or abort, for
 * pooled connections where session state would pass to the next client.
 * That release runs where PostgreSQL allows no error and no cancel (after
 * commit, interrupts held): redis_commands_noerror, bounded by
 * fencing.redis_release_timeout, a failure being a WARNING and the lock
 * left to its TTL.  So do DISCARD ALL (a pooler's reset) for every lease
 * of the session, and backend exit, from a before_shmem_exit callback;
 * each sends its releases together, one pipeline within that time.  Owners of
 * unknown-outcome attempts of a transaction lease are given back with it,
 * never kept for the session's later calls, which may be another
 * client's.
 *
 * IDENTIFICATION
 *	  src/fenced_lock.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <limits.h>

#include "access/htup_details.h"
#include "access/xlog.h"
#include "common/int.h"
#include "common/pg_prng.h"
#include "datatype/timestamp.h"
#include "declared.h"
#include "fence_token.h"
#include "fenced_lock.h"
#include "fenced_lock_scripts.h"
#include "fencing_errcodes.h"
#include "funcapi.h"
#include "marks.h"
#include "miscadmin.h"
#include "nodes/pg_list.h"
#include "pg_compat.h"
#include "pgstat.h"
#include "redis_conn.h"
#include "resource_map.h"
#include "resource_name.h"
#include "session_state.h"
#include "stats.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"
#include "utils/tuplestore.h"

/* Bounds and defaults of the settings. */
#define FENCED_DEFAULT_TTL			30000	/* ms */
#define FENCED_MAX_TTL				INT_MAX /* ms, about 24.8 days */
#define FENCED_DEFAULT_WAIT			0	/* ms */
#define FENCED_MAX_WAIT				INT_MAX /* ms */
#define FENCED_MAX_WAIT_REPLICAS	1000
#define FENCED_DEFAULT_WAIT_TIMEOUT 1000	/* ms */
#define FENCED_MAX_WAIT_TIMEOUT		3600000 /* ms */
#define FENCED_MAX_KEY_TEMPLATE		1024
#define FENCED_KEY_PLACEHOLDER		"<resource>"

/* Back-off between attempts on a busy lock, in ms, before jitter. */
#define FENCED_BACKOFF_MIN			4
#define FENCED_BACKOFF_MAX			128

/* Owner strings: "pg:<sysid>:<pid>:<n>:<16 hex digits>", at most 73 bytes. */
#define FENCED_OWNER_LEN			80

/*
 * Owner strings of unknown-outcome attempts kept: at most FENCED_MAX_MAYBE
 * per resource (the oldest goes first) and on at most FENCED_MAX_UNKNOWN
 * resources.  When one more resource would pass that, the owners whose
 * locks have surely expired go, then those of the resources whose locks
 * expire soonest, down to FENCED_KEEP_UNKNOWN resources.
 */
#define FENCED_MAX_MAYBE			8
#define FENCED_MAX_UNKNOWN			1024
#define FENCED_KEEP_UNKNOWN			768

/*
 * How far past the high-water mark a counter that went backwards is set.
 * The lost counter may have handed out tokens above the mark whose holders
 * have not written yet; issuing one of them again would give two holders
 * the same token, both accepted.  A gap of a second of clock-made tokens
 * keeps the new token above those issued in the second before the mark's
 * was written, or since; gaps in tokens cost nothing.
 */
#define FENCED_REPAIR_GAP			1000000

/*
 * How long a token counter key outlives the lock it was last issued with,
 * in ms.  Past that, the next token comes from the Redis clock, which has
 * then passed the last token issued (unless tokens were issued faster
 * than one per microsecond for that long), so the key is disposable and
 * Redis no longer keeps one per resource ever locked.
 */
#define FENCED_COUNTER_LINGER		60000

/*
 * Token counter keys under this prefix are fencing's own.  Any other
 * template (the classic "fence:<resource>") may name a key that other
 * clients INCR, expecting it to last: it never expires.
 */
#define FENCED_OWN_KEY_PREFIX		"fencing:"

/*
 * Beyond this many entries, an acquisition prunes leases expired for
 * FENCED_PRUNE_GRACE; the next pruning waits until the map has doubled.
 */
#define FENCED_PRUNE_THRESHOLD		1024
#define FENCED_PRUNE_GRACE			1000	/* ms after expiry */

/* Settings. */
static char *fencing_redis_lock_key = NULL;
static char *fencing_redis_token_key = NULL;
static int	fencing_default_ttl = FENCED_DEFAULT_TTL;
static int	fencing_default_wait = FENCED_DEFAULT_WAIT;
static int	fencing_redis_wait_replicas = 0;
static int	fencing_redis_wait_timeout = FENCED_DEFAULT_WAIT_TIMEOUT;

/*
 * What this session holds, or may hold, of one resource: a lease; or a
 * lease that expired long ago and was pruned, kept only while its token is
 * still declared so that fenced_release can withdraw it ("lapsed"); and
 * the owner strings of attempts whose outcome is unknown (sent, no answer:
 * "maybe-owners").  An entry with none of these is removed.
 */
typedef struct Lease
{
	ResourceMapKey key;
	bool		held;			/* token..owner describe a lease */
	bool		xact;			/* held until the transaction ends */
	bool		lapsed;			/* token is a pruned lease's, still declared */
	FenceToken	token;
	TimestampTz acquired;
	TimestampTz expires;		/* by our clock; Redis's decides */
	char		owner[FENCED_OWNER_LEN];
	int			nmaybe;			/* owners of unknown-outcome attempts */
	TimestampTz maybe_until;	/* their locks have expired by then */
	char		(*maybe)[FENCED_OWNER_LEN]; /* FENCED_MAX_MAYBE slots, made
											 * on first use */
} Lease;

PG_FUNCTION_INFO_V1(fenced_acquire);
PG_FUNCTION_INFO_V1(fenced_acquire_xact);
PG_FUNCTION_INFO_V1(fenced_extend);
PG_FUNCTION_INFO_V1(fenced_release);
PG_FUNCTION_INFO_V1(fenced_leases);

/*
 * check_key_template
 *		A Redis key name with exactly one "<resource>" in it.
 */
static bool
check_key_template(char **newval, void **extra, GucSource source)
{
	const char *first;

	if (*newval == NULL || strlen(*newval) > FENCED_MAX_KEY_TEMPLATE)
	{
		GUC_check_errdetail("A key template can be at most %d bytes long.",
							FENCED_MAX_KEY_TEMPLATE);
		return false;
	}
	first = strstr(*newval, FENCED_KEY_PLACEHOLDER);
	if (first == NULL ||
		strstr(first + strlen(FENCED_KEY_PLACEHOLDER), FENCED_KEY_PLACEHOLDER) != NULL)
	{
		GUC_check_errdetail("A key template must contain \"%s\" exactly once.",
							FENCED_KEY_PLACEHOLDER);
		return false;
	}
	return true;
}

/*
 * fenced_lock_init
 *		Define the lock settings; called from _PG_init.
 */
void
fenced_lock_init(void)
{
	DefineCustomStringVariable("fencing.redis_lock_key",
							   "Template of the Redis key that holds the lock of a resource.",
							   "\"<resource>\" stands for the resource name.  The default is key layout v1; set \"lock:<resource>\" to share locks with clients of the classic lock:/fence: layout.",
							   &fencing_redis_lock_key,
							   "fencing:v1:{r:<resource>}:lock",
							   PGC_SUSET,
							   0,
							   check_key_template, NULL, NULL);

	DefineCustomStringVariable("fencing.redis_token_key",
							   "Template of the Redis key that counts the tokens of a resource.",
							   "\"<resource>\" stands for the resource name.  A key beginning with \"fencing:\" expires a minute after the lock it was last issued with; any other never expires.  The default is key layout v1; set \"fence:<resource>\" to share tokens with clients of the classic lock:/fence: layout.",
							   &fencing_redis_token_key,
							   "fencing:v1:{r:<resource>}:token",
							   PGC_SUSET,
							   0,
							   check_key_template, NULL, NULL);

	DefineCustomIntVariable("fencing.default_ttl",
							"Lease time of a lock when fenced_acquire() and fenced_extend() are not given a ttl.",
							"Valid range is 1 ms to 24 days.",
							&fencing_default_ttl,
							FENCED_DEFAULT_TTL, 1, FENCED_MAX_TTL,
							PGC_USERSET,
							GUC_UNIT_MS,
							NULL, NULL, NULL);

	DefineCustomIntVariable("fencing.default_wait",
							"How long fenced_acquire() waits for a busy lock when not given a wait.",
							"0 means a single attempt.",
							&fencing_default_wait,
							FENCED_DEFAULT_WAIT, 0, FENCED_MAX_WAIT,
							PGC_USERSET,
							GUC_UNIT_MS,
							NULL, NULL, NULL);

	DefineCustomIntVariable("fencing.redis_wait_replicas",
							"Number of Redis replicas that must acknowledge an acquisition.",
							"After taking a lock fenced_acquire() sends WAIT and fails, giving the lock back, if fewer replicas acknowledge in time.  0 means no WAIT.",
							&fencing_redis_wait_replicas,
							0, 0, FENCED_MAX_WAIT_REPLICAS,
							PGC_SUSET,
							0,
							NULL, NULL, NULL);

	DefineCustomIntVariable("fencing.redis_wait_timeout",
							"Longest wait for the replicas of fencing.redis_wait_replicas.",
							"Valid range is 1 ms to 1 h.",
							&fencing_redis_wait_timeout,
							FENCED_DEFAULT_WAIT_TIMEOUT, 1, FENCED_MAX_WAIT_TIMEOUT,
							PGC_SUSET,
							GUC_UNIT_MS,
							NULL, NULL, NULL);
}

/* The resource argument: neither NULL, nor empty, nor too long. */
static char *
fenced_resource_arg(FunctionCallInfo fcinfo)
{
	char	   *resource;

	if (PG_ARGISNULL(0))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("resource must not be null")));
	resource = text_to_cstring(PG_GETARG_TEXT_PP(0));
	if (resource[0] == '\0')
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("resource must not be empty")));
	resource_name_check(resource, strlen(resource));
	return resource;
}

/*
 * interval_to_us
 *		The length of an interval in microseconds, a month counting 30 days
 *		as in interval arithmetic.
 */
static int64
interval_to_us(const Interval *span, const char *argname)
{
	int64		days;
	int64		us;

	if (pg_mul_s64_overflow((int64) span->month, DAYS_PER_MONTH, &days) ||
		pg_add_s64_overflow(days, (int64) span->day, &days) ||
		pg_mul_s64_overflow(days, USECS_PER_DAY, &us) ||
		pg_add_s64_overflow(us, span->time, &us))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s is too long", argname)));
	return us;
}

/*
 * fenced_ttl_arg
 *		The ttl argument at argno in ms, rounded up so that a lease is
 *		never shorter than asked for; the default when NULL.
 */
static int
fenced_ttl_arg(FunctionCallInfo fcinfo, int argno)
{
	int64		us;

	if (PG_ARGISNULL(argno))
		return fencing_default_ttl;
	us = interval_to_us(PG_GETARG_INTERVAL_P(argno), "ttl");
	if (us <= 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("ttl must be greater than zero")));
	if (us > (int64) FENCED_MAX_TTL * 1000)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("ttl is too long"),
				 errdetail("The longest lease is %d ms.", FENCED_MAX_TTL)));
	return (int) ((us + 999) / 1000);
}

/* The wait argument at argno in ms; the default when NULL. */
static int
fenced_wait_arg(FunctionCallInfo fcinfo, int argno)
{
	int64		us;

	if (PG_ARGISNULL(argno))
		return fencing_default_wait;
	us = interval_to_us(PG_GETARG_INTERVAL_P(argno), "wait");
	if (us < 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("wait must not be negative")));
	if (us > (int64) FENCED_MAX_WAIT * 1000)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("wait is too long"),
				 errdetail("The longest wait is %d ms.", FENCED_MAX_WAIT)));
	return (int) ((us + 999) / 1000);
}

#ifdef USE_HIREDIS

static ResourceMap *leases = NULL;
static long leases_prune_at = FENCED_PRUNE_THRESHOLD;
static int	leases_unknown = 0; /* entries with maybe-owners */

/* Whether fenced_acquire's current attempt has been handed to Redis. */
static bool attempt_sent = false;

/*
 * The current transaction's part, given back when it ends: the resources
 * it took transaction leases on (char *), and the owners of its attempts
 * whose outcome is unknown (XactOwner *).  Both live in xact_cxt, reset
 * then.
 */
typedef struct XactOwner
{
	char	   *resource;
	char		owner[FENCED_OWNER_LEN];
} XactOwner;

static MemoryContext xact_cxt = NULL;
static List *xact_resources = NIL;
static List *xact_unknown = NIL;

/* Releases being sent where nothing may throw; reset after each batch. */
static MemoryContext release_cxt = NULL;

static bool exit_registered = false;
static void fenced_lock_at_exit(int code, Datum arg);

static RedisScript acquire_script = {"fencing acquire script", FENCED_ACQUIRE_LUA, ""};
static RedisScript extend_script = {"fencing extend script", FENCED_EXTEND_LUA, ""};
static RedisScript release_script = {"fencing release script", FENCED_RELEASE_LUA, ""};

/* Expand a key template for resource. */
static char *
fenced_key(const char *template, const char *resource)
{
	const char *at = strstr(template, FENCED_KEY_PLACEHOLDER);
	StringInfoData key;

	if (at == NULL)				/* the check hook prevents it */
		elog(ERROR, "key template \"%s\" has no placeholder", template);
	initStringInfo(&key);
	appendBinaryStringInfo(&key, template, at - template);
	appendStringInfoString(&key, resource);
	appendStringInfoString(&key, at + strlen(FENCED_KEY_PLACEHOLDER));
	return key.data;
}

/* The lock key of resource, and with token_key its counter key. */
static char *
fenced_keys(const char *resource, char **token_key)
{
	char	   *lock_key = fenced_key(fencing_redis_lock_key, resource);

	if (token_key != NULL)
	{
		*token_key = fenced_key(fencing_redis_token_key, resource);
		if (strcmp(lock_key, *token_key) == 0)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("lock key and token key of resource \"%s\" are the same Redis key \"%s\"",
							resource, lock_key),
					 errhint("Make fencing.redis_lock_key and fencing.redis_token_key differ.")));
	}
	return lock_key;
}

/*
 * fenced_make_owner
 *		A new owner string: unique across servers, backends and
 *		acquisitions, and saying which server and backend holds the lock.
 */
static void
fenced_make_owner(char *owner)
{
	static uint64 acquisitions = 0;

	snprintf(owner, FENCED_OWNER_LEN, "pg:" UINT64_FORMAT ":%d:" UINT64_FORMAT ":%016llx",
			 GetSystemIdentifier(), MyProcPid, ++acquisitions,
			 (unsigned long long) pg_prng_uint64(&pg_global_prng_state));
}

/* The entry of resource, made if need be. */
static Lease *
lease_enter(const char *resource)
{
	Lease	   *lease;
	bool		found;

	if (leases == NULL)
	{
		MemoryContext cxt = AllocSetContextCreate(TopMemoryContext,
												  "fencing leases",
												  ALLOCSET_SMALL_SIZES);

		leases = resource_map_create("fencing leases", sizeof(Lease), cxt);
	}

	/*
	 * Registered here, in a backend and after InitPostgres, so that it runs
	 * before ShutdownPostgres aborts an open transaction, and before the
	 * connection module's on_proc_exit callback closes the connection.
	 */
	if (!exit_registered)
	{
		before_shmem_exit(fenced_lock_at_exit, (Datum) 0);
		exit_registered = true;
	}
	/* a new entry is zeroed: not held, no maybe-owners */
	lease = resource_map_enter(leases, resource, &found);
	return lease;
}

static Lease *
lease_lookup(const char *resource)
{
	return leases ? resource_map_lookup(leases, resource) : NULL;
}

/* Forget every maybe-owner of an entry. */
static void
lease_maybe_clear(Lease *lease)
{
	if (lease->nmaybe > 0)
		leases_unknown--;
	lease->nmaybe = 0;
}

/* Remove an entry. */
static void
lease_remove(Lease *lease)
{
	lease_maybe_clear(lease);
	if (lease->maybe != NULL)
		pfree(lease->maybe);
	resource_map_remove(leases, lease->key.resource);
}

/* Remove an entry if nothing is left in it. */
static void
lease_forget_if_empty(Lease *lease)
{
	if (!lease->held && !lease->lapsed && lease->nmaybe == 0)
		lease_remove(lease);
}

/* Order entries by when their maybe-owners' locks expire. */
static int
lease_cmp_maybe_until(const void *a, const void *b)
{
	TimestampTz x = (*(Lease *const *) a)->maybe_until;
	TimestampTz y = (*(Lease *const *) b)->maybe_until;

	return x < y ? -1 : x > y ? 1 : 0;
}

/*
 * leases_limit_unknown
 *		Keep the unknown-outcome owners of at most FENCED_MAX_UNKNOWN
 *		resources, sparing keep's (about to get one more).
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

	if (leases_unknown < FENCED_MAX_UNKNOWN)
		return;
	victims = palloc(sizeof(Lease *) * leases_unknown);
	resource_map_iterate(leases, &iter);
	while ((lease = resource_map_next(&iter)) != NULL)
		if (lease->nmaybe > 0 && lease != keep && n < leases_unknown)
			victims[n++] = lease;
	qsort(victims, n, sizeof(Lease *), lease_cmp_maybe_until);
	for (i = 0; i < n; i++)
	{
		if (leases_unknown <= FENCED_KEEP_UNKNOWN &&
			TimestampTzPlusMilliseconds(victims[i]->maybe_until,
										FENCED_PRUNE_GRACE) >= now)
			break;
		lease_maybe_clear(victims[i]);
		lease_forget_if_empty(victims[i]);
	}
	pfree(victims);
}

/*
 * Remember an owner whose attempt may have taken the lock, which would
 * expire by until.
 */
static void
lease_maybe_add(Lease *lease, const char *owner, TimestampTz until)
{
	TimestampTz now = GetCurrentTimestamp();
	int			i;

	if (lease->maybe == NULL)
		lease->maybe = MemoryContextAlloc(resource_map_context(leases),
										  sizeof(*lease->maybe) * FENCED_MAX_MAYBE);
	if (lease->nmaybe == 0)
	{
		leases_limit_unknown(lease, now);
		leases_unknown++;
		lease->maybe_until = until;
	}
	else
		lease->maybe_until = Max(lease->maybe_until, until);
	for (i = 0; i < lease->nmaybe; i++)
		if (strcmp(lease->maybe[i], owner) == 0)
			return;
	if (lease->nmaybe == FENCED_MAX_MAYBE)
	{
		/* drop the oldest; its lock has most likely expired by now */
		memmove(lease->maybe[0], lease->maybe[1],
				sizeof(lease->maybe[0]) * (FENCED_MAX_MAYBE - 1));
		lease->nmaybe--;
	}
	strlcpy(lease->maybe[lease->nmaybe++], owner, FENCED_OWNER_LEN);
}

/*
 * xact_remember
 *		Note an owner the current transaction gives back when it ends: that
 *		of an attempt whose outcome is unknown, or of a transaction lease
 *		whose release failed.
 */
static void
xact_remember(const char *resource, const char *owner)
{
	MemoryContext old;
	XactOwner  *x;

	if (xact_cxt == NULL)
		xact_cxt = AllocSetContextCreate(TopMemoryContext,
										 "fencing transaction leases",
										 ALLOCSET_SMALL_SIZES);
	old = MemoryContextSwitchTo(xact_cxt);
	x = palloc(sizeof(XactOwner));
	x->resource = pstrdup(resource);
	strlcpy(x->owner, owner, FENCED_OWNER_LEN);
	xact_unknown = lappend(xact_unknown, x);
	MemoryContextSwitchTo(old);
}

/*
 * lease_remember_unknown
 *		An attempt under owner was sent and not answered: it may have taken
 *		the lock on resource for ttl_ms.  A session attempt's owner is kept
 *		for the session's next acquisition or release of the resource; a
 *		transaction's is given back when the transaction ends.
 */
static void
lease_remember_unknown(const char *resource, const char *owner, int ttl_ms,
					   bool xact)
{
	if (xact)
		xact_remember(resource, owner);
	else
		lease_maybe_add(lease_enter(resource), owner,
						TimestampTzPlusMilliseconds(GetCurrentTimestamp(), ttl_ms));
}

/*
 * lease_end
 *		The lease on resource is over: withdraw the declaration of its
 *		token (the session's, or the transaction's for a transaction
 *		lease), unless something else has been declared since.
 */
static void
lease_end(Lease *lease)
{
	FenceToken	declared;

	if ((lease->held || lease->lapsed) &&
		declared_get(lease->key.resource, lease->xact, &declared) &&
		declared == lease->token)
		declared_clear(lease->key.resource, lease->xact);
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
 * memory.  Transaction leases are left alone: they end with it.  Maybe-owners whose locks have surely expired go too.  Each
 * pruning scans the map, so the next one waits until the map has doubled,
 * which keeps the cost per acquisition constant.
 */
static void
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

		if (lease->nmaybe > 0 &&
			TimestampTzPlusMilliseconds(lease->maybe_until, FENCED_PRUNE_GRACE) < now)
			lease_maybe_clear(lease);
		if (lease->held && !lease->xact &&
			TimestampTzPlusMilliseconds(lease->expires, FENCED_PRUNE_GRACE) < now)
		{
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

/* Parse a token sent back by the acquire script. */
static FenceToken
fenced_parse_token(const RedisValue *v, const char *what)
{
	FenceToken	token = 0;

	if (v->type != REDIS_VALUE_STRING ||
		!fence_token_from_cstring(v->str, &token))
		redis_unexpected(acquire_script.name, what, v);
	return token;
}

/*
 * fenced_give_back
 *		Best effort, after an acquisition failed past taking the lock:
 *		release it, on a new connection if need be.  If that fails too, the
 *		owner is kept as a maybe-owner, for the next acquisition or release
 *		of the resource to take over, and the TTL ends the lock meanwhile.
 *		Never an error of its own.
 */
static void
fenced_give_back(const char *resource, const char *lock_key,
				 const char *owner, int ttl_ms, bool xact)
{
	MemoryContext cxt = CurrentMemoryContext;
	const char *args[1];
	volatile bool done = false;

	args[0] = owner;
	PG_TRY();
	{
		RedisValue *reply = redis_eval(&release_script, 1, &lock_key, 1, args);

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
 * fenced_may_have_run
 *		Whether the acquire script may have run in Redis although the call
 *		failed with edata.
 *
 * Called for an attempt handed to the connection module.  Not when Redis
 * answered with an error (the script took no lock under our owner), nor
 * when the command never reached the socket (no connection, AUTH refused,
 * an unusable password file), which the transport knows.  Anything else
 * -- a timeout, a lost connection, a protocol error, a cancel -- may have
 * come after the script ran.
 */
static bool
fenced_may_have_run(const ErrorData *edata)
{
	switch (edata->sqlerrcode)
	{
		case ERRCODE_FENCING_REDIS_BUSY:
		case ERRCODE_FENCING_REDIS_CLUSTER_CHANGING:
		case ERRCODE_FENCING_REDIS_REFUSED:
		case ERRCODE_FENCING_REDIS_NOT_REPLICATED:
			return false;
		default:
			return redis_call_sent();
	}
}

/*
 * fenced_try_acquire
 *		One attempt: the script with the newest high-water mark as the
 *		floor, and the owners of lease (if any) as ours to take over.  True
 *		and *token when the lock was taken; false and *pttl when it is
 *		busy.
 */
static bool
fenced_try_acquire(const char *resource, const char *lock_key,
				   const char *token_key, const char *owner, int ttl_ms,
				   Lease *lease, FenceToken *token, long long *pttl)
{
	FenceToken	mark;
	bool		has_mark;
	char		floor[FENCE_TOKEN_TEXT_LEN] = "";
	char		repaired[FENCE_TOKEN_TEXT_LEN] = "";
	char		ttl[12];
	char		counter_ttl[24] = "";
	const char *keys[2];
	const char *args[6 + FENCED_MAX_MAYBE];
	int			nargs = 0;
	int			i;
	RedisValue *reply;
	RedisValue **e;

	has_mark = marks_read_newest(resource, &mark);
	if (has_mark)
	{
		fence_token_to_cstring(mark, floor);
		fence_token_to_cstring(mark > FENCE_TOKEN_MAX - FENCED_REPAIR_GAP - 1 ?
							   mark : mark + FENCED_REPAIR_GAP, repaired);
	}
	snprintf(ttl, sizeof(ttl), "%d", ttl_ms);
	if (strncmp(fencing_redis_token_key, FENCED_OWN_KEY_PREFIX,
				strlen(FENCED_OWN_KEY_PREFIX)) == 0)
		snprintf(counter_ttl, sizeof(counter_ttl), INT64_FORMAT,
				 (int64) ttl_ms + FENCED_COUNTER_LINGER);

	keys[0] = lock_key;
	keys[1] = token_key;
	args[nargs++] = owner;
	args[nargs++] = ttl;
	args[nargs++] = floor;
	args[nargs++] = repaired;
	args[nargs++] = counter_ttl;
	if (lease != NULL && lease->held)
		args[nargs++] = lease->owner;
	for (i = 0; lease != NULL && i < lease->nmaybe; i++)
		args[nargs++] = lease->maybe[i];

	attempt_sent = true;
	reply = redis_eval(&acquire_script, 2, keys, nargs, args);
	e = reply->elements;
	if (reply->type != REDIS_VALUE_ARRAY || reply->nelements < 2 ||
		e[0]->type != REDIS_VALUE_INTEGER || e[1]->type == REDIS_VALUE_ARRAY)
		redis_unexpected(acquire_script.name, "{taken, ...}", reply);

	if (e[0]->integer == 0)
	{
		if (e[1]->type != REDIS_VALUE_INTEGER)
			redis_unexpected(acquire_script.name, "the lock's PTTL", e[1]);
		*pttl = e[1]->integer;
		attempt_sent = false;	/* answered: it took nothing */
		return false;
	}

	if (reply->nelements != 4 || e[2]->type != REDIS_VALUE_INTEGER)
		redis_unexpected(acquire_script.name, "{1, token, repaired, rule's token}", reply);
	*token = fenced_parse_token(e[1], "a token");

	if (e[2]->integer != 0)
	{
		FenceToken	would = fenced_parse_token(e[3], "a token");
		char		would_text[FENCE_TOKEN_TEXT_LEN];
		char		issued[FENCE_TOKEN_TEXT_LEN];

		fence_token_to_cstring(would, would_text);
		fence_token_to_cstring(*token, issued);
		stats_redis_count(STATS_REDIS_REPAIRED);
		ereport(WARNING,
				(errmsg("token counter in Redis for resource \"%s\" went backwards: next token %s is not above the high-water mark %s",
						resource, would_text, floor),
				 errdetail("The counter was raised %d past the mark, beyond any token it may have handed out before it went back, and token %s issued instead.",
						   FENCED_REPAIR_GAP, issued),
				 errhint("Redis lost writes or its clock is behind the clock that issued the mark's token; check its persistence, replication and clock.")));
	}
	return true;
}

/*
 * Releases sent together where nothing may throw: one EVAL of the release
 * script per resource, with the owners its lock may be held under.  EVAL
 * rather than EVALSHA, so that a server that lost its script cache costs
 * no second round.  Everything is in release_cxt.
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
	const char **argv = palloc(sizeof(char *) * (4 + nowners));
	int			i;

	if (batch->n == batch->size)
	{
		batch->size *= 2;
		batch->resources = repalloc(batch->resources, sizeof(char *) * batch->size);
		batch->argc = repalloc(batch->argc, sizeof(int) * batch->size);
		batch->argv = repalloc(batch->argv, sizeof(char **) * batch->size);
	}
	argv[0] = "EVAL";
	argv[1] = release_script.text;
	argv[2] = "1";
	argv[3] = fenced_keys(resource, NULL);
	for (i = 0; i < nowners; i++)
		argv[4 + i] = pstrdup(owners[i]);
	batch->resources[batch->n] = pstrdup(resource);
	batch->argc[batch->n] = 4 + nowners;
	batch->argv[batch->n] = argv;
	batch->n++;
	MemoryContextSwitchTo(old);
}

/* Add the release of everything the session may hold of an entry. */
static void
release_batch_add_lease(ReleaseBatch *batch, Lease *lease)
{
	const char *owners[1 + FENCED_MAX_MAYBE];
	int			n = 0;
	int			i;

	if (lease->held)
		owners[n++] = lease->owner;
	for (i = 0; i < lease->nmaybe; i++)
		owners[n++] = lease->maybe[i];
	if (n > 0)
		release_batch_add(batch, lease->key.resource, n, owners);
}

/*
 * release_batch_send
 *		Send the releases, pipelined, under one command timeout; a failure
 *		is one WARNING, never an error.  The batch is gone afterwards.
 */
static void
release_batch_send(ReleaseBatch *batch)
{
	MemoryContext old;
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
	old = MemoryContextSwitchTo(release_cxt);
	replies = palloc(sizeof(RedisValue *) * batch->n);
	(void) redis_commands_noerror(batch->n, batch->argc, batch->argv,
								  replies, &failure);
	for (i = 0; i < batch->n; i++)
	{
		if (replies[i] != NULL && replies[i]->type == REDIS_VALUE_INTEGER)
			continue;
		if (first == NULL)
			first = batch->resources[i];
		if (failure == NULL && replies[i] != NULL)
			failure = replies[i]->type == REDIS_VALUE_ERROR ?
				psprintf("The Redis server refused the %s: %s",
						 release_script.name, replies[i]->str) :
				psprintf("The Redis server answered the %s with something other than an integer.",
						 release_script.name);
		nfailed++;
	}
	MemoryContextSwitchTo(old);
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
	MemoryContextReset(release_cxt);
}

/* Add the owners of the transaction's unknown-outcome attempts. */
static void
release_batch_add_xact_unknown(ReleaseBatch *batch)
{
	ListCell   *lc;

	foreach(lc, xact_unknown)
	{
		XactOwner  *x = lfirst(lc);
		const char *owner = x->owner;

		release_batch_add(batch, x->resource, 1, &owner);
	}
}

/* Forget the transaction's part. */
static void
xact_forget(void)
{
	xact_resources = NIL;
	xact_unknown = NIL;
	if (xact_cxt != NULL)
		MemoryContextReset(xact_cxt);
}

/*
 * fenced_lock_at_xact_end
 *		Give back the transaction's leases, and any lock its unknown-outcome
 *		attempts took; called when a transaction ends, whichever way, where
 *		nothing may throw.  The declarations of their tokens end with the
 *		transaction too (declared.c).
 */
void
fenced_lock_at_xact_end(void)
{
	ReleaseBatch batch;
	ListCell   *lc;

	if (xact_resources == NIL && xact_unknown == NIL)
		return;
	release_batch_init(&batch);
	foreach(lc, xact_resources)
	{
		Lease	   *lease = lease_lookup(lfirst(lc));

		if (lease == NULL || !lease->held || !lease->xact)
			continue;			/* released or lost meanwhile */
		release_batch_add_lease(&batch, lease);
		lease->held = false;
		lease->xact = false;
		lease_maybe_clear(lease);
		lease_forget_if_empty(lease);
	}
	release_batch_add_xact_unknown(&batch);
	xact_forget();
	release_batch_send(&batch);
}

/*
 * fenced_lock_pre_prepare
 *		Refuse to PREPARE a transaction that holds a transaction lease: its
 *		lock would have to outlive the transaction's end in this session,
 *		and COMMIT PREPARED may come from another.
 */
void
fenced_lock_pre_prepare(void)
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

	if (leases == NULL && xact_unknown == NIL)
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
	release_batch_send(&batch);
}

/*
 * fenced_lock_discard_all
 *		DISCARD ALL: give back every lock of the session and forget every
 *		lease, so that the pooler's next client starts clean.  A failed
 *		release is a WARNING: the reset must succeed.
 */
void
fenced_lock_discard_all(void)
{
	fenced_lock_release_all();
	if (leases != NULL)
	{
		/* the map and its maybe-owner slots live in a context of its own */
		MemoryContextDelete(resource_map_context(leases));
		leases = NULL;
		leases_prune_at = FENCED_PRUNE_THRESHOLD;
		leases_unknown = 0;
	}
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

#else							/* !USE_HIREDIS */

/* The error of every Redis function in a build without hiredis. */
pg_noreturn static void
fenced_not_supported(void)
{
	ereport(ERROR,
			(errcode(ERRCODE_FENCING_REDIS_NOT_BUILT),
			 errmsg("fencing was built without Redis support"),
			 errhint("Install hiredis and rebuild fencing with WITH_HIREDIS=1.")));
}

/*
 * Without Redis support no lease is ever taken: there is nothing to give
 * back at the end of a transaction or at DISCARD ALL, and nothing to keep
 * a transaction from being prepared.
 */
void
fenced_lock_at_xact_end(void)
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

#endif							/* USE_HIREDIS */

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
	int			ttl_ms = fenced_ttl_arg(fcinfo, 1);
	int			wait_ms = fenced_wait_arg(fcinfo, 2);
#ifdef USE_HIREDIS
	char	   *token_key;
	char	   *lock_key = fenced_keys(resource, &token_key);
	char		owner[FENCED_OWNER_LEN];
	Lease	   *lease = lease_lookup(resource);
	MemoryContext cxt = CurrentMemoryContext;
	TimestampTz deadline;
	TimestampTz now;
	FenceToken	token = 0;
	bool		taken = false;
	bool		had_xact_lease;

	/*
	 * A lock is held for the session or for a transaction, never both: the
	 * one would end the other's lease, or outlive it, behind its back.
	 */
	if (lease != NULL && lease->held && lease->xact != xact)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 xact ?
				 errmsg("resource \"%s\" is already locked by this session with fenced_acquire()",
						resource) :
				 errmsg("resource \"%s\" is already locked by this transaction with fenced_acquire_xact()",
						resource),
				 errdetail("A lock is held either for the session or for a transaction, not both."),
				 errhint("Release it with fenced_release() first.")));
	had_xact_lease = lease != NULL && lease->held && lease->xact;

	fenced_make_owner(owner);
	deadline = TimestampTzPlusMilliseconds(GetCurrentTimestamp(), wait_ms);
	attempt_sent = false;
	PG_TRY();
	{
		long long	pttl;
		int			step = FENCED_BACKOFF_MIN;

		while (!(taken = fenced_try_acquire(resource, lock_key, token_key,
											owner, ttl_ms, lease, &token,
											&pttl)))
		{
			long		remaining;

			remaining = TimestampDifferenceMilliseconds(GetCurrentTimestamp(),
														deadline);
			if (remaining <= 0)
				break;
			fenced_backoff(step, pttl, remaining);
			step = Min(step * 2, FENCED_BACKOFF_MAX);
		}
	}
	PG_CATCH();
	{
		MemoryContext ecxt = MemoryContextSwitchTo(cxt);
		ErrorData  *edata = CopyErrorData();

		/*
		 * An attempt that may have reached Redis may have taken the lock:
		 * its owner is kept for the next acquisition or release of the
		 * resource to take over, or for the transaction's end to give
		 * back.  Nothing is kept for one that did not.
		 */
		MemoryContextSwitchTo(ecxt);
		if (attempt_sent && fenced_may_have_run(edata))
			lease_remember_unknown(resource, owner, ttl_ms, xact);
		FreeErrorData(edata);
		PG_RE_THROW();
	}
	PG_END_TRY();
	if (!taken)
	{
		stats_redis_count(STATS_REDIS_BUSY);
		PG_RETURN_NULL();
	}

	if (fencing_redis_wait_replicas > 0)
		fenced_wait_replicas(resource, lock_key, owner, ttl_ms, xact);

	now = GetCurrentTimestamp();
	lease = lease_enter(resource);
	if (xact && lease->lapsed)
		lease_end(lease);		/* its session declaration ends with it */
	if (xact && !had_xact_lease)
	{
		MemoryContext old;

		if (xact_cxt == NULL)
			xact_cxt = AllocSetContextCreate(TopMemoryContext,
											 "fencing transaction leases",
											 ALLOCSET_SMALL_SIZES);
		old = MemoryContextSwitchTo(xact_cxt);
		xact_resources = lappend(xact_resources, pstrdup(resource));
		MemoryContextSwitchTo(old);
	}
	lease->held = true;
	lease->xact = xact;
	lease->lapsed = false;
	lease->token = token;
	lease->acquired = now;
	lease->expires = TimestampTzPlusMilliseconds(now, ttl_ms);
	strlcpy(lease->owner, owner, FENCED_OWNER_LEN);
	lease_maybe_clear(lease);
	declared_set(resource, token, xact);
	leases_prune(now);
	stats_redis_acquired(TimestampTzPlusMilliseconds(deadline, -wait_ms));

	PG_RETURN_FENCE_TOKEN(token);
#else
	(void) resource;
	(void) ttl_ms;
	(void) wait_ms;
	(void) xact;
	fenced_not_supported();
#endif
}

/*
 * fenced_acquire(resource text, ttl interval, wait interval)
 *		returns fence_token
 *
 * Take the lock on resource for ttl and return a new token, declared for
 * the session; NULL if the lock is still busy after wait.  A NULL ttl or
 * wait means fencing.default_ttl or fencing.default_wait.  Acquiring a
 * lock this session already holds takes it again, with a new token.
 */
Datum
fenced_acquire(PG_FUNCTION_ARGS)
{
	session_state_check("fenced_acquire()");
	return fenced_acquire_common(fcinfo, false);
}

/*
 * fenced_acquire_xact(resource text, ttl interval, wait interval)
 *		returns fence_token
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
 * and then the lease ends and its token is no longer declared.
 */
Datum
fenced_extend(PG_FUNCTION_ARGS)
{
	char	   *resource = fenced_resource_arg(fcinfo);
	int			ttl_ms = fenced_ttl_arg(fcinfo, 1);
#ifdef USE_HIREDIS
	Lease	   *lease = lease_lookup(resource);
	char	   *lock_key;
	char		ttl[12];
	const char *args[2];
	RedisValue *reply;

	if (lease == NULL || !lease->held)
		PG_RETURN_BOOL(false);

	lock_key = fenced_keys(resource, NULL);
	snprintf(ttl, sizeof(ttl), "%d", ttl_ms);
	args[0] = lease->owner;
	args[1] = ttl;
	reply = redis_eval(&extend_script, 1, (const char **) &lock_key, 2, args);
	if (reply->type != REDIS_VALUE_INTEGER)
		redis_unexpected(extend_script.name, "an integer", reply);

	if (reply->integer == 1)
	{
		lease->expires = TimestampTzPlusMilliseconds(GetCurrentTimestamp(), ttl_ms);
		PG_RETURN_BOOL(true);
	}
	lease_end(lease);
	lease_forget_if_empty(lease);
	PG_RETURN_BOOL(false);
#else
	(void) resource;
	(void) ttl_ms;
	fenced_not_supported();
#endif
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
#ifdef USE_HIREDIS
	Lease	   *lease = lease_lookup(resource);
	char	   *lock_key;
	const char *args[1 + FENCED_MAX_MAYBE];
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
	if (!lease->held && lease->nmaybe == 0)
	{
		lease_end(lease);
		lease_remove(lease);
		PG_RETURN_BOOL(false);
	}

	/*
	 * From here on the lease is over.  A session lease's owner joins the
	 * maybe-owners until Redis answers, so that a release that fails can
	 * be retried, and a later acquisition takes the lock over if it is
	 * still there.  A transaction lease's is given back at the end of the
	 * transaction if this release fails, and never kept beyond it.
	 */
	nargs = 0;
	xact_owner[0] = '\0';
	if (lease->held && lease->xact)
	{
		strlcpy(xact_owner, lease->owner, FENCED_OWNER_LEN);
		args[nargs++] = xact_owner;
		lease_end(lease);
	}
	else if (lease->held)
	{
		lease_maybe_add(lease, lease->owner, lease->expires);
		lease_end(lease);
	}
	else if (lease->lapsed)
		lease_end(lease);
	for (i = 0; i < lease->nmaybe; i++)
		args[nargs++] = lease->maybe[i];

	lock_key = fenced_keys(resource, NULL);
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
#else
	(void) resource;
	fenced_not_supported();
#endif
}

/*
 * fenced_leases()
 *		The locks this session holds, as far as it knows: resource, token,
 *		owner, acquired, expires (by this server's clock).
 */
Datum
fenced_leases(PG_FUNCTION_ARGS)
{
#ifdef USE_HIREDIS
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
		values[0] = CStringGetTextDatum(lease->key.resource);
		values[1] = FenceTokenGetDatum(lease->token);
		values[2] = CStringGetTextDatum(lease->owner);
		values[3] = TimestampTzGetDatum(lease->acquired);
		values[4] = TimestampTzGetDatum(lease->expires);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	return (Datum) 0;
#else
	fenced_not_supported();
#endif
}
