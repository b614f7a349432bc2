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
 *	3. the caller connects to that address and checks with ROLE that it
 *	   is a primary (redis_conn.c), and asks again if not.
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
 * which is why the tokens, not the locks, are what fences.  The whole discovery is
 * bounded by the caller's deadline (the connect and command timeouts
 * together), never by a timeout per Sentinel times the list; each Sentinel
 * gets at most the connect timeout to accept and the command timeout to
 * answer, so that one silent Sentinel cannot use up the budget of the
 * others.
 *
 * Every wait sleeps on the latch with CHECK_FOR_INTERRUPTS, as the data
 * connection does, so cancel and statement_timeout work here too.  A
 * Sentinel's connection lives only for its question and is always freed,
 * on error paths too.  A host name in fencing.redis_sentinels is resolved
 * by hiredis with a blocking getaddrinfo(); IP addresses avoid that.
 *
 * Sentinels with requirepass get AUTH with the password of
 * fencing.redis_sentinel_password_file, pipelined with the question; a
 * refused AUTH is reported without the server's text.
 *
 * IDENTIFICATION
 *	  src/redis_sentinel.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <ctype.h>
#include <limits.h>
#include <sys/socket.h>

#ifdef USE_HIREDIS
#include <hiredis/hiredis.h>
#endif

#include "fencing_errcodes.h"
#include "lib/stringinfo.h"
#include "miscadmin.h"
#include "pg_compat.h"
#include "pgstat.h"
#include "redis_conn.h"
#include "redis_hostport.h"
#include "redis_sentinel.h"
#include "redis_settings.h"
#include "storage/fd.h"
#include "storage/latch.h"
#include "utils/guc.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

/* Bounds of the settings and of what a Sentinel may answer. */
#define SENTINEL_MAX_NAME_LEN		256
#define SENTINEL_MAX_REPLY_BYTES	4096

/* Settings. */
static char *fencing_redis_sentinels = NULL;
static char *fencing_redis_sentinel_master = NULL;
static char *fencing_redis_sentinel_password_file = NULL;

/*
 * check_redis_sentinel_master
 *		A master name as Sentinel configurations spell them.
 */
static bool
check_redis_sentinel_master(char **newval, void **extra, GucSource source)
{
	if (*newval == NULL)
		return true;
	if (strlen(*newval) > SENTINEL_MAX_NAME_LEN)
	{
		GUC_check_errdetail("A master name can be at most %d bytes long.",
							SENTINEL_MAX_NAME_LEN);
		return false;
	}
	for (const char *p = *newval; *p; p++)
	{
		if (isspace((unsigned char) *p) || iscntrl((unsigned char) *p))
		{
			GUC_check_errdetail("A master name cannot contain white space or control characters.");
			return false;
		}
	}
	return true;
}

/*
 * check_redis_sentinel_password_file
 *		Empty, or a file name without control characters; the file is
 *		read and checked at every discovery.
 */
static bool
check_redis_sentinel_password_file(char **newval, void **extra,
								   GucSource source)
{
	if (*newval == NULL)
		return true;
	for (const char *p = *newval; *p; p++)
	{
		if (iscntrl((unsigned char) *p))
		{
			GUC_check_errdetail("A file name cannot contain control characters.");
			return false;
		}
	}
	return true;
}

/* Assign hook: a connection made under the old settings is replaced. */
static void
sentinel_settings_changed(const char *newval, void *extra)
{
	redis_settings_generation++;
}

/*
 * redis_sentinel_init
 *		Define the Sentinel settings; called from redis_settings_init.
 */
