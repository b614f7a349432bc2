/*-------------------------------------------------------------------------
 *
 * redis.h
 *	  The public face of the Redis client, the one header of src/redis/
 *	  that the lock layer includes: replies (RedisValue), the time a call
 *	  may take (RedisBudget), a failed call described (RedisError), every
 *	  setting of the client, commands and scripts (redis_conn.c), and a
 *	  subscriber connection (redis_subscribe.c).
 *
 * The client knows nothing above it: no tokens, marks, locks or
 * statistics.  Callers hand in commands and scripts and get back palloc'd
 * copies of the replies, so that no hiredis memory ever outlives the call
 * that received it.  Describing a failure never closes a connection;
 * whoever owns the connection decides that.
 *
 * Only src/lock/ includes this (test/scripts/layers.sh checks it).
 *
 * IDENTIFICATION
 *	  src/redis/redis.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef FENCING_REDIS_REDIS_H
#define FENCING_REDIS_REDIS_H

#include "core/pg_compat.h"
#include "datatype/timestamp.h"

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

/*
 * The time a call may take, passed down to every step of it: the
 * deadline, and whether the waits serve interrupts (not where PostgreSQL
 * holds them: after commit, at exit).  ms and limit name the limit that
 * set the deadline, for messages.
 */
typedef struct RedisBudget
{
	TimestampTz deadline;
	bool		interruptible;
	long		ms;
	const char *limit;
} RedisBudget;

extern RedisBudget redis_budget_start(long ms, const char *limit,
									  bool interruptible);
extern RedisBudget redis_budget_within(const RedisBudget *outer, long ms,
									   const char *limit);
extern long redis_budget_remaining(const RedisBudget *budget);
extern bool redis_pause_before_retry(const RedisBudget *budget, int pause_ms);

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
 * whole text; prefix is NULL for a code fencing does not know.  A class
 * whose hint is about the keys (keys_hint) takes it from the layer above
 * (redis_key_hints): see redis_error_hint.
 */
typedef struct RedisErrorClass
{
	const char *prefix;
	int			sqlstate;
	const char *hint;
	bool		keys_hint;
} RedisErrorClass;

extern bool redis_error_set(RedisError *err, int sqlstate, char *message,
							char *detail, char *hint);
pg_noreturn extern void redis_error_raise(const RedisError *err);
extern char *redis_error_line(const RedisError *err);
extern const RedisErrorClass *redis_error_class(const char *text);
extern const char *redis_error_hint(const RedisErrorClass *class);
extern int	redis_errno_sqlstate(int e);

/*
 * What the client tells the layer above, and what that layer tells it
 * back: the client knows nothing above it, so the layer that gives it
 * keys and counts what it does (src/lock/) sets these at load.
 *
 * redis_event_hook is called at each event the layer above counts, NULL
 * counting nothing.  redis_key_hints are what messages say about the keys
 * given (the settings that name them), NULL saying nothing: the hint of a
 * NOPERM refusal, and the detail and hint of a script's keys refused for
 * being in different Redis Cluster hash slots.
 */
typedef enum RedisEvent
{
	REDIS_EVENT_CONNECT,		/* a connection made to Redis */
	REDIS_EVENT_REDIRECT,		/* a Cluster -MOVED or -ASK followed */
	REDIS_EVENT_FAILOVER		/* a move to a new primary, Sentinel mode */
} RedisEvent;

typedef void (*RedisEventHook) (RedisEvent event);

typedef struct RedisKeyHints
{
	const char *noperm_hint;
	const char *crossslot_detail;
	const char *crossslot_hint;
} RedisKeyHints;

/*
 * redis_owed_hook is called with each reply to a command sent by
 * redis_commands_post_noerror, in order, when it is read, before the
 * connection carries anything else; with NULL for one lost because the
 * connection closed first (which may be in error cleanup: the hook must
 * not throw then).
 */
typedef void (*RedisOwedHook) (const RedisValue *reply);

extern RedisEventHook redis_event_hook;
extern RedisOwedHook redis_owed_hook;
extern RedisKeyHints redis_key_hints;

/*
 * The longest password, in fencing.redis_password or the first line of
 * fencing.redis_password_file.  Redis sets no limit; this one only keeps
 * a mistake (a whole file) from being sent.
 */
#define REDIS_MAX_PASSWORD_LEN	(1024 * 1024)

extern char *redis_host;
extern int	redis_port;
extern char *redis_username;
extern char *redis_password;
extern char *redis_password_file;
extern int	redis_database;
extern int	redis_connect_timeout;	/* ms */
extern int	redis_command_timeout;	/* ms */
extern int	redis_release_timeout;	/* ms */
extern char *redis_sentinels;
extern char *redis_sentinel_master;
extern char *redis_sentinel_username;
extern char *redis_sentinel_password_file;
extern char *redis_cluster_nodes;
extern bool redis_discovered_host_names;

/* fencing.redis_tls: libpq's sslmode words, the ones that always use TLS. */
typedef enum RedisTlsMode
{
	REDIS_TLS_DISABLE,
	REDIS_TLS_REQUIRE,
	REDIS_TLS_VERIFY_CA,
	REDIS_TLS_VERIFY_FULL
} RedisTlsMode;

extern int	redis_tls;
extern char *redis_tls_ca_file;
extern char *redis_tls_cert_file;
extern char *redis_tls_key_file;
extern char *redis_tls_server_name;

/*
 * Bumped whenever a setting that names the server or the credentials
 * changes; a connection made under an older generation is replaced.
 */
extern uint64 redis_settings_generation;

/* Bumped when fencing.redis_cluster_nodes changes: forget the slot map. */
extern uint64 redis_cluster_generation;

extern void redis_settings_init(void);
extern bool redis_sentinel_enabled(void);
extern bool redis_cluster_enabled(void);
extern uint64 redis_settings_fingerprint(void);

#ifdef USE_HIREDIS

extern bool redis_check_private_file(const char *path, const char *what,
									 RedisError *err);
extern bool redis_read_password_file(const char *path, char **password,
									 RedisError *err);
extern void redis_forget_password(char *password);
#endif

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
extern bool redis_commands_post_ready(void);
extern bool redis_commands_post_noerror_within(const RedisBudget *budget,
											   int ncommands, const int *argc,
											   const char ***argv,
											   char **failure);
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

#ifdef USE_HIREDIS

/* How a wait on the subscriber connection ended. */
typedef enum RedisSubscribeWake
{
	REDIS_WAKE_MESSAGE,			/* a message on the channel */
	REDIS_WAKE_TIMEOUT,			/* the time passed */
	REDIS_WAKE_LOST				/* the subscription is gone: closed */
} RedisSubscribeWake;

/* Why a subscription could not be made. */
typedef enum RedisSubscribeFailure
{
	REDIS_SUBSCRIBE_OK,
	REDIS_SUBSCRIBE_UNREACHABLE,	/* no connection: try again later */
	REDIS_SUBSCRIBE_REFUSED		/* the server said no (ACL, no such command) */
} RedisSubscribeFailure;

extern RedisSubscribeFailure redis_subscribe(const char *channel,
											 TimestampTz deadline);
extern bool redis_subscribed(void);
extern bool redis_subscribed_to_last_server(void);
extern RedisSubscribeWake redis_subscribe_wait(long timeout_ms);
extern void redis_subscribe_close(void);
#endif

#endif							/* FENCING_REDIS_REDIS_H */
