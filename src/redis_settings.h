/*-------------------------------------------------------------------------
 *
 * redis_settings.h
 *	  Every setting of the Redis client (fencing.redis_host and the rest,
 *	  the Sentinel, Cluster and TLS ones too), and the files that hold
 *	  secrets.
 *
 * IDENTIFICATION
 *	  src/redis_settings.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef REDIS_SETTINGS_H
#define REDIS_SETTINGS_H

/*
 * The longest password, in fencing.redis_password or the first line of
 * fencing.redis_password_file.  Redis sets no limit; this one only keeps
 * a mistake (a whole file) from being sent.
 */
#define REDIS_MAX_PASSWORD_LEN	(1024 * 1024)

extern char *redis_host;
extern int	redis_port;
extern char *redis_username;
extern char *redis_password;
extern char *redis_password_file;
extern int	redis_database;
extern int	redis_connect_timeout;	/* ms */
extern int	redis_command_timeout;	/* ms */
extern int	redis_release_timeout;	/* ms */
extern char *redis_sentinels;
extern char *redis_sentinel_master;
extern char *redis_sentinel_username;
extern char *redis_sentinel_password_file;
extern char *redis_cluster_nodes;
extern bool redis_discovered_host_names;

/* fencing.redis_tls: libpq's sslmode words, the ones that always use TLS. */
typedef enum RedisTlsMode
{
	REDIS_TLS_DISABLE,
	REDIS_TLS_REQUIRE,
	REDIS_TLS_VERIFY_CA,
	REDIS_TLS_VERIFY_FULL
} RedisTlsMode;

extern int	redis_tls;
extern char *redis_tls_ca_file;
extern char *redis_tls_cert_file;
extern char *redis_tls_key_file;
extern char *redis_tls_server_name;

/*
 * Bumped whenever a setting that names the server or the credentials
 * changes; a connection made under an older generation is replaced.
 */
extern uint64 redis_settings_generation;

/* Bumped when fencing.redis_cluster_nodes changes: forget the slot map. */
extern uint64 redis_cluster_generation;

extern void redis_settings_init(void);
extern bool redis_sentinel_enabled(void);
extern bool redis_cluster_enabled(void);
extern uint64 redis_settings_fingerprint(void);

#ifdef USE_HIREDIS
#include "redis_error.h"

extern bool redis_check_private_file(const char *path, const char *what,
									 RedisError *err);
extern bool redis_read_password_file(const char *path, char **password,
									 RedisError *err);
extern void redis_forget_password(char *password);
#endif

#endif							/* REDIS_SETTINGS_H */
