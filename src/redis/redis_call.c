/*-------------------------------------------------------------------------
 *
 * redis_call.c
 *	  What one Redis call carries: a failure, described, and the classes
 *	  of Redis error replies; a reply, its arrays capped as hiredis reads
 *	  them, then copied out of hiredis into the current memory context;
 *	  and the time the call may take, a deadline that every step of it
 *	  (connect, AUTH, the command, a pause before a retry) spends, so that
 *	  no step can outlast the call.
 *
 * Errors are pure: nothing here touches a connection or throws but
 * redis_error_raise, so a failure can be described on any path, and
 * passed up to the caller that knows whether to throw it or to turn it
 * into a WARNING.
 *
 * hiredis allocates an array's element vector as soon as it reads its
 * header, and its reader has no maxelements before 1.0: every reader gets
 * our createArray, which refuses (see redis_io.c for the other caps).
 * hiredis memory is malloc'd, so each reply is copied and freed at once,
 * and no ereport can leak or dangle it.
 *
 * IDENTIFICATION
 *	  src/redis/redis_call.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <errno.h>
#include <limits.h>

#ifdef USE_HIREDIS
#include "redis/hiredis_compat.h"
#endif
#include "core/pg_compat.h"
#include "fencing_errcodes.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "redis/redis.h"
#include "redis/redis_int.h"
#include "storage/latch.h"
#include "utils/timestamp.h"

/*
 * The table of doc/lock-reference.md's "SQLSTATEs of the Redis functions", by Redis
 * error code.
 */
static const RedisErrorClass redis_error_classes[] = {
	{"NOAUTH", ERRCODE_FENCING_REDIS_REFUSED,
	"Set fencing.redis_password or fencing.redis_password_file."},
	{"WRONGPASS", ERRCODE_FENCING_REDIS_REFUSED, NULL},
	{"NOPERM", ERRCODE_FENCING_REDIS_REFUSED, NULL, true},
	{"OOM", ERRCODE_FENCING_REDIS_REFUSED,
	"Redis has reached its maxmemory limit; fencing needs room to write, and maxmemory-policy noeviction."},
	{"READONLY", ERRCODE_FENCING_REDIS_BUSY,
	"The server is a read-only replica; fencing.redis_host must name the primary."},
	{"LOADING", ERRCODE_FENCING_REDIS_BUSY, NULL},
	{"MASTERDOWN", ERRCODE_FENCING_REDIS_BUSY, NULL},
	{"BUSY", ERRCODE_FENCING_REDIS_BUSY, NULL},
	{"ERR max number of clients reached", ERRCODE_FENCING_REDIS_BUSY,
	"Redis has reached its maxclients limit."},
	{"TRYAGAIN", ERRCODE_FENCING_REDIS_CLUSTER_CHANGING, NULL},
	{"CLUSTERDOWN", ERRCODE_FENCING_REDIS_CLUSTER_CHANGING, NULL},
	{"MOVED", ERRCODE_FENCING_REDIS_CLUSTER_CHANGING,
	"Slots moved again while fencing followed a redirect; retry.  Outside Cluster mode, fencing.redis_host names a node of a Redis Cluster: set fencing.redis_cluster_nodes instead."},
	{"ASK", ERRCODE_FENCING_REDIS_CLUSTER_CHANGING,
	"Slots moved again while fencing followed a redirect; retry.  Outside Cluster mode, fencing.redis_host names a node of a Redis Cluster: set fencing.redis_cluster_nodes instead."},
	{"NOREPLICAS", ERRCODE_FENCING_REDIS_NOT_REPLICATED, NULL},
	{NULL, ERRCODE_FENCING_REDIS_REFUSED, NULL}
};

/*
 * redis_error_set
 *		Describe a failure in *err; returns false for the caller to pass
 *		on.  message, detail and hint are palloc'd or constant; detail and
 *		hint may be NULL.  err->sent and err->reason are left as they are:
 *		only the transport knows them.
 */
bool
redis_error_set(RedisError *err, int sqlstate, char *message, char *detail,
				char *hint)
{
	err->sqlstate = sqlstate;
	err->message = message;
	err->detail = detail;
	err->hint = hint;
	return false;
}

/* Report a failure described by redis_error_set. */
void
redis_error_raise(const RedisError *err)
{
	ereport(ERROR,
			(errcode(err->sqlstate),
			 errmsg_internal("%s", err->message),
			 err->detail ? errdetail_internal("%s", err->detail) : 0,
			 err->hint ? errhint("%s", err->hint) : 0));
	pg_unreachable();
}

/* One line for a WARNING: a failure's message and detail. */
char *
redis_error_line(const RedisError *err)
{
	return err->detail ? psprintf("%s: %s", err->message, err->detail) :
		err->message;
}

/* Set at load by the layer above (redis.h). */
RedisEventHook redis_event_hook = NULL;
RedisOwedHook redis_owed_hook = NULL;
RedisKeyHints redis_key_hints = {NULL, NULL, NULL};

/* The class of an error reply; the last entry if its code is unknown. */
const RedisErrorClass *
redis_error_class(const char *text)
{
	const RedisErrorClass *class;

	for (class = redis_error_classes; class->prefix != NULL; class++)
	{
		size_t		n = strlen(class->prefix);

		if (strncmp(text, class->prefix, n) == 0 &&
			(text[n] == ' ' || text[n] == '\0'))
			break;
	}
	return class;
}

/* The hint of an error reply of class, NULL if none. */
const char *
redis_error_hint(const RedisErrorClass *class)
{
	return class->keys_hint ? redis_key_hints.noperm_hint : class->hint;
}

/*
 * redis_errno_sqlstate
 *		The SQLSTATE errcode_for_file_access() would give errno, for file
 *		errors described before they are reported.
 */
