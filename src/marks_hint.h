/*-------------------------------------------------------------------------
 *
 * marks_hint.h
 *	  Where each mark's live version was last seen, shared by the backends
 *	  of a server that preloads the library.
 *
 * IDENTIFICATION
 *	  src/marks_hint.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef MARKS_HINT_H
#define MARKS_HINT_H

#include "storage/itemptr.h"

extern void marks_hint_init(void);
extern bool marks_hint_get(uint32 hash, ItemPointer tid);
extern void marks_hint_put(uint32 hash, ItemPointer tid);

#endif							/* MARKS_HINT_H */
