/*-------------------------------------------------------------------------
 *
 * redis_conn.c
 *	  One hiredis connection per backend: connect, commands, replies,
 *	  errors.  Its settings are in redis_settings.c.
 *
 * The connection is opened lazily by the first command a backend sends,
 * never in _PG_init (which may run in the postmaster, whose sockets every
 * child would share), reused by every later command, and freed at backend
 * exit.  Its descriptor is reserved with AcquireExternalFD so that fd.c's
 * accounting stays right.
 *
 * The socket never blocks.  As libpq-be-fe-helpers.h does for libpq, the
 * connect is started without waiting, and the connect, the sending of a
 * command and the wait for its reply all sleep in WaitEventSetWait on the
 * socket and the backend's latch: a query cancel, statement_timeout,
 * pg_terminate_backend or postmaster death is served at once in every
 * phase, a configuration reload (which sets the latch too) never breaks a
 * call, and the wait shows in pg_stat_activity as the Extension wait
 * event.  fencing.redis_connect_timeout bounds the connect, and
 * fencing.redis_command_timeout each command from its first byte sent to
 * its reply.  Only redis_commands_noerror, for the places where PostgreSQL
 * holds interrupts (after commit, at exit), waits on the socket alone,
 * bounded by those timeouts, and reports failure instead of throwing.
 *
 * After any failure -- an I/O error, a timeout, an interrupt while a
 * command is outstanding, a protocol error, an error reply that is
 * reported to the user -- the connection is dropped (redisFree) and the
 * next command opens a new one, re-sending AUTH and SELECT.  A reply that
 * arrives late can therefore never be read as the answer to a later
 * command.  Before a reused connection carries a command, a non-blocking
 * peek makes sure the server has not closed it (a restarted Redis) and
 * that nothing unsolicited is waiting in it; either one means a fresh
 * connection, so a command is never sent twice.
 *
 * hiredis memory is malloc'd, outside PostgreSQL's memory contexts.  Each
 * reply is copied into palloc'd memory and freed at once, and error
 * strings are copied before the objects holding them are freed, so that
 * no ereport can leak or dangle hiredis memory.
 *
 * Which server: fencing.redis_host, or in Sentinel mode the primary that
 * redis_sentinel.c finds (asked again at every connect, checked with
 * ROLE, and left as soon as the Sentinels announce a failover), or in
 * Cluster mode the primary of the command's hash slot, from the map that
 * redis_cluster.c keeps, with a connection per node used and -MOVED/-ASK
 * followed once (redis_send).  Callers see none of it.
 *
 * The password never appears in any message: it is sent only in AUTH,
 * nothing the server answers to AUTH is ever quoted (a refusal is reported
 * by its error code alone), SHOW prints it masked, and a password read
 * from fencing.redis_password_file is wiped from memory once sent.
 *
 * IDENTIFICATION
 *	  src/redis_conn.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <errno.h>
#include <sys/socket.h>
#include <sys/stat.h>

#ifdef USE_HIREDIS
#include "hiredis_compat.h"
#endif

#include "common/cryptohash.h"
#include "fencing_errcodes.h"
#include "miscadmin.h"
#include "pg_compat.h"
#include "pgstat.h"
#include "redis_cluster.h"
#include "redis_conn.h"
#include "redis_sentinel.h"
#include "redis_settings.h"
#include "stats.h"
#include "storage/fd.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#ifdef USE_HIREDIS

/* The connection, and what goes with it. */
static redisContext *conn = NULL;
static bool conn_ready = false; /* connected, authenticated, selected */
static WaitEventSet *conn_wes = NULL;	/* latch, postmaster death, socket */
static int	conn_wes_io = 0;	/* the socket event conn_wes waits for */
static bool conn_fd_reserved = false;
static uint64 conn_generation = 0;
static bool conn_exit_registered = false;

/*
 * Commands have been sent and not all their replies read.  Set only while
 * an exchange runs: a FATAL in the middle of one (pg_terminate_backend
 * while waiting) leaves no PG_CATCH to drop the connection, and a release
 * sent from an exit callback must not read the interrupted command's late
 * reply as its own.
 */
static bool conn_in_flight = false;

/* Position of the socket in conn_wes (after the latch and postmaster). */
#define CONN_WES_SOCKET_POS 2

/* A reply received but not yet copied and freed. */
static redisReply *conn_reply = NULL;

/*
 * Caps on one reply.  hiredis 0.14 buffers a bulk string whole before it
 * hands it over, and allocates an array's element vector as soon as it
 * reads its header: without caps a broken or hostile server could make a
 * backend allocate without bound (a 1.1 GB bulk string ended in "invalid
 * memory alloc request size", a "*2147483647" header in a 16 GB calloc
 * that stalled the backend uninterruptibly).  Bytes are counted as they
 * are read, array elements as hiredis announces them (its reader has no
 * maxelements before 1.0), so an oversized reply is refused early.  The
 * caps sit far above the largest reply a caller expects: CLUSTER SLOTS of
 * 500 primaries with a replica each, the 16,384 slots scattered in as many
 * ranges, is about 3 MB and at most 330,000 elements, CLUSTER SHARDS much
 * less.  The line cap keeps hiredis, which scans a line from its start at
 * every read, from going quadratic over a status line that never ends.
 */
#define REDIS_MAX_REPLY_BYTES		(32 * 1024 * 1024)
#define REDIS_MAX_REPLY_ELEMENTS	(1024 * 1024)
#define REDIS_MAX_REPLY_LINE		(64 * 1024)

/* Sentinel and Cluster modes. */
#define REDIS_SENTINEL_RETRY_PAUSE	100 /* ms between discoveries */
#define REDIS_CLUSTER_RETRY_PAUSE	100 /* ms between map reloads */
#define REDIS_CLUSTER_MAX_LINKS		16	/* open connections to nodes */

/* Which cap the reply being read went over, if any. */
typedef enum RedisReplyLimit
{
	REDIS_LIMIT_NONE,
	REDIS_LIMIT_BYTES,
	REDIS_LIMIT_ELEMENTS,
	REDIS_LIMIT_LINE
} RedisReplyLimit;

static RedisReplyLimit reply_limit = REDIS_LIMIT_NONE;
static long reply_elements = 0; /* announced so far in this reply */

/* hiredis's reply builders, but for arrays, which go through our cap. */
static redisReplyObjectFunctions redis_reply_functions;
static void *(*hiredis_create_array) (const redisReadTask *task,
									  RedisArrayCount elements) = NULL;

static bool redis_connect(bool interruptible, RedisError *err);

/*
 * SQLSTATE and hint for a Redis error reply, by its error code (the first
 * word), or for a few replies under the generic ERR code, by their whole
 * text.
 */
typedef struct RedisErrorClass
{
	const char *prefix;
	int			sqlstate;
	const char *hint;
} RedisErrorClass;

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

