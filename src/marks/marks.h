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

/* What recording an acquisition's floor did (marks_floor.c). */
typedef enum MarksFloorResult
{
	FLOOR_RECORDED,				/* the floor is the token, until the
								 * transaction ends */
	FLOOR_ABOVE,				/* a floor at or above it is recorded */
	FLOOR_FULL					/* no room, or no table: raise the mark */
} MarksFloorResult;

/*
 * A write marks_check accepted, to accept its repeats (the same resource,
 * token and strictness, in the same transaction) without a lookup: see
 * marks_check_repeats.
 */
typedef struct MarksRepeat
{
	bool		valid;
	LocalTransactionId lxid;
	uint64		generation;		/* marks_held.c's, after the check */
	FenceToken	token;
	bool		strict;
} MarksRepeat;

extern void marks_init(void);
extern void marks_kept_close(void);
extern void marks_at_xact_end(void);
extern void marks_check(const char *resource, FenceToken token, bool strict,
						FenceToken max_step);
extern void marks_check_memo(MarksRepeat *memo, FenceToken token,
							 bool strict);
extern bool marks_check_repeats(const MarksRepeat *memo, const char *resource,
								FenceToken token, bool strict);
pg_noreturn extern void marks_report_stale(const char *resource,
										   const char *table,
										   const char *trigger,
										   FenceToken token, FenceToken mark);
extern MarksAcquireResult marks_raise_for_holder(const char *resource,
												FenceToken token,
												TimestampTz deadline);
extern bool marks_read(const char *resource, FenceToken *mark);
extern bool marks_read_held(const char *resource, FenceToken *mark);
extern bool marks_read_newest(const char *resource, FenceToken *mark);
extern FenceToken marks_advance(const char *resource, FenceToken token,
							   bool write);
extern bool marks_forget(const char *resource);

typedef MarksAcquireResult (*MarksFloorRaise) (const char *resource,
											   FenceToken token,
											   TimestampTz deadline);
extern void marks_floor_init(MarksFloorRaise raise);

/*
 * Called when a write of token to resource must wait for transaction xid,
 * which holds the mark; > 0: xid is being ended, poll for it every so many
 * ms (asking again); 0: wait for it as for any writer.  Set by the lock
 * layer (lease_takeover.c), which the marks layer cannot call.
 */
typedef int (*MarksStalledHook) (const char *resource, FenceToken token,
								 TransactionId xid);
extern PGDLLIMPORT MarksStalledHook marks_stalled_hook;
extern bool marks_floor_enabled(void);
extern MarksFloorResult marks_floor_record(const char *resource,
										   FenceToken token, bool session);
extern void marks_floor_forget(const char *resource);
extern bool marks_floor_get(const char *resource, FenceToken *token);
extern bool marks_floor_stale(const char *resource, FenceToken token,
							  FenceToken *floor);

/* Fewer decimal digits than the mark's by at least this many: another source. */
#define STALE_HINT_MIN_DIGITS	6

extern int	stale_hint_token_sources(FenceToken token, FenceToken mark);

extern bool replica_applying(void);
extern void replica_raise(Oid extnsp, const char *resource, FenceToken token);

#endif							/* FENCING_MARKS_MARKS_H */
