/*-------------------------------------------------------------------------
 *
 * redis_tls.c
 *	  TLS on a Redis socket: the handshake, writes and reads, driven on
 *	  the waits of the transport (redis_io.c), and the staleness check.
 *
 * hiredis 0.14 has no TLS, so OpenSSL runs on the socket hiredis
 * connected: the transport formats commands with hiredis and writes them
 * with redis_tls_send, and redis_tls_receive feeds hiredis's reader with
 * what SSL_read returns.  The socket is non-blocking; each OpenSSL call
 * says what it needs (WANT_READ or WANT_WRITE, either of which any call
 * can ask for: renegotiation, session tickets and key updates come at any
 * time), and the caller's wait function sleeps for exactly that, on the
 * latch, interruptible and within the call's deadline.
 *
 * The backend shares OpenSSL's error queue with its own client
 * connection's TLS (be-secure-openssl.c reads the queue after each of its
 * calls), so the queue is cleared before and after every call here: an
 * error of ours must never be reported on the client's connection, nor
 * one of its errors taken for ours.
 *
 * IDENTIFICATION
 *	  src/redis/redis_tls.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#ifdef USE_HIREDIS
#include "redis/hiredis_compat.h"
#include <openssl/err.h>
#include <openssl/ssl.h>
#endif

#include "fencing_errcodes.h"
#include "redis/redis.h"
#include "redis/redis_int.h"
#include "storage/latch.h"

#ifdef USE_HIREDIS

/*
 * The outcome of one OpenSSL call.  WANT_READ and WANT_WRITE are what it
 * needs from the socket before the same call can go on; CLOSED is the end
 * of the connection (close_notify, end of file, a reset); FAILED a TLS
 * error.  Both are described in the step's *why.
 */
typedef enum RedisTlsStep
{
	REDIS_TLS_DONE,
	REDIS_TLS_WANT_READ,
	REDIS_TLS_WANT_WRITE,
	REDIS_TLS_CLOSED,
	REDIS_TLS_FAILED
} RedisTlsStep;

/* Why a call ended the connection: the verifier's or OpenSSL's words. */
typedef struct RedisTlsFailure
{
	char	   *reason;
	const char *hint;			/* NULL if none */
} RedisTlsFailure;

/*
 * tls_failure
 *		Why the connection ended: the verifier's reason for a certificate
 *		it refused, else OpenSSL's, else the socket's (sys_errno, 0 for an
 *		end of file), with a hint for the usual mistakes.
 */
static RedisTlsStep
tls_failure(SSL *ssl, int sys_errno, RedisTlsFailure *why)
{
	unsigned long e = ERR_peek_error();
	int			r = ERR_GET_REASON(e);

	why->hint = NULL;
	if (e == 0)
	{
		why->reason = pstrdup(sys_errno != 0 ? strerror(sys_errno) :
							  "the server closed the connection");
		return REDIS_TLS_CLOSED;
	}
#ifdef SSL_R_UNEXPECTED_EOF_WHILE_READING
	/* OpenSSL 3 reports an end of file without close_notify so */
	if (r == SSL_R_UNEXPECTED_EOF_WHILE_READING)
	{
		ERR_clear_error();
		why->reason = pstrdup("the server closed the connection");
		return REDIS_TLS_CLOSED;
	}
#endif
	if (r == SSL_R_CERTIFICATE_VERIFY_FAILED)
	{
		ERR_clear_error();
		why->reason = psprintf("certificate verify failed: %s",
							   X509_verify_cert_error_string(SSL_get_verify_result(ssl)));
		why->hint = redis_tls == REDIS_TLS_VERIFY_FULL ?
			"Check fencing.redis_tls_ca_file (the authority that signed the server's certificate) and fencing.redis_tls_server_name (the name it was issued for)." :
			"Check fencing.redis_tls_ca_file: it must hold the authority that signed the server's certificate.";
		return REDIS_TLS_FAILED;
	}
	why->reason = redis_tls_queued_error();
	if (r == SSL_R_WRONG_VERSION_NUMBER || r == SSL_R_PACKET_LENGTH_TOO_LONG)
		why->hint = "Check that the server speaks TLS on that port (tls-port).";
	else if (r == SSL_R_TLSV13_ALERT_CERTIFICATE_REQUIRED ||
			 r == SSL_R_SSLV3_ALERT_HANDSHAKE_FAILURE ||
			 r == SSL_R_SSLV3_ALERT_BAD_CERTIFICATE ||
			 r == SSL_R_SSLV3_ALERT_CERTIFICATE_UNKNOWN ||
			 r == SSL_R_TLSV1_ALERT_UNKNOWN_CA)
		why->hint = "The server requires a client certificate it trusts (tls-auth-clients): check fencing.redis_tls_cert_file and fencing.redis_tls_key_file.";
	return REDIS_TLS_FAILED;
}

