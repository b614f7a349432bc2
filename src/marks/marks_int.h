/*-------------------------------------------------------------------------
 *
 * marks_int.h
 *	  Inside the marks layer, for its files only: the marks table,
 *	  fence_high_water, found, checked and read (marks_table.c) and
 *	  written (marks_write.c) on the heap and the index; the marks this
 *	  transaction holds, per subtransaction level (marks_held.c), and
 *	  where each mark's live version was last seen (marks_cache.c).
 *
 * IDENTIFICATION
 *	  src/marks/marks_int.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef FENCING_MARKS_MARKS_INT_H
#define FENCING_MARKS_MARKS_INT_H

#include "access/tableam.h"
#include "core/core.h"
#include "core/pg_compat.h"
#include "storage/itemptr.h"
#include "storage/lock.h"
#include "utils/rel.h"
#include "utils/timestamp.h"

/* Columns of the marks table. */
#define Anum_mark_resource	1
#define Anum_mark_token		2
#define Anum_mark_moved_at	3
#define Anum_mark_set_by	4
#define Natts_mark			4
/* The table of 1.2, before ALTER EXTENSION UPDATE added set_by. */
#define Natts_mark_1_2		3

/*
 * What set a mark's token (column set_by): an acquisition, fence_advance,
 * or a guarded write.  Strict mode rejects an equal token only after a
 * write (marks.c).  A table without the column reads as written.
 */
#define MARK_SET_BY_ACQUIRE	'a'
#define MARK_SET_BY_ADVANCE	'v'
#define MARK_SET_BY_WRITE	'w'

/* The marks table and its primary key index, open for one operation. */
typedef struct MarksRel
{
	Relation	heap;
	Relation	index;
	Datum		key;			/* the resource, as text */
	const char *resource;
	bool		has_set_by;		/* the table has column set_by (1.3) */
	bool		kept;			/* heap and index are marks_kept.c's */
} MarksRel;

/* The lock serializing the first inserts of one resource's mark. */
typedef struct MarksInsertLock
{
	LOCKTAG		tag;
	bool		held;
} MarksInsertLock;

/*
 * How marks_look treats a version of the mark that another transaction is
 * writing.  NULL means: wait for it as long as it takes.
 */
typedef struct MarksWait
{
	FenceToken	token;			/* a newer token in progress is reported */
	TimestampTz deadline;		/* 0: no limit; else poll until then */
	bool		serializable;	/* an invisible move is a serialization
								 * failure */
} MarksWait;

/* What marks_look found. */
typedef enum MarksLook
{
	MARKS_NONE,					/* no mark */
	MARKS_FOUND,				/* the newest version, no writer in progress */
	MARKS_NEWER_IN_PROGRESS,	/* a writer in progress sets a newer token */
	MARKS_TIMED_OUT				/* a writer in progress outlasted the deadline */
} MarksLook;

/* Polling interval of a bounded wait for a writer in progress, in ms. */
#define MARKS_POLL_MS			5

/* marks_table.c: finding the table and checking its shape */
extern void marks_table_init(void (*forget_versions) (void));
extern Oid	marks_relid(void);
extern void marks_open(MarksRel *m, const char *resource, LOCKMODE lockmode);
extern void marks_close(MarksRel *m);
extern BlockNumber marks_nblocks(MarksRel *m);

/* marks_kept.c: the table and its key kept open by a writing transaction */
extern void marks_kept_init(void);
extern bool marks_kept_get(Oid relid, Relation *heap, Relation *index);
extern void marks_keep(Oid relid, Oid indexid);

/* marks_table.c: reading its rows */

extern MarksLook marks_look(MarksRel *m, const MarksWait *wait,
							HeapTuple *tuple);
extern bool marks_find(MarksRel *m, HeapTuple *tuple);
extern bool marks_fetch(MarksRel *m, ItemPointer tid, bool anywhere,
						HeapTuple *tuple);
extern bool marks_fetch_visible(MarksRel *m, FenceToken *mark);
extern bool marks_fetch_newest(MarksRel *m, FenceToken *mark);
extern bool marks_fetch_newest_version(MarksRel *m, ItemPointer tid,
									   HeapTuple *tuple);
extern bool marks_fetch_newest_at(MarksRel *m, ItemPointer tid,
								  FenceToken *mark);
extern FenceToken marks_token_of(MarksRel *m, HeapTuple tuple);
extern TimestampTz marks_moved_at(MarksRel *m, HeapTuple tuple);
extern char marks_set_by_of(MarksRel *m, HeapTuple tuple);
extern bool marks_written_here(HeapTuple tuple);
extern bool marks_raised_here(MarksRel *m, HeapTuple tuple);
pg_noreturn extern void marks_serialization_failure(MarksRel *m);

/* marks_write.c: writing its rows */

extern bool marks_insert_lock(MarksRel *m, MarksInsertLock *lock);
extern void marks_insert_unlock(MarksInsertLock *lock);
extern void marks_insert(MarksRel *m, FenceToken token, char set_by,
						 ItemPointer version);
extern TM_Result marks_raise(MarksRel *m, HeapTuple tuple, FenceToken token,
							 TimestampTz moved_at, char set_by,
							 ItemPointer version);
extern TM_Result marks_lock(MarksRel *m, HeapTuple tuple);
extern TM_Result marks_delete(MarksRel *m, HeapTuple tuple);
extern void marks_before_retry(MarksRel *m, TM_Result result);

/*
 * What this transaction holds of one mark, as of one subtransaction
 * level: a rollback of that level returns to the level below it.
 */
typedef struct CheckedLevel
{
	SubTransactionId subid;		/* subtransaction that set this level */
	bool		written;		/* the mark set by us, not found at token */
	bool		own;			/* version created by this transaction: a
								 * raise stays in memory */
	bool		forgotten;		/* deleted (fence_forget): look it up */
	bool		used;			/* a write was accepted at token */
	char		set_by;			/* what set the token stored in version */
	FenceToken	token;			/* the mark, locked by this transaction */
	FenceToken	stored;			/* the token stored in version */
	ItemPointerData version;	/* the mark's live version, created or
								 * locked by us; invalid if unknown */
} CheckedLevel;

/*
 * Whether level keeps a raise in memory, above the version stored, or a
 * write at the version's token that set_by does not record yet.
 */
#define CHECKED_PENDING(level) \
	((level)->own && !(level)->forgotten && \
	 ((level)->token > (level)->stored || \
	  ((level)->used && (level)->set_by != MARK_SET_BY_WRITE)))

/* marks_held.c: the marks this transaction holds */
extern void marks_held_init(void);
extern void marks_held_at_xact_end(void);
extern uint64 marks_held_generation(void);
extern uint32 checked_hash(const char *resource);
extern CheckedLevel *checked_held(const char *resource, uint32 hash);
extern void checked_remember(const char *resource, uint32 hash,
							 const CheckedLevel *state);
extern void checked_forget(const char *resource);
extern void marks_held_flush(void (*write) (const char *resource,
											CheckedLevel *level));

/* marks_report.c: a write rejected by its mark */
pg_noreturn extern void marks_report_step(const char *resource,
										  FenceToken token, FenceToken mark,
										  FenceToken max_step);

/* marks_cache.c: the shared table of mark addresses */
extern void marks_hint_init(void);
extern bool marks_hint_get(uint32 hash, ItemPointer tid);
extern void marks_hint_put(uint32 hash, ItemPointer tid);

#endif							/* FENCING_MARKS_MARKS_INT_H */
