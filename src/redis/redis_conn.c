/*-------------------------------------------------------------------------
 *
 * redis_conn.c
 *	  The Redis client's public API: commands, scripts, the calls that
 *	  never throw, and which mode (one server, Sentinel, Cluster) serves
 *	  them.
 *
 * A backend's connections are opened lazily by the first command it
 * sends, never in _PG_init (which may run in the postmaster, whose
 * sockets every child would share), reused by every later command, and
 * closed at backend exit.  Which server: fencing.redis_host, or in
 * Sentinel mode the primary that redis_sentinel.c finds (asked again at
 * every connect, checked with ROLE, and left as soon as the Sentinels
 * announce a failover), or in Cluster mode the primary of the command's
 * hash slot (redis_cluster.c).  Callers see none of it.
 *
 * Every call has one budget, passed down to each of its steps: an
 * interruptible call has no deadline of its own, each step (connect,
 * AUTH, SELECT, the command) being bounded by its timeout setting; a call
 * that must not throw (redis_commands_noerror) ends, connect included,
 * within fencing.redis_release_timeout.
 *
 * After any failure -- an I/O error, a timeout, an interrupt while a
 * command is outstanding, a protocol error, an error reply that is
 * reported to the user -- the connection is closed and the next command
 * opens a new one, re-sending AUTH and SELECT: a reply that arrives late
 * can never be read as the answer to a later command, and a command is
 * never sent twice.
 *
 * IDENTIFICATION
 *	  src/redis/redis_conn.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "common/cryptohash.h"
#include "fencing_errcodes.h"
#include "miscadmin.h"
#include "redis/redis.h"
#include "redis/redis_int.h"
#include "storage/ipc.h"

#ifdef USE_HIREDIS

/* The link of the single-server and Sentinel modes. */
static RedisLink single;
static bool exit_registered = false;

/* See redis_call_sent. */
static bool call_sent = false;

/*
 * Sentinel mode: the primary the session last connected to, under which
 * settings, and whether a move away from it was counted already (the
 * Sentinels' announcement or a READONLY reply).  A move noticed only by
 * the reconnection, the old connection having dropped first, is counted
 * when the new primary's address differs (sentinel_count_move).
 */
static char last_primary[REDIS_HOSTPORT_MAX_HOST + 1];
static int	last_primary_port = 0;
static uint64 last_primary_generation = 0;
static bool move_counted = false;

/* The link the current call uses, or used last; NULL if none. */
static RedisLink *
redis_current(void)
{
	return redis_cluster_enabled() ? redis_cluster_active() : &single;
}

/* Close the current link, if any.  Safe to call from error cleanup. */
static void
redis_drop(void)
{
	RedisLink  *link = redis_current();

	if (link != NULL)
		redis_link_close(link);
}

static void
redis_at_exit(int code, Datum arg)
{
	redis_link_close(&single);
	redis_cluster_close_all();
}

/*
 * redis_check_mode
 *		The settings that the check hooks cannot check together, since
 *		they cannot see each other's values; false if they conflict,
 *		described in *err.
 */
static bool
redis_check_mode(RedisError *err)
{
	if (redis_sentinel_enabled() && redis_cluster_enabled())
		return redis_error_set(err, ERRCODE_FENCING_REDIS_REFUSED,
							   pstrdup("fencing.redis_sentinels and fencing.redis_cluster_nodes are both set"),
							   NULL,
							   pstrdup("Set fencing.redis_sentinels for a primary watched by Sentinels, or fencing.redis_cluster_nodes for a Redis Cluster, not both."));
	if (redis_cluster_enabled() && redis_database != 0)
		return redis_error_set(err, ERRCODE_FENCING_REDIS_REFUSED,
							   psprintf("fencing.redis_database is %d, but a Redis Cluster has only database 0",
										redis_database),
							   NULL,
							   pstrdup("Set fencing.redis_database to 0 in Cluster mode."));
	return true;
}

