/*-------------------------------------------------------------------------
 *
 * redis_error.c
 *	  A failed Redis call, described, and the classes of Redis error
 *	  replies.
 *
 * Pure: nothing here touches a connection or throws but
 * redis_error_raise, so a failure can be described on any path, and
 * passed up to the caller that knows whether to throw it or to turn it
 * into a WARNING.
 *
 * IDENTIFICATION
 *	  src/redis_error.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <errno.h>

#include "fencing_errcodes.h"
#include "redis_error.h"

/*
 * The table of doc/redis.md's "SQLSTATEs of the Redis functions", by Redis
 * error code.
 */
static const RedisErrorClass redis_error_classes[] = {
	{"NOAUTH", ERRCODE_FENCING_REDIS_REFUSED,
	"Set fencing.redis_password or fencing.redis_password_file."},
	{"WRONGPASS", ERRCODE_FENCING_REDIS_REFUSED, NULL},
	{"NOPERM", ERRCODE_FENCING_REDIS_REFUSED,
	"The Redis ACL user needs EVALSHA, EVAL and WAIT, and access to the keys of fencing.redis_lock_key and fencing.redis_token_key."},
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
