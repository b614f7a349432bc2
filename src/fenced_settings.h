/*-------------------------------------------------------------------------
 *
 * fenced_settings.h
 *	  The settings of the lease layer, the arguments its SQL functions
 *	  share, and the Redis keys of a resource.
 *
 * IDENTIFICATION
 *	  src/fenced_settings.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef FENCED_SETTINGS_H
#define FENCED_SETTINGS_H

#include "fmgr.h"

extern void fenced_settings_init(void);

extern char *fencing_redis_lock_key;
extern char *fencing_redis_token_key;
extern int	fencing_redis_wait_replicas;
extern int	fencing_redis_wait_timeout;
extern bool fencing_acquire_raises_mark;

/* fencing.lock_wait_wakeup: what ends a waiter's sleep on a busy lock */
typedef enum FencedWakeup
{
	FENCED_WAKEUP_RELEASE,		/* the release's notice, else the lock's PTTL */
	FENCED_WAKEUP_POLL			/* the back-off alone */
} FencedWakeup;

extern int	fencing_lock_wait_wakeup;

extern char *fenced_resource_arg(FunctionCallInfo fcinfo);
extern int	fenced_ttl_arg(FunctionCallInfo fcinfo, int argno);
extern int	fenced_wait_arg(FunctionCallInfo fcinfo, int argno);
extern bool fenced_renew_arg(FunctionCallInfo fcinfo, int argno);
extern int	fenced_max_hold_arg(FunctionCallInfo fcinfo, int argno);
extern char *fenced_keys(const char *resource, char **token_key);
extern char *fenced_key(const char *template, const char *resource);
extern bool fenced_counter_expires(void);
extern bool fenced_counter_lifetime(int ttl_ms, char *buf, size_t len);
extern int	fenced_counter_linger(void);

#endif							/* FENCED_SETTINGS_H */