/*
 * redis_single_ensure
 *		Single-server and Sentinel modes: make sure the link is open and
 *		usable under the current settings, opening it within the budget,
 *		after reading the replies owed to redis_commands_post_noerror_within
 *		(within one command timeout); false on failure, described in *err.
 */
/*
 * Count a failover when the Sentinels named another primary than the one
 * this session last used under the same settings, unless the move was
 * counted when it was noticed; then remember the new one.
 */
static void
sentinel_count_move(void)
{
	if (last_primary_port != 0 && !move_counted &&
		last_primary_generation == single.generation &&
		(last_primary_port != single.port ||
		 strcmp(last_primary, single.host) != 0))
		redis_count_event(REDIS_EVENT_FAILOVER);
	strlcpy(last_primary, single.host, sizeof(last_primary));
	last_primary_port = single.port;
	last_primary_generation = single.generation;
	move_counted = false;
}

static bool
redis_single_ensure(const RedisBudget *budget, RedisError *err)
{
	if (redis_link_is_open(&single) && single.sock.owed > 0)
	{
		RedisBudget step = redis_budget_within(budget, redis_command_timeout,
											   "fencing.redis_command_timeout");
		RedisError	lost = {0};

		/* a failure closes the link, and the call goes on over a new one */
		(void) redis_link_collect(&single, &step, &lost);
	}
	if (redis_link_is_open(&single) && redis_sentinel_enabled() &&
		redis_sentinel_switched())
	{
		redis_count_event(REDIS_EVENT_FAILOVER);
		move_counted = true;
		redis_link_close(&single);
	}
	else if (redis_link_is_open(&single) && !redis_link_usable(&single))
		redis_link_close(&single);
	if (redis_link_is_open(&single))
		return true;

	redis_cluster_close_all();
	if (redis_sentinel_enabled())
	{
		if (!redis_sentinel_connect(&single, budget, err))
			return false;
		sentinel_count_move();
		return true;
	}
	redis_sentinel_unwatch();
	return redis_link_open(&single, redis_host, redis_port, budget, err);
}

/*
 * redis_send
 *		Send one command to the server it belongs to and return its reply;
 *		NULL on failure, described in *err.  Connecting spends outer; the
 *		command has command_ms, within outer.
 */
static RedisValue *
redis_send(int argc, const char **argv, const RedisBudget *outer,
		   long command_ms, RedisError *err)
{
	RedisBudget budget;

	if (!exit_registered)
	{
		on_proc_exit(redis_at_exit, (Datum) 0);
		exit_registered = true;
	}
	if (!redis_check_mode(err))
		return NULL;
	if (redis_cluster_enabled())
	{
		redis_link_close(&single);
		redis_sentinel_unwatch();
		return redis_cluster_send(argc, argv, outer, command_ms, err);
	}
	if (!redis_single_ensure(outer, err))
		return NULL;
	budget = redis_budget_within(outer, command_ms,
								 "fencing.redis_command_timeout");
	return redis_link_exchange(&single, argc, argv, &budget, err);
}

/*
 * redis_command
 *		Send one command and return its reply, connecting first if need be.
 *
 * extra_timeout_ms is added to fencing.redis_command_timeout, for commands
 * that wait on the server side (WAIT).  Connection trouble is reported as
 * an ERROR and leaves no connection behind; an error reply is returned
 * like any other, with the connection kept.
 */
RedisValue *
redis_command(int argc, const char **argv, int extra_timeout_ms)
{
	RedisValue *volatile result = NULL;
	RedisError	err = {0};
	RedisBudget outer = redis_budget_start(-1, NULL, true);

	call_sent = false;
	PG_TRY();
	{
		result = redis_send(argc, argv, &outer,
							(long) redis_command_timeout + extra_timeout_ms,
							&err);
	}
	PG_CATCH();
	{
		RedisLink  *link = redis_current();

		call_sent = link != NULL && redis_link_sent(link);
		redis_drop();
		PG_RE_THROW();
	}
	PG_END_TRY();
	if (result == NULL)
	{
		call_sent = err.sent;
		redis_drop();
		redis_error_raise(&err);
	}
	call_sent = true;
	return result;
}