/* The class of an error reply; the last entry if its code is unknown. */
static const RedisErrorClass *
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

/* How a reply of the wrong shape is described. */
static const char *
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

/*
 * The server connected to, or to be: fencing.redis_host and
 * fencing.redis_port (target_host NULL), or in Sentinel mode the primary
 * the Sentinels named, or in Cluster mode the node of the active
 * connection (target_host in TopMemoryContext).
 */
static char *target_host = NULL;
static int	target_port = 0;

static const char *
redis_target_host(void)
{
	return target_host != NULL ? target_host : redis_host;
}

static int
redis_target_port(void)
{
	return target_host != NULL ? target_port : redis_port;
}

/*
 * Aim at host:port (a Sentinel's answer, a cluster node), or with NULL at
 * the settings.
 */
static void
redis_set_target(const char *host, int port)
{
	if (target_host != NULL)
		pfree(target_host);
	target_host = host != NULL ? MemoryContextStrdup(TopMemoryContext, host) : NULL;
	target_port = port;
}

/*
 * redis_target
 *		The server as messages name it: "host:port", "[v6addr]:port", or
 *		the socket path.
 */
static char *
redis_target(void)
{
	const char *host = redis_target_host();
	int			port = redis_target_port();

	if (host[0] == '/')
		return pstrdup(host);
	if (strchr(host, ':') != NULL)
		return psprintf("[%s]:%d", host, port);
	return psprintf("%s:%d", host, port);
}

/*
 * redis_drop
 *		Close the connection, if any, and free everything that goes with
 *		it.  Safe to call at any time, including from error cleanup.
 */
static void
redis_drop(void)
{
	if (conn_reply != NULL)
	{
		freeReplyObject(conn_reply);
		conn_reply = NULL;
	}
	if (conn_wes != NULL)
	{
		FreeWaitEventSet(conn_wes);
		conn_wes = NULL;
	}
	if (conn != NULL)
	{
		redisFree(conn);
		conn = NULL;
	}
	if (conn_fd_reserved)
	{
		ReleaseExternalFD();
		conn_fd_reserved = false;
	}
	conn_ready = false;
	conn_in_flight = false;
}

static void redis_drop_parked(void);

static void
redis_at_exit(int code, Datum arg)
{
	redis_drop();
	redis_drop_parked();
}

/*
 * redis_fail
 *		Drop the connection and describe the failure in *err; returns false
 *		for the caller to pass on.  message, detail and hint are palloc'd
 *		or constant; detail and hint may be NULL.
 */
bool
redis_fail(RedisError *err, int sqlstate, char *message, char *detail,
		   char *hint)
{
	redis_drop();
	err->sqlstate = sqlstate;
	err->message = message;
	err->detail = detail;
	err->hint = hint;
	return false;
}

/* Report a failure described by redis_fail. */
void
redis_raise(const RedisError *err)
{
	ereport(ERROR,
			(errcode(err->sqlstate),
			 errmsg_internal("%s", err->message),
			 err->detail ? errdetail_internal("%s", err->detail) : 0,
			 err->hint ? errhint("%s", err->hint) : 0));
	pg_unreachable();
}

/*
 * redis_errno_sqlstate
 *		The SQLSTATE errcode_for_file_access() would give errno, for file
 *		errors described before they are reported.
 */
static int
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

/*
 * redis_wait
 *		Sleep until the socket is ready for io (WL_SOCKET_READABLE or
 *		WL_SOCKET_WRITEABLE); false once deadline has passed.
 *
 * An interruptible wait also sleeps on the latch and serves interrupts
 * with CHECK_FOR_INTERRUPTS, so that a cancel, statement_timeout or
 * pg_terminate_backend ends it at once; a configuration reload sets the
 * latch too, and the wait goes on.  The other kind, for calls made where
 * PostgreSQL holds interrupts, watches only the socket, the postmaster and
 * the clock.  Either shows in pg_stat_activity as the Extension wait.
 */
static bool
redis_wait(int io, TimestampTz deadline, bool interruptible)
{
	for (;;)
	{
		long		remaining;

		if (interruptible)
			CHECK_FOR_INTERRUPTS();
		remaining = TimestampDifferenceMilliseconds(GetCurrentTimestamp(),
													deadline);
		if (remaining <= 0)
			return false;

		if (interruptible)
		{
			WaitEvent	event;

			if (conn_wes_io != io)
			{
				ModifyWaitEvent(conn_wes, CONN_WES_SOCKET_POS, io, NULL);
				conn_wes_io = io;
			}
			if (WaitEventSetWait(conn_wes, remaining, &event, 1,
								 fencing_wait_event(FENCING_WAIT_REDIS_IO)) == 0)
				continue;		/* timed out: the loop says so */
			if (event.events & WL_LATCH_SET)
			{
				ResetLatch(MyLatch);
				continue;		/* interrupts are served at the top */
			}
			return true;
		}
		else if (WaitLatchOrSocket(NULL, io | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
								   conn->fd, remaining,
								   fencing_wait_event(FENCING_WAIT_REDIS_IO)) & io)
			return true;
	}
}

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
		reply_limit = REDIS_LIMIT_ELEMENTS;
		return NULL;
	}
	reply_elements += elements;
	return hiredis_create_array(task, elements);
}

/*
 * redis_reader_line_too_long
 *		Whether the unparsed bytes begin with a line longer than
 *		REDIS_MAX_REPLY_LINE.  The reader's position is always at the start
 *		of an item or just after its type byte, so the bytes there are a
 *		line (status, error, integer) or a length before a bulk string or
 *		an array, which a carriage return must end soon.
 */
static bool
redis_reader_line_too_long(const redisReader *r)
{
	return r->len - r->pos > REDIS_MAX_REPLY_LINE &&
		memchr(r->buf + r->pos, '\r', REDIS_MAX_REPLY_LINE) == NULL;
}

/*
 * redis_too_large
 *		Describe a reply that went over a cap in *err.
 */
static bool
redis_too_large(RedisError *err)
{
	char	   *detail;

	switch (reply_limit)
	{
		case REDIS_LIMIT_ELEMENTS:
			detail = psprintf("The reply has more than %d array elements, the most fencing accepts.",
							  REDIS_MAX_REPLY_ELEMENTS);
			break;
		case REDIS_LIMIT_LINE:
			detail = psprintf("A status, error, integer or length line of the reply is longer than %d bytes, the most fencing accepts.",
							  REDIS_MAX_REPLY_LINE);
			break;
		case REDIS_LIMIT_BYTES:
		default:
			detail = psprintf("The reply is longer than %d bytes, the most fencing accepts.",
							  REDIS_MAX_REPLY_BYTES);
			break;
	}
	return redis_fail(err, ERRCODE_FENCING_REDIS_PROTOCOL,
					  psprintf("reply from Redis server at \"%s\" is too large",
							   redis_target()),
					  detail, NULL);
}