void
redis_sentinel_init(void)
{
	DefineCustomStringVariable("fencing.redis_sentinels",
							   "Redis Sentinels that name the primary fenced_acquire() talks to.",
							   "A comma-separated list of host:port.  When set, fencing.redis_host and fencing.redis_port are not used: the primary is asked of the Sentinels at every connect.  Empty means no Sentinel.",
							   &fencing_redis_sentinels,
							   "",
							   PGC_SUSET,
							   0,
							   check_redis_hostport_list, sentinel_settings_changed, NULL);

	DefineCustomStringVariable("fencing.redis_sentinel_master",
							   "Name under which the Redis Sentinels monitor the primary.",
							   "Required when fencing.redis_sentinels is set.",
							   &fencing_redis_sentinel_master,
							   "",
							   PGC_SUSET,
							   0,
							   check_redis_sentinel_master, sentinel_settings_changed, NULL);

	DefineCustomStringVariable("fencing.redis_sentinel_password_file",
							   "File holding the password of the Redis Sentinels (their requirepass).",
							   "The first line of the file is the password.  It is read at every discovery and must be readable only by the server's operating system user (mode 0600 or stricter).  Empty means the Sentinels need no password.",
							   &fencing_redis_sentinel_password_file,
							   "",
							   PGC_SUSET,
							   0,
							   check_redis_sentinel_password_file, sentinel_settings_changed, NULL);
}

/* Whether the primary is to be asked of Sentinels. */
bool
redis_sentinel_enabled(void)
{
	return fencing_redis_sentinels != NULL && fencing_redis_sentinels[0] != '\0';
}

const char *
redis_sentinel_master_name(void)
{
	return fencing_redis_sentinel_master;
}

#ifdef USE_HIREDIS

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
	SENTINEL_BAD_REPLY			/* an error reply, or not what Sentinel says */
} SentinelOutcome;

/* What the Sentinels asked said, when none named the primary. */
typedef struct SentinelTally
{
	bool		unknown;		/* one did not know the master name */
	bool		refused;		/* one refused the password */
	StringInfoData detail;		/* "host:port what it said; ..." */
} SentinelTally;

/*
 * A Sentinel's connection and replies while we talk to it, freed on every
 * path.
 */
static redisContext *sentinel_conn = NULL;
static bool sentinel_fd_reserved = false;
static redisReply *sentinel_replies[4];

/*
 * The watch: the connection of the Sentinel that last named the primary,
 * subscribed to +promoted-slave and +switch-master, kept open.  Anything arriving on it, or
 * its loss, means the primary may have changed.
 */
static redisContext *watch_conn = NULL;
static bool watch_fd_reserved = false;

/*
 * Whether the discovery under way may serve interrupts; not when called
 * where PostgreSQL holds them (redis_commands_noerror), where it waits on
 * the socket and the clock alone.
 */
static bool sentinel_interruptible = true;

static void
sentinel_disconnect(void)
{
	for (int i = 0; i < lengthof(sentinel_replies); i++)
	{
		if (sentinel_replies[i] != NULL)
		{
			freeReplyObject(sentinel_replies[i]);
			sentinel_replies[i] = NULL;
		}
	}
	if (sentinel_conn != NULL)
	{
		redisFree(sentinel_conn);
		sentinel_conn = NULL;
	}
	if (sentinel_fd_reserved)
	{
		ReleaseExternalFD();
		sentinel_fd_reserved = false;
	}
}

/*
 * redis_sentinel_unwatch
 *		Close the watch, if any.
 */
void
redis_sentinel_unwatch(void)
{
	if (watch_conn != NULL)
	{
		redisFree(watch_conn);
		watch_conn = NULL;
	}
	if (watch_fd_reserved)
	{
		ReleaseExternalFD();
		watch_fd_reserved = false;
	}
}

/*
 * redis_sentinel_switched
 *		Whether the primary may have changed since the Sentinels named it:
 *		a +promoted-slave or +switch-master message waits on the watch
 *		(whatever its text: a needless rediscovery costs one round trip),
 *		or the watch is gone.
 *		A non-blocking peek, no round trip; the watch is closed when true.
 */
bool
redis_sentinel_switched(void)
{
	char		c;
	ssize_t		n;

	if (watch_conn != NULL && watch_conn->reader->pos >= watch_conn->reader->len)
	{
		n = recv(watch_conn->fd, &c, 1, MSG_PEEK | MSG_DONTWAIT);
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
			return false;
	}
	redis_sentinel_unwatch();
	return true;
}

