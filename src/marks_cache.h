/*-------------------------------------------------------------------------
 *
 * marks_cache.h
 *	  The marks this transaction holds, per subtransaction level.
 *
 * IDENTIFICATION
 *	  src/marks_cache.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef MARKS_CACHE_H
#define MARKS_CACHE_H

#include "core/core.h"
#include "storage/itemptr.h"

/*
 * What this transaction holds of one mark, as of one subtransaction
 * level: a rollback of that level returns to the level below it.
 */
typedef struct CheckedLevel
{
	SubTransactionId subid;		/* subtransaction that took the lock */
	bool		written;		/* the mark set by us, not found at token */
	FenceToken	token;			/* the mark, locked by this transaction */
	ItemPointerData version;	/* the mark's live version, created or
								 * locked by us; invalid if unknown */
} CheckedLevel;

extern void marks_cache_init(void);
extern void marks_cache_at_xact_end(void);
extern uint32 checked_hash(const char *resource);
extern CheckedLevel *checked_held(const char *resource, uint32 hash);
extern void checked_remember(const char *resource, uint32 hash,
							 FenceToken token, bool written,
							 ItemPointer version);
extern void checked_forget(const char *resource);

#endif							/* MARKS_CACHE_H */