/* Copy a hiredis reply into the current memory context. */
static RedisValue *
redis_value_copy(const redisReply *r)
{
	RedisValue *v = palloc0(sizeof(RedisValue));
	size_t		i;

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
			for (i = 0; i < r->elements; i++)
				v->elements[i] = redis_value_copy(r->element[i]);
			break;
		default:
			/* RESP3 types were refused before */
			elog(ERROR, "unknown hiredis reply type %d", r->type);
	}
	return v;
}

/*
 * redis_io_failed
 *		Describe a failed hiredis read or write on the connection.
 */
static bool
redis_io_failed(RedisError *err, bool secret)
{
	char	   *target = redis_target();

	if (reply_limit != REDIS_LIMIT_NONE)
		return redis_too_large(err);
	if (conn->err == REDIS_ERR_OOM)
		return redis_fail(err, ERRCODE_OUT_OF_MEMORY,
						  pstrdup("out of memory"),
						  psprintf("Could not buffer a command for, or a reply from, Redis server at \"%s\".",
								   target),
						  NULL);
	/* hiredis's text quotes a byte of the reply, which may echo a secret */
	if (conn->err == REDIS_ERR_PROTOCOL)
		return redis_fail(err, ERRCODE_FENCING_REDIS_PROTOCOL,
						  psprintf("unexpected reply from Redis server at \"%s\"",
								   target),
						  secret ? NULL : pstrdup(conn->errstr),
						  NULL);
	return redis_fail(err, ERRCODE_FENCING_REDIS_UNAVAILABLE,
					  psprintf("lost connection to Redis server at \"%s\"",
							   target),
					  pstrdup(conn->errstr[0] ? conn->errstr : "unknown error"),
					  NULL);
}

/*
 * redis_exchange_many
 *		Send ncommands commands on the open connection, pipelined, and wait
 *		for their replies, all within timeout_ms; false on failure,
 *		described in *err, with the connection dropped (replies[i] is then
 *		NULL for every reply not read).
 *
 * The socket is non-blocking: whatever does not fit in the socket buffers
 * is sent as the server reads it, the backend sleeping in redis_wait in
 * between, as it does for the replies.  secret says that the commands
 * carry a password, so that nothing the server sends back may be quoted.
 */
static bool
redis_exchange_many(int ncommands, const int *argc, const char ***argv,
					RedisValue **replies, long timeout_ms,
					bool interruptible, bool secret, RedisError *err)
{
	TimestampTz deadline;
	int			done = 0;
	int			c;
	int			i;

	Assert(conn != NULL && conn->err == 0);

	for (c = 0; c < ncommands; c++)
		replies[c] = NULL;
	conn_in_flight = true;
	for (c = 0; c < ncommands; c++)
	{
		size_t	   *argvlen = palloc(sizeof(size_t) * argc[c]);

		for (i = 0; i < argc[c]; i++)
			argvlen[i] = strlen(argv[c][i]);
		if (redisAppendCommandArgv(conn, argc[c], argv[c], argvlen) != REDIS_OK)
			return redis_io_failed(err, secret);
		pfree(argvlen);
	}

	deadline = TimestampTzPlusMilliseconds(GetCurrentTimestamp(), timeout_ms);
	for (;;)
	{
		if (redisBufferWrite(conn, &done) != REDIS_OK)
			return redis_io_failed(err, secret);
		if (done)
			break;
		if (!redis_wait(WL_SOCKET_WRITEABLE, deadline, interruptible))
			return redis_fail(err, ERRCODE_FENCING_REDIS_UNAVAILABLE,
							  psprintf("timed out sending a command to Redis server at \"%s\"",
									   redis_target()),
							  psprintf("The server did not read the command within %ld ms.",
									   timeout_ms),
							  pstrdup("The limit is fencing.redis_command_timeout."));
	}

	for (c = 0; c < ncommands; c++)
	{
		void	   *reply = NULL;
		size_t		reply_bytes = 0;

		reply_limit = REDIS_LIMIT_NONE;
		reply_elements = 0;
		for (;;)
		{
			size_t		buffered;

			if (redisGetReplyFromReader(conn, &reply) != REDIS_OK)
				return redis_io_failed(err, secret);
			if (reply != NULL)
				break;
			if (!redis_wait(WL_SOCKET_READABLE, deadline, interruptible))
				return redis_fail(err, ERRCODE_FENCING_REDIS_UNAVAILABLE,
								  psprintf("timed out waiting for a reply from Redis server at \"%s\"",
										   redis_target()),
								  psprintf("No reply arrived within %ld ms.", timeout_ms),
								  pstrdup("The limit is fencing.redis_command_timeout."));
			buffered = conn->reader->len;
			if (redisBufferRead(conn) != REDIS_OK)
				return redis_io_failed(err, secret);
			reply_bytes += conn->reader->len - buffered;
			if (reply_bytes > REDIS_MAX_REPLY_BYTES)
				reply_limit = REDIS_LIMIT_BYTES;
			else if (redis_reader_line_too_long(conn->reader))
				reply_limit = REDIS_LIMIT_LINE;
			if (reply_limit != REDIS_LIMIT_NONE)
				return redis_too_large(err);
		}

		if (!redis_reply_is_resp2(reply))
		{
			freeReplyObject(reply);
			return redis_fail(err, ERRCODE_FENCING_REDIS_PROTOCOL,
							  psprintf("unexpected reply from Redis server at \"%s\"",
									   redis_target()),
							  pstrdup("The reply has a RESP3 type, which fencing never asks for."),
							  NULL);
		}
		conn_reply = reply;
		replies[c] = redis_value_copy(conn_reply);
		freeReplyObject(conn_reply);
		conn_reply = NULL;
	}
	conn_in_flight = false;
	return true;
}

/*
 * redis_exchange
 *		Send one command on the open connection and wait for its reply,
 *		within timeout_ms; NULL on failure, described in *err, with the
 *		connection dropped.
 */
static RedisValue *
redis_exchange(int argc, const char **argv, long timeout_ms,
			   bool interruptible, bool secret, RedisError *err)
{
	RedisValue *reply;

	if (!redis_exchange_many(1, &argc, &argv, &reply, timeout_ms,
							 interruptible, secret, err))
		return NULL;
	return reply;
}

/*
 * redis_is_stale
 *		Whether a connection about to be reused is no longer in step with
 *		the server: closed by it (restart, idle timeout), broken, or
 *		holding bytes nobody asked for.
 */
static bool
redis_is_stale(void)
{
	char		c;
	ssize_t		n;

	if (conn->reader->pos < conn->reader->len)
		return true;
	n = recv(conn->fd, &c, 1, MSG_PEEK | MSG_DONTWAIT);
	if (n >= 0)
		return true;			/* end of file, or unsolicited bytes */
	return !(errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR);
}

