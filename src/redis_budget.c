/*-------------------------------------------------------------------------
 *
 * redis_budget.c
 *	  The time one Redis call may take: a deadline that every step of the
 *	  call (connect, AUTH, the command, a pause before a retry) spends, so
 *	  that no step can outlast the call.
 *
 * IDENTIFICATION
 *	  src/redis_budget.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <limits.h>

#include "core/pg_compat.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "redis_budget.h"
#include "storage/latch.h"
#include "utils/timestamp.h"

/* A budget of ms from now, or without end if ms < 0. */
RedisBudget
redis_budget_start(long ms, const char *limit, bool interruptible)
{
	RedisBudget b;

	b.deadline = ms < 0 ? DT_NOEND :
		TimestampTzPlusMilliseconds(GetCurrentTimestamp(), ms);
	b.interruptible = interruptible;
	b.ms = ms;
	b.limit = limit;
	return b;
}

/*
 * redis_budget_within
 *		The budget of a step limited to ms: outer's, if it ends first.
 */
RedisBudget
redis_budget_within(const RedisBudget *outer, long ms, const char *limit)
{
	RedisBudget b = redis_budget_start(ms, limit, outer->interruptible);

	if (outer->deadline < b.deadline)
		return *outer;
	return b;
}

/* Milliseconds left, at most LONG_MAX; 0 once the deadline has passed. */
long
redis_budget_remaining(const RedisBudget *budget)
{
	if (budget->deadline == DT_NOEND)
		return LONG_MAX;
	return TimestampDifferenceMilliseconds(GetCurrentTimestamp(),
										   budget->deadline);
}

/*
 * redis_pause_before_retry
 *		Sleep pause_ms before another try, serving interrupts if the budget
 *		allows; false, at once, if the budget would not outlast the pause.
 */
bool
redis_pause_before_retry(const RedisBudget *budget, int pause_ms)
{
	if (redis_budget_remaining(budget) <= pause_ms)
		return false;
	if (budget->interruptible)
	{
		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 pause_ms, fencing_wait_event(FENCING_WAIT_REDIS_RETRY));
		ResetLatch(MyLatch);
		CHECK_FOR_INTERRUPTS();
	}
	else
		(void) WaitLatch(NULL, WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 pause_ms, fencing_wait_event(FENCING_WAIT_REDIS_RETRY));
	return true;
}