/* The outcome of a call that returned ret <= 0. */
static RedisTlsStep
tls_outcome(SSL *ssl, int ret, RedisTlsFailure *why)
{
	int			save_errno = errno;
	RedisTlsStep step;

	switch (SSL_get_error(ssl, ret))
	{
		case SSL_ERROR_WANT_READ:
			step = REDIS_TLS_WANT_READ;
			break;
		case SSL_ERROR_WANT_WRITE:
			step = REDIS_TLS_WANT_WRITE;
			break;
		case SSL_ERROR_ZERO_RETURN:
			why->reason = pstrdup("the server closed the connection");
			why->hint = NULL;
			step = REDIS_TLS_CLOSED;
			break;
		case SSL_ERROR_SYSCALL:
			step = tls_failure(ssl, ret == 0 ? 0 : save_errno, why);
			break;
		default:
			step = tls_failure(ssl, 0, why);
			break;
	}
	ERR_clear_error();
	return step;
}

/* One step of the handshake. */
static RedisTlsStep
tls_handshake_step(SSL *ssl, RedisTlsFailure *why)
{
	int			ret;

	ERR_clear_error();
	errno = 0;
	ret = SSL_connect(ssl);
	if (ret == 1)
	{
		ERR_clear_error();
		return REDIS_TLS_DONE;
	}
	return tls_outcome(ssl, ret, why);
}

/* Write up to len bytes; DONE with *written > 0, or what it needs. */
static RedisTlsStep
tls_write_step(SSL *ssl, const char *buf, size_t len, size_t *written,
			   RedisTlsFailure *why)
{
	int			ret;

	ERR_clear_error();
	errno = 0;
	ret = SSL_write(ssl, buf, (int) Min(len, (size_t) INT_MAX));
	if (ret > 0)
	{
		ERR_clear_error();
		*written = ret;
		return REDIS_TLS_DONE;
	}
	return tls_outcome(ssl, ret, why);
}

/* Read up to len bytes; DONE with *nread > 0, or what it needs. */
static RedisTlsStep
tls_read_step(SSL *ssl, char *buf, size_t len, size_t *nread,
			  RedisTlsFailure *why)
{
	int			ret;

	ERR_clear_error();
	errno = 0;
	ret = SSL_read(ssl, buf, (int) Min(len, (size_t) INT_MAX));
	if (ret > 0)
	{
		ERR_clear_error();
		*nread = ret;
		return REDIS_TLS_DONE;
	}
	return tls_outcome(ssl, ret, why);
}

/*
 * tls_failed
 *		Describe a step that ended the connection.  A TLS error is TF107 in
 *		the handshake and after it (a TLS 1.3 server refuses a client's
 *		certificate after the client's handshake is over); the end of the
 *		connection is TF107 in the handshake, where it means a server that
 *		does not speak TLS, and a lost connection after it.
 */
