/*-------------------------------------------------------------------------
 *
 * lock_settings.c
 *	  The settings of fenced_acquire() and friends, the arguments their SQL
 *	  functions share, and the Redis keys and release channel of a
 *	  resource.
 *
 * Built with or without hiredis: the settings exist either way, so that a
 * configuration written for one build loads in the other.
 *
 * The release script announces a lock it deleted on the resource's
 * channel, the lock key followed by ":released", the lock key in braces
 * if it has no {tag} (so that the channel is in the lock key's hash
 * slot): SPUBLISH in Cluster mode, where a shard channel stays within the
 * slot's shard, PUBLISH otherwise.  The fair waiters' queue of a lock is
 * kept beside it the same way, under ":fair:queue" and ":fair:timeouts".
 *
 * IDENTIFICATION
 *	  src/lock/lock_settings.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <limits.h>

#include "common/int.h"
#include "core/core.h"
#include "datatype/timestamp.h"
#include "fencing_errcodes.h"
#include "lib/stringinfo.h"
#include "lock/lock.h"
#include "lock/lock_int.h"
#include "redis/redis.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/timestamp.h"

/* Bounds and defaults of the settings. */
#define FENCED_DEFAULT_TTL			30000	/* ms */
#define FENCED_MAX_TTL				INT_MAX /* ms, about 24.8 days */
#define FENCED_DEFAULT_WAIT			0	/* ms */
#define FENCED_MAX_WAIT				INT_MAX /* ms */
#define FENCED_DEFAULT_MAX_HOLD		600000	/* ms */
#define FENCED_MAX_MAX_HOLD			INT_MAX /* ms */
#define FENCED_MAX_WAIT_REPLICAS	1000
#define FENCED_DEFAULT_WAIT_TIMEOUT 1000	/* ms */
#define FENCED_MAX_WAIT_TIMEOUT		3600000 /* ms */
#define FENCED_MAX_KEY_TEMPLATE		1024
#define FENCED_KEY_PLACEHOLDER		"<resource>"

/*
 * How long a token counter key outlives the lock it was last issued or
 * extended with, in ms.  Past that, the next token comes from the Redis
 * clock, which has then passed the last token issued (unless tokens were
 * issued faster than one per microsecond for that long), or from a repair
 * that is above it (lock_attempt.c), so the key is disposable and Redis
 * no longer keeps one per resource ever locked.
 */
#define FENCED_COUNTER_LINGER		60000

/*
 * Token counter keys under this prefix are fencing's own.  Any other
 * template (the classic "fence:<resource>") may name a key that other
 * clients INCR, expecting it to last: it never expires.
 */
#define FENCED_OWN_KEY_PREFIX		"fencing:"

/* Settings. */
char	   *fencing_redis_lock_key = NULL;
char	   *fencing_redis_token_key = NULL;
static int	fencing_default_ttl = FENCED_DEFAULT_TTL;
static int	fencing_default_wait = FENCED_DEFAULT_WAIT;
static int	fencing_lease_max_hold = FENCED_DEFAULT_MAX_HOLD;
int			fencing_redis_wait_replicas = 0;
int			fencing_redis_wait_timeout = FENCED_DEFAULT_WAIT_TIMEOUT;
bool		fencing_acquire_raises_mark = true;
int			fencing_lock_wait_wakeup = FENCED_WAKEUP_RELEASE;

static const struct config_enum_entry lock_wait_wakeup_options[] = {
	{"release", FENCED_WAKEUP_RELEASE, false},
	{"poll", FENCED_WAKEUP_POLL, false},
	{NULL, 0, false}
};

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
 * fenced_settings_init
 *		Define the Redis client's settings, then the lock settings; called
 *		from _PG_init.  Both exist in a build without hiredis too.
 */