int
redis_errno_sqlstate(int e)
{
	switch (e)
	{
		case ENOENT:
			return ERRCODE_UNDEFINED_FILE;
		case EPERM:
		case EACCES:
		case EROFS:
			return ERRCODE_INSUFFICIENT_PRIVILEGE;
		case ENOTDIR:
		case EISDIR:
			return ERRCODE_WRONG_OBJECT_TYPE;
		case ENFILE:
		case EMFILE:
			return ERRCODE_INSUFFICIENT_RESOURCES;
		case EIO:
			return ERRCODE_IO_ERROR;
		default:
			return ERRCODE_INTERNAL_ERROR;
	}
}


#ifdef USE_HIREDIS

/* The reply being read; one at a time in a backend. */
static long reply_elements = 0; /* announced so far in this reply */
static bool arrays_refused = false;

/* hiredis's reply builders, but for arrays, which go through our cap. */
static redisReplyObjectFunctions redis_reply_functions;
static void *(*hiredis_create_array) (const redisReadTask *task,
									  RedisArrayCount elements) = NULL;

/*
 * redis_create_array
 *		hiredis's createArray, refused (NULL, which the reader reports as
 *		out of memory) once the reply announces more elements than
 *		REDIS_MAX_REPLY_ELEMENTS in all, before anything is allocated.
 */
static void *
redis_create_array(const redisReadTask *task, RedisArrayCount elements)
{
	if (elements > (RedisArrayCount) (REDIS_MAX_REPLY_ELEMENTS - reply_elements))
	{
		arrays_refused = true;
		return NULL;
	}
	reply_elements += elements;
	return hiredis_create_array(task, elements);
}

/* Build the replies of reader with hiredis's functions, arrays capped. */
void
redis_value_cap_arrays(redisReader *reader)
{
	if (hiredis_create_array == NULL)
	{
		redis_reply_functions = *reader->fn;
		hiredis_create_array = redis_reply_functions.createArray;
		redis_reply_functions.createArray = redis_create_array;
	}
	reader->fn = &redis_reply_functions;
}

/* A new reply is to be read: nothing counted, nothing refused yet. */
void
redis_value_start_reply(void)
{
	reply_elements = 0;
	arrays_refused = false;
}

/* Whether the reply being read announced more elements than the cap. */
bool
redis_value_arrays_refused(void)
{
	return arrays_refused;
}

/* Copy a hiredis reply into the current memory context. */
RedisValue *
redis_value_copy(const redisReply *r)
{
	RedisValue *v = palloc0(sizeof(RedisValue));

	switch (r->type)
	{
		case REDIS_REPLY_STRING:
		case REDIS_REPLY_STATUS:
		case REDIS_REPLY_ERROR:
			v->type = r->type == REDIS_REPLY_STRING ? REDIS_VALUE_STRING :
				r->type == REDIS_REPLY_STATUS ? REDIS_VALUE_STATUS :
				REDIS_VALUE_ERROR;
			v->len = r->len;
			v->str = palloc(r->len + 1);
			memcpy(v->str, r->str, r->len);
			v->str[r->len] = '\0';
			break;
		case REDIS_REPLY_INTEGER:
			v->type = REDIS_VALUE_INTEGER;
			v->integer = r->integer;
			break;
		case REDIS_REPLY_NIL:
			v->type = REDIS_VALUE_NIL;
			break;
		case REDIS_REPLY_ARRAY:
			v->type = REDIS_VALUE_ARRAY;
			v->nelements = r->elements;
			v->elements = palloc0(sizeof(RedisValue *) * Max(r->elements, 1));
			for (size_t i = 0; i < r->elements; i++)
				v->elements[i] = redis_value_copy(r->element[i]);
			break;
		default:
			/* RESP3 types were refused before (redis_io_read) */
			elog(ERROR, "unknown hiredis reply type %d", r->type);
	}
	return v;
}

#endif							/* USE_HIREDIS */


/* A budget of ms from now, or without end if ms < 0. */
RedisBudget
redis_budget_start(long ms, const char *limit, bool interruptible)
{
	RedisBudget b;

	b.deadline = ms < 0 ? DT_NOEND :
		TimestampTzPlusMilliseconds(GetCurrentTimestamp(), ms);
	b.interruptible = interruptible;
	b.ms = ms;
	b.limit = limit;
	return b;
}

/*
 * redis_budget_within
 *		The budget of a step limited to ms: outer's, if it ends first.
 */
RedisBudget
redis_budget_within(const RedisBudget *outer, long ms, const char *limit)
{
	RedisBudget b = redis_budget_start(ms, limit, outer->interruptible);

	if (outer->deadline < b.deadline)
		return *outer;
	return b;
}

/* Milliseconds left, at most LONG_MAX; 0 once the deadline has passed. */
long
redis_budget_remaining(const RedisBudget *budget)
{
	if (budget->deadline == DT_NOEND)
		return LONG_MAX;
	return TimestampDifferenceMilliseconds(GetCurrentTimestamp(),
										   budget->deadline);
}

/*
 * redis_pause_before_retry
 *		Sleep pause_ms before another try, serving interrupts if the budget
 *		allows; false, at once, if the budget would not outlast the pause.
 */
bool
redis_pause_before_retry(const RedisBudget *budget, int pause_ms)
{
	if (redis_budget_remaining(budget) <= pause_ms)
		return false;
	if (budget->interruptible)
	{
		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 pause_ms, fencing_wait_event(FENCING_WAIT_REDIS_RETRY));
		ResetLatch(MyLatch);
		CHECK_FOR_INTERRUPTS();
	}
	else
		(void) WaitLatch(NULL, WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 pause_ms, fencing_wait_event(FENCING_WAIT_REDIS_RETRY));
	return true;
}