static RedisTlsOutcome
tls_failed(RedisTlsStep step, const RedisTlsFailure *why, bool handshake,
		   const char *target, RedisError *err)
{
	if (step == REDIS_TLS_CLOSED && !handshake)
	{
		err->reason = why->reason;
		redis_error_set(err, ERRCODE_FENCING_REDIS_UNAVAILABLE,
						psprintf("lost connection to Redis server at \"%s\"",
								 target),
						pstrdup(why->reason), NULL);
		return REDIS_TLS_ERROR;
	}
	err->reason = psprintf("TLS failed: %s", why->reason);
	redis_error_set(err, ERRCODE_FENCING_REDIS_TLS,
					handshake ?
					psprintf("TLS handshake with Redis server at \"%s\" failed: %s",
							 target, why->reason) :
					psprintf("TLS connection to Redis server at \"%s\" failed: %s",
							 target, why->reason),
					NULL,
					why->hint ? pstrdup(why->hint) :
					step == REDIS_TLS_CLOSED ?
					pstrdup("Check that the server speaks TLS on that port (tls-port).") :
					NULL);
	return REDIS_TLS_ERROR;
}

/* The socket event a step that wants more waits for. */
static int
tls_event(RedisTlsStep step)
{
	return step == REDIS_TLS_WANT_READ ? WL_SOCKET_READABLE : WL_SOCKET_WRITEABLE;
}

/*
 * redis_tls_connect
 *		The handshake, waiting with wait(arg, event) for what each step
 *		asks; on REDIS_TLS_ERROR *err says why.
 */
RedisTlsOutcome
redis_tls_connect(SSL *ssl, RedisTlsWait wait, void *arg, const char *target,
				  RedisError *err)
{
	for (;;)
	{
		RedisTlsFailure why;
		RedisTlsStep step = tls_handshake_step(ssl, &why);

		if (step == REDIS_TLS_DONE)
			return REDIS_TLS_OK;
		if (step == REDIS_TLS_CLOSED || step == REDIS_TLS_FAILED)
			return tls_failed(step, &why, true, target, err);
		if (!wait(arg, tls_event(step)))
			return REDIS_TLS_TIMEOUT;
	}
}

/* The lengths of a command's arguments, for hiredis. */
static size_t *
tls_arg_lengths(int argc, const char **argv)
{
	size_t	   *argvlen = palloc(sizeof(size_t) * argc);

	for (int i = 0; i < argc; i++)
		argvlen[i] = strlen(argv[i]);
	return argvlen;
}

/*
 * tls_format
 *		The commands formatted by hiredis, in one palloc'd buffer of *len
 *		bytes; NULL if hiredis could not.  hiredis's copies of a secret
 *		are wiped.
 */
static char *
tls_format(int ncommands, const int *argc, const char ***argv, bool secret,
		   size_t *len)
{
	char	  **formatted = palloc0(sizeof(char *) * ncommands);
	long long  *lengths = palloc0(sizeof(long long) * ncommands);
	char	   *buf = NULL;
	bool		ok = true;

	*len = 0;
	for (int c = 0; c < ncommands && ok; c++)
	{
		lengths[c] = redisFormatCommandArgv(&formatted[c], argc[c], argv[c],
											tls_arg_lengths(argc[c], argv[c]));
		ok = lengths[c] >= 0;
		*len += ok ? lengths[c] : 0;
	}
	if (ok)
		buf = palloc(*len);
	*len = 0;
	for (int c = 0; c < ncommands && formatted[c] != NULL; c++)
	{
		if (ok)
			memcpy(buf + *len, formatted[c], lengths[c]);
		*len += ok ? lengths[c] : 0;
		if (secret)
			explicit_bzero(formatted[c], lengths[c]);
		redisFreeCommand(formatted[c]);
	}
	return buf;
}

/*
 * redis_tls_send
 *		Format the commands as hiredis does and write them; *sent is set
 *		once OpenSSL took the first byte (before that, nothing the server
 *		could decrypt has left).  secret says that a command carries a
 *		password: the buffer is wiped.
 */