/* The current order, reparsed if the setting changed. */
static void
sentinel_refresh_order(void)
{
	const char *why;

	if (sentinel_order_of != NULL &&
		strcmp(sentinel_order_of, fencing_redis_sentinels) == 0)
		return;
	if (!redis_parse_hostports(fencing_redis_sentinels, sentinel_order,
							 &sentinel_count, &why))
		elog(ERROR, "fencing.redis_sentinels passed its check hook but does not parse");
	if (sentinel_order_of != NULL)
		pfree(sentinel_order_of);
	sentinel_order_of = MemoryContextStrdup(TopMemoryContext, fencing_redis_sentinels);
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
 * redis_sentinel_distrust
 *		The Sentinel that answered last (now first in the order) named a
 *		server that is not a primary: it has not yet heard of a failover.
 *		Ask it last next time.
 */
void
redis_sentinel_distrust(void)
{
	RedisHostPort first = sentinel_order[0];

	if (sentinel_count < 2)
		return;
	memmove(&sentinel_order[0], &sentinel_order[1],
			sizeof(RedisHostPort) * (sentinel_count - 1));
	sentinel_order[sentinel_count - 1] = first;
}

/* The earlier of two deadlines. */
static TimestampTz
sentinel_min_deadline(TimestampTz a, TimestampTz b)
{
	return a < b ? a : b;
}

/*
 * sentinel_wait
 *		Sleep until the Sentinel's socket is ready for io_event, serving
 *		interrupts if allowed; false at the deadline.
 */
static bool
sentinel_wait(int io_event, TimestampTz deadline)
{
	for (;;)
	{
		long		remaining;
		int			rc;

		remaining = TimestampDifferenceMilliseconds(GetCurrentTimestamp(), deadline);
		if (remaining <= 0)
			return false;
		if (!sentinel_interruptible)
			rc = WaitLatchOrSocket(NULL, WL_EXIT_ON_PM_DEATH | WL_TIMEOUT | io_event,
								   sentinel_conn->fd, remaining,
								   fencing_wait_event(FENCING_WAIT_REDIS_IO));
		else
			rc = WaitLatchOrSocket(MyLatch,
								   WL_LATCH_SET | WL_EXIT_ON_PM_DEATH | WL_TIMEOUT | io_event,
								   sentinel_conn->fd, remaining,
								   fencing_wait_event(FENCING_WAIT_REDIS_IO));
		if (rc & WL_LATCH_SET)
		{
			ResetLatch(MyLatch);
			CHECK_FOR_INTERRUPTS();
		}
		if (rc & io_event)
			return true;
	}
}

/*
 * sentinel_connect
 *		Open a non-blocking connection to one Sentinel by connect_deadline;
 *		false with *why on failure.
 */
static bool
sentinel_connect(const RedisHostPort *addr, TimestampTz connect_deadline,
				 const char **why)
{
	int			err = 0;
	socklen_t	len = sizeof(err);

	if (!AcquireExternalFD())
	{
		*why = "too many open files on the local server";
		return false;
	}
	sentinel_fd_reserved = true;
	sentinel_conn = redisConnectNonBlock(addr->host, addr->port);
	if (sentinel_conn == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OUT_OF_MEMORY),
				 errmsg("out of memory"),
				 errdetail("Could not allocate a Redis connection.")));
	if (sentinel_conn->err)
	{
		*why = pstrdup(sentinel_conn->errstr);
		return false;
	}
	/* hiredis reports a connect in progress as done: wait for the socket */
	if (!sentinel_wait(WL_SOCKET_WRITEABLE, connect_deadline))
	{
		*why = "connect timed out";
		return false;
	}
	if (getsockopt(sentinel_conn->fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0)
		err = errno;
	if (err != 0)
	{
		*why = pstrdup(strerror(err));
		return false;
	}
	return true;
}

/*
 * sentinel_exchange
 *		Send the commands and read nreplies replies by deadline, into
 *		replies[] (hiredis objects, which the caller frees); false with
 *		*why when the connection fails, times out or speaks no RESP.
 */
