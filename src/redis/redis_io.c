/*-------------------------------------------------------------------------
 *
 * redis_io.c
 *	  The transport of every Redis connection: one socket, its waits, one
 *	  capped exchange of commands and replies, and the replies copied out
 *	  of hiredis.
 *
 * hiredis only formats commands and parses replies; the socket is ours to
 * wait on.  As libpq-be-fe-helpers.h does for libpq, the descriptor is
 * reserved with AcquireExternalFD, the connect is started without
 * waiting, and every wait sleeps in WaitEventSetWait on the socket and
 * the latch: cancel, statement_timeout, pg_terminate_backend and
 * postmaster death are served at once in every phase, a reload (which
 * sets the latch too) never breaks a call, and the wait shows as the
 * Extension wait event (FencingRedisIO on PostgreSQL 17 and later).  A
 * budget that is not interruptible, where PostgreSQL holds interrupts,
 * waits on the socket, the postmaster and the clock alone, in the same
 * event set (a set made per wait would cost four system calls more, at
 * every commit that gives a lock back).  Only resolving a host name
 * (getaddrinfo) blocks.
 *
 * Caps on one reply, on every socket alike.  hiredis 0.14 buffers a bulk
 * string whole, and allocates an array's element vector as soon as it
 * reads its header, so without caps a hostile server could make a backend
 * allocate without bound.  Bytes are counted as they are read, array
 * elements as hiredis announces them (its reader has no maxelements
 * before 1.0: every socket gets our createArray, redis_call.c, which
 * refuses before anything is allocated).  The caps sit far above the largest reply
 * expected: CLUSTER SLOTS of 500 primaries with a replica each, the slots
 * scattered in 16,384 ranges, is about 3 MB and 330,000 elements.  The
 * line cap keeps hiredis, which scans a line from its start at every
 * read, from going quadratic over a line that never ends.
 *
 * With fencing.redis_tls, OpenSSL runs on the socket (redis_tls.c): the
 * same waits drive its handshake, writes and reads.
 *
 * hiredis memory is malloc'd: each reply is copied into palloc'd memory
 * and freed at once, and error strings are copied before the objects
 * holding them are freed, so that no ereport can leak or dangle it.  After
 * a failure the socket is closed: a late reply can never be read as the
 * answer to a later command.
 *
 * IDENTIFICATION
 *	  src/redis/redis_io.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <errno.h>
#include <limits.h>
#include <sys/socket.h>

#ifdef USE_HIREDIS
#include "redis/hiredis_compat.h"
#endif

#include "core/pg_compat.h"
#include "fencing_errcodes.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "redis/redis.h"
#include "redis/redis_int.h"
#include "storage/fd.h"
#include "utils/memutils.h"

#ifdef USE_HIREDIS

#define REDIS_MAX_REPLY_LINE		(64 * 1024)

/* Which cap the reply being read went over, if any. */
typedef enum RedisReplyLimit
{
	REDIS_LIMIT_NONE,
	REDIS_LIMIT_BYTES,
	REDIS_LIMIT_ELEMENTS,
	REDIS_LIMIT_LINE
} RedisReplyLimit;

/* The reply being read; one at a time in a backend. */
static RedisReplyLimit reply_limit = REDIS_LIMIT_NONE;

/* A reply received but not yet copied and freed. */
static redisReply *pending_reply = NULL;

/*
 * redis_io_close
 *		Close the socket, if open, and free everything that goes with it.
 *		Safe to call at any time, including from error cleanup.
 */
void
redis_io_close(RedisSocket *s)
{
	if (pending_reply != NULL)
	{
		freeReplyObject(pending_reply);
		pending_reply = NULL;
	}
	if (s->wes != NULL)
	{
		FreeWaitEventSet(s->wes);
		s->wes = NULL;
	}
	redis_tls_end(&s->ssl);
	if (s->ctx != NULL)
	{
		redisFree(s->ctx);
		s->ctx = NULL;
	}
	if (s->fd_reserved)
	{
		ReleaseExternalFD();
		s->fd_reserved = false;
	}
	s->in_flight = false;
	/* replies owed to redis_io_post are lost with the socket */
	while (s->owed > 0)
	{
		s->owed--;
		redis_owed_reply(NULL);
	}
}

