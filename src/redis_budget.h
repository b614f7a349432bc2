/*-------------------------------------------------------------------------
 *
 * redis_budget.h
 *	  The time one Redis call may take, passed down to each of its steps.
 *
 * IDENTIFICATION
 *	  src/redis_budget.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef REDIS_BUDGET_H
#define REDIS_BUDGET_H

#include "datatype/timestamp.h"

/*
 * The time a call may take, passed down to every step of it: the
 * deadline, and whether the waits serve interrupts (not where PostgreSQL
 * holds them: after commit, at exit).  ms and limit name the limit that
 * set the deadline, for messages.
 */
typedef struct RedisBudget
{
	TimestampTz deadline;
	bool		interruptible;
	long		ms;
	const char *limit;
} RedisBudget;

extern RedisBudget redis_budget_start(long ms, const char *limit,
									  bool interruptible);
extern RedisBudget redis_budget_within(const RedisBudget *outer, long ms,
									   const char *limit);
extern long redis_budget_remaining(const RedisBudget *budget);
extern bool redis_pause_before_retry(const RedisBudget *budget, int pause_ms);

#endif							/* REDIS_BUDGET_H */
