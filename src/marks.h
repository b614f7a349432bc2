/*-------------------------------------------------------------------------
 *
 * marks.h
 *	  High-water marks: the highest token accepted per resource.
 *
 * IDENTIFICATION
 *	  src/marks.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef MARKS_H
#define MARKS_H

#include "fence_token.h"
#include "pg_compat.h"
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

#endif							/* MARKS_H */
