/*-------------------------------------------------------------------------
 *
 * stale_hint.c
 *	  The hint of a TF001 rejection whose token is far below the mark.
 *
 * A holder that lost its lock offers a token a little below the mark: the
 * next holder's.  A token orders of magnitude below it is another story:
 * the resource takes tokens from two sources that do not know of each
 * other.  fenced_acquire() issues tokens near the Redis clock in
 * microseconds (about 1.8 * 10^15), while a worker that INCRs a counter
 * key of its own counts from 1, and is fenced out for good once the first
 * fenced_acquire() token was written.  Such a rejection says so, and how
 * to share one counter.
 *
 * IDENTIFICATION
 *	  src/stale_hint.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "stale_hint.h"

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