/* Close the socket and describe the failure; false for the caller. */
static bool
redis_io_fail(RedisSocket *s, RedisError *err, const char *reason,
			  int sqlstate, char *message, char *detail, char *hint)
{
	err->sent = s->sent;
	err->reason = reason;
	redis_io_close(s);
	return redis_error_set(err, sqlstate, message, detail, hint);
}

/*
 * redis_io_wait
 *		Sleep until the socket is ready for io (WL_SOCKET_READABLE or
 *		WL_SOCKET_WRITEABLE); false once the deadline has passed.
 */
static bool
redis_io_wait(RedisSocket *s, int io, const RedisBudget *budget)
{
	bool		latch_was_set = false;
	bool		ready = false;

	if (s->wes_io != io)
	{
		ModifyWaitEvent(s->wes, REDIS_WES_SOCKET_POS, io, NULL);
		s->wes_io = io;
	}
	for (;;)
	{
		long		remaining;
		WaitEvent	event;

		if (budget->interruptible)
			CHECK_FOR_INTERRUPTS();
		remaining = redis_budget_remaining(budget);
		if (remaining <= 0)
			break;
		remaining = Min(remaining, INT_MAX);

		if (WaitEventSetWait(s->wes, remaining, &event, 1,
							 fencing_wait_event(FENCING_WAIT_REDIS_IO)) == 0)
			continue;			/* timed out: the loop says so */
		if (event.events & WL_LATCH_SET)
		{
			/*
			 * Interruptible: served at the top.  Otherwise the latch is
			 * reset so as to sleep on the socket, and set again before
			 * returning, for the waits that come after this one to see.
			 */
			ResetLatch(MyLatch);
			latch_was_set = latch_was_set || !budget->interruptible;
			continue;
		}
		ready = true;
		break;
	}
	if (latch_was_set)
		SetLatch(MyLatch);
	return ready;
}

/* The wait of a TLS call: a socket and the budget of the call. */
typedef struct RedisIoTlsWait
{
	RedisSocket *s;
	const RedisBudget *budget;
} RedisIoTlsWait;

static bool
redis_io_tls_wait(void *arg, int event)
{
	RedisIoTlsWait *w = arg;

	return redis_io_wait(w->s, event, w->budget);
}

/* Where a call ran out of time, for redis_io_timed_out. */
typedef enum RedisIoPhase
{
	REDIS_IO_HANDSHAKE,
	REDIS_IO_SEND,
	REDIS_IO_RECEIVE
} RedisIoPhase;

/* Describe a deadline that passed in phase. */
static bool
redis_io_timed_out(RedisSocket *s, RedisError *err, const RedisBudget *budget,
				   RedisIoPhase phase)
{
	char	   *hint = psprintf("The limit is %s.", budget->limit);

	switch (phase)
	{
		case REDIS_IO_HANDSHAKE:
			return redis_io_fail(s, err, "TLS handshake timed out",
								 ERRCODE_FENCING_REDIS_UNAVAILABLE,
								 psprintf("timed out in the TLS handshake with Redis server at \"%s\"",
										  s->target),
								 psprintf("The handshake did not complete within %ld ms.",
										  budget->ms),
								 psprintf("%s  A server that does not speak TLS on that port can also cause this.",
										  hint));
		case REDIS_IO_SEND:
			return redis_io_fail(s, err, "timed out sending",
								 ERRCODE_FENCING_REDIS_UNAVAILABLE,
								 psprintf("timed out sending a command to Redis server at \"%s\"",
										  s->target),
								 psprintf("The server did not read the command within %ld ms.",
										  budget->ms),
								 hint);
		case REDIS_IO_RECEIVE:
			break;
	}
	return redis_io_fail(s, err, "timed out waiting for a reply",
						 ERRCODE_FENCING_REDIS_UNAVAILABLE,
						 psprintf("timed out waiting for a reply from Redis server at \"%s\"",
								  s->target),
						 psprintf("No reply arrived within %ld ms.", budget->ms),
						 hint);
}

