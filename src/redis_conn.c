/*-------------------------------------------------------------------------
 *
 * redis_conn.c
 *	  One hiredis connection per backend: settings, connect, commands,
 *	  errors.
 *
 * The connection is opened lazily by the first command a backend sends,
 * never in _PG_init (which may run in the postmaster, whose sockets every
 * child would share), reused by every later command, and freed at backend
 * exit.  Its descriptor is reserved with AcquireExternalFD so that fd.c's
 * accounting stays right.
 *
 * Every wait is bounded.  The connect is a blocking hiredis connect with
 * fencing.redis_connect_timeout; every command must be answered within
 * fencing.redis_command_timeout.  While waiting for a reply the backend
 * sleeps in WaitEventSetWait on the socket and its latch, so a query
 * cancel, statement_timeout or postmaster death is served at once rather
 * than after the timeout.  SO_RCVTIMEO/SO_SNDTIMEO (redisSetTimeout, set
 * again after every connect, since hiredis does not keep it) only back
 * that up.
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
 * The password never appears in any message: it is sent only in AUTH, an
 * AUTH refusal is reported with the password blotted out of the server's
 * text, SHOW prints it masked, and a password read from
 * fencing.redis_password_file is wiped from memory once sent.
 *
 * IDENTIFICATION
 *	  src/redis_conn.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <ctype.h>
#include <limits.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>

#ifdef USE_HIREDIS
#include <hiredis/hiredis.h>
#endif

#include "common/cryptohash.h"
#include "fencing_errcodes.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "redis_conn.h"
#include "stats.h"
#include "storage/fd.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "utils/guc.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

/* Bounds of the settings. */
#define REDIS_DEFAULT_PORT				6379
#define REDIS_MAX_DATABASE				INT_MAX
#define REDIS_DEFAULT_CONNECT_TIMEOUT	2000	/* ms */
#define REDIS_MAX_CONNECT_TIMEOUT		60000	/* ms */
#define REDIS_DEFAULT_COMMAND_TIMEOUT	1000	/* ms */
#define REDIS_MAX_COMMAND_TIMEOUT		3600000 /* ms */
#define REDIS_MAX_HOST_LEN				253
#define REDIS_MAX_USERNAME_LEN			512
#define REDIS_MAX_PASSWORD_LEN			4096

/* Settings. */
static char *fencing_redis_host = NULL;
static int	fencing_redis_port = REDIS_DEFAULT_PORT;
static char *fencing_redis_username = NULL;
static char *fencing_redis_password = NULL;
static char *fencing_redis_password_file = NULL;
static int	fencing_redis_database = 0;
static int	fencing_redis_connect_timeout = REDIS_DEFAULT_CONNECT_TIMEOUT;
int			fencing_redis_command_timeout = REDIS_DEFAULT_COMMAND_TIMEOUT;

/*
 * Bumped whenever a setting that names the server or the credentials
 * changes; a connection made under an older generation is replaced.
 */
static uint64 settings_generation = 0;

/*
 * redis_settings_changed
 *		Assign hook of the settings that name the server or the
 *		credentials: the next command reconnects.  Only flags, since an
 *		assign hook must not fail (and also runs in the postmaster).
 */
static void
redis_settings_changed_str(const char *newval, void *extra)
{
	settings_generation++;
}

static void
redis_settings_changed_int(int newval, void *extra)
{
	settings_generation++;
}

/*
 * check_redis_host
 *		A host name or IP address, or the absolute path of a Unix socket.
 */
static bool
check_redis_host(char **newval, void **extra, GucSource source)
{
	const char *p;

	if (*newval == NULL || (*newval)[0] == '\0')
	{
		GUC_check_errdetail("A host name, an IP address or the absolute path of a Unix socket is required.");
		return false;
	}
	if ((*newval)[0] == '/')
	{
		if (strlen(*newval) >= sizeof(((struct sockaddr_un *) NULL)->sun_path))
		{
			GUC_check_errdetail("A Unix socket path can be at most %d bytes long.",
								(int) sizeof(((struct sockaddr_un *) NULL)->sun_path) - 1);
			return false;
		}
		return true;
	}
	if (strlen(*newval) > REDIS_MAX_HOST_LEN)
	{
		GUC_check_errdetail("A host name can be at most %d bytes long.",
							REDIS_MAX_HOST_LEN);
		return false;
	}
	for (p = *newval; *p; p++)
	{
		if (isspace((unsigned char) *p) || iscntrl((unsigned char) *p) ||
			*p == '/')
		{
			GUC_check_errdetail("A host name cannot contain white space, control characters or \"/\"; a Unix socket path must be absolute.");
			return false;
		}
	}
	return true;
}

