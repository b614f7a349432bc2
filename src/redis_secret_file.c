/*-------------------------------------------------------------------------
 *
 * redis_secret_file.c
 *	  The files that hold the Redis client's secrets: read when connecting,
 *	  refused when anyone but the server's operating system user can read
 *	  them, and the secrets wiped from memory after use.
 *
 * IDENTIFICATION
 *	  src/redis_secret_file.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <sys/stat.h>

#include "fencing_errcodes.h"
#include "redis_settings.h"
#include "storage/fd.h"

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