/*
 * redis_ensure_connected
 *		Make sure there is a usable connection under the current settings;
 *		false on failure, described in *err.
 */
static bool
redis_ensure_connected(bool interruptible, RedisError *err)
{
	if (conn != NULL && redis_sentinel_enabled() && redis_sentinel_switched())
	{
		stats_redis_count(STATS_REDIS_FAILOVERS);
		redis_drop();
	}
	else if (conn != NULL &&
			 (!conn_ready || conn_in_flight ||
			  conn_generation != redis_settings_generation ||
			  redis_is_stale()))
		redis_drop();
	if (conn == NULL)
		return redis_connect(interruptible, err);
	return true;
}

/*
 * redis_read_password_file
 *		The password in a password file (fencing.redis_password_file,
 *		fencing.redis_sentinel_password_file): its first line; false if the
 *		file is unusable, described in *err.
 *
 * Like libpq's .pgpass, the file must not be readable by anyone but the
 * server's operating system user; unlike libpq, a file that is too open is
 * an error, not a warning, since it guards a shared service.
 */
bool
redis_read_password_file(const char *path, char **password, RedisError *err)
{
	struct stat st;
	FILE	   *file;
	char	   *buf;
	size_t		len;
	int			save_errno;

	if (stat(path, &st) != 0)
	{
		save_errno = errno;
		return redis_fail(err, redis_errno_sqlstate(save_errno),
						  psprintf("could not stat Redis password file \"%s\": %s",
								   path, strerror(save_errno)),
						  NULL, NULL);
	}
	if (!S_ISREG(st.st_mode))
		return redis_fail(err, ERRCODE_CONFIG_FILE_ERROR,
						  psprintf("Redis password file \"%s\" is not a regular file",
								   path),
						  NULL, NULL);
	if ((st.st_mode & (S_IRWXG | S_IRWXO)) != 0)
		return redis_fail(err, ERRCODE_CONFIG_FILE_ERROR,
						  psprintf("Redis password file \"%s\" has group or world access",
								   path),
						  pstrdup("Permissions should be u=rw (0600) or less."),
						  NULL);

	file = AllocateFile(path, "r");
	if (file == NULL)
	{
		save_errno = errno;
		return redis_fail(err, redis_errno_sqlstate(save_errno),
						  psprintf("could not open Redis password file \"%s\": %s",
								   path, strerror(save_errno)),
						  NULL, NULL);
	}
	buf = palloc0(REDIS_MAX_PASSWORD_LEN + 2);
	if (fgets(buf, REDIS_MAX_PASSWORD_LEN + 2, file) == NULL)
		buf[0] = '\0';
	save_errno = errno;
	if (ferror(file))
	{
		FreeFile(file);
		explicit_bzero(buf, REDIS_MAX_PASSWORD_LEN + 2);
		return redis_fail(err, redis_errno_sqlstate(save_errno),
						  psprintf("could not read Redis password file \"%s\": %s",
								   path, strerror(save_errno)),
						  NULL, NULL);
	}
	FreeFile(file);

	len = strlen(buf);
	if (len > REDIS_MAX_PASSWORD_LEN)
	{
		explicit_bzero(buf, REDIS_MAX_PASSWORD_LEN + 2);
		return redis_fail(err, ERRCODE_CONFIG_FILE_ERROR,
						  psprintf("Redis password in file \"%s\" is too long", path),
						  psprintf("A Redis password can be at most %d bytes long.",
								   REDIS_MAX_PASSWORD_LEN),
						  NULL);
	}
	while (len > 0 && (buf[len - 1] == '\n' || buf[len - 1] == '\r'))
		buf[--len] = '\0';
	if (len == 0)
		return redis_fail(err, ERRCODE_CONFIG_FILE_ERROR,
						  psprintf("Redis password file \"%s\" is empty", path),
						  NULL, NULL);
	*password = buf;
	return true;
}

/*
 * redis_unexpected_error
 *		Describe a reply of the wrong shape in *err.
 */
static bool
redis_unexpected_error(RedisError *err, const char *command,
					   const char *expected, const RedisValue *got)
{
	return redis_fail(err, ERRCODE_FENCING_REDIS_PROTOCOL,
					  psprintf("unexpected reply from Redis server at \"%s\"",
							   redis_target()),
					  psprintf("%s answered with %s instead of %s.",
							   command, redis_value_describe(got), expected),
					  NULL);
}

/*
 * redis_authenticate
 *		AUTH, with the ACL user name if one is set, on a new connection;
 *		false on failure, described in *err.
 */
static bool
redis_authenticate(bool interruptible, RedisError *err)
{
	char	   *password = NULL;
	const char *argv[3];
	int			argc = 0;
	RedisValue *volatile reply = NULL;

	if (redis_password[0] != '\0' && redis_password_file[0] != '\0')
		return redis_fail(err, ERRCODE_CONFIG_FILE_ERROR,
						  pstrdup("fencing.redis_password and fencing.redis_password_file are both set"),
						  NULL, pstrdup("Set only one of them."));
	if (redis_password_file[0] != '\0')
	{
		if (!redis_read_password_file(redis_password_file, &password,
									  err))
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
		reply = redis_exchange(argc, argv, redis_command_timeout,
							   interruptible, true, err);
	}
	PG_FINALLY();
	{
		if (password != NULL)
		{
			explicit_bzero(password, strlen(password));
			pfree(password);
			password = NULL;
		}
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

		return redis_fail(err, class->sqlstate,
						  psprintf("could not authenticate to Redis server at \"%s\"",
								   redis_target()),
						  class->prefix ?
						  psprintf("Redis answered AUTH with \"%s\"; the rest of its text is not shown, since it may repeat the password.",
								   class->prefix) :
						  pstrdup("Redis answered AUTH with an error; its text is not shown, since it may repeat the password."),
						  pstrdup("Check fencing.redis_username and the password in fencing.redis_password or fencing.redis_password_file."));
	}
	if (reply->type != REDIS_VALUE_STATUS)
		return redis_unexpected_error(err, "AUTH", "a status", reply);
	return true;
}

/*
 * redis_select
 *		SELECT fencing.redis_database on a new connection, unless it is 0;
 *		false on failure, described in *err.
 */
static bool
redis_select(bool interruptible, RedisError *err)
{
	char		db[12];
	const char *argv[2];
	RedisValue *reply;

	if (redis_database == 0)
		return true;
	snprintf(db, sizeof(db), "%d", redis_database);
	argv[0] = "SELECT";
	argv[1] = db;
	reply = redis_exchange(2, argv, redis_command_timeout,
						   interruptible, false, err);
	if (reply == NULL)
		return false;
	if (reply->type == REDIS_VALUE_ERROR)
		return redis_fail(err, redis_error_class(reply->str)->sqlstate,
						  psprintf("could not select database %d on Redis server at \"%s\"",
								   redis_database, redis_target()),
						  pstrdup(reply->str), NULL);
	if (reply->type != REDIS_VALUE_STATUS)
		return redis_unexpected_error(err, "SELECT", "a status", reply);
	return true;
}