void
fenced_settings_init(void)
{
	redis_settings_init();
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

	DefineCustomBoolVariable("fencing.acquire_raises_mark",
							 "Whether fenced_acquire() and fenced_acquire_xact() raise the resource's high-water mark to the token they return.",
							 "On, every older token is stale for the resource from the acquisition on, before the new holder writes.  Turn it off for lock names that guard no table, whose marks would only fill fence_high_water.",
							 &fencing_acquire_raises_mark,
							 true,
							 PGC_USERSET,
							 0,
							 NULL, NULL, NULL);

	DefineCustomIntVariable("fencing.lease_max_hold",
							"Longest time a lease taken with renew => true is renewed after its acquisition, when max_hold is NULL.",
							"Renewal cannot tell a stuck owner from one that works (a backend hung in I/O or an endless wait still runs its statement): past this the lock expires with its ttl.  Valid range is 1 ms to about 24 days.",
							&fencing_lease_max_hold,
							FENCED_DEFAULT_MAX_HOLD, 1, FENCED_MAX_MAX_HOLD,
							PGC_USERSET,
							GUC_UNIT_MS,
							NULL, NULL, NULL);

	DefineCustomEnumVariable("fencing.lock_wait_wakeup",
							 "What wakes fenced_acquire() waiting for a busy lock: \"release\" or \"poll\".",
							 "release: a second Redis connection subscribed to the lock's release notices, and the lock's expiry; where the subscription is refused, polling.  poll: an exponential back-off of 4 to 128 ms alone.",
							 &fencing_lock_wait_wakeup,
							 FENCED_WAKEUP_RELEASE,
							 lock_wait_wakeup_options,
							 PGC_USERSET,
							 0,
							 NULL, NULL, NULL);
}

/* The resource argument: neither NULL, nor empty, nor too long. */
char *
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
 * The interval argument at argno, named name, in ms, rounded up so that a
 * lease is never shorter than asked for; not NULL.
 */
static int
lease_ms_arg(FunctionCallInfo fcinfo, int argno, const char *name)
{
	int64		us = interval_to_us(PG_GETARG_INTERVAL_P(argno), name);

	if (us <= 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s must be greater than zero", name)));
	if (us > (int64) FENCED_MAX_TTL * 1000)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s is too long", name),
				 errdetail("The longest lease is %d ms.", FENCED_MAX_TTL)));
	return (int) ((us + 999) / 1000);
}

/*
 * fenced_ttl_arg
 *		The ttl argument at argno in ms, rounded up so that a lease is
 *		never shorter than asked for; the default when NULL.
 */
int
fenced_ttl_arg(FunctionCallInfo fcinfo, int argno)
{
	if (PG_ARGISNULL(argno))
		return fencing_default_ttl;
	return lease_ms_arg(fcinfo, argno, "ttl");
}

/*
 * fenced_use_lease_arg
 *		fence_use()'s lease argument at argno in ms, as a ttl; -1 when NULL
 *		(no lease).  A lease is refused with a declaration withdrawn
 *		(has_token false): it would have no token to fence with.
 */
int
fenced_use_lease_arg(FunctionCallInfo fcinfo, int argno, bool has_token)
{
	int			lease_ms;

	if (PG_ARGISNULL(argno))
		return -1;
	lease_ms = lease_ms_arg(fcinfo, argno, "lease");
	if (lease_ms > 0 && !has_token)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("a lease needs a token"),
				 errhint("Withdraw a declaration with fence_use(resource, NULL), without a lease.")));
	return lease_ms;
}

/*
 * The renew argument at argno: false when NULL, or when the function was
 * declared without it (an install not yet updated to 1.2).
 */
bool
fenced_renew_arg(FunctionCallInfo fcinfo, int argno)
{
	return PG_NARGS() > argno && !PG_ARGISNULL(argno) &&
		PG_GETARG_BOOL(argno);
}

/*
 * fenced_max_hold_arg
 *		The max_hold argument at argno in ms, rounded up; the default when
 *		NULL or when the function was declared without it (an install not
 *		yet updated to 1.3).
 */
int
fenced_max_hold_arg(FunctionCallInfo fcinfo, int argno)
{
	int64		us;

	if (PG_NARGS() <= argno || PG_ARGISNULL(argno))
		return fencing_lease_max_hold;
	us = interval_to_us(PG_GETARG_INTERVAL_P(argno), "max_hold");
	if (us <= 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("max_hold must be greater than zero")));
	if (us > (int64) FENCED_MAX_MAX_HOLD * 1000)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("max_hold is too long"),
				 errdetail("The longest hold is %d ms.", FENCED_MAX_MAX_HOLD)));
	return (int) Min((us + 999) / 1000, (int64) FENCED_MAX_MAX_HOLD);
}

