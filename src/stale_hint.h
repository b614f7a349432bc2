/*-------------------------------------------------------------------------
 *
 * stale_hint.h
 *	  The hint of a TF001 rejection whose token is far below the mark.
 *
 * IDENTIFICATION
 *	  src/stale_hint.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef FENCING_STALE_HINT_H
#define FENCING_STALE_HINT_H

#include "core/core.h"

/* Fewer decimal digits than the mark's by at least this many: another source. */
#define STALE_HINT_MIN_DIGITS	6

extern int	stale_hint_token_sources(FenceToken token, FenceToken mark);

#endif							/* FENCING_STALE_HINT_H */
