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
#include <hiredis/hiredis.h>
#endif

#include "common/cryptohash.h"
#include "fencing_errcodes.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "redis_conn.h"
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
									  int elements) = NULL;

/*
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
 * redis_target
 *		The server as messages name it: "host:port", "[v6addr]:port", or
 *		the socket path.
 */
static char *
redis_target(void)
{
	if (redis_host[0] == '/')
		return pstrdup(redis_host);
	if (strchr(redis_host, ':') != NULL)
		return psprintf("[%s]:%d", redis_host, redis_port);
	return psprintf("%s:%d", redis_host, redis_port);
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

static void
redis_at_exit(int code, Datum arg)
{
	redis_drop();
}

/*
 * redis_fail
 *		Drop the connection and describe the failure in *err; returns false
 *		for the caller to pass on.  message, detail and hint are palloc'd
 *		or constant; detail and hint may be NULL.
 */
static bool
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
static void
pg_attribute_noreturn()
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
								 PG_WAIT_EXTENSION) == 0)
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
								   PG_WAIT_EXTENSION) & io)
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
redis_create_array(const redisReadTask *task, int elements)
{
	if (elements > REDIS_MAX_REPLY_ELEMENTS - reply_elements)
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
			/* hiredis 0.14 has no other reply types (no RESP3) */
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
	if (conn != NULL &&
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
 *		The password in fencing.redis_password_file: its first line; false
 *		if the file is unusable, described in *err.
 *
 * Like libpq's .pgpass, the file must not be readable by anyone but the
 * server's operating system user; unlike libpq, a file that is too open is
 * an error, not a warning, since it guards a shared service.
 */
static bool
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
 * redis_connect
 *		Open the connection under the current settings: a non-blocking
 *		connect, then AUTH and SELECT; false on failure, described in *err,
 *		with nothing left behind.
 *
 * Like libpqsrv_connect_complete, the connect is started without waiting
 * and completed in redis_wait, so that it answers to interrupts; only
 * resolving a host name (getaddrinfo, inside hiredis) blocks.  hiredis
 * marks a non-blocking context connected at once: the outcome is the
 * socket's error once it turns writeable.
 */
static bool
redis_connect(bool interruptible, RedisError *err)
{
	char	   *target = redis_target();
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

	deadline = TimestampTzPlusMilliseconds(GetCurrentTimestamp(),
										   redis_connect_timeout);
	if (redis_host[0] == '/')
		c = redisConnectUnixNonBlock(redis_host);
	else
		c = redisConnectNonBlock(redis_host, redis_port);
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

	conn_wes = CreateWaitEventSet(TopMemoryContext, 3);
	AddWaitEventToSet(conn_wes, WL_LATCH_SET, PGINVALID_SOCKET, MyLatch, NULL);
	AddWaitEventToSet(conn_wes, WL_EXIT_ON_PM_DEATH, PGINVALID_SOCKET, NULL, NULL);
	AddWaitEventToSet(conn_wes, WL_SOCKET_WRITEABLE, c->fd, NULL, NULL);
	conn_wes_io = WL_SOCKET_WRITEABLE;

	if (!redis_wait(WL_SOCKET_WRITEABLE, deadline, interruptible))
		return redis_fail(err, ERRCODE_FENCING_REDIS_UNAVAILABLE,
						  psprintf("timed out connecting to Redis server at \"%s\"",
								   target),
						  psprintf("No connection within %d ms.",
								   redis_connect_timeout),
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
		if (redis_ensure_connected(true, &err))
			result = redis_exchange(argc, argv,
									(long) redis_command_timeout + extra_timeout_ms,
									true, false, &err);
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

/*
 * redis_commands_noerror
 *		Send ncommands commands, pipelined, connecting first if need be,
 *		where nothing may be thrown: after commit, or at backend exit, where
 *		PostgreSQL holds interrupts and turns any ERROR into FATAL.
 *
 * Interrupts are held throughout, so that neither a cancel nor
 * pg_terminate_backend cuts the call short; fencing.redis_connect_timeout
 * bounds the connect (and each of AUTH and SELECT after it), and one
 * fencing.redis_command_timeout all the commands together, from the first
 * byte sent to the last reply.  On success replies[i] is the reply to
 * command i, which may be an error reply; on failure the connection is
 * dropped, false is returned, replies[i] is NULL for every reply not read
 * and *failure describes the failure in one line, for the caller's
 * WARNING.
 */
bool
redis_commands_noerror(int ncommands, const int *argc, const char ***argv,
					   RedisValue **replies, char **failure)
{
	RedisError	err;
	bool		ok = false;
	int			c;

	for (c = 0; c < ncommands; c++)
		replies[c] = NULL;
	HOLD_INTERRUPTS();
	if (redis_ensure_connected(false, &err))
		ok = redis_exchange_many(ncommands, argc, argv, replies,
								 redis_command_timeout, false, false, &err);
	RESUME_INTERRUPTS();
	if (!ok)
		*failure = err.detail ? psprintf("%s: %s", err.message, err.detail) :
			err.message;
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
 * script again for the EVALSHAs that follow.  Any other error reply is
 * reported.
 */
RedisValue *
redis_eval(RedisScript *script, int nkeys, const char **keys, int nargs,
		   const char **args)
{
	int			argc = 3 + nkeys + nargs;
	const char **argv = palloc(sizeof(char *) * argc);
	char		numkeys[12];
	RedisValue *reply;

	if (script->sha[0] == '\0')
		redis_script_sha(script);

	snprintf(numkeys, sizeof(numkeys), "%d", nkeys);
	argv[0] = "EVALSHA";
	argv[1] = script->sha;
	argv[2] = numkeys;
	memcpy(argv + 3, keys, sizeof(char *) * nkeys);
	memcpy(argv + 3 + nkeys, args, sizeof(char *) * nargs);

	reply = redis_command(argc, argv, 0);
	if (reply->type == REDIS_VALUE_ERROR &&
		strncmp(reply->str, "NOSCRIPT", 8) == 0)
	{
		argv[0] = "EVAL";
		argv[1] = script->text;
		reply = redis_command(argc, argv, 0);
	}
	if (reply->type == REDIS_VALUE_ERROR)
		redis_refused(script->name, reply);

	pfree(argv);
	return reply;
}

#endif							/* USE_HIREDIS */
