/*-------------------------------------------------------------------------
 *
 * redis_tls_config.c
 *	  What the Redis client reads from files at connect: the TLS
 *	  configuration of every connection (fencing.redis_tls*), one OpenSSL
 *	  context, and TLS put on a connected socket; and the files that hold
 *	  secrets, refused when anyone but the server's operating system user
 *	  can read them, the secrets wiped from memory after use.
 *
 * One SSL_CTX serves every connection of the backend -- servers,
 * Sentinels, Cluster nodes, the Sentinel watch -- built from the settings
 * at the first connect that needs it, and again when a setting or one of
 * the files changes (checked by stat at every connect, so that a renewed
 * certificate needs no reload).  OpenSSL memory is malloc'd: a context is
 * freed when replaced (connections still open hold a reference of their
 * own), and everything is freed on every error path.
 *
 * The modes mean what libpq's sslmode words mean: require encrypts and
 * verifies nothing unless a CA file is given (then the chain, as libpq
 * does with a root certificate file), verify-ca verifies the chain,
 * verify-full also the name: fencing.redis_tls_server_name, or the host
 * connected to; an IP address is matched against iPAddress
 * subjectAltNames and, as libpq does, not sent as SNI.  A Unix socket
 * carries no TLS (Redis has none there; libpq ignores sslmode there too).
 *
 * The backend shares OpenSSL's error queue with its own client
 * connection's TLS: the queue is cleared before and after every call.
 *
 * IDENTIFICATION
 *	  src/redis/redis_tls_config.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <arpa/inet.h>
#include <sys/stat.h>

#ifdef USE_HIREDIS
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#endif

#include "fencing_errcodes.h"
#include "redis/redis.h"
#include "redis/redis_int.h"
#include "storage/fd.h"

#ifdef USE_HIREDIS

/* The files a context is built from, as stat saw them. */
typedef struct TlsFileId
{
	dev_t		dev;
	ino_t		ino;
	mode_t		mode;
	off_t		size;
	struct timespec mtime;
} TlsFileId;

#define TLS_NFILES 3

static SSL_CTX *tls_ctx = NULL;
static uint64 tls_ctx_generation = 0;
static TlsFileId tls_ctx_files[TLS_NFILES];

/* The files of the current settings: CA, certificate, key. */
static void
tls_file_ids(TlsFileId *ids)
{
	const char *paths[TLS_NFILES] = {redis_tls_ca_file, redis_tls_cert_file,
	redis_tls_key_file};

	memset(ids, 0, sizeof(TlsFileId) * TLS_NFILES);
	for (int i = 0; i < TLS_NFILES; i++)
	{
		struct stat st;

		if (paths[i][0] == '\0' || stat(paths[i], &st) != 0)
			continue;
		ids[i].dev = st.st_dev;
		ids[i].ino = st.st_ino;
		ids[i].mode = st.st_mode;
		ids[i].size = st.st_size;
		ids[i].mtime = st.st_mtim;
	}
}

/* A key file with a passphrase would make OpenSSL prompt on a terminal. */
static int
tls_no_passphrase(char *buf, int size, int rwflag, void *userdata)
{
	return 0;
}

/* The first error OpenSSL queued, in its words; the queue is cleared. */
char *
redis_tls_queued_error(void)
{
	unsigned long e = ERR_peek_error();
	const char *text = e != 0 ? ERR_reason_error_string(e) : NULL;
	char	   *reason;

	if (text != NULL)
		reason = pstrdup(text);
	else if (e != 0)
		reason = psprintf("OpenSSL error %lu", e);
	else
		reason = pstrdup("no reason given");
	ERR_clear_error();
	return reason;
}

/* A file of the configuration OpenSSL would not load; NULL for the caller. */
static SSL_CTX *
tls_config_failed(SSL_CTX *ctx, RedisError *err, const char *what,
				  const char *path)
{
	char	   *reason = redis_tls_queued_error();

	SSL_CTX_free(ctx);
	err->sent = false;
	err->reason = "its TLS configuration cannot be used";
	redis_error_set(err, ERRCODE_CONFIG_FILE_ERROR,
					psprintf("could not load %s \"%s\": %s", what, path, reason),
					NULL, NULL);
	return NULL;
}

/*
 * tls_ctx_build
 *		A context for the current settings; NULL on failure, described in
 *		*err, with nothing left allocated.
 */