/*
 * fenced_options_args
 *		The arguments of an acquisition after the resource(s): ttl, wait,
 *		renew, max_hold, fair, on_lost.  One not declared (an install not
 *		yet updated to 1.3) or NULL is its default: fair false, on_lost
 *		'ignore'.  on_lost is 'ignore' or 'error'.
 */
void
fenced_options_args(FunctionCallInfo fcinfo, bool xact,
					FencedAcquireOptions *opts)
{
	opts->ttl_ms = fenced_ttl_arg(fcinfo, 1);
	opts->wait_ms = fenced_wait_arg(fcinfo, 2);
	opts->xact = xact;
	opts->renew = fenced_renew_arg(fcinfo, 3);
	opts->max_hold_ms = fenced_max_hold_arg(fcinfo, 4);
	opts->fair = PG_NARGS() > 5 && !PG_ARGISNULL(5) && PG_GETARG_BOOL(5);
	opts->on_lost_error = false;
	if (PG_NARGS() > 6 && !PG_ARGISNULL(6))
	{
		char	   *on_lost = TextDatumGetCString(PG_GETARG_DATUM(6));

		if (strcmp(on_lost, "error") == 0)
			opts->on_lost_error = true;
		else if (strcmp(on_lost, "ignore") != 0)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("invalid value for on_lost: \"%s\"", on_lost),
					 errhint("Valid values are \"ignore\" and \"error\".")));
	}
}

/* The wait argument at argno in ms; the default when NULL. */
int
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

/* Expand a key template for resource. */
char *
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
char *
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

/* Whether token counter keys expire: fencing's own, by their prefix. */
bool
fenced_counter_expires(void)
{
	return strncmp(fencing_redis_token_key, FENCED_OWN_KEY_PREFIX,
				   strlen(FENCED_OWN_KEY_PREFIX)) == 0;
}

/*
 * fenced_counter_lifetime
 *		Into buf, the lifetime in ms of a token counter key issued or
 *		extended with a lock of ttl_ms; false, and buf empty, for a key that
 *		must never expire.  The lock and its counter expire together, the
 *		counter later: extending a lock extends its counter too, so that a
 *		lock held longer than ttl + FENCED_COUNTER_LINGER never outlives it.
 */
bool
fenced_counter_lifetime(int ttl_ms, char *buf, size_t len)
{
	buf[0] = '\0';
	if (!fenced_counter_expires())
		return false;
	snprintf(buf, len, INT64_FORMAT, (int64) ttl_ms + FENCED_COUNTER_LINGER);
	return true;
}

/* How long a token counter outlives the lock it was extended with, in ms. */
int
fenced_counter_linger(void)
{
	return FENCED_COUNTER_LINGER;
}

/*
 * fenced_release_channel
 *		The channel of the release notices of the lock at lock_key: in its
 *		hash slot, which is the slot of its {tag}, or of the whole key
 *		without one.
 */
char *
fenced_release_channel(const char *lock_key)
{
	const char *open = strchr(lock_key, '{');
	const char *close = open != NULL ? strchr(open, '}') : NULL;

	if (close != NULL && close > open + 1)
		return psprintf("%s:released", lock_key);
	return psprintf("{%s}:released", lock_key);
}

/*
 * fenced_queue_keys
 *		The keys of the fair waiters' queue of the lock at lock_key, and
 *		with timeouts_key those of their timeouts: in the lock key's hash
 *		slot as its release channel is, so that the fair acquire script
 *		may take them with the lock key and the token key in Cluster mode.
 */
char *
fenced_queue_keys(const char *lock_key, char **timeouts_key)
{
	const char *open = strchr(lock_key, '{');
	const char *close = open != NULL ? strchr(open, '}') : NULL;
	const char *fmt = close != NULL && close > open + 1 ? "%s:%s" : "{%s}:%s";

	*timeouts_key = psprintf(fmt, lock_key, "fair:timeouts");
	return psprintf(fmt, lock_key, "fair:queue");
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
