/*-------------------------------------------------------------------------
 *
 * redis_settings.c
 *	  Every setting of the Redis client: definitions, check hooks, the
 *	  show hook that masks the password (the password files are read by
 *	  redis_tls_config.c).
 *
 * They exist whether or not the module was built with hiredis, so that
 * one postgresql.conf serves both builds; the client reads them when it
 * connects.  The server and credentials settings are superuser-only, the
 * timeouts anyone's.  Password files are read at every connect, so that
 * they can be rotated without a reload.
 *
 * IDENTIFICATION
 *	  src/redis/redis_settings.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <ctype.h>
#include <limits.h>
#include <sys/un.h>

#include "common/hashfn.h"
#include "fencing_errcodes.h"
#include "redis/redis.h"
#include "redis/redis_int.h"
#include "utils/guc.h"

/* Bounds of the settings. */
#define REDIS_DEFAULT_PORT				6379
#define REDIS_MAX_DATABASE				INT_MAX
#define REDIS_DEFAULT_CONNECT_TIMEOUT	2000	/* ms */
#define REDIS_MAX_CONNECT_TIMEOUT		60000	/* ms */
#define REDIS_DEFAULT_COMMAND_TIMEOUT	1000	/* ms */
#define REDIS_MAX_COMMAND_TIMEOUT		3600000 /* ms */
#define REDIS_DEFAULT_RELEASE_TIMEOUT	2000	/* ms */
#define REDIS_MAX_RELEASE_TIMEOUT		60000	/* ms */
#define REDIS_MAX_HOST_LEN				253
#define REDIS_MAX_USERNAME_LEN			512
#define SENTINEL_MAX_NAME_LEN			256

/* The settings, read by redis_conn.c. */
char	   *redis_host = NULL;
int			redis_port = REDIS_DEFAULT_PORT;
char	   *redis_username = NULL;
char	   *redis_password = NULL;
char	   *redis_password_file = NULL;
int			redis_database = 0;
int			redis_connect_timeout = REDIS_DEFAULT_CONNECT_TIMEOUT;
int			redis_command_timeout = REDIS_DEFAULT_COMMAND_TIMEOUT;
int			redis_release_timeout = REDIS_DEFAULT_RELEASE_TIMEOUT;
char	   *redis_sentinels = NULL;
char	   *redis_sentinel_master = NULL;
char	   *redis_sentinel_username = NULL;
char	   *redis_sentinel_password_file = NULL;
char	   *redis_cluster_nodes = NULL;
bool		redis_discovered_host_names = false;
int			redis_tls = REDIS_TLS_DISABLE;
char	   *redis_tls_ca_file = NULL;
char	   *redis_tls_cert_file = NULL;
char	   *redis_tls_key_file = NULL;
char	   *redis_tls_server_name = NULL;

static const struct config_enum_entry redis_tls_options[] = {
	{"disable", REDIS_TLS_DISABLE, false},
	{"require", REDIS_TLS_REQUIRE, false},
	{"verify-ca", REDIS_TLS_VERIFY_CA, false},
	{"verify-full", REDIS_TLS_VERIFY_FULL, false},
	{NULL, 0, false}
};

static void redis_tls_settings_init(void);

/* See redis.h. */
uint64		redis_settings_generation = 0;
uint64		redis_cluster_generation = 0;

/*
 * redis_settings_changed_str, redis_settings_changed_int
 *		Assign hook of the settings that name the server or the
 *		credentials: the next command reconnects.  Only flags, since an
 *		assign hook must not fail (and also runs in the postmaster).
 */
static void
redis_settings_changed_str(const char *newval, void *extra)
{
	redis_settings_generation++;
}

static void
redis_settings_changed_int(int newval, void *extra)
{
	redis_settings_generation++;
}

