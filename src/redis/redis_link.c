/*-------------------------------------------------------------------------
 *
 * redis_link.c
 *	  One authenticated connection to a Redis server: open (connect, AUTH,
 *	  SELECT), exchange, close.
 *
 * A link is opened under the current settings (the credentials, the
 * database) and remembers their generation: a link made under older ones
 * is not usable, nor one whose server has closed it or sent something
 * unasked (redis_io_stale), nor one with a command outstanding (a FATAL
 * in the middle of an exchange leaves no PG_CATCH to close it).  Opening
 * spends the caller's budget: the connect within
 * fencing.redis_connect_timeout, AUTH and SELECT within
 * fencing.redis_command_timeout each, all within the deadline of the
 * call.
 *
 * The password never appears in any message: it is sent only in AUTH,
 * nothing the server answers to AUTH is ever quoted (a refusal is
 * reported by its error code alone), and a password read from
 * fencing.redis_password_file is wiped from memory once sent.
 *
 * IDENTIFICATION
 *	  src/redis/redis_link.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "fencing_errcodes.h"
#include "redis/redis.h"
#include "redis/redis_int.h"

#ifdef USE_HIREDIS

/* The budget of one command on a link. */
static RedisBudget
redis_link_command_budget(const RedisBudget *budget)
{
	return redis_budget_within(budget, redis_command_timeout,
							   "fencing.redis_command_timeout");
}

/*
 * redis_link_authenticate
 *		AUTH, with the ACL user name if one is set, on a new connection;
 *		false on failure, described in *err.
 */
static bool
redis_link_authenticate(RedisLink *link, const RedisBudget *budget,
						RedisError *err)
{
	char	   *password = NULL;
	const char *argv[3];
	int			argc = 0;
	RedisValue *volatile reply = NULL;
	RedisBudget step = redis_link_command_budget(budget);

	if (redis_password[0] != '\0' && redis_password_file[0] != '\0')
		return redis_error_set(err, ERRCODE_CONFIG_FILE_ERROR,
							   pstrdup("fencing.redis_password and fencing.redis_password_file are both set"),
							   NULL, pstrdup("Set only one of them."));
	if (redis_password_file[0] != '\0')
	{
		if (!redis_read_password_file(redis_password_file, &password, err))
			return false;
	}
	else if (redis_password[0] != '\0')
		password = pstrdup(redis_password);

	if (password == NULL && redis_username[0] == '\0')
		return true;

	argv[argc++] = "AUTH";
	if (redis_username[0] != '\0')
		argv[argc++] = redis_username;
	argv[argc++] = password ? password : "";

	PG_TRY();
	{
		const char **command = argv;
		RedisValue *r;

		if (redis_io_exchange(&link->sock, 1, &argc, &command, &r, &step,
							  true, err))
			reply = r;
	}
	PG_FINALLY();
	{
		redis_forget_password(password);
	}
	PG_END_TRY();

	if (reply == NULL)
		return false;

	/*
	 * An AUTH refusal is reported by its error code alone, and only if it is
	 * one we know: not a word of the server's text may reach a message or
	 * the log.  Redis echoes the arguments of a command it does not know (a
	 * renamed AUTH) cut to 128 bytes, so that blotting the whole password
	 * out of the text would leave a long password's beginning in it.
	 */
	if (reply->type == REDIS_VALUE_ERROR)
	{
		const RedisErrorClass *class = redis_error_class(reply->str);

		return redis_error_set(err, class->sqlstate,
							   psprintf("could not authenticate to Redis server at \"%s\"",
										link->sock.target),
							   class->prefix ?
							   psprintf("Redis answered AUTH with \"%s\"; the rest of its text is not shown, since it may repeat the password.",
										class->prefix) :
							   pstrdup("Redis answered AUTH with an error; its text is not shown, since it may repeat the password."),
							   pstrdup("Check fencing.redis_username and the password in fencing.redis_password or fencing.redis_password_file."));
	}
	if (reply->type != REDIS_VALUE_STATUS)
		return redis_unexpected_reply(err, link->sock.target, "AUTH",
									  "a status", reply);
	return true;
}

/*
 * redis_link_select
 *		SELECT fencing.redis_database on a new connection, unless it is 0;
 *		false on failure, described in *err.
 */
static bool
redis_link_select(RedisLink *link, const RedisBudget *budget, RedisError *err)
{
	char		db[12];
	const char *argv[2];
	RedisValue *reply;
	RedisBudget step = redis_link_command_budget(budget);

	if (redis_database == 0)
		return true;
	snprintf(db, sizeof(db), "%d", redis_database);
	argv[0] = "SELECT";
	argv[1] = db;
	reply = redis_link_exchange(link, 2, argv, &step, err);
	if (reply == NULL)
		return false;
	if (reply->type == REDIS_VALUE_ERROR)
		return redis_error_set(err, redis_error_class(reply->str)->sqlstate,
							   psprintf("could not select database %d on Redis server at \"%s\"",
										redis_database, link->sock.target),
							   pstrdup(reply->str), NULL);
	if (reply->type != REDIS_VALUE_STATUS)
		return redis_unexpected_reply(err, link->sock.target, "SELECT",
									  "a status", reply);
	return true;
}

