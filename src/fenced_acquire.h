/*-------------------------------------------------------------------------
 *
 * fenced_acquire.h
 *	  The acquire protocol of fenced_acquire() and fenced_acquire_xact().
 *
 * IDENTIFICATION
 *	  src/fenced_acquire.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef FENCED_ACQUIRE_H
#define FENCED_ACQUIRE_H

#include "fence_token.h"

extern bool fenced_acquire_lease(const char *resource, int ttl_ms,
								 int wait_ms, bool xact, bool renew,
								 int max_hold_ms, FenceToken *token);

#endif							/* FENCED_ACQUIRE_H */
