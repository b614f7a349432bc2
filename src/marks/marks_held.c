/*-------------------------------------------------------------------------
 *
 * marks_held.c
 *	  The marks this transaction holds, per subtransaction level, with the
 *	  raises it keeps in memory until it commits; reading a mark as this
 *	  transaction holds it (marks_read, marks_read_newest).
 *
 * Once a transaction has checked and locked a resource's mark at token T,
 * later rows of that resource with token T cannot fail (nobody else can
 * move the mark while we hold the lock), so marks.c answers them from
 * here without a lookup.  Once it has written a version of the mark (own),
 * it keeps later raises here, in memory, and writes the last one at
 * pre-commit (marks.c): a transaction writes each mark at most twice.
 *
 * What is held depends on the subtransaction: a rollback releases the
 * row locks the subtransaction took and undoes its writes, and must undo
 * its raises in memory too.  So a mark keeps one level per subtransaction
 * that changed what is held, subtransaction IDs ascending, as deep as the
 * nesting goes: a committed subtransaction's level replaces its parent's,
 * a rolled-back one's is dropped, and the parent's is then what is held
 * again, version and raise included.  Ending a subtransaction visits only
 * the marks it gave a level (held_touched), so that a loop with a
 * savepoint per row costs the same per row however many marks are held.
 *
 * Marks live in a direct-mapped array, a resource in the slot its hash
 * picks: bulk writes repeat one resource (or a few) row after row, which
 * this serves without a hash table.  A newcomer takes the slot of a mark
 * with no raise in memory at any level, which only costs that mark a
 * lookup later: the versions the lookup walks are the few this
 * transaction wrote (at most two of its own, and those of rolled-back
 * subtransactions, which pruning removes).  A mark with a raise in memory
 * is never evicted: the newcomer goes to a hash table beside the array
 * (held_spill), so that a transaction holding raises of many marks whose
 * names collide stays linear.
 *
 * Even the slot's lookup is saved for a write that repeats, row after row,
 * a check of one resource at one token (marks_check_repeats): a
 * generation counts the changes of what is held, and nothing to look up
 * can have changed while it stays the same.
 *
 * IDENTIFICATION
 *	  src/marks/marks_held.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "common/hashfn.h"
#include "marks/marks.h"
#include "marks/marks_int.h"
#include "storage/proc.h"
#include "utils/hsearch.h"
#include "utils/memutils.h"

#define HELD_SLOTS 256

typedef struct HeldMark
{
	char	   *resource;		/* NULL if the slot was never used */
	uint32		hash;
	bool		listed;			/* a slot listed in held_used */
	int			nlevels;		/* levels[nlevels - 1] is the current one */
	int			maxlevels;
	CheckedLevel *levels;		/* subids ascending */
	struct HeldMark *next;		/* in held_spill: the next of the same hash */
} HeldMark;

/* An entry of held_spill: the marks of one hash. */
typedef struct HeldSpill
{
	uint32		hash;
	HeldMark   *first;
} HeldSpill;

/* A level a subtransaction other than the top one gave a mark. */
typedef struct HeldTouch
{
	HeldMark   *mark;
	SubTransactionId subid;
} HeldTouch;

/*
 * The marks held in this transaction: the slots, those used since it
 * began (so that ending it visits those alone), the marks that did not
 * fit (held_spill), and the levels given by subtransactions, in the order
 * given, which is subtransaction ID order; all allocations in held_cxt.
 */
static HeldMark held_slots[HELD_SLOTS];
static uint16 held_used[HELD_SLOTS];
static int	held_nused = 0;
static HTAB *held_spill = NULL;
static HeldTouch *held_touched = NULL;
static int	held_ntouched = 0;
static int	held_maxtouched = 0;
static MemoryContext held_cxt = NULL;

/*
 * Counts every change of what this transaction holds (a level remembered,
 * a subtransaction ended, the transaction ended, addresses forgotten), so
 * that marks_check_repeats can tell that nothing changed since a check.
 */
static uint64 held_generation = 0;

/*
 * marks_held_at_xact_end
 *		Forget every mark held; called when a transaction ends, whichever
 *		way (after marks_held_flush, on commit).
 */
void
marks_held_at_xact_end(void)
{
	int			i;

	held_generation++;
	if (held_nused == 0 && held_spill == NULL)
		return;
	for (i = 0; i < held_nused; i++)
		memset(&held_slots[held_used[i]], 0, sizeof(HeldMark));
	held_nused = 0;
	held_spill = NULL;
	held_touched = NULL;
	held_ntouched = held_maxtouched = 0;
	MemoryContextReset(held_cxt);
}