/*
 * redis_link_open
 *		Open a link to host:port (a Unix socket if host is a path) within
 *		the budget: a non-blocking connect, then AUTH and SELECT; false on
 *		failure, described in *err (never sent: the caller's command was
 *		not), with nothing left open.
 */
bool
redis_link_open(RedisLink *link, const char *host, int port,
				const RedisBudget *budget, RedisError *err)
{
	RedisBudget connect = redis_budget_within(budget, redis_connect_timeout,
											  "fencing.redis_connect_timeout");

	Assert(!redis_link_is_open(link));
	strlcpy(link->host, host, sizeof(link->host));
	link->port = port;
	link->ready = false;
	if (!redis_io_connect(&link->sock, host, port, REDIS_MAX_REPLY_BYTES,
						  &connect, err))
	{
		err->sent = false;
		return false;
	}
	if (!redis_link_authenticate(link, budget, err) ||
		!redis_link_select(link, budget, err))
	{
		redis_link_close(link);
		err->sent = false;
		return false;
	}
	link->generation = redis_settings_generation;
	link->ready = true;
	redis_count_event(REDIS_EVENT_CONNECT);
	return true;
}

bool
redis_link_is_open(const RedisLink *link)
{
	return link->sock.ctx != NULL;
}

/*
 * redis_link_usable
 *		Whether an open link can carry the next command (see the file
 *		header).
 */
bool
redis_link_usable(const RedisLink *link)
{
	return redis_link_is_open(link) && link->ready && !link->sock.in_flight &&
		link->generation == redis_settings_generation &&
		!redis_io_stale(&link->sock);
}

/*
 * redis_link_sent
 *		Whether the caller's last command on the link reached the socket:
 *		for an error thrown in the middle of an exchange (an interrupt).
 */
bool
redis_link_sent(const RedisLink *link)
{
	return link->ready && link->sock.sent;
}

/* The server as messages name it; still set once the link is closed. */
const char *
redis_link_target(const RedisLink *link)
{
	return link->sock.target;
}

/*
 * redis_link_exchange_many
 *		Send ncommands commands, pipelined, and read their replies within
 *		the budget; false on failure, described in *err, with the link
 *		closed.
 */
bool
redis_link_exchange_many(RedisLink *link, int ncommands, const int *argc,
						 const char ***argv, RedisValue **replies,
						 const RedisBudget *budget, RedisError *err)
{
	if (redis_io_exchange(&link->sock, ncommands, argc, argv, replies,
						  budget, false, err))
		return true;
	link->ready = false;
	return false;
}

/* One command; NULL on failure, described in *err, with the link closed. */
RedisValue *
redis_link_exchange(RedisLink *link, int argc, const char **argv,
					const RedisBudget *budget, RedisError *err)
{
	RedisValue *reply;

	if (!redis_link_exchange_many(link, 1, &argc, &argv, &reply, budget, err))
		return NULL;
	return reply;
}

/*
 * redis_link_post
 *		Send ncommands commands, pipelined, without waiting for their
 *		replies (redis_io_post); false on failure, described in *err, with
 *		the link closed.
 */
bool
redis_link_post(RedisLink *link, int ncommands, const int *argc,
				const char ***argv, const RedisBudget *budget, RedisError *err)
{
	if (redis_io_post(&link->sock, ncommands, argc, argv, budget, err))
		return true;
	link->ready = false;
	return false;
}

/*
 * redis_link_collect
 *		Read the replies owed to redis_link_post, if any; false on failure,
 *		described in *err, with the link closed.
 */
bool
redis_link_collect(RedisLink *link, const RedisBudget *budget, RedisError *err)
{
	if (redis_io_collect(&link->sock, budget, err))
		return true;
	link->ready = false;
	return false;
}

/* Close the link, if open.  Safe at any time, error cleanup included. */
void
redis_link_close(RedisLink *link)
{
	redis_io_close(&link->sock);
	link->ready = false;
}

/* How a reply of the wrong shape is described. */
const char *
redis_value_describe(const RedisValue *v)
{
	switch (v->type)
	{
		case REDIS_VALUE_STRING:
			return "a string";
		case REDIS_VALUE_ARRAY:
			return "an array";
		case REDIS_VALUE_INTEGER:
			return "an integer";
		case REDIS_VALUE_NIL:
			return "nil";
		case REDIS_VALUE_STATUS:
			return "a status";
		case REDIS_VALUE_ERROR:
			return "an error";
	}
	return "something unknown";
}

/* Describe a reply of the wrong shape from target in *err. */
bool
redis_unexpected_reply(RedisError *err, const char *target,
					   const char *command, const char *expected,
					   const RedisValue *got)
{
	err->reason = "answered with something unexpected";
	return redis_error_set(err, ERRCODE_FENCING_REDIS_PROTOCOL,
						   psprintf("unexpected reply from Redis server at \"%s\"",
									target),
						   psprintf("%s answered with %s instead of %s.",
									command, redis_value_describe(got), expected),
						   NULL);
}

#endif							/* USE_HIREDIS */