/*
 * redis_connect_target
 *		Open the connection to the target within timeout_ms: a
 *		non-blocking connect, then AUTH and SELECT; false on failure,
 *		described in *err, with nothing left behind.
 *
 * Like libpqsrv_connect_complete, the connect is started without waiting
 * and completed in redis_wait, so that it answers to interrupts; only
 * resolving a host name (getaddrinfo, inside hiredis) blocks.  hiredis
 * marks a non-blocking context connected at once: the outcome is the
 * socket's error once it turns writeable.
 */
static bool
redis_connect_target(int timeout_ms, bool interruptible, RedisError *err)
{
	char	   *target = redis_target();
	const char *host = redis_target_host();
	redisContext *c;
	TimestampTz deadline;
	int			so_error = 0;
	socklen_t	so_error_len = sizeof(so_error);

	Assert(conn == NULL);

	if (!conn_exit_registered)
	{
		on_proc_exit(redis_at_exit, (Datum) 0);
		conn_exit_registered = true;
	}

	if (!AcquireExternalFD())
		return redis_fail(err, ERRCODE_FENCING_REDIS_UNAVAILABLE,
						  psprintf("could not connect to Redis server at \"%s\"",
								   target),
						  pstrdup("There are too many open files on the local server."),
						  pstrdup("Raise the server's max_files_per_process and/or \"ulimit -n\" limits."));
	conn_fd_reserved = true;

	deadline = TimestampTzPlusMilliseconds(GetCurrentTimestamp(), timeout_ms);
	if (host[0] == '/')
		c = redisConnectUnixNonBlock(host);
	else
		c = redisConnectNonBlock(host, redis_target_port());
	if (c == NULL)
		return redis_fail(err, ERRCODE_OUT_OF_MEMORY, pstrdup("out of memory"),
						  pstrdup("Could not allocate a Redis connection."),
						  NULL);
	conn = c;
	if (c->err)
		return redis_fail(err, ERRCODE_FENCING_REDIS_UNAVAILABLE,
						  psprintf("could not connect to Redis server at \"%s\": %s",
								   target, c->errstr),
						  NULL, NULL);

	/* Replies are built by hiredis's functions, arrays under our cap. */
	if (hiredis_create_array == NULL)
	{
		redis_reply_functions = *c->reader->fn;
		hiredis_create_array = redis_reply_functions.createArray;
		redis_reply_functions.createArray = redis_create_array;
	}
	c->reader->fn = &redis_reply_functions;

	conn_wes = FencingCreateWaitEventSet(3);
	AddWaitEventToSet(conn_wes, WL_LATCH_SET, PGINVALID_SOCKET, MyLatch, NULL);
	AddWaitEventToSet(conn_wes, WL_EXIT_ON_PM_DEATH, PGINVALID_SOCKET, NULL, NULL);
	AddWaitEventToSet(conn_wes, WL_SOCKET_WRITEABLE, c->fd, NULL, NULL);
	conn_wes_io = WL_SOCKET_WRITEABLE;

	if (!redis_wait(WL_SOCKET_WRITEABLE, deadline, interruptible))
		return redis_fail(err, ERRCODE_FENCING_REDIS_UNAVAILABLE,
						  psprintf("timed out connecting to Redis server at \"%s\"",
								   target),
						  psprintf("No connection within %d ms.", timeout_ms),
						  pstrdup("The limit is fencing.redis_connect_timeout."));
	if (getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &so_error, &so_error_len) != 0)
		so_error = errno;
	if (so_error != 0)
		return redis_fail(err, ERRCODE_FENCING_REDIS_UNAVAILABLE,
						  psprintf("could not connect to Redis server at \"%s\": %s",
								   target, strerror(so_error)),
						  NULL, NULL);

	if (!redis_authenticate(interruptible, err) ||
		!redis_select(interruptible, err))
		return false;

	conn_generation = redis_settings_generation;
	conn_ready = true;
	stats_redis_count(STATS_REDIS_CONNECTS);
	return true;
}

/*
 * redis_role
 *		The role the connected server says it has ("master", "slave",
 *		"sentinel") in *role; false on failure, described in *err.
 */
static bool
redis_role(bool interruptible, char **role, RedisError *err)
{
	const char *argv[1] = {"ROLE"};
	RedisValue *reply;

	reply = redis_exchange(1, argv, redis_command_timeout,
						   interruptible, false, err);
	if (reply == NULL)
		return false;
	if (reply->type == REDIS_VALUE_ERROR)
		return redis_fail(err, redis_error_class(reply->str)->sqlstate,
						  psprintf("Redis server at \"%s\" refused ROLE",
								   redis_target()),
						  pstrdup(reply->str), NULL);
	if (reply->type != REDIS_VALUE_ARRAY || reply->nelements < 1 ||
		reply->elements[0]->type != REDIS_VALUE_STRING)
		return redis_unexpected_error(err, "ROLE", "an array naming a role", reply);
	*role = reply->elements[0]->str;
	return true;
}

/*
 * redis_connect_sentinel
 *		Sentinel mode: ask the Sentinels for the primary, connect to it and
 *		check with ROLE that it is one; false on failure, described in
 *		*err.
 *
 * During a failover the Sentinels may still name the old primary, which
 * is down (the connect fails) or demoted (ROLE says "slave"); then ask
 * again after a short pause, until the primary answers or the connect and
 * command timeouts together have passed; then the last failure is
 * reported.  Only unavailability is retried: a refused password or a
 * protocol error will not go away by asking again.
 */
