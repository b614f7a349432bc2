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

extern void marks_init(void);
extern void marks_at_xact_end(void);
extern void marks_check(const char *resource, FenceToken token, bool strict);
pg_noreturn extern void marks_report_stale(const char *resource,
										   const char *table,
										   const char *trigger,
										   FenceToken token, FenceToken mark);
extern bool marks_read(const char *resource, FenceToken *mark);
extern bool marks_read_newest(const char *resource, FenceToken *mark);

#endif							/* MARKS_H */