/* Whether any level of mark keeps a raise in memory. */
static bool
held_pending(HeldMark *mark)
{
	int			i;

	for (i = 0; i < mark->nlevels; i++)
		if (CHECKED_PENDING(&mark->levels[i]))
			return true;
	return false;
}

/*
 * Move what a committed subtransaction holds to its parent, replacing
 * what the parent held before; drop what one that rolled back held,
 * returning to what its parent held.  The levels the subtransaction gave
 * are the last of held_touched (its own subtransactions have ended, and
 * their levels became its own, listed again); a mark listed twice, or
 * whose slot went to another mark since, no longer has a current level of
 * this subtransaction's and is skipped.
 */
static void
marks_held_subxact_callback(SubXactEvent event, SubTransactionId mySubid,
							SubTransactionId parentSubid, void *arg)
{
	int			last = held_ntouched;
	int			i;

	if (event != SUBXACT_EVENT_COMMIT_SUB && event != SUBXACT_EVENT_ABORT_SUB)
		return;
	held_generation++;
	while (held_ntouched > 0 && held_touched[held_ntouched - 1].subid >= mySubid)
		held_ntouched--;

	/* Levels moved to the parent are listed again, at or before i. */
	for (i = held_ntouched; i < last; i++)
	{
		HeldMark   *mark = held_touched[i].mark;
		CheckedLevel *top;

		if (mark->nlevels == 0)
			continue;
		top = &mark->levels[mark->nlevels - 1];
		if (top->subid != mySubid)
			continue;
		if (event == SUBXACT_EVENT_ABORT_SUB)
			mark->nlevels--;
		else if (mark->nlevels > 1 && top[-1].subid == parentSubid)
		{
			top[-1] = *top;
			top[-1].subid = parentSubid;
			mark->nlevels--;
		}
		else
		{
			top->subid = parentSubid;
			if (parentSubid != TopSubTransactionId)
			{
				held_touched[held_ntouched].mark = mark;
				held_touched[held_ntouched].subid = parentSubid;
				held_ntouched++;
			}
		}
	}
}

/* Apply fn to every mark held, in the array and in held_spill. */
static void
held_foreach(void (*fn) (HeldMark *mark, void *arg), void *arg)
{
	int			i;

	for (i = 0; i < held_nused; i++)
		if (held_slots[held_used[i]].resource != NULL)
			fn(&held_slots[held_used[i]], arg);
	if (held_spill != NULL)
	{
		HASH_SEQ_STATUS status;
		HeldSpill  *entry;

		hash_seq_init(&status, held_spill);
		while ((entry = hash_seq_search(&status)) != NULL)
		{
			HeldMark   *mark;

			for (mark = entry->first; mark != NULL; mark = mark->next)
				fn(mark, arg);
		}
	}
}

static void
held_forget_versions_of(HeldMark *mark, void *arg)
{
	int			i;

	for (i = 0; i < mark->nlevels; i++)
		ItemPointerSetInvalid(&mark->levels[i].version);
}

/*
 * The marks table may have been truncated or rewritten: a remembered
 * version's address may now hold another row, so look versions up again.
 * What is held, and raised in memory, stays: the row locks are ours until
 * the transaction ends.
 */
static void
held_forget_versions(void)
{
	held_generation++;
	held_foreach(held_forget_versions_of, NULL);
}

/*
 * marks_held_init
 *		Register the subtransaction and table callbacks.
 */
void
marks_held_init(void)
{
	RegisterSubXactCallback(marks_held_subxact_callback, NULL);
	marks_table_init(held_forget_versions);
}

/*
 * marks_held_generation
 *		A number that changes whenever what this transaction holds of any
 *		mark may have changed.
 */
uint64
marks_held_generation(void)
{
	return held_generation;
}

uint32
checked_hash(const char *resource)
{
	return hash_bytes((const unsigned char *) resource, strlen(resource));
}

static inline bool
held_is(HeldMark *mark, const char *resource, uint32 hash)
{
	return mark->resource != NULL && mark->hash == hash &&
		strcmp(mark->resource, resource) == 0;
}

/* The mark of resource held, in its slot or in held_spill; or NULL. */
static HeldMark *
held_lookup(const char *resource, uint32 hash)
{
	HeldMark   *mark = &held_slots[hash % HELD_SLOTS];
	HeldSpill  *entry;

	if (held_is(mark, resource, hash))
		return mark;
	if (held_spill == NULL)
		return NULL;
	entry = hash_search(held_spill, &hash, HASH_FIND, NULL);
	for (mark = entry ? entry->first : NULL; mark != NULL; mark = mark->next)
		if (held_is(mark, resource, hash))
			return mark;
	return NULL;
}

