/*-------------------------------------------------------------------------
 *
 * redis_conn.h
 *	  One hiredis connection per backend: connect, commands, replies,
 *	  errors (its settings: redis_settings.h).
 *
 * Nothing here knows about tokens, marks or locks; callers hand in
 * commands and scripts and get back palloc'd copies of the replies, so
 * that no hiredis memory ever outlives the call that received it.
 *
 * IDENTIFICATION
 *	  src/redis_conn.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef REDIS_CONN_H
#define REDIS_CONN_H

#include "pg_compat.h"

/* A reply, copied out of hiredis into the current memory context. */
typedef enum RedisValueType
{
	REDIS_VALUE_STRING,
	REDIS_VALUE_ARRAY,
	REDIS_VALUE_INTEGER,
	REDIS_VALUE_NIL,
	REDIS_VALUE_STATUS,
	REDIS_VALUE_ERROR
} RedisValueType;

typedef struct RedisValue
{
	RedisValueType type;
	long long	integer;		/* REDIS_VALUE_INTEGER */
	char	   *str;			/* STRING, STATUS, ERROR: NUL-terminated */
	size_t		len;
	size_t		nelements;		/* ARRAY */
	struct RedisValue **elements;
} RedisValue;

/* A Lua script; sha is filled in on first use. */
typedef struct RedisScript
{
	const char *name;			/* for messages */
	const char *text;
	char		sha[41];
} RedisScript;

#ifdef USE_HIREDIS
extern RedisValue *redis_command(int argc, const char **argv,
								 int extra_timeout_ms);
extern RedisValue *redis_command_if_connected(int argc, const char **argv);

/*
 * For the places where PostgreSQL holds interrupts and nothing may throw
 * (an XACT_EVENT_COMMIT callback, an exit callback): runs ncommands
 * commands, pipelined, connecting first if need be, bounded by
 * fencing.redis_connect_timeout and one fencing.redis_command_timeout for
 * them all rather than by cancel.  Returns true with every replies[i] set
 * (possibly an error reply), or false with the connection dropped, the
 * replies not read NULL, and *failure set to a one-line description for
 * the caller's WARNING.  Never throws (but for running out of memory).  At
 * exit, call it from a before_shmem_exit callback: this module frees its
 * connection in an on_proc_exit callback, and a later call would
 * reconnect.
 */
extern bool redis_commands_noerror(int ncommands, const int *argc,
								   const char ***argv, RedisValue **replies,
								   char **failure);

extern RedisValue *redis_eval(RedisScript *script, int nkeys,
							  const char **keys, int nargs,
							  const char **args);
pg_noreturn extern void redis_refused(const char *command,
									  const RedisValue *reply);
pg_noreturn extern void redis_unexpected(const char *command,
										 const char *expected,
										 const RedisValue *got);

/*
 * For the modules behind the connection (redis_sentinel.c) only.
 *
 * A failed call, described for ereport (redis_raise) or handed back as
 * text to a caller that must not throw (redis_commands_noerror).  The
 * strings are palloc'd in the caller's memory context.
 */
typedef struct RedisError
{
	int			sqlstate;
	char	   *message;
	char	   *detail;			/* NULL if none */
	char	   *hint;			/* NULL if none */
} RedisError;

extern bool redis_fail(RedisError *err, int sqlstate, char *message,
					   char *detail, char *hint);
pg_noreturn extern void redis_raise(const RedisError *err);
extern bool redis_read_password_file(const char *path, char **password,
									 RedisError *err);
#endif

#endif							/* REDIS_CONN_H */