static bool
sentinel_exchange(int ncommands, int nreplies, int *argc, const char ***argv,
				  redisReply **replies, TimestampTz deadline, const char **why)
{
	int			done = 0;
	int			got = 0;

	for (int i = 0; i < ncommands; i++)
	{
		size_t		argvlen[4];

		Assert(argc[i] <= lengthof(argvlen));
		for (int j = 0; j < argc[i]; j++)
			argvlen[j] = strlen(argv[i][j]);
		if (redisAppendCommandArgv(sentinel_conn, argc[i], argv[i], argvlen) != REDIS_OK)
		{
			*why = pstrdup(sentinel_conn->errstr);
			return false;
		}
	}
	for (;;)
	{
		if (redisBufferWrite(sentinel_conn, &done) != REDIS_OK)
		{
			*why = pstrdup(sentinel_conn->errstr);
			return false;
		}
		if (done)
			break;
		if (!sentinel_wait(WL_SOCKET_WRITEABLE, deadline))
		{
			*why = "timed out sending";
			return false;
		}
	}
	/* a refused last command (SUBSCRIBE) answers once, not per channel */
	while (got < nreplies &&
		   !(got == ncommands && replies[got - 1]->type == REDIS_REPLY_ERROR))
	{
		void	   *reply = NULL;

		if (redisGetReplyFromReader(sentinel_conn, &reply) != REDIS_OK)
		{
			*why = "protocol error";
			return false;
		}
		if (reply != NULL)
		{
			replies[got++] = reply;
			continue;
		}
		if (!sentinel_wait(WL_SOCKET_READABLE, deadline))
		{
			*why = "timed out waiting for a reply";
			return false;
		}
		if (redisBufferRead(sentinel_conn) != REDIS_OK)
		{
			*why = pstrdup(sentinel_conn->errstr[0] ? sentinel_conn->errstr :
						   "connection lost");
			return false;
		}
		if (sentinel_conn->reader->len - sentinel_conn->reader->pos >
			SENTINEL_MAX_REPLY_BYTES)
		{
			*why = "reply larger than a Sentinel's answer can be";
			return false;
		}
	}
	return true;
}

/*
 * sentinel_read_address
 *		The [ip, port] of a get-master-addr-by-name reply, checked; NULL
 *		with *why when it is not one.
 */
static char *
sentinel_read_address(const redisReply *r, int *port, const char **why)
{
	char	   *end;
	long		p;

	if (r->type != REDIS_REPLY_ARRAY || r->elements != 2 ||
		r->element[0]->type != REDIS_REPLY_STRING ||
		r->element[1]->type != REDIS_REPLY_STRING ||
		r->element[0]->len == 0 || r->element[0]->len > REDIS_HOSTPORT_MAX_HOST ||
		strlen(r->element[0]->str) != r->element[0]->len)
	{
		*why = "answered with something other than an address";
		return NULL;
	}
	for (const char *c = r->element[0]->str; *c; c++)
	{
		if (isspace((unsigned char) *c) || iscntrl((unsigned char) *c) || *c == '/')
		{
			*why = "answered with a malformed host";
			return NULL;
		}
	}
	errno = 0;
	p = strtol(r->element[1]->str, &end, 10);
	if (end == r->element[1]->str || *end != '\0' || errno != 0 ||
		p < 1 || p > 65535)
	{
		*why = "answered with a malformed port";
		return NULL;
	}
	*port = (int) p;
	return pstrdup(r->element[0]->str);
}

/*
 * sentinel_converse
 *		Connect to one Sentinel, AUTH if there is a password, ask for the
 *		primary's address and subscribe to the failover events, all in one
 *		round trip; the caller closes the connection or keeps it as the
 *		watch.  Subscribing after the question means no switch after the
 *		answer goes unnoticed.
 */