/*
 * redis_io_tls_done
 *		Whether a TLS call went through; if not, the socket is closed and
 *		*err says why (a deadline that passed: in phase).
 */
static bool
redis_io_tls_done(RedisSocket *s, RedisTlsOutcome outcome, RedisError *err,
				  RedisIoPhase phase, const RedisBudget *budget)
{
	if (outcome == REDIS_TLS_OK)
		return true;
	if (outcome == REDIS_TLS_TIMEOUT)
		return redis_io_timed_out(s, err, budget, phase);
	/* TLS 1.3 servers check a client's certificate after its handshake */
	if (phase != REDIS_IO_HANDSHAKE && !s->answered && err->hint == NULL &&
		err->sqlstate == ERRCODE_FENCING_REDIS_UNAVAILABLE)
		err->hint = pstrdup("A server that refuses this client's certificate, or wants one (tls-auth-clients), closes the connection after the handshake: check fencing.redis_tls_cert_file and fencing.redis_tls_key_file.");
	err->sent = s->sent;
	redis_io_close(s);
	return false;
}

/*
 * redis_io_connect
 *		Connect to host:port (a Unix socket if host is a path) within the
 *		budget, the socket given max_bytes as its reply cap; false on
 *		failure, described in *err, with nothing left open.
 *
 * hiredis marks a non-blocking context connected at once: the outcome is
 * the socket's error once it turns writeable.  Then, if fencing.redis_tls
 * says so, the TLS handshake, within the same budget.
 */
bool
redis_io_connect(RedisSocket *s, const char *host, int port,
				 size_t max_bytes, const RedisBudget *budget,
				 RedisError *err)
{
	redisContext *c;
	int			so_error = 0;
	socklen_t	so_error_len = sizeof(so_error);
	RedisIoTlsWait w = {s, budget};

	Assert(s->ctx == NULL);
	memset(s, 0, sizeof(RedisSocket));
	redis_format_target(s->target, sizeof(s->target), host, port);
	s->max_bytes = max_bytes;

	if (!AcquireExternalFD())
		return redis_io_fail(s, err, "too many open files on the local server",
							 ERRCODE_FENCING_REDIS_UNAVAILABLE,
							 psprintf("could not connect to Redis server at \"%s\"",
									  s->target),
							 pstrdup("There are too many open files on the local server."),
							 pstrdup("Raise the server's max_files_per_process and/or \"ulimit -n\" limits."));
	s->fd_reserved = true;

	if (host[0] == '/')
		c = redisConnectUnixNonBlock(host);
	else
		c = redisConnectNonBlock(host, port);
	if (c == NULL)
		return redis_io_fail(s, err, "out of memory", ERRCODE_OUT_OF_MEMORY,
							 pstrdup("out of memory"),
							 pstrdup("Could not allocate a Redis connection."),
							 NULL);
	s->ctx = c;
	if (c->err)
		return redis_io_fail(s, err, pstrdup(c->errstr),
							 ERRCODE_FENCING_REDIS_UNAVAILABLE,
							 psprintf("could not connect to Redis server at \"%s\": %s",
									  s->target, c->errstr),
							 NULL, NULL);

	redis_value_cap_arrays(c->reader);

	s->wes = FencingCreateWaitEventSet(3);
	AddWaitEventToSet(s->wes, WL_LATCH_SET, PGINVALID_SOCKET, MyLatch, NULL);
	AddWaitEventToSet(s->wes, WL_EXIT_ON_PM_DEATH, PGINVALID_SOCKET, NULL, NULL);
	AddWaitEventToSet(s->wes, WL_SOCKET_WRITEABLE, c->fd, NULL, NULL);
	s->wes_io = WL_SOCKET_WRITEABLE;

	if (!redis_io_wait(s, WL_SOCKET_WRITEABLE, budget))
		return redis_io_fail(s, err, "connect timed out",
							 ERRCODE_FENCING_REDIS_UNAVAILABLE,
							 psprintf("timed out connecting to Redis server at \"%s\"",
									  s->target),
							 psprintf("No connection within %ld ms.", budget->ms),
							 psprintf("The limit is %s.", budget->limit));
	if (getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &so_error, &so_error_len) != 0)
		so_error = errno;
	if (so_error != 0)
		return redis_io_fail(s, err, pstrdup(strerror(so_error)),
							 ERRCODE_FENCING_REDIS_UNAVAILABLE,
							 psprintf("could not connect to Redis server at \"%s\": %s",
									  s->target, strerror(so_error)),
							 NULL, NULL);
	if (!redis_tls_wanted(host))
		return true;
	if (!redis_tls_begin(&s->ssl, c->fd, host, s->target, err))
	{
		redis_io_close(s);
		return false;
	}
	return redis_io_tls_done(s, redis_tls_connect(s->ssl, redis_io_tls_wait, &w,
												  s->target, err),
							 err, REDIS_IO_HANDSHAKE, budget);
}

