/*-------------------------------------------------------------------------
 *
 * redis_sentinel.c
 *	  Redis Sentinel discovery: which server is the primary now.
 *
 * A small client of our own for the part of the Sentinel protocol a
 * client needs (hiredis 0.14 has none, and Debian ships no library that
 * does), following the Sentinel client guidelines
 * (redis-doc docs/reference/sentinel-clients.md):
 *
 *	1. ask the Sentinels of fencing.redis_sentinels in turn, the one that
 *	   last answered first;
 *	2. SENTINEL get-master-addr-by-name <fencing.redis_sentinel_master>:
 *	   an address, or nil when that Sentinel does not know the name (ask
 *	   the next one);
 *	3. connect to that address and check with ROLE that it is a primary,
 *	   and ask again after a short pause if not.
 *
 * Discovery runs at every connect, so a connection lost to a failover, a
 * -READONLY reply from a demoted primary or a ROLE that is no longer
 * "master" all lead to the current primary.
 *
 * A primary that a failover replaced can stay up, and say "master", for
 * seconds until the Sentinels convert it (after SENTINEL FAILOVER, or a
 * partition): a connection to it keeps working, and writes to it are lost.
 * So the connection of the Sentinel that answered stays open, subscribed
 * to +promoted-slave (announced when the chosen replica has become a
 * primary, which is also when the Sentinels start to name it) and
 * +switch-master (when the failover ends), and before every command a
 * non-blocking peek at it (no round trip) tells whether either was
 * announced; then the data connection is dropped and the primary asked for
 * again.  Commands sent before the announcement reach the old primary,
 * which is why the tokens, not the locks, are what fences.
 *
 * The whole discovery, the data connection and ROLE included, is bounded
 * by one deadline (the connect and command timeouts together, within the
 * caller's), never by a timeout per Sentinel times the list; each Sentinel
 * gets at most the connect timeout to accept and the command timeout to
 * answer, so that one silent Sentinel cannot use up the budget of the
 * others.  A Sentinel's socket is one of the transport's (redis_io.c) like
 * any other, with the same interruptible waits and caps on a reply (and a
 * byte cap of its own: an answer is a few hundred bytes); it lives only
 * for its question and is always closed, on error paths too.
 *
 * The address a Sentinel names is checked like any address a server hands
 * out (redis_check_discovered: an IP address, no Unix socket); a host name
 * in fencing.redis_sentinels itself is resolved with a blocking
 * getaddrinfo(), which IP addresses avoid.
 *
 * Sentinels with requirepass or ACL users get AUTH with
 * fencing.redis_sentinel_username, if set, and the password of
 * fencing.redis_sentinel_password_file, pipelined with the question; a
 * refused AUTH is reported without the server's text.
 *
 * IDENTIFICATION
 *	  src/redis/redis_sentinel.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <ctype.h>
#include <errno.h>

#include "fencing_errcodes.h"
#include "lib/stringinfo.h"
#include "redis/redis.h"
#include "redis/redis_int.h"
#include "utils/memutils.h"

#ifdef USE_HIREDIS

/* What a Sentinel may answer, and the pause between two discoveries. */
#define SENTINEL_MAX_REPLY_BYTES	4096
#define SENTINEL_RETRY_PAUSE		100 /* ms */

/*
 * The Sentinels in the order to ask them: parsed from the setting when it
 * changes, the last one that answered moved to the front.
 */
static RedisHostPort sentinel_order[REDIS_MAX_HOSTPORTS];
static int	sentinel_count = 0;
static char *sentinel_order_of = NULL;	/* the setting they were parsed from */

/* What one Sentinel did with our question. */
typedef enum SentinelOutcome
{
	SENTINEL_ANSWERED,			/* an address */
	SENTINEL_UNKNOWN_MASTER,	/* nil: it does not monitor that name */
	SENTINEL_AUTH_REFUSED,		/* AUTH refused, or NOAUTH */
	SENTINEL_UNREACHABLE,		/* connect failed, lost, or timed out */
	SENTINEL_TLS_FAILED,		/* TLS handshake or verification failed */
	SENTINEL_REFUSED,			/* an error reply */
	SENTINEL_BAD_REPLY			/* no RESP, too large, or not an answer */
} SentinelOutcome;

/* What the Sentinels asked said, when none named the primary. */
typedef struct SentinelTally
{
	bool		unknown;		/* one did not know the master name */
	bool		refused;		/* one refused the password */
	bool		tls;			/* TLS with one failed */
	bool		bad_reply;		/* one answered what no Sentinel would */
	StringInfoData detail;		/* "host:port what it said; ..." */
} SentinelTally;