static bool
redis_connect_sentinel(bool interruptible, RedisError *err)
{
	TimestampTz deadline = TimestampTzPlusMilliseconds(GetCurrentTimestamp(),
													   redis_connect_timeout +
													   redis_command_timeout);

	for (;;)
	{
		int			port;
		char	   *host;
		char	   *role = NULL;
		long		remaining;

		host = redis_sentinel_resolve(deadline, redis_connect_timeout,
									  redis_command_timeout,
									  interruptible, &port, err);
		if (host == NULL)
			return false;
		redis_set_target(host, port);
		remaining = TimestampDifferenceMilliseconds(GetCurrentTimestamp(), deadline);
		if (redis_connect_target((int) Max(Min(remaining, redis_connect_timeout), 1),
								 interruptible, err) &&
			redis_role(interruptible, &role, err))
		{
			if (strcmp(role, "master") == 0)
				return true;
			redis_fail(err, ERRCODE_FENCING_REDIS_BUSY,
					   psprintf("Redis server at \"%s\" that the Sentinels name as primary of \"%s\" is not a primary",
								redis_target(), redis_sentinel_master_name()),
					   psprintf("ROLE says \"%s\".", role),
					   pstrdup("A failover may be under way; retry soon."));
			/* that Sentinel has not heard of the failover yet */
			redis_sentinel_distrust();
		}
		redis_sentinel_unwatch();

		remaining = TimestampDifferenceMilliseconds(GetCurrentTimestamp(), deadline);
		if ((err->sqlstate != ERRCODE_FENCING_REDIS_UNAVAILABLE &&
			 err->sqlstate != ERRCODE_FENCING_REDIS_BUSY) ||
			remaining <= REDIS_SENTINEL_RETRY_PAUSE)
			return false;
		if (interruptible)
		{
			(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
							 REDIS_SENTINEL_RETRY_PAUSE,
							 fencing_wait_event(FENCING_WAIT_REDIS_RETRY));
			ResetLatch(MyLatch);
			CHECK_FOR_INTERRUPTS();
		}
		else
			(void) WaitLatch(NULL, WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
							 REDIS_SENTINEL_RETRY_PAUSE,
							 fencing_wait_event(FENCING_WAIT_REDIS_RETRY));
	}
}

/*
 * redis_connect
 *		Open the connection under the current settings: to
 *		fencing.redis_host, to the primary the Sentinels name, or to the
 *		cluster node redis_cluster_prepare chose; false on failure,
 *		described in *err, with nothing left behind.
 */
static bool
redis_connect(bool interruptible, RedisError *err)
{
	/* the check hooks cannot see each other's values: checked here */
	if (redis_sentinel_enabled() && redis_cluster_enabled())
		return redis_fail(err, ERRCODE_FENCING_REDIS_REFUSED,
						  pstrdup("fencing.redis_sentinels and fencing.redis_cluster_nodes are both set"),
						  NULL,
						  pstrdup("Set fencing.redis_sentinels for a primary watched by Sentinels, or fencing.redis_cluster_nodes for a Redis Cluster, not both."));
	if (redis_cluster_enabled())
	{
		/* redis_cluster_prepare chose the node */
		if (redis_database != 0)
			return redis_fail(err, ERRCODE_FENCING_REDIS_REFUSED,
							  psprintf("fencing.redis_database is %d, but a Redis Cluster has only database 0",
									   redis_database),
							  NULL,
							  pstrdup("Set fencing.redis_database to 0 in Cluster mode."));
		redis_sentinel_unwatch();
		return redis_connect_target(redis_connect_timeout, interruptible, err);
	}
	redis_drop_parked();
	if (redis_sentinel_enabled())
		return redis_connect_sentinel(interruptible, err);
	redis_sentinel_unwatch();
	redis_set_target(NULL, 0);
	return redis_connect_target(redis_connect_timeout, interruptible, err);
}

/*
 * Cluster mode: one connection per node used.
 *
 * The module's connection variables (conn, conn_wes, ...) describe the
 * active connection, the one to the node the current call goes to.  The
 * connections to other nodes are parked here, and swapped in when a call
 * goes to their node again, so that a backend keeps one connection to each
 * node it uses and a call costs no more round trips than with one server.
 * Keyless commands (WAIT, after the script) go to the active connection:
 * the node that ran the script.
 */
typedef struct RedisLink
{
	redisContext *conn;
	WaitEventSet *wes;
	int			wes_io;
	bool		fd_reserved;
	uint64		generation;
	bool		ready;
	char	   *host;			/* TopMemoryContext */
	int			port;
} RedisLink;

static RedisLink parked[REDIS_CLUSTER_MAX_LINKS];
static int	nparked = 0;

/* Close a parked connection. */
static void
redis_link_free(RedisLink *link)
{
	if (link->wes != NULL)
		FreeWaitEventSet(link->wes);
	if (link->conn != NULL)
		redisFree(link->conn);
	if (link->fd_reserved)
		ReleaseExternalFD();
	pfree(link->host);
}

/* Close every parked connection. */
static void
redis_drop_parked(void)
{
	while (nparked > 0)
		redis_link_free(&parked[--nparked]);
}

/*
 * redis_use_node
 *		Make the connection to host:port the active one: swap it in if it
 *		is parked, else aim the next connect at it.  The active connection,
 *		if any, is parked (the oldest parked one closed if there is no
 *		room), unless it was made under other settings (before Cluster mode
 *		was set, say), which closes it.
 */
static void
redis_use_node(const char *host, int port)
{
	if (target_host != NULL && target_port == port && strcmp(target_host, host) == 0)
		return;
	if (conn != NULL &&
		(target_host == NULL || conn_generation != redis_settings_generation))
		redis_drop();
	if (conn != NULL)
	{
		RedisLink  *link;

		if (nparked == REDIS_CLUSTER_MAX_LINKS)
		{
			redis_link_free(&parked[0]);
			memmove(&parked[0], &parked[1], sizeof(RedisLink) * --nparked);
		}
		link = &parked[nparked++];
		link->conn = conn;
		link->wes = conn_wes;
		link->wes_io = conn_wes_io;
		link->fd_reserved = conn_fd_reserved;
		link->generation = conn_generation;
		link->ready = conn_ready;
		link->host = MemoryContextStrdup(TopMemoryContext, target_host);
		link->port = target_port;
		conn = NULL;
		conn_wes = NULL;
		conn_fd_reserved = false;
		conn_ready = false;
	}
	redis_set_target(host, port);
	for (int i = 0; i < nparked; i++)
	{
		RedisLink  *link = &parked[i];

		if (link->port == port && strcmp(link->host, host) == 0)
		{
			conn = link->conn;
			conn_wes = link->wes;
			conn_wes_io = link->wes_io;
			conn_fd_reserved = link->fd_reserved;
			conn_generation = link->generation;
			conn_ready = link->ready;
			pfree(link->host);
			memmove(link, link + 1, sizeof(RedisLink) * (nparked - i - 1));
			nparked--;
			break;
		}
	}
}

/*
 * redis_cluster_refresh
 *		Load the slot map, asking the known primaries and then the seeds in
 *		turn (CLUSTER SLOTS) until one answers, by deadline; false on
 *		failure, described in *err (the last node's failure).
 */