static SentinelOutcome
sentinel_converse(const RedisHostPort *addr, const char *password,
				  TimestampTz deadline, int connect_timeout_ms,
				  int command_timeout_ms, char **host, int *port,
				  const char **why)
{
	const char *auth[2] = {"AUTH", password};
	const char *ask[3] = {"SENTINEL", "get-master-addr-by-name",
	fencing_redis_sentinel_master};
	const char *subscribe[3] = {"SUBSCRIBE", "+promoted-slave", "+switch-master"};
	int			argc[3];
	const char **argv[3];
	int			n = 0;
	redisReply *answer;
	redisReply *subscribed;
	TimestampTz connect_deadline;

	if (password != NULL)
	{
		argc[n] = 2;
		argv[n++] = auth;
	}
	argc[n] = 3;
	argv[n++] = ask;
	argc[n] = 3;
	argv[n++] = subscribe;

	connect_deadline = TimestampTzPlusMilliseconds(GetCurrentTimestamp(),
												   connect_timeout_ms);
	if (!sentinel_connect(addr, sentinel_min_deadline(deadline, connect_deadline),
						  why))
		return SENTINEL_UNREACHABLE;
	/* SUBSCRIBE answers once per channel */
	if (!sentinel_exchange(n, n + 1, argc, argv, sentinel_replies,
						   sentinel_min_deadline(deadline,
												 TimestampTzPlusMilliseconds(GetCurrentTimestamp(),
																			 command_timeout_ms)),
						   why))
		return SENTINEL_UNREACHABLE;

	answer = sentinel_replies[n - 2];
	if (password != NULL && sentinel_replies[0]->type == REDIS_REPLY_ERROR)
	{
		/* the server's text is not shown: it answers a secret */
		*why = "refused the password";
		return SENTINEL_AUTH_REFUSED;
	}
	if (answer->type == REDIS_REPLY_ERROR &&
		strncmp(answer->str, "NOAUTH", 6) == 0)
	{
		*why = "requires a password";
		return SENTINEL_AUTH_REFUSED;
	}
	if (answer->type == REDIS_REPLY_ERROR)
	{
		*why = psprintf("refused: %s", answer->str);
		return SENTINEL_BAD_REPLY;
	}
	if (answer->type == REDIS_REPLY_NIL)
	{
		*why = "does not know the master name";
		return SENTINEL_UNKNOWN_MASTER;
	}
	for (int i = n - 1; i <= n && sentinel_replies[i] != NULL; i++)
	{
		subscribed = sentinel_replies[i];
		if (subscribed->type != REDIS_REPLY_ARRAY || subscribed->elements != 3 ||
			subscribed->element[0]->type != REDIS_REPLY_STRING ||
			strcmp(subscribed->element[0]->str, "subscribe") != 0)
		{
			*why = subscribed->type == REDIS_REPLY_ERROR ?
				psprintf("refused SUBSCRIBE: %s", subscribed->str) :
				"answered SUBSCRIBE with something other than a confirmation";
			return SENTINEL_BAD_REPLY;
		}
	}
	*host = sentinel_read_address(answer, port, why);
	return *host != NULL ? SENTINEL_ANSWERED : SENTINEL_BAD_REPLY;
}

/*
 * sentinel_ask
 *		Ask one Sentinel for the primary's address.  The connection becomes
 *		the watch when the Sentinel named the primary, and is closed
 *		otherwise, and on any error thrown while waiting.
 */
static SentinelOutcome
sentinel_ask(const RedisHostPort *addr, const char *password,
			 TimestampTz deadline, int connect_timeout_ms,
			 int command_timeout_ms, char **host, int *port, const char **why)
{
	SentinelOutcome outcome;

	PG_TRY();
	{
		outcome = sentinel_converse(addr, password, deadline, connect_timeout_ms,
									command_timeout_ms, host, port, why);
	}
	PG_CATCH();
	{
		sentinel_disconnect();
		PG_RE_THROW();
	}
	PG_END_TRY();
	if (outcome == SENTINEL_ANSWERED)
	{
		/* the subscribed connection becomes the watch */
		redis_sentinel_unwatch();
		watch_conn = sentinel_conn;
		watch_fd_reserved = sentinel_fd_reserved;
		sentinel_conn = NULL;
		sentinel_fd_reserved = false;
	}
	sentinel_disconnect();
	return outcome;
}

/* Wipe and free a password read from its file. */
static void
sentinel_forget_password(char *password)
{
	if (password != NULL)
	{
		explicit_bzero(password, strlen(password));
		pfree(password);
	}
}

/*
 * sentinel_ask_all
 *		Ask the Sentinels in turn until one names the primary, by
 *		deadline; the host, or NULL with what each said in the tally.
 */