/* The Sentinel being asked, closed on every path. */
static RedisSocket sentinel_sock;

/*
 * The watch: the socket of the Sentinel that last named the primary,
 * subscribed to +promoted-slave and +switch-master, kept open.  Anything
 * arriving on it, or its loss, means the primary may have changed.
 */
static RedisSocket watch_sock;

/* Close the watch, if any. */
void
redis_sentinel_unwatch(void)
{
	redis_io_close(&watch_sock);
}

/*
 * redis_sentinel_switched
 *		Whether the primary may have changed since the Sentinels named it:
 *		a +promoted-slave or +switch-master message waits on the watch
 *		(whatever its text: a needless rediscovery costs one round trip),
 *		or the watch is gone.  A non-blocking peek, no round trip; the
 *		watch is closed when true.
 */
bool
redis_sentinel_switched(void)
{
	if (watch_sock.ctx != NULL && !redis_io_stale(&watch_sock))
		return false;
	redis_sentinel_unwatch();
	return true;
}

/* The current order, reparsed if the setting changed. */
static void
sentinel_refresh_order(void)
{
	const char *why;

	if (sentinel_order_of != NULL &&
		strcmp(sentinel_order_of, redis_sentinels) == 0)
		return;
	if (!redis_parse_hostports(redis_sentinels, sentinel_order,
							   &sentinel_count, &why))
		elog(ERROR, "fencing.redis_sentinels passed its check hook but does not parse");
	if (sentinel_order_of != NULL)
		pfree(sentinel_order_of);
	sentinel_order_of = MemoryContextStrdup(TopMemoryContext, redis_sentinels);
}

/* Move the Sentinel at index i to the front of the order. */
static void
sentinel_to_front(int i)
{
	RedisHostPort first = sentinel_order[i];

	memmove(&sentinel_order[1], &sentinel_order[0], sizeof(RedisHostPort) * i);
	sentinel_order[0] = first;
}

/*
 * sentinel_distrust
 *		The Sentinel that answered last (now first in the order) named a
 *		server that is not a primary: it has not yet heard of a failover.
 *		Ask it last next time.
 */
static void
sentinel_distrust(void)
{
	RedisHostPort first = sentinel_order[0];

	if (sentinel_count < 2)
		return;
	memmove(&sentinel_order[0], &sentinel_order[1],
			sizeof(RedisHostPort) * (sentinel_count - 1));
	sentinel_order[sentinel_count - 1] = first;
}

/*
 * sentinel_read_address
 *		The [ip, port] of a get-master-addr-by-name reply, checked like an
 *		address any server hands out (redis_check_discovered); NULL with
 *		*why when it is not one.
 */
static char *
sentinel_read_address(const RedisValue *r, int *port, const char **why)
{
	char	   *end;
	long		p;
	const char *refused;

	if (r->type != REDIS_VALUE_ARRAY || r->nelements != 2 ||
		r->elements[0]->type != REDIS_VALUE_STRING ||
		r->elements[1]->type != REDIS_VALUE_STRING ||
		r->elements[0]->len == 0 || r->elements[0]->len > REDIS_HOSTPORT_MAX_HOST ||
		strlen(r->elements[0]->str) != r->elements[0]->len)
	{
		*why = "answered with something other than an address";
		return NULL;
	}
	for (const char *c = r->elements[0]->str; *c; c++)
	{
		if (isspace((unsigned char) *c) || iscntrl((unsigned char) *c) || *c == '/')
		{
			*why = "answered with a malformed host";
			return NULL;
		}
	}
	errno = 0;
	p = strtol(r->elements[1]->str, &end, 10);
	if (end == r->elements[1]->str || *end != '\0' || errno != 0 ||
		p < 1 || p > 65535)
	{
		*why = "answered with a malformed port";
		return NULL;
	}
	if (!redis_check_discovered(r->elements[0]->str, (int) p,
								redis_discovered_host_names, &refused))
	{
		*why = psprintf("named \"%s:%ld\": %s", r->elements[0]->str, p, refused);
		return NULL;
	}
	*port = (int) p;
	return pstrdup(r->elements[0]->str);
}

/*
 * sentinel_converse
 *		Connect to one Sentinel, AUTH if there is a password, ask for the
 *		primary's address and subscribe to the failover events, all in one
 *		round trip; the caller closes the socket or keeps it as the watch.
 *		Subscribing after the question means no switch after the answer
 *		goes unnoticed.
 */
