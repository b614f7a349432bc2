/*-------------------------------------------------------------------------
 *
 * redis_error.h
 *	  A failed Redis call, described, and the classes of Redis error
 *	  replies.
 *
 * The bottom of the Redis client: it knows no connection, so describing
 * a failure never closes one; whoever owns the connection decides that.
 *
 * IDENTIFICATION
 *	  src/redis_error.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef REDIS_ERROR_H
#define REDIS_ERROR_H

#include "core/pg_compat.h"

/*
 * A failed call, for ereport (redis_error_raise) or, where nothing may be
 * thrown, as one line of text (redis_error_line).  The strings are
 * palloc'd or constant.
 *
 * sent says that the command the call was made for had been handed, in
 * part at least, to the socket when the call failed: the server may have
 * run it.  It is false for every failure before that (no connection,
 * AUTH refused, a password file that cannot be read).  reason is the
 * failure in a few words without the server's name, for a list of what
 * each of several servers did (the Sentinels).
 */
typedef struct RedisError
{
	int			sqlstate;
	char	   *message;
	char	   *detail;			/* NULL if none */
	char	   *hint;			/* NULL if none */
	const char *reason;			/* NULL if none */
	bool		sent;
} RedisError;

/*
 * The SQLSTATE and hint of a Redis error reply, by its error code (the
 * first word), or for a few replies under the generic ERR code, by their
 * whole text; prefix is NULL for a code fencing does not know.
 */
typedef struct RedisErrorClass
{
	const char *prefix;
	int			sqlstate;
	const char *hint;
} RedisErrorClass;

extern bool redis_error_set(RedisError *err, int sqlstate, char *message,
							char *detail, char *hint);
pg_noreturn extern void redis_error_raise(const RedisError *err);
extern char *redis_error_line(const RedisError *err);
extern const RedisErrorClass *redis_error_class(const char *text);
extern int	redis_errno_sqlstate(int e);

#endif							/* REDIS_ERROR_H */