static bool
redis_cluster_refresh(TimestampTz deadline, bool interruptible, RedisError *err)
{
	RedisHostPort nodes[REDIS_MAX_HOSTPORTS * 2];
	int			n = redis_cluster_candidates(nodes, lengthof(nodes));
	const char *argv[2] = {"CLUSTER", "SLOTS"};

	for (int i = 0; i < n; i++)
	{
		RedisValue *reply;
		const char *why;

		if (i > 0 && GetCurrentTimestamp() >= deadline)
			break;
		redis_use_node(nodes[i].host, nodes[i].port);
		if (!redis_ensure_connected(interruptible, err))
			continue;
		reply = redis_exchange(2, argv, redis_command_timeout,
							   interruptible, false, err);
		if (reply == NULL)
			continue;
		if (reply->type == REDIS_VALUE_ERROR)
		{
			redis_fail(err, redis_error_class(reply->str)->sqlstate,
					   psprintf("Redis server at \"%s\" refused CLUSTER SLOTS",
								redis_target()),
					   pstrdup(reply->str),
					   pstrdup("fencing.redis_cluster_nodes must name nodes of a Redis Cluster."));
			continue;
		}
		if (!redis_cluster_load_map(reply, nodes[i].host, &why))
		{
			redis_fail(err, ERRCODE_FENCING_REDIS_PROTOCOL,
					   psprintf("unexpected reply from Redis server at \"%s\"",
								redis_target()),
					   pstrdup(why), NULL);
			continue;
		}
		return true;
	}
	return false;
}

/*
 * redis_command_slot
 *		The hash slot a command's keys are in, or -1 for a command without
 *		keys; for fencing's commands, only EVAL and EVALSHA have keys.  Keys
 *		in different slots are refused: Redis Cluster cannot run a script on
 *		them (-CROSSSLOT).
 */
static int
redis_command_slot(int argc, const char **argv, RedisError *err, bool *ok)
{
	long		nkeys;
	int			slot = -1;

	*ok = true;
	if (argc < 4 ||
		(pg_strcasecmp(argv[0], "EVALSHA") != 0 && pg_strcasecmp(argv[0], "EVAL") != 0))
		return -1;
	nkeys = strtol(argv[2], NULL, 10);
	for (long i = 0; i < nkeys && 3 + i < argc; i++)
	{
		int			s = redis_cluster_key_slot(argv[3 + i], strlen(argv[3 + i]));

		if (slot >= 0 && s != slot)
		{
			*ok = redis_fail(err, ERRCODE_FENCING_REDIS_REFUSED,
							 psprintf("Redis keys \"%s\" and \"%s\" are in different Redis Cluster hash slots (%d and %d)",
									  argv[3], argv[3 + i], slot, s),
							 pstrdup("The lock key and the token key of a resource must be in one hash slot, for the script that takes both."),
							 pstrdup("Give fencing.redis_lock_key and fencing.redis_token_key the same {hash tag} around <resource>, as the default layout \"fencing:v1:{r:<resource>}:...\" does."));
			return -1;
		}
		slot = s;
	}
	return slot;
}

/*
 * redis_cluster_prepare
 *		Cluster mode: make the connection to the primary that serves the
 *		command's keys the active one, loading the map first if need be;
 *		false on failure, described in *err.
 *
 * A node that cannot be reached may have failed over: the map is
 * forgotten and loaded again after a short pause, until the connect and
 * command timeouts together have passed (the cluster elects a new primary
 * within about cluster-node-timeout).  A command without keys goes to the
 * active connection (or, on a fresh backend, to a seed).
 */
static bool
redis_cluster_prepare(int argc, const char **argv, bool interruptible,
					  RedisError *err)
{
	TimestampTz deadline = TimestampTzPlusMilliseconds(GetCurrentTimestamp(),
													   redis_connect_timeout +
													   redis_command_timeout);
	bool		ok;
	int			slot = redis_command_slot(argc, argv, err, &ok);

	if (!ok)
		return false;
	for (;;)
	{
		bool		routed = true;
		long		remaining;

		if (slot >= 0)
		{
			const RedisHostPort *node = redis_cluster_node_of(slot);

			if (node == NULL)
			{
				routed = redis_cluster_refresh(deadline, interruptible, err);
				if (routed && (node = redis_cluster_node_of(slot)) == NULL)
					routed = redis_fail(err, ERRCODE_FENCING_REDIS_CLUSTER_CHANGING,
										psprintf("no primary of the Redis Cluster serves hash slot %d",
												 slot),
										pstrdup("The cluster is incomplete, or a failover is under way."),
										NULL);
			}
			if (routed)
				redis_use_node(node->host, node->port);
		}
		else if (target_host == NULL)
		{
			RedisHostPort seed;

			(void) redis_cluster_candidates(&seed, 1);
			redis_use_node(seed.host, seed.port);
		}
		if (routed && redis_ensure_connected(interruptible, err))
			return true;

		remaining = TimestampDifferenceMilliseconds(GetCurrentTimestamp(), deadline);
		if ((err->sqlstate != ERRCODE_FENCING_REDIS_UNAVAILABLE &&
			 err->sqlstate != ERRCODE_FENCING_REDIS_CLUSTER_CHANGING) ||
			remaining <= REDIS_CLUSTER_RETRY_PAUSE)
			return false;
		redis_cluster_forget_map(true);
		if (interruptible)
		{
			(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
							 REDIS_CLUSTER_RETRY_PAUSE,
							 fencing_wait_event(FENCING_WAIT_REDIS_RETRY));
			ResetLatch(MyLatch);
			CHECK_FOR_INTERRUPTS();
		}
		else
			(void) WaitLatch(NULL, WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
							 REDIS_CLUSTER_RETRY_PAUSE,
							 fencing_wait_event(FENCING_WAIT_REDIS_RETRY));
	}
}

/*
 * redis_redirect_target
 *		The slot and host:port of a -MOVED or -ASK reply ("MOVED 3999
 *		127.0.0.1:6381"; an empty host means the host that answered); false
 *		if the text is not one.
 */
static bool
redis_redirect_target(const char *text, int *slot, char **host, int *port)
{
	const char *p = strchr(text, ' ');
	const char *colon;
	char	   *end;
	long		n;

	if (p == NULL)
		return false;
	n = strtol(p + 1, &end, 10);
	if (end == p + 1 || *end != ' ' || n < 0 || n >= REDIS_CLUSTER_SLOTS)
		return false;
	*slot = (int) n;
	p = end + 1;
	colon = strrchr(p, ':');
	if (colon == NULL || colon - p > REDIS_HOSTPORT_MAX_HOST)
		return false;
	n = strtol(colon + 1, &end, 10);
	if (end == colon + 1 || *end != '\0' || n < 1 || n > 65535)
		return false;
	*port = (int) n;
	*host = colon == p ? pstrdup(redis_target_host()) : pnstrdup(p, colon - p);
	return true;
}

/*
 * redis_send
 *		Send one command to the server it belongs to and return its reply;
 *		NULL on failure, described in *err, with the connection dropped.
 *
 * In Cluster mode the command goes to the primary of its keys' slot, and
 * a redirect is followed once: -MOVED updates the map and resends the
 * command to the node named; -ASK (a slot being migrated) sends ASKING and
 * the command to the node named, leaving the map alone.  A second
 * redirect is returned as it is, for the caller to report (TF103).  The
 * script cache is per node: a NOSCRIPT from the new node comes back to
 * redis_eval, whose EVAL is a command of its own, with its own redirect.
 */