/*
 * check_redis_username
 *		Empty (no ACL user), or a name Redis ACLs can hold.
 */
static bool
check_redis_username(char **newval, void **extra, GucSource source)
{
	const char *p;

	if (*newval == NULL)
		return true;
	if (strlen(*newval) > REDIS_MAX_USERNAME_LEN)
	{
		GUC_check_errdetail("A Redis user name can be at most %d bytes long.",
							REDIS_MAX_USERNAME_LEN);
		return false;
	}
	for (p = *newval; *p; p++)
	{
		if (isspace((unsigned char) *p) || iscntrl((unsigned char) *p))
		{
			GUC_check_errdetail("A Redis user name cannot contain white space or control characters.");
			return false;
		}
	}
	return true;
}

/*
 * check_redis_password
 *		Any text Redis could take, within a sane length.
 */
static bool
check_redis_password(char **newval, void **extra, GucSource source)
{
	if (*newval != NULL && strlen(*newval) > REDIS_MAX_PASSWORD_LEN)
	{
		GUC_check_errdetail("A Redis password can be at most %d bytes long.",
							REDIS_MAX_PASSWORD_LEN);
		return false;
	}
	return true;
}

/*
 * check_redis_password_file
 *		Empty, or a file name without control characters.  The file itself
 *		is read and checked when connecting, so that it can be rotated
 *		without a reload.
 */
static bool
check_redis_password_file(char **newval, void **extra, GucSource source)
{
	const char *p;

	if (*newval == NULL)
		return true;
	for (p = *newval; *p; p++)
	{
		if (iscntrl((unsigned char) *p))
		{
			GUC_check_errdetail("A file name cannot contain control characters.");
			return false;
		}
	}
	return true;
}

/*
 * show_redis_password
 *		Never print the password, not even to a superuser: whether one is
 *		set is all SHOW and pg_settings tell.
 */
static const char *
show_redis_password(void)
{
	if (fencing_redis_password != NULL && fencing_redis_password[0] != '\0')
		return "********";
	return "";
}

/*
 * redis_conn_init
 *		Define the connection settings; called from _PG_init.  They exist
 *		whether or not the module was built with hiredis, so that one
 *		postgresql.conf serves both builds.
 */