static SSL_CTX *
tls_ctx_build(RedisError *err)
{
	SSL_CTX    *ctx;
	bool		has_cert = redis_tls_cert_file[0] != '\0';

	if (has_cert != (redis_tls_key_file[0] != '\0'))
	{
		err->sent = false;
		err->reason = "its TLS configuration cannot be used";
		redis_error_set(err, ERRCODE_CONFIG_FILE_ERROR,
						pstrdup("fencing.redis_tls_cert_file and fencing.redis_tls_key_file must be set together"),
						NULL, NULL);
		return NULL;
	}
	if (has_cert &&
		!redis_check_private_file(redis_tls_key_file, "Redis TLS key file", err))
	{
		err->reason = "its TLS key file cannot be used";
		return NULL;
	}

	ERR_clear_error();
	ctx = SSL_CTX_new(TLS_client_method());
	if (ctx == NULL)
	{
		err->sent = false;
		err->reason = "out of memory";
		redis_error_set(err, ERRCODE_OUT_OF_MEMORY, pstrdup("out of memory"),
						psprintf("Could not create a TLS context: %s.",
								 redis_tls_queued_error()),
						NULL);
		return NULL;
	}
	SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
	SSL_CTX_set_options(ctx, SSL_OP_NO_COMPRESSION);
	/* a write returns once a record is out: the sent flag needs that */
	SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE);
	SSL_CTX_set_default_passwd_cb(ctx, tls_no_passphrase);

	if (redis_tls_ca_file[0] != '\0')
	{
		if (SSL_CTX_load_verify_locations(ctx, redis_tls_ca_file, NULL) != 1)
			return tls_config_failed(ctx, err, "Redis TLS CA file",
									 redis_tls_ca_file);
		SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
	}
	else if (redis_tls >= REDIS_TLS_VERIFY_CA)
	{
		if (SSL_CTX_set_default_verify_paths(ctx) != 1)
			return tls_config_failed(ctx, err, "OpenSSL's default trust store",
									 X509_get_default_cert_file());
		SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
	}

	if (has_cert)
	{
		if (SSL_CTX_use_certificate_chain_file(ctx, redis_tls_cert_file) != 1)
			return tls_config_failed(ctx, err, "Redis TLS certificate file",
									 redis_tls_cert_file);
		if (SSL_CTX_use_PrivateKey_file(ctx, redis_tls_key_file,
										SSL_FILETYPE_PEM) != 1 ||
			SSL_CTX_check_private_key(ctx) != 1)
			return tls_config_failed(ctx, err, "Redis TLS key file",
									 redis_tls_key_file);
	}
	ERR_clear_error();
	return ctx;
}

/*
 * tls_ctx_current
 *		The context of the current settings and files, rebuilt if either
 *		changed since it was built; false on failure, described in *err.
 */
static bool
tls_ctx_current(RedisError *err)
{
	TlsFileId	ids[TLS_NFILES];
	SSL_CTX    *ctx;

	tls_file_ids(ids);
	if (tls_ctx != NULL && tls_ctx_generation == redis_settings_generation &&
		memcmp(ids, tls_ctx_files, sizeof(ids)) == 0)
		return true;
	ctx = tls_ctx_build(err);
	if (ctx == NULL)
		return false;
	/* connections still open hold their own reference to the old one */
	SSL_CTX_free(tls_ctx);
	tls_ctx = ctx;
	tls_ctx_generation = redis_settings_generation;
	memcpy(tls_ctx_files, ids, sizeof(ids));
	return true;
}

/* Whether a connection to host uses TLS: not over a Unix socket. */
bool
redis_tls_wanted(const char *host)
{
	return redis_tls != REDIS_TLS_DISABLE && host[0] != '/';
}

/*
 * redis_tls_begin
 *		Put TLS on the connected socket fd to host, ready for the
 *		handshake; false on failure, described in *err, with *ssl NULL or
 *		for the caller to end.
 */