static SentinelOutcome
sentinel_converse(const RedisHostPort *addr, const char *password,
				  const RedisBudget *budget, char **host, int *port,
				  const char **why)
{
	const char *auth[3] = {"AUTH"};
	const char *ask[3] = {"SENTINEL", "get-master-addr-by-name",
	redis_sentinel_master};
	const char *subscribe[3] = {"SUBSCRIBE", "+promoted-slave", "+switch-master"};
	int			argc[3];
	const char **argv[3];
	RedisValue *replies[4];
	int			n = 0;
	RedisValue *answer;
	RedisError	err = {0};
	RedisBudget step;

	if (password != NULL || redis_sentinel_username[0] != '\0')
	{
		argc[n] = 1;
		if (redis_sentinel_username[0] != '\0')
			auth[argc[n]++] = redis_sentinel_username;
		auth[argc[n]++] = password ? password : "";
		argv[n++] = auth;
	}
	argc[n] = 3;
	argv[n++] = ask;
	argc[n] = 3;
	argv[n++] = subscribe;

	step = redis_budget_within(budget, redis_connect_timeout,
							   "fencing.redis_connect_timeout");
	if (!redis_io_connect(&sentinel_sock, addr->host, addr->port,
						  SENTINEL_MAX_REPLY_BYTES, &step, &err))
	{
		*why = err.reason;
		return err.sqlstate == ERRCODE_FENCING_REDIS_TLS ?
			SENTINEL_TLS_FAILED : SENTINEL_UNREACHABLE;
	}
	step = redis_budget_within(budget, redis_command_timeout,
							   "fencing.redis_command_timeout");
	/* SUBSCRIBE answers once per channel, or once if refused */
	replies[n] = NULL;
	if (!redis_io_exchange(&sentinel_sock, n, argc, argv, replies, &step,
						   n == 3, &err) ||
		(replies[n - 1]->type != REDIS_VALUE_ERROR &&
		 !redis_io_read(&sentinel_sock, &replies[n], &step, n == 3, &err)))
	{
		if (err.sqlstate != ERRCODE_FENCING_REDIS_PROTOCOL)
		{
			*why = err.reason;
			return err.sqlstate == ERRCODE_FENCING_REDIS_TLS ?
				SENTINEL_TLS_FAILED : SENTINEL_UNREACHABLE;
		}
		*why = err.detail ? psprintf("%s: %s", err.reason, err.detail) : err.reason;
		return SENTINEL_BAD_REPLY;
	}

	answer = replies[n - 2];
	if (n == 3 && replies[0]->type == REDIS_VALUE_ERROR)
	{
		/* the server's text is not shown: it answers a secret */
		*why = "refused the password";
		return SENTINEL_AUTH_REFUSED;
	}
	if (answer->type == REDIS_VALUE_ERROR &&
		strncmp(answer->str, "NOAUTH", 6) == 0)
	{
		*why = "requires a password";
		return SENTINEL_AUTH_REFUSED;
	}
	if (answer->type == REDIS_VALUE_ERROR)
	{
		*why = psprintf("refused: %s", answer->str);
		return SENTINEL_REFUSED;
	}
	if (answer->type == REDIS_VALUE_NIL)
	{
		*why = "does not know the master name";
		return SENTINEL_UNKNOWN_MASTER;
	}
	for (int i = n - 1; i <= n && replies[i] != NULL; i++)
	{
		const RedisValue *subscribed = replies[i];

		if (subscribed->type != REDIS_VALUE_ARRAY || subscribed->nelements != 3 ||
			subscribed->elements[0]->type != REDIS_VALUE_STRING ||
			strcmp(subscribed->elements[0]->str, "subscribe") != 0)
		{
			if (subscribed->type == REDIS_VALUE_ERROR)
			{
				*why = psprintf("refused SUBSCRIBE: %s", subscribed->str);
				return SENTINEL_REFUSED;
			}
			*why = "answered SUBSCRIBE with something other than a confirmation";
			return SENTINEL_BAD_REPLY;
		}
	}
	*host = sentinel_read_address(answer, port, why);
	return *host != NULL ? SENTINEL_ANSWERED : SENTINEL_BAD_REPLY;
}

/*
 * sentinel_ask
 *		Ask one Sentinel for the primary's address.  The socket becomes the
 *		watch when the Sentinel named the primary, and is closed otherwise,
 *		and on any error thrown while waiting.
 */