/* Describe a reply that went over a cap. */
static bool
redis_io_too_large(RedisSocket *s, RedisError *err)
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
			detail = psprintf("The reply is longer than %zu bytes, the most fencing accepts.",
							  s->max_bytes);
			break;
	}
	return redis_io_fail(s, err, "reply too large",
						 ERRCODE_FENCING_REDIS_PROTOCOL,
						 psprintf("reply from Redis server at \"%s\" is too large",
								  s->target),
						 detail, NULL);
}

/*
 * redis_io_failed
 *		Describe a failed hiredis read or write.  secret says that the
 *		commands carried a password: hiredis's text of a protocol error
 *		quotes a byte of the reply, which may echo it.
 */
static bool
redis_io_failed(RedisSocket *s, RedisError *err, bool secret)
{
	redisContext *c = s->ctx;

	if (redis_value_arrays_refused())
		reply_limit = REDIS_LIMIT_ELEMENTS;
	if (reply_limit != REDIS_LIMIT_NONE)
		return redis_io_too_large(s, err);
	if (c->err == REDIS_ERR_OOM)
		return redis_io_fail(s, err, "out of memory", ERRCODE_OUT_OF_MEMORY,
							 pstrdup("out of memory"),
							 psprintf("Could not buffer a command for, or a reply from, Redis server at \"%s\".",
									  s->target),
							 NULL);
	if (c->err == REDIS_ERR_PROTOCOL)
		return redis_io_fail(s, err, "protocol error",
							 ERRCODE_FENCING_REDIS_PROTOCOL,
							 psprintf("unexpected reply from Redis server at \"%s\"",
									  s->target),
							 secret ? NULL : pstrdup(c->errstr),
							 NULL);
	return redis_io_fail(s, err,
						 pstrdup(c->errstr[0] ? c->errstr : "connection lost"),
						 ERRCODE_FENCING_REDIS_UNAVAILABLE,
						 psprintf("lost connection to Redis server at \"%s\"",
								  s->target),
						 pstrdup(c->errstr[0] ? c->errstr : "unknown error"),
						 NULL);
}

/*
 * Whether the unparsed bytes begin with a line over REDIS_MAX_REPLY_LINE:
 * the reader is always at the start of an item or just after its type
 * byte, where a carriage return must come soon.
 */
static bool
redis_reader_line_too_long(const redisReader *r)
{
	return r->len - r->pos > REDIS_MAX_REPLY_LINE &&
		memchr(r->buf + r->pos, '\r', REDIS_MAX_REPLY_LINE) == NULL;
}