RedisTlsOutcome
redis_tls_send(SSL *ssl, int ncommands, const int *argc, const char ***argv,
			   bool secret, bool *sent, RedisTlsWait wait, void *arg,
			   const char *target, RedisError *err)
{
	size_t		len;
	size_t		done = 0;
	char	   *buf = tls_format(ncommands, argc, argv, secret, &len);
	RedisTlsOutcome outcome = REDIS_TLS_OK;

	if (buf == NULL)
	{
		err->reason = "out of memory";
		redis_error_set(err, ERRCODE_OUT_OF_MEMORY, pstrdup("out of memory"),
						psprintf("Could not format a command for Redis server at \"%s\".",
								 target),
						NULL);
		return REDIS_TLS_ERROR;
	}
	while (done < len && outcome == REDIS_TLS_OK)
	{
		RedisTlsFailure why;
		size_t		n = 0;
		RedisTlsStep step = tls_write_step(ssl, buf + done, len - done, &n,
										   &why);

		if (step == REDIS_TLS_DONE)
		{
			*sent = true;
			done += n;
		}
		else if (step == REDIS_TLS_CLOSED || step == REDIS_TLS_FAILED)
			outcome = tls_failed(step, &why, false, target, err);
		else if (!wait(arg, tls_event(step)))
			outcome = REDIS_TLS_TIMEOUT;
	}
	if (secret)
		explicit_bzero(buf, len);
	pfree(buf);
	return outcome;
}

/*
 * redis_tls_receive
 *		Feed reader what OpenSSL holds or the socket brings: *nread bytes.
 *		OpenSSL is asked before any wait, so that bytes it holds decrypted
 *		(SSL_has_pending) are never waited for on a socket that has
 *		nothing more to bring.
 */
RedisTlsOutcome
redis_tls_receive(SSL *ssl, redisReader *reader, size_t *nread,
				  RedisTlsWait wait, void *arg, const char *target,
				  RedisError *err)
{
	char		buf[16 * 1024];

	for (;;)
	{
		RedisTlsFailure why;
		RedisTlsStep step = tls_read_step(ssl, buf, sizeof(buf), nread, &why);

		if (step == REDIS_TLS_DONE)
		{
			if (redisReaderFeed(reader, buf, *nread) == REDIS_OK)
				return REDIS_TLS_OK;
			err->reason = "out of memory";
			redis_error_set(err, ERRCODE_OUT_OF_MEMORY, pstrdup("out of memory"),
							psprintf("Could not buffer a reply from Redis server at \"%s\".",
									 target),
							NULL);
			return REDIS_TLS_ERROR;
		}
		if (step == REDIS_TLS_CLOSED || step == REDIS_TLS_FAILED)
			return tls_failed(step, &why, false, target, err);
		if (!wait(arg, tls_event(step)))
			return REDIS_TLS_TIMEOUT;
	}
}

/*
 * redis_tls_stale
 *		Whether the server sent something nobody asked for, closed the
 *		connection or broke it.  The raw socket cannot tell: a session
 *		ticket or key update is a readable record that carries no data.  A
 *		non-blocking SSL_peek returns decrypted bytes OpenSSL holds
 *		(SSL_has_pending) without touching the socket, processes whatever
 *		records came, and says whether any carried data.
 */
bool
redis_tls_stale(SSL *ssl)
{
	char		c;
	int			ret;
	int			e;

	ERR_clear_error();
	ret = SSL_peek(ssl, &c, 1);
	e = ret > 0 ? SSL_ERROR_NONE : SSL_get_error(ssl, ret);
	ERR_clear_error();
	return !(e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE);
}

/* Free the connection's TLS, if any; the socket stays hiredis's to close. */
void
redis_tls_end(SSL **ssl)
{
	if (*ssl == NULL)
		return;
	SSL_free(*ssl);
	*ssl = NULL;
	ERR_clear_error();
}

#endif							/* USE_HIREDIS */