void
redis_conn_init(void)
{
	DefineCustomStringVariable("fencing.redis_host",
							   "Redis server that fenced_acquire() takes locks and tokens from.",
							   "A host name or IP address, or the absolute path of a Unix socket.",
							   &fencing_redis_host,
							   "127.0.0.1",
							   PGC_SUSET,
							   0,
							   check_redis_host, redis_settings_changed_str, NULL);

	DefineCustomIntVariable("fencing.redis_port",
							"TCP port of the Redis server.",
							"Not used when fencing.redis_host is a Unix socket.",
							&fencing_redis_port,
							REDIS_DEFAULT_PORT, 1, 65535,
							PGC_SUSET,
							0,
							NULL, redis_settings_changed_int, NULL);

	DefineCustomStringVariable("fencing.redis_username",
							   "Redis ACL user to authenticate as.",
							   "Empty means the \"default\" user (AUTH with the password only).",
							   &fencing_redis_username,
							   "",
							   PGC_SUSET,
							   0,
							   check_redis_username, redis_settings_changed_str, NULL);

	DefineCustomStringVariable("fencing.redis_password",
							   "Password to authenticate to Redis with.",
							   "Empty means none.  Shown only as asterisks, and only to superusers; prefer fencing.redis_password_file.",
							   &fencing_redis_password,
							   "",
							   PGC_SUSET,
							   GUC_SUPERUSER_ONLY | GUC_NO_SHOW_ALL | GUC_NOT_IN_SAMPLE,
							   check_redis_password, redis_settings_changed_str,
							   show_redis_password);

	DefineCustomStringVariable("fencing.redis_password_file",
							   "File holding the password to authenticate to Redis with.",
							   "The first line of the file is the password.  It is read at every connect and must be readable only by the server's operating system user (mode 0600 or stricter).  Empty means none.",
							   &fencing_redis_password_file,
							   "",
							   PGC_SUSET,
							   0,
							   check_redis_password_file, redis_settings_changed_str, NULL);

	DefineCustomIntVariable("fencing.redis_database",
							"Redis database number to SELECT after connecting.",
							"0 means no SELECT; the server's \"databases\" setting bounds the valid numbers.",
							&fencing_redis_database,
							0, 0, REDIS_MAX_DATABASE,
							PGC_SUSET,
							0,
							NULL, redis_settings_changed_int, NULL);

	DefineCustomIntVariable("fencing.redis_connect_timeout",
							"Longest wait for a connection to the Redis server.",
							"Valid range is 1 ms to 60 s.",
							&fencing_redis_connect_timeout,
							REDIS_DEFAULT_CONNECT_TIMEOUT, 1, REDIS_MAX_CONNECT_TIMEOUT,
							PGC_USERSET,
							GUC_UNIT_MS,
							NULL, NULL, NULL);

	DefineCustomIntVariable("fencing.redis_command_timeout",
							"Longest wait for the Redis server to answer one command.",
							"Valid range is 1 ms to 1 h.  A command that is not answered in time fails and its connection is dropped.",
							&fencing_redis_command_timeout,
							REDIS_DEFAULT_COMMAND_TIMEOUT, 1, REDIS_MAX_COMMAND_TIMEOUT,
							PGC_USERSET,
							GUC_UNIT_MS,
							NULL, NULL, NULL);
}

#ifdef USE_HIREDIS

/* The connection, and what goes with it. */
static redisContext *conn = NULL;
static WaitEventSet *conn_wes = NULL;	/* latch, postmaster death, socket */
static bool conn_fd_reserved = false;
static uint64 conn_generation = 0;
static int	conn_timeout_applied = -1;	/* ms set by redisSetTimeout */
static bool conn_exit_registered = false;

/* A reply received but not yet copied and freed. */
static redisReply *conn_reply = NULL;

/* Ways an exchange with the server can fail. */
typedef enum RedisFailure
{
	REDIS_FAILURE_NONE,
	REDIS_FAILURE_LOST,			/* I/O error or end of file */
	REDIS_FAILURE_TIMEOUT,		/* no reply within the timeout */
	REDIS_FAILURE_PROTOCOL		/* bytes that are not RESP */
} RedisFailure;

static void redis_connect(void);

/*
 * redis_target
 *		The server as messages name it: "host:port", "[v6addr]:port", or
 *		the socket path.
 */
static char *
redis_target(void)
{
	if (fencing_redis_host[0] == '/')
		return pstrdup(fencing_redis_host);
	if (strchr(fencing_redis_host, ':') != NULL)
		return psprintf("[%s]:%d", fencing_redis_host, fencing_redis_port);
	return psprintf("%s:%d", fencing_redis_host, fencing_redis_port);
}

static struct timeval
ms_to_timeval(int ms)
{
	struct timeval tv;

	tv.tv_sec = ms / 1000;
	tv.tv_usec = (ms % 1000) * 1000;
	return tv;
}

/*
 * redis_conn_drop
 *		Close the connection, if any, and free everything that goes with
 *		it.  Safe to call at any time, including from error cleanup.
 */
void
redis_conn_drop(void)
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
	conn_timeout_applied = -1;
}

static void
redis_conn_at_exit(int code, Datum arg)
{
	redis_conn_drop();
}

/*
 * redis_fail
 *		Drop the connection and report a failed exchange.
 */