/* Assign hook of fencing.redis_cluster_nodes: the map may be another's. */
static void
redis_cluster_nodes_changed(const char *newval, void *extra)
{
	redis_settings_generation++;
	redis_cluster_generation++;
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
 * check_redis_tls_server_name
 *		Empty (the host connected to), or a host name or IP address.
 */
static bool
check_redis_tls_server_name(char **newval, void **extra, GucSource source)
{
	if (*newval == NULL || (*newval)[0] == '\0')
		return true;
	if ((*newval)[0] == '/')
	{
		GUC_check_errdetail("A TLS server name is a host name or an IP address.");
		return false;
	}
	return check_redis_host(newval, extra, source);
}

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
 * show_redis_password
 *		Never print the password, not even to a superuser: whether one is
 *		set is all SHOW and pg_settings tell.
 */
static const char *
show_redis_password(void)
{
	if (redis_password != NULL && redis_password[0] != '\0')
		return "********";
	return "";
}

/*
 * redis_settings_init
 *		Define the connection settings; called from _PG_init.  They exist
 *		whether or not the module was built with hiredis, so that one
 *		postgresql.conf serves both builds.
 */
void
redis_settings_init(void)
{
	DefineCustomStringVariable("fencing.redis_host",
							   "Redis server that fenced_acquire() takes locks and tokens from.",
							   "A host name or IP address, or the absolute path of a Unix socket.",
							   &redis_host,
							   "127.0.0.1",
							   PGC_SUSET,
							   0,
							   check_redis_host, redis_settings_changed_str, NULL);

	DefineCustomIntVariable("fencing.redis_port",
							"TCP port of the Redis server.",
							"Not used when fencing.redis_host is a Unix socket.",
							&redis_port,
							REDIS_DEFAULT_PORT, 1, 65535,
							PGC_SUSET,
							0,
							NULL, redis_settings_changed_int, NULL);

	DefineCustomStringVariable("fencing.redis_username",
							   "Redis ACL user to authenticate as.",
							   "Empty means the \"default\" user (AUTH with the password only).",
							   &redis_username,
							   "",
							   PGC_SUSET,
							   0,
							   check_redis_username, redis_settings_changed_str, NULL);

	DefineCustomStringVariable("fencing.redis_password",
							   "Password to authenticate to Redis with.",
							   "Empty means none.  Shown only as asterisks, and only to superusers; prefer fencing.redis_password_file.",
							   &redis_password,
							   "",
							   PGC_SUSET,
							   GUC_SUPERUSER_ONLY | GUC_NO_SHOW_ALL | GUC_NOT_IN_SAMPLE,
							   check_redis_password, redis_settings_changed_str,
							   show_redis_password);

	DefineCustomStringVariable("fencing.redis_password_file",
							   "File holding the password to authenticate to Redis with.",
							   "The first line of the file is the password.  It is read at every connect and must be readable only by the server's operating system user (mode 0600 or stricter).  Empty means none.",
							   &redis_password_file,
							   "",
							   PGC_SUSET,
							   0,
							   check_redis_password_file, redis_settings_changed_str, NULL);

	DefineCustomIntVariable("fencing.redis_database",
							"Redis database number to SELECT after connecting.",
							"0 means no SELECT; the server's \"databases\" setting bounds the valid numbers.",
							&redis_database,
							0, 0, REDIS_MAX_DATABASE,
							PGC_SUSET,
							0,
							NULL, redis_settings_changed_int, NULL);

	DefineCustomIntVariable("fencing.redis_connect_timeout",
							"Longest wait for a connection to the Redis server.",
							"Valid range is 1 ms to 60 s.",
							&redis_connect_timeout,
							REDIS_DEFAULT_CONNECT_TIMEOUT, 1, REDIS_MAX_CONNECT_TIMEOUT,
							PGC_USERSET,
							GUC_UNIT_MS,
							NULL, NULL, NULL);

	DefineCustomIntVariable("fencing.redis_command_timeout",
							"Longest wait for the Redis server to answer one command.",
							"Valid range is 1 ms to 1 h.  A command that is not answered in time fails and its connection is dropped.",
							&redis_command_timeout,
							REDIS_DEFAULT_COMMAND_TIMEOUT, 1, REDIS_MAX_COMMAND_TIMEOUT,
							PGC_USERSET,
							GUC_UNIT_MS,
							NULL, NULL, NULL);

	/*
	 * Releases after commit, at DISCARD ALL and at exit run with interrupts
	 * held: a user's long command timeout must not make a backend deaf to
	 * pg_terminate_backend and to shutdown, hence a superuser's cap.
	 */
	DefineCustomIntVariable("fencing.redis_release_timeout",
							"Longest time the releases PostgreSQL cannot interrupt may take, connecting included.",
							"Applies to the lock releases after commit or abort (fenced_acquire_xact), at DISCARD ALL and at backend exit, which ignore cancel and termination; within it the connect and command timeouts apply as well.  Valid range is 1 ms to 60 s.",
							&redis_release_timeout,
							REDIS_DEFAULT_RELEASE_TIMEOUT, 1, REDIS_MAX_RELEASE_TIMEOUT,
							PGC_SUSET,
							GUC_UNIT_MS,
							NULL, NULL, NULL);

	DefineCustomStringVariable("fencing.redis_sentinels",
							   "Redis Sentinels that name the primary fenced_acquire() talks to.",
							   "A comma-separated list of host:port.  When set, fencing.redis_host and fencing.redis_port are not used: the primary is asked of the Sentinels at every connect.  Empty means no Sentinel.",
							   &redis_sentinels,
							   "",
							   PGC_SUSET,
							   0,
							   check_redis_hostport_list, redis_settings_changed_str, NULL);

	DefineCustomStringVariable("fencing.redis_sentinel_master",
							   "Name under which the Redis Sentinels monitor the primary.",
							   "Required when fencing.redis_sentinels is set.",
							   &redis_sentinel_master,
							   "",
							   PGC_SUSET,
							   0,
							   check_redis_sentinel_master, redis_settings_changed_str, NULL);

	DefineCustomStringVariable("fencing.redis_sentinel_username",
							   "Redis ACL user to authenticate to the Redis Sentinels as.",
							   "Empty means the \"default\" user (AUTH with the password of fencing.redis_sentinel_password_file only).",
							   &redis_sentinel_username,
							   "",
							   PGC_SUSET,
							   0,
							   check_redis_username, redis_settings_changed_str, NULL);

	DefineCustomStringVariable("fencing.redis_sentinel_password_file",
							   "File holding the password of the Redis Sentinels (their requirepass).",
							   "The first line of the file is the password.  It is read at every discovery and must be readable only by the server's operating system user (mode 0600 or stricter).  Empty means the Sentinels need no password.",
							   &redis_sentinel_password_file,
							   "",
							   PGC_SUSET,
							   0,
							   check_redis_password_file, redis_settings_changed_str, NULL);

	DefineCustomStringVariable("fencing.redis_cluster_nodes",
							   "Seed nodes of the Redis Cluster that fenced_acquire() talks to.",
							   "A comma-separated list of host:port.  When set, fencing.redis_host and fencing.redis_port are not used: each call goes to the primary that serves its keys' hash slot, as the map asked of these nodes says.  Empty means no Cluster.",
							   &redis_cluster_nodes,
							   "",
							   PGC_SUSET,
							   0,
							   check_redis_hostport_list, redis_cluster_nodes_changed, NULL);

	/*
	 * Addresses from Sentinels and Cluster nodes are IP addresses unless
	 * this allows names: a name is resolved by a getaddrinfo() that neither
	 * cancel nor any timeout interrupts, and a server would choose it.
	 */
	DefineCustomBoolVariable("fencing.redis_discovered_host_names",
							 "Accept host names in the addresses Redis Sentinels and Cluster nodes hand out.",
							 "Off: a Sentinel's answer, CLUSTER SLOTS, -MOVED and -ASK must name an IP address.  Resolving a host name blocks the backend, uninterruptibly, for as long as the resolver takes.",
							 &redis_discovered_host_names,
							 false,
							 PGC_SUSET,
							 0,
							 NULL, NULL, NULL);

	redis_tls_settings_init();
}

/*
 * redis_tls_settings_init
 *		The TLS settings, for every connection a backend opens: servers,
 *		Sentinels, Cluster nodes and the Sentinel watch alike.
 */
static void
redis_tls_settings_init(void)
{
	DefineCustomEnumVariable("fencing.redis_tls",
							 "Whether and how connections to Redis use TLS.",
							 "disable, require (encrypt; verify the chain only if fencing.redis_tls_ca_file is set), verify-ca (the chain) or verify-full (the chain and the server's name), as libpq's sslmode.  Applies to the server, the Sentinels and the Cluster nodes alike; not to a Unix socket.",
							 &redis_tls,
							 REDIS_TLS_DISABLE, redis_tls_options,
							 PGC_SUSET,
							 0,
							 NULL, redis_settings_changed_int, NULL);

	DefineCustomStringVariable("fencing.redis_tls_ca_file",
							   "File of the certificate authorities that sign the Redis servers' certificates (PEM).",
							   "Empty means OpenSSL's default trust store for verify-ca and verify-full, and no verification for require.",
							   &redis_tls_ca_file,
							   "",
							   PGC_SUSET,
							   0,
							   check_redis_password_file, redis_settings_changed_str, NULL);

	DefineCustomStringVariable("fencing.redis_tls_cert_file",
							   "File of the client certificate to present to Redis (PEM), for tls-auth-clients.",
							   "May hold the chain after the certificate.  Requires fencing.redis_tls_key_file.  Empty means none.",
							   &redis_tls_cert_file,
							   "",
							   PGC_SUSET,
							   0,
							   check_redis_password_file, redis_settings_changed_str, NULL);

	DefineCustomStringVariable("fencing.redis_tls_key_file",
							   "File of the private key of fencing.redis_tls_cert_file (PEM, not encrypted).",
							   "Must be readable only by the server's operating system user (mode 0600 or stricter).  Empty means none.",
							   &redis_tls_key_file,
							   "",
							   PGC_SUSET,
							   0,
							   check_redis_password_file, redis_settings_changed_str, NULL);

	DefineCustomStringVariable("fencing.redis_tls_server_name",
							   "Name verified in the Redis servers' certificates (verify-full) and sent as SNI.",
							   "Empty means the host connected to.  An IP address is matched against the certificate's IP address subjectAltNames and not sent as SNI.",
							   &redis_tls_server_name,
							   "",
							   PGC_SUSET,
							   0,
							   check_redis_tls_server_name, redis_settings_changed_str, NULL);
}

/* Whether the primary is to be asked of Sentinels. */
bool
redis_sentinel_enabled(void)
{
	return redis_sentinels != NULL && redis_sentinels[0] != '\0';
}

/* Whether calls are to be routed through a Redis Cluster. */
bool
redis_cluster_enabled(void)
{
	return redis_cluster_nodes != NULL && redis_cluster_nodes[0] != '\0';
}

/* Fold one string setting, NULL as empty, its terminator included. */
static uint64
fingerprint_str(uint64 h, const char *value)
{
	if (value == NULL)
		value = "";
	return hash_bytes_extended((const unsigned char *) value,
							   strlen(value) + 1, h);
}

static uint64
fingerprint_int(uint64 h, int value)
{
	return hash_bytes_extended((const unsigned char *) &value,
							   sizeof(value), h);
}

/*
 * redis_settings_fingerprint
 *		A hash of the effective values of every setting that decides which
 *		Redis server a connection reaches and as whom: the lease renewer
 *		publishes its own, so that a session whose values differ (ALTER
 *		DATABASE, ALTER ROLE, SET) can tell it would renew elsewhere.  The
 *		password is hashed where it is, never copied; the timeouts and the
 *		key templates (carried by each lease) are left out.
 */
uint64
redis_settings_fingerprint(void)
{
	uint64		h = 0;

	h = fingerprint_str(h, redis_host);
	h = fingerprint_int(h, redis_port);
	h = fingerprint_str(h, redis_username);
	h = fingerprint_str(h, redis_password);
	h = fingerprint_str(h, redis_password_file);
	h = fingerprint_int(h, redis_database);
	h = fingerprint_str(h, redis_sentinels);
	h = fingerprint_str(h, redis_sentinel_master);
	h = fingerprint_str(h, redis_sentinel_username);
	h = fingerprint_str(h, redis_sentinel_password_file);
	h = fingerprint_str(h, redis_cluster_nodes);
	h = fingerprint_int(h, redis_discovered_host_names);
	h = fingerprint_int(h, redis_tls);
	h = fingerprint_str(h, redis_tls_ca_file);
	h = fingerprint_str(h, redis_tls_cert_file);
	h = fingerprint_str(h, redis_tls_key_file);
	h = fingerprint_str(h, redis_tls_server_name);
	return h;
}