static RedisValue *
redis_send(int argc, const char **argv, long timeout_ms, bool interruptible,
		   RedisError *err)
{
	RedisValue *reply;
	int			slot;
	char	   *host;
	int			port;
	bool		ask;

	if (!redis_cluster_enabled())
	{
		if (!redis_ensure_connected(interruptible, err))
			return NULL;
		return redis_exchange(argc, argv, timeout_ms, interruptible, false, err);
	}

	if (!redis_cluster_prepare(argc, argv, interruptible, err))
		return NULL;
	reply = redis_exchange(argc, argv, timeout_ms, interruptible, false, err);
	if (reply == NULL)
	{
		/* the node may be gone: ask for the map again next time */
		redis_cluster_forget_map(true);
		return NULL;
	}
	if (reply->type != REDIS_VALUE_ERROR)
		return reply;
	ask = strncmp(reply->str, "ASK ", 4) == 0;
	if ((!ask && strncmp(reply->str, "MOVED ", 6) != 0) ||
		!redis_redirect_target(reply->str, &slot, &host, &port))
		return reply;

	stats_redis_count(STATS_REDIS_REDIRECTS);
	if (!ask)
		redis_cluster_set_slot(slot, host, port);
	redis_use_node(host, port);
	if (!redis_ensure_connected(interruptible, err))
		return NULL;
	if (ask)
	{
		const char *asking[1] = {"ASKING"};
		RedisValue *ok = redis_exchange(1, asking, timeout_ms, interruptible,
										false, err);

		if (ok == NULL)
			return NULL;
		if (ok->type != REDIS_VALUE_STATUS)
		{
			redis_unexpected_error(err, "ASKING", "a status", ok);
			return NULL;
		}
	}
	return redis_exchange(argc, argv, timeout_ms, interruptible, false, err);
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
	RedisError	err;

	PG_TRY();
	{
		result = redis_send(argc, argv,
							(long) redis_command_timeout + extra_timeout_ms,
							true, &err);
	}
	PG_CATCH();
	{
		redis_drop();
		PG_RE_THROW();
	}
	PG_END_TRY();
	if (result == NULL)
		redis_raise(&err);
	return result;
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
	RedisValue *volatile result = NULL;
	RedisError	err;

	if (conn == NULL || !conn_ready || conn_in_flight)
		return NULL;
	PG_TRY();
	{
		result = redis_exchange(argc, argv, redis_command_timeout,
								true, false, &err);
	}
	PG_CATCH();
	{
		redis_drop();
		PG_RE_THROW();
	}
	PG_END_TRY();
	return result;
}

/* One line for a WARNING: a failure's message and detail. */
static char *
redis_error_line(const RedisError *err)
{
	return err->detail ? psprintf("%s: %s", err->message, err->detail) :
		err->message;
}

/*
 * redis_commands_noerror
 *		Send ncommands commands, pipelined, connecting first if need be,
 *		where nothing may be thrown: after commit, or at backend exit, where
 *		PostgreSQL holds interrupts and turns any ERROR into FATAL.
 *
 * Interrupts are held throughout, so that neither a cancel nor
 * pg_terminate_backend cuts the call short; the whole call, connect
 * included, ends within fencing.redis_release_timeout (a superuser's
 * setting: the connect and command timeouts are the user's, and would
 * otherwise decide how long a backend ignores termination), and the
 * connect and command timeouts apply within it.  On success replies[i] is
 * the reply to command i, which may be an error reply; on failure false
 * is returned, the connection is dropped, replies[i] is NULL for every
 * reply not read and *failure describes the first failure in one line,
 * for the caller's WARNING.  In Cluster mode the commands may belong to
 * different nodes: each is sent on its own to the node of its keys
 * (redis_send), within what is left of the time, and a node that fails
 * does not keep the commands of the others from being sent.
 */
bool
redis_commands_noerror(int ncommands, const int *argc, const char ***argv,
					   RedisValue **replies, char **failure)
{
	int			connect_timeout = redis_connect_timeout;
	int			command_timeout = redis_command_timeout;
	TimestampTz deadline = TimestampTzPlusMilliseconds(GetCurrentTimestamp(),
													   redis_release_timeout);
	RedisError	err;
	bool		ok = true;
	int			c;

	for (c = 0; c < ncommands; c++)
		replies[c] = NULL;
	*failure = NULL;
	HOLD_INTERRUPTS();
	PG_TRY();
	{
		for (c = 0; c < ncommands; c++)
		{
			long		remaining;

			remaining = TimestampDifferenceMilliseconds(GetCurrentTimestamp(),
														deadline);
			if (remaining <= 0)
			{
				ok = false;
				if (*failure == NULL)
					*failure = psprintf("fencing.redis_release_timeout (%d ms) ran out",
										redis_release_timeout);
				break;
			}

			/* the user's timeouts, within what is left */
			redis_connect_timeout = (int) Min(connect_timeout, remaining);
			redis_command_timeout = (int) Min(command_timeout, remaining);
			if (redis_cluster_enabled())
			{
				/* each to the node of its keys, one after the other */
				replies[c] = redis_send(argc[c], argv[c], redis_command_timeout,
										false, &err);
				if (replies[c] == NULL)
				{
					ok = false;
					if (*failure == NULL)
						*failure = redis_error_line(&err);
				}
				continue;
			}
			if (!redis_ensure_connected(false, &err) ||
				!redis_exchange_many(ncommands, argc, argv, replies,
									 redis_command_timeout, false, false, &err))
			{
				ok = false;
				*failure = redis_error_line(&err);
			}
			break;
		}
	}
	PG_FINALLY();
	{
		redis_connect_timeout = connect_timeout;
		redis_command_timeout = command_timeout;
	}
	PG_END_TRY();
	RESUME_INTERRUPTS();
	return ok;
}

/*
 * redis_refused
 *		Drop the connection and report an error reply, with a SQLSTATE
 *		chosen by the Redis error code (see the README's table).
 */
void
redis_refused(const char *command, const RedisValue *reply)
{
	const RedisErrorClass *class = redis_error_class(reply->str);
	char	   *target = redis_target();

	redis_drop();
	ereport(ERROR,
			(errcode(class->sqlstate),
			 errmsg("Redis server at \"%s\" refused %s", target, command),
			 errdetail_internal("%s", reply->str),
			 class->hint ? errhint("%s", class->hint) : 0));
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
	RedisError	err;

	redis_unexpected_error(&err, command, expected, got);
	redis_raise(&err);
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

	if (script->sha[0] == '\0')
		redis_script_sha(script);

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
			stats_redis_count(STATS_REDIS_FAILOVERS);
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