static void
pg_attribute_noreturn()
redis_fail(RedisFailure failure, const char *detail, long timeout_ms)
{
	char	   *target = redis_target();

	redis_conn_drop();
	switch (failure)
	{
		case REDIS_FAILURE_TIMEOUT:
			ereport(ERROR,
					(errcode(ERRCODE_FENCING_REDIS_UNAVAILABLE),
					 errmsg("timed out waiting for a reply from Redis server at \"%s\"",
							target),
					 errdetail("No reply arrived within %ld ms.", timeout_ms),
					 errhint("The limit is fencing.redis_command_timeout.")));
			break;
		case REDIS_FAILURE_PROTOCOL:
			ereport(ERROR,
					(errcode(ERRCODE_FENCING_REDIS_PROTOCOL),
					 errmsg("unexpected reply from Redis server at \"%s\"", target),
					 errdetail_internal("%s", detail)));
			break;
		case REDIS_FAILURE_LOST:
		default:
			ereport(ERROR,
					(errcode(ERRCODE_FENCING_REDIS_UNAVAILABLE),
					 errmsg("lost connection to Redis server at \"%s\"", target),
					 errdetail_internal("%s", detail)));
			break;
	}
	pg_unreachable();
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
 * redis_roundtrip
 *		Send one command on the open connection and wait for its reply,
 *		at most timeout_ms.
 *
 * On failure the connection is dropped; then with quiet NULL is returned,
 * otherwise the failure is reported.  An interrupt while waiting is
 * served by CHECK_FOR_INTERRUPTS, whose error the callers' PG_CATCH turns
 * into a dropped connection.
 */
static RedisValue *
redis_roundtrip(int argc, const char **argv, long timeout_ms, bool quiet)
{
	size_t	   *argvlen = palloc(sizeof(size_t) * argc);
	TimestampTz deadline;
	void	   *reply = NULL;
	RedisValue *value;
	int			done = 0;
	int			i;
	RedisFailure failure = REDIS_FAILURE_NONE;
	char	   *detail = NULL;

	Assert(conn != NULL && conn->err == 0);

	for (i = 0; i < argc; i++)
		argvlen[i] = strlen(argv[i]);
	if (redisAppendCommandArgv(conn, argc, argv, argvlen) != REDIS_OK)
	{
		failure = REDIS_FAILURE_LOST;
		goto failed;
	}

	/* The socket blocks, within SO_SNDTIMEO; commands are small. */
	do
	{
		if (redisBufferWrite(conn, &done) != REDIS_OK)
		{
			failure = REDIS_FAILURE_LOST;
			goto failed;
		}
	} while (!done);

	deadline = TimestampTzPlusMilliseconds(GetCurrentTimestamp(), timeout_ms);
	for (;;)
	{
		WaitEvent	event;
		long		remaining;

		if (redisGetReplyFromReader(conn, &reply) != REDIS_OK)
		{
			failure = REDIS_FAILURE_PROTOCOL;
			goto failed;
		}
		if (reply != NULL)
			break;

		remaining = TimestampDifferenceMilliseconds(GetCurrentTimestamp(),
													deadline);
		if (remaining <= 0 ||
			WaitEventSetWait(conn_wes, remaining, &event, 1,
							 PG_WAIT_EXTENSION) == 0)
		{
			failure = REDIS_FAILURE_TIMEOUT;
			goto failed;
		}
		if (event.events & WL_LATCH_SET)
		{
			ResetLatch(MyLatch);
			CHECK_FOR_INTERRUPTS();
		}
		if ((event.events & WL_SOCKET_READABLE) &&
			redisBufferRead(conn) != REDIS_OK)
		{
			failure = conn->err == REDIS_ERR_PROTOCOL ?
				REDIS_FAILURE_PROTOCOL : REDIS_FAILURE_LOST;
			goto failed;
		}
	}

	conn_reply = reply;
	value = redis_value_copy(conn_reply);
	freeReplyObject(conn_reply);
	conn_reply = NULL;
	pfree(argvlen);
	return value;

failed:
	if (failure != REDIS_FAILURE_TIMEOUT)
		detail = pstrdup(conn->errstr[0] ? conn->errstr : "unknown error");
	if (quiet)
	{
		redis_conn_drop();
		return NULL;
	}
	redis_fail(failure, detail, timeout_ms);
}

/*
 * redis_conn_is_stale
 *		Whether a connection about to be reused is no longer in step with
 *		the server: closed by it (restart, idle timeout), broken, or
 *		holding bytes nobody asked for.
 */
static bool
redis_conn_is_stale(void)
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
 *		Make sure there is a usable connection under the current settings.
 */
static void
redis_ensure_connected(void)
{
	if (conn != NULL &&
		(conn_generation != settings_generation || redis_conn_is_stale()))
		redis_conn_drop();
	if (conn == NULL)
		redis_connect();
	else if (conn_timeout_applied != fencing_redis_command_timeout)
	{
		if (redisSetTimeout(conn, ms_to_timeval(fencing_redis_command_timeout)) != REDIS_OK)
			redis_fail(REDIS_FAILURE_LOST, pstrdup(conn->errstr), 0);
		conn_timeout_applied = fencing_redis_command_timeout;
	}
}

/*
 * redis_read_password_file
 *		The password in fencing.redis_password_file: its first line.
 *
 * Like libpq's .pgpass, the file must not be readable by anyone but the
 * server's operating system user; unlike libpq, a file that is too open is
 * an error, not a warning, since it guards a shared service.
 */
static char *
redis_read_password_file(const char *path)
{
	struct stat st;
	FILE	   *file;
	char		buf[REDIS_MAX_PASSWORD_LEN + 2];
	size_t		len;
	char	   *password;

	if (stat(path, &st) != 0)
		ereport(ERROR,
				(errcode_for_file_access(),
				 errmsg("could not stat Redis password file \"%s\": %m", path)));
	if (!S_ISREG(st.st_mode))
		ereport(ERROR,
				(errcode(ERRCODE_CONFIG_FILE_ERROR),
				 errmsg("Redis password file \"%s\" is not a regular file", path)));
	if ((st.st_mode & (S_IRWXG | S_IRWXO)) != 0)
		ereport(ERROR,
				(errcode(ERRCODE_CONFIG_FILE_ERROR),
				 errmsg("Redis password file \"%s\" has group or world access", path),
				 errdetail("Permissions should be u=rw (0600) or less.")));

	file = AllocateFile(path, "r");
	if (file == NULL)
		ereport(ERROR,
				(errcode_for_file_access(),
				 errmsg("could not open Redis password file \"%s\": %m", path)));
	if (fgets(buf, sizeof(buf), file) == NULL)
		buf[0] = '\0';
	if (ferror(file))
	{
		int			save_errno = errno;

		FreeFile(file);
		explicit_bzero(buf, sizeof(buf));
		errno = save_errno;
		ereport(ERROR,
				(errcode_for_file_access(),
				 errmsg("could not read Redis password file \"%s\": %m", path)));
	}
	FreeFile(file);

	len = strlen(buf);
	if (len > REDIS_MAX_PASSWORD_LEN)
	{
		explicit_bzero(buf, sizeof(buf));
		ereport(ERROR,
				(errcode(ERRCODE_CONFIG_FILE_ERROR),
				 errmsg("Redis password in file \"%s\" is too long", path),
				 errdetail("A Redis password can be at most %d bytes long.",
						   REDIS_MAX_PASSWORD_LEN)));
	}
	while (len > 0 && (buf[len - 1] == '\n' || buf[len - 1] == '\r'))
		buf[--len] = '\0';
	if (len == 0)
		ereport(ERROR,
				(errcode(ERRCODE_CONFIG_FILE_ERROR),
				 errmsg("Redis password file \"%s\" is empty", path)));

	password = pstrdup(buf);
	explicit_bzero(buf, sizeof(buf));
	return password;
}

/*
 * redis_redact
 *		Blot secret out of a server message, in place.
 */
static void
redis_redact(char *text, const char *secret)
{
	size_t		n = strlen(secret);
	char	   *p;

	if (n == 0)
		return;
	while ((p = strstr(text, secret)) != NULL)
		memset(p, '*', n);
}

/*
 * redis_authenticate
 *		AUTH, with the ACL user name if one is set, on a new connection.
 */
static void
redis_authenticate(void)
{
	char	   *password = NULL;
	const char *argv[3];
	int			argc = 0;
	RedisValue *reply;

	if (fencing_redis_password[0] != '\0' && fencing_redis_password_file[0] != '\0')
		ereport(ERROR,
				(errcode(ERRCODE_CONFIG_FILE_ERROR),
				 errmsg("fencing.redis_password and fencing.redis_password_file are both set"),
				 errhint("Set only one of them.")));
	if (fencing_redis_password_file[0] != '\0')
		password = redis_read_password_file(fencing_redis_password_file);
	else if (fencing_redis_password[0] != '\0')
		password = pstrdup(fencing_redis_password);

	if (password == NULL && fencing_redis_username[0] == '\0')
		return;

	argv[argc++] = "AUTH";
	if (fencing_redis_username[0] != '\0')
		argv[argc++] = fencing_redis_username;
	argv[argc++] = password ? password : "";

	PG_TRY();
	{
		reply = redis_roundtrip(argc, argv, fencing_redis_command_timeout, false);
		if (reply->type == REDIS_VALUE_ERROR && password != NULL)
			redis_redact(reply->str, password);
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

	if (reply->type == REDIS_VALUE_ERROR)
	{
		char	   *target = redis_target();

		redis_conn_drop();
		ereport(ERROR,
				(errcode(ERRCODE_FENCING_REDIS_REFUSED),
				 errmsg("could not authenticate to Redis server at \"%s\"", target),
				 errdetail_internal("%s", reply->str),
				 errhint("Check fencing.redis_username and the password in fencing.redis_password or fencing.redis_password_file.")));
	}
	if (reply->type != REDIS_VALUE_STATUS)
		redis_conn_unexpected("AUTH", "a status", reply);
}

/*
 * redis_connect
 *		Open the connection under the current settings: connect, set the
 *		command timeout, AUTH, SELECT.  Runs inside the caller's PG_TRY,
 *		which drops a half-made connection on any error.
 */
static void
redis_connect(void)
{
	char	   *target = redis_target();
	struct timeval tv = ms_to_timeval(fencing_redis_connect_timeout);
	redisContext *c;

	Assert(conn == NULL);

	if (!conn_exit_registered)
	{
		on_proc_exit(redis_conn_at_exit, (Datum) 0);
		conn_exit_registered = true;
	}

	if (!AcquireExternalFD())
		ereport(ERROR,
				(errcode(ERRCODE_FENCING_REDIS_UNAVAILABLE),
				 errmsg("could not connect to Redis server at \"%s\"", target),
				 errdetail("There are too many open files on the local server."),
				 errhint("Raise the server's max_files_per_process and/or \"ulimit -n\" limits.")));
	conn_fd_reserved = true;

	if (fencing_redis_host[0] == '/')
		c = redisConnectUnixWithTimeout(fencing_redis_host, tv);
	else
		c = redisConnectWithTimeout(fencing_redis_host, fencing_redis_port, tv);
	if (c == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OUT_OF_MEMORY),
				 errmsg("out of memory"),
				 errdetail("Could not allocate a Redis connection.")));
	conn = c;
	if (c->err)
	{
		char	   *err = pstrdup(c->errstr);

		redis_conn_drop();
		ereport(ERROR,
				(errcode(ERRCODE_FENCING_REDIS_UNAVAILABLE),
				 errmsg("could not connect to Redis server at \"%s\": %s",
						target, err)));
	}

	/* hiredis sets only the connect timeout; reads would block forever. */
	if (redisSetTimeout(c, ms_to_timeval(fencing_redis_command_timeout)) != REDIS_OK)
		redis_fail(REDIS_FAILURE_LOST, pstrdup(c->errstr), 0);
	conn_timeout_applied = fencing_redis_command_timeout;

	conn_wes = CreateWaitEventSet(TopMemoryContext, 3);
	AddWaitEventToSet(conn_wes, WL_LATCH_SET, PGINVALID_SOCKET, MyLatch, NULL);
	AddWaitEventToSet(conn_wes, WL_EXIT_ON_PM_DEATH, PGINVALID_SOCKET, NULL, NULL);
	AddWaitEventToSet(conn_wes, WL_SOCKET_READABLE, c->fd, NULL, NULL);

	redis_authenticate();

	if (fencing_redis_database != 0)
	{
		char		db[12];
		const char *argv[2];
		RedisValue *reply;

		snprintf(db, sizeof(db), "%d", fencing_redis_database);
		argv[0] = "SELECT";
		argv[1] = db;
		reply = redis_roundtrip(2, argv, fencing_redis_command_timeout, false);
		if (reply->type == REDIS_VALUE_ERROR)
		{
			redis_conn_drop();
			ereport(ERROR,
					(errcode(ERRCODE_FENCING_REDIS_REFUSED),
					 errmsg("could not select database %d on Redis server at \"%s\"",
							fencing_redis_database, target),
					 errdetail_internal("%s", reply->str)));
		}
		if (reply->type != REDIS_VALUE_STATUS)
			redis_conn_unexpected("SELECT", "a status", reply);
	}

	conn_generation = settings_generation;
	stats_redis_count(STATS_REDIS_CONNECTS);
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
	RedisValue *result = NULL;

	PG_TRY();
	{
		redis_ensure_connected();
		result = redis_roundtrip(argc, argv,
								 (long) fencing_redis_command_timeout + extra_timeout_ms,
								 false);
	}
	PG_CATCH();
	{
		redis_conn_drop();
		PG_RE_THROW();
	}
	PG_END_TRY();
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
	RedisValue *result = NULL;

	if (conn == NULL)
		return NULL;
	PG_TRY();
	{
		result = redis_roundtrip(argc, argv, fencing_redis_command_timeout, true);
	}
	PG_CATCH();
	{
		redis_conn_drop();
		PG_RE_THROW();
	}
	PG_END_TRY();
	return result;
}