/*
 * redis_io_read
 *		Read one reply by the budget's deadline, under the caps; false on
 *		failure, described in *err, with the socket closed.
 */
bool
redis_io_read(RedisSocket *s, RedisValue **reply, const RedisBudget *budget,
			  bool secret, RedisError *err)
{
	void	   *r = NULL;
	size_t		reply_bytes = 0;
	bool		read_first = s->owed > 0;

	reply_limit = REDIS_LIMIT_NONE;
	redis_value_start_reply();
	for (;;)
	{
		size_t		nread;

		if (redisGetReplyFromReader(s->ctx, &r) != REDIS_OK)
			return redis_io_failed(s, err, secret);
		if (r != NULL)
			break;
		if (s->ssl != NULL)
		{
			RedisIoTlsWait w = {s, budget};

			if (!redis_io_tls_done(s, redis_tls_receive(s->ssl, s->ctx->reader,
														&nread,
														redis_io_tls_wait, &w,
														s->target, err),
								   err, REDIS_IO_RECEIVE, budget))
				return false;
		}
		else
		{
			size_t		buffered;

			/*
			 * A reply owed to redis_io_post was asked for long before it
			 * is collected, and is usually in the socket already: it is
			 * read before any sleep, which would cost a system call of its
			 * own (the socket is non-blocking: nothing there reads as
			 * nothing).
			 */
			if (!read_first &&
				!redis_io_wait(s, WL_SOCKET_READABLE, budget))
				return redis_io_timed_out(s, err, budget, REDIS_IO_RECEIVE);
			read_first = false;
			buffered = s->ctx->reader->len;
			if (redisBufferRead(s->ctx) != REDIS_OK)
				return redis_io_failed(s, err, secret);
			nread = s->ctx->reader->len - buffered;
		}
		reply_bytes += nread;
		if (reply_bytes > s->max_bytes)
			reply_limit = REDIS_LIMIT_BYTES;
		else if (redis_reader_line_too_long(s->ctx->reader))
			reply_limit = REDIS_LIMIT_LINE;
		if (reply_limit != REDIS_LIMIT_NONE)
			return redis_io_too_large(s, err);
	}
	pending_reply = r;
	if (!redis_reply_is_resp2(pending_reply))
	{
		freeReplyObject(pending_reply);
		pending_reply = NULL;
		return redis_io_fail(s, err, "protocol error",
							 ERRCODE_FENCING_REDIS_PROTOCOL,
							 psprintf("unexpected reply from Redis server at \"%s\"",
									  s->target),
							 pstrdup("The reply has a RESP3 type, which fencing never asks for."),
							 NULL);
	}
	*reply = redis_value_copy(pending_reply);
	freeReplyObject(pending_reply);
	pending_reply = NULL;
	s->answered = true;
	return true;
}

/*
 * redis_io_send
 *		Send ncommands commands, pipelined, by the budget's deadline; false
 *		on failure, described in *err, with the socket closed.  No reply
 *		may be owed (redis_io_collect first).
 *
 * The socket is non-blocking: whatever does not fit in the socket buffers
 * is sent as the server reads it, the backend sleeping in between, as it
 * does for the replies.  s->sent is set before the first byte may leave
 * (over TLS, once OpenSSL took it), and stays set: the commands may have
 * run.
 */