bool
redis_tls_begin(SSL **ssl, int fd, const char *host, const char *target,
				RedisError *err)
{
	const char *name = redis_tls_server_name[0] != '\0' ?
		redis_tls_server_name : host;
	unsigned char addr[sizeof(struct in6_addr)];
	bool		is_ip = inet_pton(AF_INET, name, addr) == 1 ||
		inet_pton(AF_INET6, name, addr) == 1;
	bool		ok;

	Assert(*ssl == NULL);
	if (!tls_ctx_current(err))
		return false;
	ERR_clear_error();
	*ssl = SSL_new(tls_ctx);
	ok = *ssl != NULL && SSL_set_fd(*ssl, fd) == 1 &&
		(is_ip || SSL_set_tlsext_host_name(*ssl, name) == 1);
	if (ok && redis_tls == REDIS_TLS_VERIFY_FULL)
	{
		X509_VERIFY_PARAM *param = SSL_get0_param(*ssl);

		if (is_ip)
			ok = X509_VERIFY_PARAM_set1_ip_asc(param, name) == 1;
		else
		{
			X509_VERIFY_PARAM_set_hostflags(param,
											X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
			ok = X509_VERIFY_PARAM_set1_host(param, name, 0) == 1;
		}
	}
	if (!ok)
	{
		err->sent = false;
		err->reason = "TLS could not be set up";
		return redis_error_set(err, ERRCODE_FENCING_REDIS_TLS,
							   psprintf("could not set up TLS for Redis server at \"%s\": %s",
										target, redis_tls_queued_error()),
							   NULL, NULL);
	}
	SSL_set_connect_state(*ssl);
	return true;
}

#endif							/* USE_HIREDIS */


#ifdef USE_HIREDIS

/*
 * redis_check_private_file
 *		Whether the file holding a secret (what: "Redis password file",
 *		"Redis TLS key file") is a regular file that no one but the
 *		server's operating system user can read; false with *err if not.
 *
 * Like libpq's .pgpass, except that a file that is too open is an error,
 * not a warning, since it guards a shared service.
 */
bool
redis_check_private_file(const char *path, const char *what, RedisError *err)
{
	struct stat st;
	int			save_errno;

	err->sent = false;
	if (stat(path, &st) != 0)
	{
		save_errno = errno;
		return redis_error_set(err, redis_errno_sqlstate(save_errno),
							   psprintf("could not stat %s \"%s\": %s",
										what, path, strerror(save_errno)),
							   NULL, NULL);
	}
	if (!S_ISREG(st.st_mode))
		return redis_error_set(err, ERRCODE_CONFIG_FILE_ERROR,
							   psprintf("%s \"%s\" is not a regular file",
										what, path),
							   NULL, NULL);
	if ((st.st_mode & (S_IRWXG | S_IRWXO)) != 0)
		return redis_error_set(err, ERRCODE_CONFIG_FILE_ERROR,
							   psprintf("%s \"%s\" has group or world access",
										what, path),
							   pstrdup("Permissions should be u=rw (0600) or less."),
							   NULL);
	return true;
}

/*
 * redis_read_password_file
 *		The password in a password file (fencing.redis_password_file,
 *		fencing.redis_sentinel_password_file): its first line; false if the
 *		file is unusable, described in *err.
 */
bool
redis_read_password_file(const char *path, char **password, RedisError *err)
{
	FILE	   *file;
	char	   *buf;
	size_t		len;
	int			save_errno;

	err->reason = "its password file cannot be used";
	if (!redis_check_private_file(path, "Redis password file", err))
		return false;

	file = AllocateFile(path, "r");
	if (file == NULL)
	{
		save_errno = errno;
		return redis_error_set(err, redis_errno_sqlstate(save_errno),
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
		return redis_error_set(err, redis_errno_sqlstate(save_errno),
							   psprintf("could not read Redis password file \"%s\": %s",
										path, strerror(save_errno)),
							   NULL, NULL);
	}
	FreeFile(file);

	len = strlen(buf);
	if (len > REDIS_MAX_PASSWORD_LEN)
	{
		explicit_bzero(buf, REDIS_MAX_PASSWORD_LEN + 2);
		return redis_error_set(err, ERRCODE_CONFIG_FILE_ERROR,
							   psprintf("Redis password in file \"%s\" is too long", path),
							   psprintf("A Redis password can be at most %d bytes long.",
										REDIS_MAX_PASSWORD_LEN),
							   NULL);
	}
	while (len > 0 && (buf[len - 1] == '\n' || buf[len - 1] == '\r'))
		buf[--len] = '\0';
	if (len == 0)
		return redis_error_set(err, ERRCODE_CONFIG_FILE_ERROR,
							   psprintf("Redis password file \"%s\" is empty", path),
							   NULL, NULL);
	*password = buf;
	return true;
}

/* Wipe and free a password (NULL: none). */
void
redis_forget_password(char *password)
{
	if (password != NULL)
	{
		explicit_bzero(password, strlen(password));
		pfree(password);
	}
}

#endif							/* USE_HIREDIS */