/*
 * redis_call_sent
 *		Whether the last call of redis_command (redis_eval) that failed had
 *		handed its command, in part at least, to the socket: the server may
 *		have run it.  True after a call that got its reply.
 */
bool
redis_call_sent(void)
{
	return call_sent;
}

/*
 * redis_last_server
 *		The server the last command went to (Sentinel mode: the primary the
 *		Sentinels named; Cluster mode: the node that served its keys), for
 *		a second connection to the same one; false before the first.
 */
bool
redis_last_server(const char **host, int *port)
{
	RedisLink  *link = redis_current();

	if (link == NULL || link->host[0] == '\0')
		return false;
	*host = link->host;
	*port = link->port;
	return true;
}

/*
 * redis_command_if_connected
 *		Send one command on the open connection, for clean-up on the way to
 *		reporting another error: NULL if there is no connection or it fails,
 *		never an error of its own (but interrupts are still served).
 */
RedisValue *
redis_command_if_connected(int argc, const char **argv)
{
	RedisLink  *link = redis_current();
	RedisValue *volatile result = NULL;
	RedisError	err = {0};
	RedisBudget budget;

	if (link == NULL || !redis_link_is_open(link) || !link->ready ||
		link->sock.in_flight || link->sock.owed > 0)
		return NULL;
	budget = redis_budget_start(redis_command_timeout,
								"fencing.redis_command_timeout", true);
	PG_TRY();
	{
		result = redis_link_exchange(link, argc, argv, &budget, &err);
	}
	PG_CATCH();
	{
		redis_drop();
		PG_RE_THROW();
	}
	PG_END_TRY();
	return result;
}

/*
 * redis_commands_noerror
 *		Send ncommands commands, pipelined, connecting first if need be,
 *		where nothing may be thrown: after commit, or at backend exit, where
 *		PostgreSQL holds interrupts and turns any ERROR into FATAL.
 *
 * Interrupts are held throughout, so that neither a cancel nor
 * pg_terminate_backend cuts the call short; the whole call, connect, AUTH
 * and SELECT included, ends within fencing.redis_release_timeout (a
 * superuser's setting: the connect and command timeouts are the user's,
 * and would otherwise decide how long a backend ignores termination), and
 * the connect and command timeouts apply within it.  On success
 * replies[i] is the reply to command i, which may be an error reply; on
 * failure false is returned, the connection is dropped, replies[i] is
 * NULL for every reply not read and *failure describes the first failure
 * in one line, for the caller's WARNING.  In Cluster mode the commands may
 * belong to different nodes: each is sent on its own to the node of its
 * keys, within what is left of the time, and a node that fails does not
 * keep the commands of the others from being sent.
 */
bool
redis_commands_noerror(int ncommands, const int *argc, const char ***argv,
					   RedisValue **replies, char **failure)
{
	RedisBudget budget = redis_release_budget();

	return redis_commands_noerror_within(&budget, ncommands, argc, argv,
										 replies, failure);
}

/* The budget of a call that must not throw: fencing.redis_release_timeout. */
RedisBudget
redis_release_budget(void)
{
	return redis_budget_start(redis_release_timeout,
							  "fencing.redis_release_timeout", false);
}

/*
 * redis_commands_noerror_within
 *		redis_commands_noerror within what is left of a budget of
 *		redis_release_budget, for a caller that sends more than once in
 *		the time of one call.
 */
