/*-------------------------------------------------------------------------
 *
 * marks_report.c
 *	  The rejections of a write by its mark: a stale token (TF001), a token
 *	  too far above the mark (TF011), and the hint of a stale token.
 *
 * The hint of a stale token.  A holder that lost its lock offers a token a
 * little below the mark: the next holder's.  A token orders of magnitude
 * below it is another story: the resource takes tokens from two sources
 * that do not know of each other.  fenced_acquire() issues tokens near the
 * Redis clock in microseconds (about 1.8 * 10^15), while a worker that
 * INCRs a counter key of its own counts from 1, and is fenced out for good
 * once the first fenced_acquire() token was written.  Such a rejection
 * says so, and how to share one counter.
 *
 * IDENTIFICATION
 *	  src/marks/marks_report.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "fencing_errcodes.h"
#include "marks/marks.h"
#include "marks/marks_int.h"
#include "stats/stats.h"

/*
 * marks_report_stale
 *		Reject a write of token because the mark is above it (or equal to
 *		it, under a strict trigger).
 *
 * resource names the resource of a resource-scope mark; in row scope it
 * is NULL, and the mark is the row's own token in table, checked by
 * trigger.
 */
void
marks_report_stale(const char *resource, const char *table,
				   const char *trigger, FenceToken token, FenceToken mark)
{
	char		offered[FENCE_TOKEN_TEXT_LEN];
	char		current[FENCE_TOKEN_TEXT_LEN];

	stats_count(STATS_REJECTED_STALE);
	stats_rejected_resource(resource, true);
	fence_token_to_cstring(token, offered);
	fence_token_to_cstring(mark, current);
	if (resource == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_FENCING_STALE_TOKEN),
				 errmsg("stale fence token for a row of table \"%s\"", table),
				 token == mark ?
				 errdetail("Token %s is not above the row's token %s, and trigger \"%s\" requires strictly increasing tokens.",
						   offered, current, trigger) :
				 errdetail("Token %s is below the row's token %s.",
						   offered, current),
				 errhint("A newer lock holder has written this row; acquire the lock again for a new token."),
				 stale_hint_token_sources(token, mark)));
	ereport(ERROR,
			(errcode(ERRCODE_FENCING_STALE_TOKEN),
			 errmsg("stale fence token for resource \"%s\"", resource),
			 token == mark ?
			 errdetail("Token %s is not above the current mark %s, and this table requires strictly increasing tokens.",
					   offered, current) :
			 errdetail("Token %s is below the current mark %s.",
					   offered, current),
			 errhint("A newer lock holder has written to this resource; acquire the lock again for a new token."),
			 stale_hint_token_sources(token, mark)));
}

/*
 * marks_report_step
 *		Reject a write of token to resource, more than max_step above its
 *		mark.
 */
void
marks_report_step(const char *resource, FenceToken token, FenceToken mark,
				  FenceToken max_step)
{
	char		offered[FENCE_TOKEN_TEXT_LEN];
	char		current[FENCE_TOKEN_TEXT_LEN];
	char		step[FENCE_TOKEN_TEXT_LEN];

	fence_token_to_cstring(token, offered);
	fence_token_to_cstring(mark, current);
	fence_token_to_cstring(max_step, step);
	ereport(ERROR,
			(errcode(ERRCODE_FENCING_TOKEN_STEP),
			 errmsg("fence token %s for resource \"%s\" is too far above its mark %s",
					offered, resource, current),
			 errdetail("A token that only the statement supplies may raise a mark by at most fencing.max_token_step (%s).",
					   step),
			 errhint("A lock holder's token is declared with fence_use() or fenced_acquire(), and a mark moved by hand with fence_advance(); neither is bounded.")));
}

/* The number of decimal digits of token. */
static int
stale_hint_digits(FenceToken token)
{
	int			digits = 1;

	while (token >= 10)
	{
		token /= 10;
		digits++;
	}
	return digits;
}

/*
 * stale_hint_token_sources
 *		In an ereport() rejecting token as stale against mark, after its
 *		errhint(): replace the hint when token is STALE_HINT_MIN_DIGITS or
 *		more decimal digits shorter than the mark.  Returns 0, as errhint()
 *		does.
 */
int
stale_hint_token_sources(FenceToken token, FenceToken mark)
{
	int			orders = stale_hint_digits(mark) - stale_hint_digits(token);

	if (orders < STALE_HINT_MIN_DIGITS)
		return 0;
	return errhint("Token and mark are %d orders of magnitude apart: the resource seems to take tokens from two sources, such as fenced_acquire() and a counter of another client's. "
				   "Take every token of a resource from one counter: set fencing.redis_token_key to the other clients' counter key (doc/clients.md, \"Mixing token sources\").",
				   orders);
}
