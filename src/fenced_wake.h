/*-------------------------------------------------------------------------
 *
 * fenced_wake.h
 *	  Waiters woken on release: the release notice of a resource, and a
 *	  waiter's subscription and sleep.
 *
 * IDENTIFICATION
 *	  src/fenced_wake.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef FENCED_WAKE_H
#define FENCED_WAKE_H

#include "datatype/timestamp.h"

/* The arguments of the release script that say where to announce it. */
#define FENCED_NOTICE_NARGS		2

extern void fenced_release_notice(const char *lock_key, const char **args);

/* One acquisition's waits on a busy lock. */
typedef struct FencedWake
{
	const char *channel;
	bool		refused;		/* the server refused the subscription */
	TimestampTz retry_at;		/* no subscription before then */
	int			failures;		/* subscriptions failed or lost */
} FencedWake;

extern void fenced_wake_start(FencedWake *wake, const char *lock_key);
extern bool fenced_wake_subscribe(FencedWake *wake, TimestampTz deadline);
extern bool fenced_wake_sleep(FencedWake *wake, long long pttl,
							  long remaining);
extern void fenced_wake_end(void);

#endif							/* FENCED_WAKE_H */