bool
redis_commands_noerror_within(const RedisBudget *budget, int ncommands,
							  const int *argc, const char ***argv,
							  RedisValue **replies, char **failure)
{
	RedisBudget outer = *budget;
	RedisError	err = {0};
	bool		ok = true;

	for (int c = 0; c < ncommands; c++)
		replies[c] = NULL;
	*failure = NULL;
	HOLD_INTERRUPTS();
	for (int c = 0; c < ncommands; c++)
	{
		RedisBudget budget;

		if (redis_budget_remaining(&outer) <= 0)
		{
			ok = false;
			if (*failure == NULL)
				*failure = psprintf("fencing.redis_release_timeout (%d ms) ran out",
									redis_release_timeout);
			break;
		}
		if (redis_cluster_enabled())
		{
			/* each to the node of its keys, one after the other */
			replies[c] = redis_send(argc[c], argv[c], &outer,
									redis_command_timeout, &err);
			if (replies[c] == NULL)
			{
				ok = false;
				redis_drop();
				if (*failure == NULL)
					*failure = redis_error_line(&err);
			}
			continue;
		}
		if (!redis_check_mode(&err) || !redis_single_ensure(&outer, &err))
			ok = false;
		else
		{
			budget = redis_budget_within(&outer, redis_command_timeout,
										 "fencing.redis_command_timeout");
			ok = redis_link_exchange_many(&single, ncommands, argc, argv,
										  replies, &budget, &err);
		}
		if (!ok)
		{
			redis_drop();
			*failure = redis_error_line(&err);
		}
		break;
	}
	RESUME_INTERRUPTS();
	return ok;
}

/*
 * redis_commands_post_ready
 *		Whether redis_commands_post_noerror_within may be used now: outside
 *		Cluster mode, on the connection of an earlier call, open, idle and
 *		made under the current settings.  Commands that would need a new
 *		connection are better sent with redis_commands_noerror_within: the
 *		connect's round trips are waited for anyway, and a failure is known
 *		at once.
 */
bool
redis_commands_post_ready(void)
{
	return !redis_cluster_enabled() && redis_link_is_open(&single) &&
		single.ready && !single.sock.in_flight &&
		single.generation == redis_settings_generation;
}

/*
 * redis_commands_post_noerror_within
 *		Send ncommands commands, pipelined, where nothing may be thrown, as
 *		redis_commands_noerror_within does, but without waiting for their
 *		replies: true once they are in the socket, whole.  Their replies
 *		are owed, and handed to redis_owed_hook when read: before the
 *		connection's next command, which the server therefore runs after
 *		them.  Only where redis_commands_post_ready says so (in Cluster
 *		mode the commands may go to different nodes); false, with *failure
 *		set, on failure, the connection dropped.
 */
bool
redis_commands_post_noerror_within(const RedisBudget *budget, int ncommands,
								   const int *argc, const char ***argv,
								   char **failure)
{
	RedisBudget step;
	RedisError	err = {0};
	bool		ok;

	Assert(!redis_cluster_enabled());
	*failure = NULL;
	HOLD_INTERRUPTS();
	ok = redis_check_mode(&err) && redis_single_ensure(budget, &err);
	if (ok)
	{
		step = redis_budget_within(budget, redis_command_timeout,
								   "fencing.redis_command_timeout");
		ok = redis_link_post(&single, ncommands, argc, argv, &step, &err);
	}
	if (!ok)
	{
		redis_drop();
		*failure = redis_error_line(&err);
	}
	RESUME_INTERRUPTS();
	return ok;
}

/*
 * redis_refused
 *		Drop the connection and report an error reply, with a SQLSTATE
 *		chosen by the Redis error code (see doc/lock-reference.md's table).
 */
void
redis_refused(const char *command, const RedisValue *reply)
{
	const RedisErrorClass *class = redis_error_class(reply->str);
	const char *hint = redis_error_hint(class);
	char	   *target = pstrdup(redis_link_target(redis_current()));

	redis_drop();
	ereport(ERROR,
			(errcode(class->sqlstate),
			 errmsg("Redis server at \"%s\" refused %s", target, command),
			 errdetail_internal("%s", reply->str),
			 hint ? errhint("%s", hint) : 0));
	pg_unreachable();
}

