/*-------------------------------------------------------------------------
 *
 * redis_settings.h
 *	  The settings of the Redis connection (fencing.redis_host and the
 *	  rest), defined in redis_settings.c and read by redis_conn.c.
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

/*
 * Bumped whenever a setting that names the server or the credentials
 * changes; a connection made under an older generation is replaced.
 */
extern uint64 redis_settings_generation;

extern void redis_settings_init(void);

#endif							/* REDIS_SETTINGS_H */