/*
 * marks_read_held
 *		The mark of resource as this transaction holds it, raises kept in
 *		memory included; false if it holds none.  Without a lookup of the
 *		name when the transaction holds no mark.
 */
bool
marks_read_held(const char *resource, FenceToken *mark)
{
	CheckedLevel *held;

	if (held_nused == 0 && held_spill == NULL)
		return false;
	held = checked_held(resource, checked_hash(resource));
	if (held == NULL)
		return false;
	*mark = held->token;
	return true;
}

/*
 * checked_held
 *		What this transaction holds of the mark of resource, of hash; NULL
 *		if nothing, or if it forgot the mark (checked_forget).
 */
CheckedLevel *
checked_held(const char *resource, uint32 hash)
{
	HeldMark   *mark = held_lookup(resource, hash);
	CheckedLevel *top;

	if (mark == NULL || mark->nlevels == 0)
		return NULL;
	top = &mark->levels[mark->nlevels - 1];
	return top->forgotten ? NULL : top;
}

/*
 * A place for the mark of resource: its slot, unless a mark with a raise
 * in memory holds the slot; then a new mark in held_spill.
 */
static HeldMark *
held_place(const char *resource, uint32 hash)
{
	int			index = hash % HELD_SLOTS;
	HeldMark   *mark = &held_slots[index];
	HeldSpill  *entry;
	bool		found;

	if (!mark->listed)
	{
		held_used[held_nused++] = index;
		mark->listed = true;
	}
	if (mark->resource == NULL || mark->nlevels == 0 || !held_pending(mark))
	{
		mark->resource = MemoryContextStrdup(held_cxt, resource);
		mark->hash = hash;
		mark->nlevels = 0;
		return mark;
	}
	if (held_spill == NULL)
	{
		HASHCTL		ctl;

		ctl.keysize = sizeof(uint32);
		ctl.entrysize = sizeof(HeldSpill);
		ctl.hcxt = held_cxt;
		held_spill = hash_create("fencing held marks", 1024, &ctl,
								 HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
	}
	entry = hash_search(held_spill, &hash, HASH_ENTER, &found);
	if (!found)
		entry->first = NULL;
	mark = MemoryContextAllocZero(held_cxt, sizeof(HeldMark));
	mark->resource = MemoryContextStrdup(held_cxt, resource);
	mark->hash = hash;
	mark->next = entry->first;
	entry->first = mark;
	return mark;
}

/*
 * checked_remember
 *		Remember that this transaction holds the mark of resource as state
 *		says, as of the current subtransaction.
 */
void
checked_remember(const char *resource, uint32 hash, const CheckedLevel *state)
{
	SubTransactionId subid = GetCurrentSubTransactionId();
	HeldMark   *mark;
	CheckedLevel *level;

	held_generation++;
	if (held_cxt == NULL)
		held_cxt = AllocSetContextCreate(TopMemoryContext,
										 "fencing held marks",
										 ALLOCSET_DEFAULT_SIZES);
	mark = held_lookup(resource, hash);
	if (mark == NULL)
		mark = held_place(resource, hash);

	/* A deeper subtransaction than the current level's gets a level. */
	if (mark->nlevels == 0 || mark->levels[mark->nlevels - 1].subid != subid)
	{
		if (mark->nlevels == mark->maxlevels)
		{
			int			n = Max(2, mark->maxlevels * 2);

			mark->levels = mark->levels == NULL ?
				MemoryContextAlloc(held_cxt, n * sizeof(CheckedLevel)) :
				repalloc(mark->levels, n * sizeof(CheckedLevel));
			mark->maxlevels = n;
		}
		mark->nlevels++;
		if (subid != TopSubTransactionId)
		{
			if (held_ntouched == held_maxtouched)
			{
				int			n = Max(64, held_maxtouched * 2);

				held_touched = held_touched == NULL ?
					MemoryContextAlloc(held_cxt, n * sizeof(HeldTouch)) :
					repalloc(held_touched, n * sizeof(HeldTouch));
				held_maxtouched = n;
			}
			held_touched[held_ntouched].mark = mark;
			held_touched[held_ntouched].subid = subid;
			held_ntouched++;
		}
	}
	level = &mark->levels[mark->nlevels - 1];
	*level = *state;
	level->subid = subid;
}

/*
 * checked_forget
 *		Forget the mark of resource, as of the current subtransaction: a
 *		rollback of it holds again what was held before.
 */
void
checked_forget(const char *resource)
{
	uint32		hash = checked_hash(resource);
	CheckedLevel forgotten = {0};

	if (held_lookup(resource, hash) == NULL)
		return;
	forgotten.forgotten = true;
	ItemPointerSetInvalid(&forgotten.version);
	checked_remember(resource, hash, &forgotten);
}

typedef struct HeldFlush
{
	void		(*write) (const char *resource, CheckedLevel *level);
} HeldFlush;

static void
held_flush_one(HeldMark *mark, void *arg)
{
	HeldFlush  *flush = arg;

	if (mark->nlevels > 0 && CHECKED_PENDING(&mark->levels[mark->nlevels - 1]))
		flush->write(mark->resource, &mark->levels[mark->nlevels - 1]);
}

/*
 * marks_held_flush
 *		Call write for every mark whose raise is in memory, once every
 *		subtransaction has ended; write stores the raise and updates the
 *		level to say so.
 */
void
marks_held_flush(void (*write) (const char *resource, CheckedLevel *level))
{
	HeldFlush	flush = {write};

	held_generation++;
	held_foreach(held_flush_one, &flush);
}

/*
 * The mark this transaction holds of resource, raises kept in memory
 * included; else the table's, the newest version or the one the snapshot
 * sees.  False if it has none.
 */
static bool
marks_read_held_or(const char *resource, FenceToken *mark, bool newest)
{
	uint32		hash = checked_hash(resource);
	CheckedLevel *held = checked_held(resource, hash);
	MarksRel	m;
	bool		found;

	if (held != NULL)
	{
		*mark = held->token;
		return true;
	}
	marks_open(&m, resource, AccessShareLock);
	if (newest)
	{
		ItemPointerData hint;

		if (!marks_hint_get(hash, &hint))
			ItemPointerSetInvalid(&hint);
		found = marks_fetch_newest_at(&m, &hint, mark);
	}
	else
		found = marks_fetch_visible(&m, mark);
	marks_close(&m);
	return found;
}

/*
 * marks_read
 *		The mark of resource as the current snapshot sees it, without a
 *		lock; false if it has none.  A mark this transaction holds is what
 *		it holds, raises kept in memory included.
 */
bool
marks_read(const char *resource, FenceToken *mark)
{
	return marks_read_held_or(resource, mark, false);
}

/*
 * marks_read_newest
 *		The newest mark of resource, committed or written by a transaction
 *		still in progress, whatever this transaction's snapshot is; without
 *		a lock and without waiting.  False if it has none.
 *
 * For a floor that a new token must exceed (fenced_acquire), a snapshot's
 * mark is not enough: under REPEATABLE READ, or in a statement that waited
 * for a busy lock, a mark raised since the snapshot was taken is missed.
 * A dirty snapshot sees every live version of the row, including those
 * of writers that have not committed (and may yet abort); the highest of
 * them is returned, as a floor can only err on the high side.  Another
 * transaction in progress may hold the mark higher in memory than the
 * version it wrote (marks_check): the floor is then a lower bound, as it
 * is anyway for a transaction yet to raise the mark.  This transaction's
 * own raises in memory are counted.  Preloaded, the version at the address
 * the shared table recorded for the mark is tried before the index
 * (marks_fetch_newest_at): an acquisition reads the mark twice.
 */
bool
marks_read_newest(const char *resource, FenceToken *mark)
{
	return marks_read_held_or(resource, mark, true);
}

/*
 * marks_check_memo
 *		Record, right after marks_check accepted a write of token to a
 *		resource, what marks_check_repeats needs to accept its repeats.
 *
 * The caller keeps the memo with the resource's name, which must be the
 * one marks_check was given.  Once marks_check has accepted, this
 * transaction holds the mark at token, set by it (written) or, not
 * strict, found there; in either case a repeat of the check returns at
 * its first test of what is held (a strict check of an equal mark that
 * an acquisition or fence_advance set has made it this transaction's
 * write), after the floors of acquisitions in progress, which other
 * sessions move at any time.
 */
void
marks_check_memo(MarksRepeat *memo, FenceToken token, bool strict)
{
	memo->valid = true;
	memo->lxid = FencingLocalTransactionId();
	memo->generation = marks_held_generation();
	memo->token = token;
	memo->strict = strict;
}

/*
 * marks_check_repeats
 *		Whether a write of token to resource repeats the check memo
 *		recorded, nothing held by this transaction having changed since;
 *		if so, it is accepted, or rejected below an acquisition's floor as
 *		marks_check would.  A write of many rows to one resource is checked
 *		once, not once per row.
 */
bool
marks_check_repeats(const MarksRepeat *memo, const char *resource,
					FenceToken token, bool strict)
{
	FenceToken	floor;

	if (!memo->valid || memo->token != token || memo->strict != strict ||
		memo->generation != marks_held_generation() ||
		memo->lxid != FencingLocalTransactionId())
		return false;
	if (marks_floor_stale(resource, token, &floor))
		marks_report_stale(resource, NULL, NULL, token, floor);
	return true;
}
