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


extern void marks_init(void);
extern void marks_at_xact_end(void);
extern void marks_check(Oid extnsp, const char *resource, FenceToken token,
						bool strict);
extern bool marks_read(Oid extnsp, const char *resource, FenceToken *mark);
extern bool marks_read_newest(Oid extnsp, const char *resource,
							  FenceToken *mark);

#endif							/* MARKS_H */