static bool
redis_io_send(RedisSocket *s, int ncommands, const int *argc,
			  const char ***argv, const RedisBudget *budget, bool secret,
			  RedisError *err)
{
	Assert(s->ctx != NULL && s->ctx->err == 0 && s->owed == 0);

	s->sent = false;
	s->in_flight = true;
	if (s->ssl != NULL)
	{
		RedisIoTlsWait w = {s, budget};

		return redis_io_tls_done(s, redis_tls_send(s->ssl, ncommands, argc,
												   argv, secret, &s->sent,
												   redis_io_tls_wait, &w,
												   s->target, err),
								 err, REDIS_IO_SEND, budget);
	}
	else
	{
		int			done = 0;

		for (int c = 0; c < ncommands; c++)
		{
			size_t	   *argvlen = palloc(sizeof(size_t) * argc[c]);

			for (int i = 0; i < argc[c]; i++)
				argvlen[i] = strlen(argv[c][i]);
			if (redisAppendCommandArgv(s->ctx, argc[c], argv[c], argvlen) != REDIS_OK)
				return redis_io_failed(s, err, secret);
			pfree(argvlen);
		}
		s->sent = true;
		for (;;)
		{
			if (redisBufferWrite(s->ctx, &done) != REDIS_OK)
				return redis_io_failed(s, err, secret);
			if (done)
				return true;
			if (!redis_io_wait(s, WL_SOCKET_WRITEABLE, budget))
				return redis_io_timed_out(s, err, budget, REDIS_IO_SEND);
		}
	}
}

/*
 * redis_io_exchange
 *		Send ncommands commands, pipelined, and read their replies, by the
 *		budget's deadline; false on failure, described in *err, with the
 *		socket closed (replies[i] is then NULL for every reply not read).
 */
bool
redis_io_exchange(RedisSocket *s, int ncommands, const int *argc,
				  const char ***argv, RedisValue **replies,
				  const RedisBudget *budget, bool secret, RedisError *err)
{
	for (int c = 0; c < ncommands; c++)
		replies[c] = NULL;
	if (!redis_io_send(s, ncommands, argc, argv, budget, secret, err))
		return false;
	for (int c = 0; c < ncommands; c++)
		if (!redis_io_read(s, &replies[c], budget, secret, err))
			return false;
	s->in_flight = false;
	return true;
}

/*
 * redis_io_post
 *		Send ncommands commands, pipelined, by the budget's deadline,
 *		without waiting for their replies: they are owed (s->owed), and
 *		read by redis_io_collect before the socket carries anything else.
 *		The commands are in the socket, whole, when this returns true;
 *		false on failure, described in *err, with the socket closed.
 */
bool
redis_io_post(RedisSocket *s, int ncommands, const int *argc,
			  const char ***argv, const RedisBudget *budget, RedisError *err)
{
	if (!redis_io_send(s, ncommands, argc, argv, budget, false, err))
		return false;
	s->in_flight = false;
	s->owed = ncommands;
	return true;
}

/*
 * redis_io_collect
 *		Read the replies owed to redis_io_post, in order, by the budget's
 *		deadline, handing each to the layer above (redis_owed_hook); false
 *		on failure, described in *err, with the socket closed (which hands
 *		it the replies not read, as NULL).
 */
bool
redis_io_collect(RedisSocket *s, const RedisBudget *budget, RedisError *err)
{
	while (s->owed > 0)
	{
		RedisValue *reply;

		if (!redis_io_read(s, &reply, budget, false, err))
			return false;
		s->owed--;
		redis_owed_reply(reply);
	}
	return true;
}

/*
 * redis_io_stale
 *		Whether an open socket about to be reused is no longer in step with
 *		the server: closed by it (restart, idle timeout), broken, or
 *		holding bytes nobody asked for.  A non-blocking peek, no round
 *		trip; under TLS, at the decrypted bytes (redis_tls_stale).
 */
bool
redis_io_stale(const RedisSocket *s)
{
	char		c;
	ssize_t		n;

	if (s->ctx->reader->pos < s->ctx->reader->len)
		return true;
	if (s->ssl != NULL)
		return redis_tls_stale(s->ssl);
	n = recv(s->ctx->fd, &c, 1, MSG_PEEK | MSG_DONTWAIT);
	if (n >= 0)
		return true;			/* end of file, or unsolicited bytes */
	return !(errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR);
}

#endif							/* USE_HIREDIS */
