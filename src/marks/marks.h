/*-------------------------------------------------------------------------
 *
 * marks.h
 *	  The public face of the marks layer: high-water marks, the highest
 *	  token accepted per resource; the hint of a TF001 rejection whose
 *	  token is far below the mark; marks on a logical-replication
 *	  subscriber.  The marks layer uses core (and stats' counters) only.
 *
 * IDENTIFICATION
 *	  src/marks/marks.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef FENCING_MARKS_MARKS_H
#define FENCING_MARKS_MARKS_H

#include "core/core.h"
#include "core/pg_compat.h"
#include "utils/timestamp.h"

/* What a raise of a mark to an acquisition's token did. */
typedef enum MarksAcquireResult
{
	MARKS_ACQUIRE_RAISED,		/* the mark is at the token, locked */
	MARKS_ACQUIRE_ABOVE,		/* the mark is at or above it already */
	MARKS_ACQUIRE_BUSY			/* a writer in progress outlasted the wait */
} MarksAcquireResult;

extern void marks_init(void);
extern void marks_at_xact_end(void);
extern void marks_check(const char *resource, FenceToken token, bool strict,
						FenceToken max_step);
pg_noreturn extern void marks_report_stale(const char *resource,
										   const char *table,
										   const char *trigger,
										   FenceToken token, FenceToken mark);
extern MarksAcquireResult marks_raise_for_holder(const char *resource,
												FenceToken token,
												TimestampTz deadline);
extern bool marks_read(const char *resource, FenceToken *mark);
extern bool marks_read_newest(const char *resource, FenceToken *mark);
extern FenceToken marks_advance(const char *resource, FenceToken token);
extern bool marks_forget(const char *resource);

/* Fewer decimal digits than the mark's by at least this many: another source. */
#define STALE_HINT_MIN_DIGITS	6

extern int	stale_hint_token_sources(FenceToken token, FenceToken mark);

extern bool replica_applying(void);
extern void replica_raise(Oid extnsp, const char *resource, FenceToken token);

#endif							/* FENCING_MARKS_MARKS_H */
