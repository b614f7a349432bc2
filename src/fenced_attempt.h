/*-------------------------------------------------------------------------
 *
 * fenced_attempt.h
 *	  One attempt at a lock: the acquire script and its token.
 *
 * IDENTIFICATION
 *	  src/fenced_attempt.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef FENCED_ATTEMPT_H
#define FENCED_ATTEMPT_H

#include "core/core.h"
#include "lease_table.h"

extern void fenced_make_owner(char *owner);
extern void fenced_attempt_start(void);
extern bool fenced_try_acquire(const char *resource, const char *lock_key,
							   const char *token_key, const char *owner,
							   int ttl_ms, Lease *lease, FenceToken *token,
							   long long *pttl);
extern bool fenced_attempt_may_have_run(const ErrorData *edata);

#endif							/* FENCED_ATTEMPT_H */