static char *
sentinel_ask_all(const char *password, TimestampTz deadline,
				 int connect_timeout_ms, int command_timeout_ms, int *port,
				 SentinelTally *tally)
{
	StringInfo	detail = &tally->detail;

	for (int i = 0; i < sentinel_count; i++)
	{
		const RedisHostPort *addr = &sentinel_order[i];
		const char *why = NULL;
		char	   *host = NULL;

		if (detail->len > 0)
			appendStringInfoString(detail, "; ");
		if (strchr(addr->host, ':') != NULL)
			appendStringInfo(detail, "[%s]:%d ", addr->host, addr->port);
		else
			appendStringInfo(detail, "%s:%d ", addr->host, addr->port);
		if (GetCurrentTimestamp() >= deadline)
		{
			appendStringInfoString(detail, "not asked: out of time");
			continue;
		}
		switch (sentinel_ask(addr, password, deadline, connect_timeout_ms,
							 command_timeout_ms, &host, port, &why))
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
			case SENTINEL_UNREACHABLE:
			case SENTINEL_BAD_REPLY:
				break;
		}
		appendStringInfoString(detail, why);
	}
	return NULL;
}

/*
 * redis_sentinel_resolve
 *		The address the Sentinels name as primary of
 *		fencing.redis_sentinel_master: its host (palloc'd) and *port; NULL
 *		on failure, described in *err.
 *
 * Asks the Sentinels in turn until one names it, by deadline.  When none
 * does, the error says why, per Sentinel: a name no Sentinel knows or a
 * refused password is the configuration's fault (TF104), Sentinels that
 * cannot be reached are not (TF101).  interruptible as for
 * redis_commands_noerror.
 */
char *
redis_sentinel_resolve(TimestampTz deadline, int connect_timeout_ms,
					   int command_timeout_ms, bool interruptible, int *port,
					   RedisError *err)
{
	char	   *volatile password = NULL;
	SentinelTally *tally = palloc0(sizeof(SentinelTally));
	char	   *host = NULL;

	if (fencing_redis_sentinel_master[0] == '\0')
	{
		redis_fail(err, ERRCODE_FENCING_REDIS_REFUSED,
				   pstrdup("fencing.redis_sentinels is set but fencing.redis_sentinel_master is not"),
				   NULL,
				   pstrdup("Set fencing.redis_sentinel_master to the name the Sentinels monitor the primary under."));
		return NULL;
	}
	sentinel_refresh_order();
	initStringInfo(&tally->detail);
	if (fencing_redis_sentinel_password_file[0] != '\0')
	{
		char	   *pw;

		if (!redis_read_password_file(fencing_redis_sentinel_password_file,
									  &pw, err))
			return NULL;
		password = pw;
	}

	sentinel_interruptible = interruptible;
	PG_TRY();
	{
		host = sentinel_ask_all(password, deadline, connect_timeout_ms,
								command_timeout_ms, port, tally);
	}
	PG_CATCH();
	{
		sentinel_forget_password(password);
		PG_RE_THROW();
	}
	PG_END_TRY();
	sentinel_forget_password(password);

	if (host != NULL)
		return host;
	appendStringInfoChar(&tally->detail, '.');
	if (tally->unknown)
		redis_fail(err, ERRCODE_FENCING_REDIS_REFUSED,
				   psprintf("Redis Sentinels do not know master \"%s\"",
							fencing_redis_sentinel_master),
				   tally->detail.data,
				   pstrdup("Check fencing.redis_sentinel_master against the Sentinels' \"sentinel monitor\" lines."));
	else if (tally->refused)
		redis_fail(err, ERRCODE_FENCING_REDIS_REFUSED,
				   psprintf("could not authenticate to the Redis Sentinels of master \"%s\"",
							fencing_redis_sentinel_master),
				   tally->detail.data,
				   pstrdup("Check the password in fencing.redis_sentinel_password_file."));
	else
		redis_fail(err, ERRCODE_FENCING_REDIS_UNAVAILABLE,
				   psprintf("could not get the address of master \"%s\" from any Redis Sentinel",
							fencing_redis_sentinel_master),
				   tally->detail.data,
				   pstrdup("Check that the Sentinels of fencing.redis_sentinels are running."));
	return NULL;
}

#endif							/* USE_HIREDIS */