static SentinelOutcome
sentinel_ask(const RedisHostPort *addr, const char *password,
			 const RedisBudget *budget, char **host, int *port,
			 const char **why)
{
	SentinelOutcome outcome;

	PG_TRY();
	{
		outcome = sentinel_converse(addr, password, budget, host, port, why);
	}
	PG_CATCH();
	{
		redis_io_close(&sentinel_sock);
		PG_RE_THROW();
	}
	PG_END_TRY();
	if (outcome == SENTINEL_ANSWERED)
	{
		/* the subscribed socket becomes the watch */
		redis_sentinel_unwatch();
		watch_sock = sentinel_sock;
		memset(&sentinel_sock, 0, sizeof(sentinel_sock));
	}
	redis_io_close(&sentinel_sock);
	return outcome;
}

/*
 * sentinel_ask_all
 *		Ask the Sentinels in turn until one names the primary, within the
 *		budget; the host, or NULL with what each said in the tally.
 */
static char *
sentinel_ask_all(const char *password, const RedisBudget *budget, int *port,
				 SentinelTally *tally)
{
	StringInfo	detail = &tally->detail;

	for (int i = 0; i < sentinel_count; i++)
	{
		const RedisHostPort *addr = &sentinel_order[i];
		char		target[REDIS_TARGET_LEN];
		const char *why = NULL;
		char	   *host = NULL;

		if (detail->len > 0)
			appendStringInfoString(detail, "; ");
		redis_format_target(target, sizeof(target), addr->host, addr->port);
		appendStringInfo(detail, "%s ", target);
		if (redis_budget_remaining(budget) <= 0)
		{
			appendStringInfoString(detail, "not asked: out of time");
			continue;
		}
		switch (sentinel_ask(addr, password, budget, &host, port, &why))
		{
			case SENTINEL_ANSWERED:
				sentinel_to_front(i);
				return host;
			case SENTINEL_UNKNOWN_MASTER:
				tally->unknown = true;
				break;
			case SENTINEL_AUTH_REFUSED:
				tally->refused = true;
				break;
			case SENTINEL_BAD_REPLY:
				tally->bad_reply = true;
				break;
			case SENTINEL_TLS_FAILED:
				tally->tls = true;
				break;
			case SENTINEL_UNREACHABLE:
			case SENTINEL_REFUSED:
				break;
		}
		appendStringInfoString(detail, why);
	}
	return NULL;
}

/*
 * sentinel_resolve
 *		The address the Sentinels name as primary of
 *		fencing.redis_sentinel_master: its host (palloc'd) and *port; NULL
 *		on failure, described in *err.
 *
 * Asks the Sentinels in turn until one names it, within the budget.  When
 * none does, the error says why, per Sentinel: a name no Sentinel knows
 * or a refused password is the configuration's fault (TF104), TLS that
 * fails with a Sentinel too (TF107), an answer
 * no Sentinel would give (no RESP, too large, an address fencing refuses)
 * is TF105, Sentinels that cannot be reached are not at fault (TF101).
 */
static char *
sentinel_resolve(const RedisBudget *budget, int *port, RedisError *err)
{
	char	   *volatile password = NULL;
	SentinelTally *tally = palloc0(sizeof(SentinelTally));
	char	   *host = NULL;

	if (redis_sentinel_master[0] == '\0')
	{
		redis_error_set(err, ERRCODE_FENCING_REDIS_REFUSED,
						pstrdup("fencing.redis_sentinels is set but fencing.redis_sentinel_master is not"),
						NULL,
						pstrdup("Set fencing.redis_sentinel_master to the name the Sentinels monitor the primary under."));
		return NULL;
	}
	sentinel_refresh_order();
	initStringInfo(&tally->detail);
	if (redis_sentinel_password_file[0] != '\0')
	{
		char	   *pw;

		if (!redis_read_password_file(redis_sentinel_password_file, &pw, err))
			return NULL;
		password = pw;
	}

	PG_TRY();
	{
		host = sentinel_ask_all(password, budget, port, tally);
	}
	PG_FINALLY();
	{
		redis_forget_password(password);
	}
	PG_END_TRY();

	if (host != NULL)
		return host;
	appendStringInfoChar(&tally->detail, '.');
	if (tally->unknown)
		redis_error_set(err, ERRCODE_FENCING_REDIS_REFUSED,
						psprintf("Redis Sentinels do not know master \"%s\"",
								 redis_sentinel_master),
						tally->detail.data,
						pstrdup("Check fencing.redis_sentinel_master against the Sentinels' \"sentinel monitor\" lines."));
	else if (tally->refused)
		redis_error_set(err, ERRCODE_FENCING_REDIS_REFUSED,
						psprintf("could not authenticate to the Redis Sentinels of master \"%s\"",
								 redis_sentinel_master),
						tally->detail.data,
						pstrdup("Check fencing.redis_sentinel_username and the password in fencing.redis_sentinel_password_file."));
	else if (tally->tls)
		redis_error_set(err, ERRCODE_FENCING_REDIS_TLS,
						psprintf("could not get the address of master \"%s\" from any Redis Sentinel",
								 redis_sentinel_master),
						tally->detail.data,
						pstrdup("TLS with a Sentinel failed: check fencing.redis_tls and its files."));
	else if (tally->bad_reply)
		redis_error_set(err, ERRCODE_FENCING_REDIS_PROTOCOL,
						psprintf("could not get the address of master \"%s\" from any Redis Sentinel",
								 redis_sentinel_master),
						tally->detail.data,
						pstrdup("Check that fencing.redis_sentinels names Redis Sentinels."));
	else
		redis_error_set(err, ERRCODE_FENCING_REDIS_UNAVAILABLE,
						psprintf("could not get the address of master \"%s\" from any Redis Sentinel",
								 redis_sentinel_master),
						tally->detail.data,
						pstrdup("Check that the Sentinels of fencing.redis_sentinels are running."));
	return NULL;
}

