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

/* SQLSTATEs of a fencing rejection (class FN, "fence"). */
#define ERRCODE_FENCE_TOKEN_STALE	MAKE_SQLSTATE('F','N','0','0','1')
#define ERRCODE_FENCE_TOKEN_MISSING MAKE_SQLSTATE('F','N','0','0','2')

extern void marks_init(void);
extern void marks_at_xact_end(void);
extern void marks_check(Oid extnsp, const char *resource, FenceToken token,
						bool strict);
extern bool marks_read(Oid extnsp, const char *resource, FenceToken *mark);

#endif							/* MARKS_H */