/*
 * redis_unexpected
 *		Drop the connection and report a reply of the wrong shape: whatever
 *		is answering is not the Redis we expect, or not in step with us.
 */
void
redis_unexpected(const char *command, const char *expected,
				 const RedisValue *got)
{
	RedisError	err = {0};

	redis_unexpected_reply(&err, redis_link_target(redis_current()),
						   command, expected, got);
	redis_drop();
	redis_error_raise(&err);
}

/* Compute a script's SHA1, the name EVALSHA knows it by. */
static void
redis_script_sha(RedisScript *script)
{
	pg_cryptohash_ctx *ctx = pg_cryptohash_create(PG_SHA1);
	uint8		digest[20];
	int			i;

	if (ctx == NULL ||
		pg_cryptohash_init(ctx) < 0 ||
		pg_cryptohash_update(ctx, (const uint8 *) script->text,
							 strlen(script->text)) < 0 ||
		pg_cryptohash_final(ctx, digest, sizeof(digest)) < 0)
		elog(ERROR, "could not compute SHA1 of the %s", script->name);
	pg_cryptohash_free(ctx);
	for (i = 0; i < 20; i++)
		snprintf(script->sha + 2 * i, 3, "%02x", digest[i]);
}

/*
 * redis_script_prepare
 *		Compute a script's SHA1 now, where an error may be thrown, for a
 *		caller that sends it later where none may (the release at commit).
 */
void
redis_script_prepare(RedisScript *script)
{
	if (script->sha[0] == '\0')
		redis_script_sha(script);
}

/*
 * redis_eval
 *		Run a Lua script with EVALSHA, falling back to EVAL when the server
 *		does not have it cached, and return its reply.
 *
 * The script cache is volatile -- emptied by a restart, a failover or
 * SCRIPT FLUSH -- so NOSCRIPT is expected, not an error; EVAL caches the
 * script again for the EVALSHAs that follow.  In Sentinel mode, -READONLY
 * means the primary was demoted: the script is sent once more over a new
 * connection to the primary the Sentinels name now (a script that met
 * READONLY wrote nothing: a replica refuses its first write).  Any other
 * error reply is reported.
 */
RedisValue *
redis_eval(RedisScript *script, int nkeys, const char **keys, int nargs,
		   const char **args)
{
	int			argc = 3 + nkeys + nargs;
	const char **argv = palloc(sizeof(char *) * argc);
	char		numkeys[12];
	RedisValue *reply;
	bool		evaluated = false;
	bool		rediscovered = false;

	redis_script_prepare(script);

	snprintf(numkeys, sizeof(numkeys), "%d", nkeys);
	argv[0] = "EVALSHA";
	argv[1] = script->sha;
	argv[2] = numkeys;
	memcpy(argv + 3, keys, sizeof(char *) * nkeys);
	memcpy(argv + 3 + nkeys, args, sizeof(char *) * nargs);

	for (;;)
	{
		reply = redis_command(argc, argv, 0);
		if (reply->type != REDIS_VALUE_ERROR)
			break;
		if (!evaluated && strncmp(reply->str, "NOSCRIPT", 8) == 0)
		{
			argv[0] = "EVAL";
			argv[1] = script->text;
			evaluated = true;
		}
		else if (!rediscovered && redis_sentinel_enabled() &&
				 strncmp(reply->str, "READONLY", 8) == 0)
		{
			/* a demoted primary: the Sentinels name the new one */
			redis_count_event(REDIS_EVENT_FAILOVER);
			move_counted = true;
			redis_drop();
			rediscovered = true;
		}
		else
			redis_refused(script->name, reply);
	}

	pfree(argv);
	return reply;
}

#endif							/* USE_HIREDIS */