/*
 * sentinel_role
 *		The role the server of the link says it has ("master", "slave",
 *		"sentinel") in *role; false on failure, described in *err.
 */
static bool
sentinel_role(RedisLink *link, const RedisBudget *budget, char **role,
			  RedisError *err)
{
	const char *argv[1] = {"ROLE"};
	RedisBudget step = redis_budget_within(budget, redis_command_timeout,
										   "fencing.redis_command_timeout");
	RedisValue *reply = redis_link_exchange(link, 1, argv, &step, err);

	if (reply == NULL)
		return false;
	if (reply->type == REDIS_VALUE_ERROR)
		return redis_error_set(err, redis_error_class(reply->str)->sqlstate,
							   psprintf("Redis server at \"%s\" refused ROLE",
										redis_link_target(link)),
							   pstrdup(reply->str), NULL);
	if (reply->type != REDIS_VALUE_ARRAY || reply->nelements < 1 ||
		reply->elements[0]->type != REDIS_VALUE_STRING)
		return redis_unexpected_reply(err, redis_link_target(link), "ROLE",
									  "an array naming a role", reply);
	*role = reply->elements[0]->str;
	return true;
}

/*
 * redis_sentinel_connect
 *		Ask the Sentinels for the primary, open the link to it and check
 *		with ROLE that it is one; false on failure, described in *err,
 *		with the link closed.
 *
 * During a failover the Sentinels may still name the old primary, which
 * is down (the connect fails) or demoted (ROLE says "slave"); then ask
 * again after a short pause, until the primary answers or the connect and
 * command timeouts together have passed; then the last failure is
 * reported.  Only unavailability is retried: a refused password or a
 * protocol error will not go away by asking again.
 */
bool
redis_sentinel_connect(RedisLink *link, const RedisBudget *outer,
					   RedisError *err)
{
	RedisBudget budget = redis_budget_within(outer,
											 (long) redis_connect_timeout + redis_command_timeout,
											 "fencing.redis_connect_timeout plus fencing.redis_command_timeout");

	for (;;)
	{
		int			port;
		char	   *host;
		char	   *role = NULL;

		host = sentinel_resolve(&budget, &port, err);
		if (host == NULL)
			return false;
		if (redis_link_open(link, host, port, &budget, err) &&
			sentinel_role(link, &budget, &role, err))
		{
			if (strcmp(role, "master") == 0)
				return true;
			redis_link_close(link);
			redis_error_set(err, ERRCODE_FENCING_REDIS_BUSY,
							psprintf("Redis server at \"%s\" that the Sentinels name as primary of \"%s\" is not a primary",
									 redis_link_target(link), redis_sentinel_master),
							psprintf("ROLE says \"%s\".", role),
							pstrdup("A failover may be under way; retry soon."));
			/* that Sentinel has not heard of the failover yet */
			sentinel_distrust();
		}
		redis_link_close(link);
		redis_sentinel_unwatch();

		if ((err->sqlstate != ERRCODE_FENCING_REDIS_UNAVAILABLE &&
			 err->sqlstate != ERRCODE_FENCING_REDIS_BUSY) ||
			!redis_pause_before_retry(&budget, SENTINEL_RETRY_PAUSE))
			return false;
	}
}

#endif							/* USE_HIREDIS */