/* SQLSTATE and hint for a Redis error reply, by its error code prefix. */
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
	{"TRYAGAIN", ERRCODE_FENCING_REDIS_CLUSTER_CHANGING, NULL},
	{"CLUSTERDOWN", ERRCODE_FENCING_REDIS_CLUSTER_CHANGING, NULL},
	{"NOREPLICAS", ERRCODE_FENCING_REDIS_NOT_REPLICATED, NULL},
	{NULL, ERRCODE_FENCING_REDIS_REFUSED, NULL}
};

/*
 * redis_conn_refused
 *		Drop the connection and report an error reply, with a SQLSTATE
 *		chosen by the Redis error code (see the README's table).
 */
void
redis_conn_refused(const char *command, const RedisValue *reply)
{
	const RedisErrorClass *class;
	char	   *target = redis_target();

	for (class = redis_error_classes; class->prefix != NULL; class++)
	{
		size_t		n = strlen(class->prefix);

		if (strncmp(reply->str, class->prefix, n) == 0 &&
			(reply->str[n] == ' ' || reply->str[n] == '\0'))
			break;
	}

	redis_conn_drop();
	ereport(ERROR,
			(errcode(class->sqlstate),
			 errmsg("Redis server at \"%s\" refused %s", target, command),
			 errdetail_internal("%s", reply->str),
			 class->hint ? errhint("%s", class->hint) : 0));
	pg_unreachable();
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
 * redis_conn_unexpected
 *		Drop the connection and report a reply of the wrong shape: whatever
 *		is answering is not the Redis we expect, or not in step with us.
 */
void
redis_conn_unexpected(const char *command, const char *expected,
					  const RedisValue *got)
{
	char	   *target = redis_target();

	redis_conn_drop();
	ereport(ERROR,
			(errcode(ERRCODE_FENCING_REDIS_PROTOCOL),
			 errmsg("unexpected reply from Redis server at \"%s\"", target),
			 errdetail("%s answered with %s instead of %s.",
					   command, redis_value_describe(got), expected)));
	pg_unreachable();
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
		redis_conn_refused(script->name, reply);

	pfree(argv);
	return reply;
}

#endif							/* USE_HIREDIS */
