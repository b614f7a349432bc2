/*-------------------------------------------------------------------------
 *
 * redis_conn.h
 *	  The Redis client's public API: commands, scripts, and the calls that
 *	  never throw (its settings: redis_settings.h).
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

#include "core/pg_compat.h"
#include "redis_io.h"

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
 * commands, pipelined, connecting first if need be, all within
 * fencing.redis_release_timeout (and the connect timeout and one command
 * timeout for them all within it) rather than by cancel.  Returns true with every replies[i] set
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
extern RedisBudget redis_release_budget(void);
extern bool redis_commands_noerror_within(const RedisBudget *budget,
										  int ncommands, const int *argc,
										  const char ***argv,
										  RedisValue **replies,
										  char **failure);

extern void redis_script_prepare(RedisScript *script);
extern RedisValue *redis_eval(RedisScript *script, int nkeys,
							  const char **keys, int nargs,
							  const char **args);
pg_noreturn extern void redis_refused(const char *command,
									  const RedisValue *reply);
pg_noreturn extern void redis_unexpected(const char *command,
										 const char *expected,
										 const RedisValue *got);
extern bool redis_call_sent(void);
extern bool redis_last_server(const char **host, int *port);
#endif

#endif							/* REDIS_CONN_H */
