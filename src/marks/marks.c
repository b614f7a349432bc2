/*-------------------------------------------------------------------------
 *
 * marks.c
 *	  High-water marks: the highest token accepted per resource, checked
 *	  and raised (rejections are reported by marks_report.c).
 *
 * The marks live in the extension's table fence_high_water, one row per
 * resource (marks_table.c finds and reads it, marks_write.c writes it).
 * A write with token T to resource R finds the newest version of R's row
 * and
 *
 * - if the mark is below T, updates it to T;
 * - if it is at or above T, locks it (FOR NO KEY UPDATE) and compares;
 * - if there is none, inserts it.
 *
 * In every case the row stays locked by the writing transaction until it
 * ends.  Two writers of one resource therefore serialize on that row, the
 * later one sees the earlier one's committed mark, and a rollback takes
 * the raise back with it.  This is what INSERT ... ON CONFLICT DO UPDATE
 * ... WHERE mark < T does.  As ON CONFLICT does, a mark moved by a
 * transaction that our REPEATABLE READ or SERIALIZABLE snapshot cannot
 * see is a serialization failure.  Two first writes to one resource must
 * not both insert: before inserting, a writer takes a heavyweight lock on
 * the resource name's hash and looks again, holding the lock until its
 * row is in the index, where the second writer's look finds it and waits
 * for the first to commit.
 *
 * A transaction writes each mark at most twice.  Once it has created a
 * version of the mark, no one else can write the row before it ends, so
 * later raises are kept in memory per subtransaction level (marks_held.c)
 * and the last is written at pre-commit, after the deferred triggers, or
 * at PREPARE.  Its own checks and reads answer from memory; others see the
 * version written, a lower bound, and wait for the row lock as before.  An
 * acquisition's raise is always written.  A first write in a transaction
 * tries the address the shared hint table (marks_cache.c) last recorded,
 * taken only once marks_fetch has checked it; else the mark is looked up.
 *
 * moved_at says when a mark was created or last raised, and also, to
 * within MARK_REFRESH_INTERVAL, when it was last written at its own token:
 * such a write refreshes it when it is older than that, so that a
 * resource written for hours at one token does not look idle to
 * fence_forget_idle().  A raise stamps the transaction's start time and a
 * refresh one microsecond less, which is how strict mode tells a mark
 * this transaction raised from one it only refreshed.
 *
 * set_by says what set the mark's token: an acquisition, fence_advance or
 * a guarded write (MARK_SET_BY_*).  Strict mode rejects an equal token
 * only after a write: the first write at a token that an acquisition or
 * fence_advance set, from any session, is accepted and records itself
 * (set_by becomes a write, moved_at the transaction's start, as a raise),
 * so that the next transaction's write at that token is rejected.  A
 * version this transaction created records it at pre-commit, with its
 * raises kept in memory.  Written in the row, it survives a restart and
 * is seen from every backend, as a pool moves a holder between them.
 *
 * IDENTIFICATION
 *	  src/marks/marks.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "commands/extension.h"
#include "fencing_errcodes.h"
#include "marks/marks.h"
#include "marks/marks_int.h"
#include "miscadmin.h"
#include "stats/stats.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"

/*
 * A write at a mark's own token refreshes moved_at when it is older than
 * this: at most one HOT update of the mark a minute, instead of a lock.
 */
#define MARK_REFRESH_INTERVAL	((int64) 60 * USECS_PER_SEC)

/* What marks_claim should do with the mark it finds. */
typedef enum ClaimMode
{
	CLAIM_CHECK,				/* raise to the token, or reject if above */
	CLAIM_CHECK_STRICT,			/* the same, rejecting an equal mark too */
	CLAIM_ADVANCE,				/* raise to the token, never reject */
	CLAIM_STORE					/* the same, writing a raise kept in memory */
} ClaimMode;

/* What marks_claim found and did. */
typedef struct MarksClaim
{
	FenceToken	mark;			/* the mark, as this transaction holds it */
	bool		written;		/* set by this transaction, not found */
	bool		own;			/* version created by this transaction */
	char		set_by;			/* what set the token stored in version */
	FenceToken	stored;			/* the token stored in version */
	ItemPointerData version;	/* the live version, ours or locked */
} MarksClaim;

static void marks_xact_callback(XactEvent event, void *arg);

/* The pre-commit writes of raises kept in memory are done (see below). */
static bool stored_all = false;

/*
 * marks_at_xact_end
 *		Forget what this transaction checked and held (marks_held.c);
 *		called when a transaction ends, whichever way.
 */
void
marks_at_xact_end(void)
{
	marks_held_at_xact_end();
	stored_all = false;
}

/*
 * marks_init
 *		Register the callbacks of the marks held and the hint table;
 *		called from _PG_init.
 */
void
marks_init(void)
{
	RegisterXactCallback(marks_xact_callback, NULL);
	marks_held_init();
	marks_kept_init();
	marks_floor_init(marks_raise_for_holder);
	marks_hint_init();
}

/*
 * marks_claim
 *		Create, raise or lock the mark of m's resource for token.
 *
 * set_by is what a version written sets (MARK_SET_BY_*); a write
 * (MARK_SET_BY_WRITE) at a mark that an acquisition or fence_advance of
 * another transaction set records itself in it, and is accepted by strict
 * mode too.
 *
 * Returns true when the write is accepted, with the mark at token and
 * locked by this transaction; false when the mark is above token (or
 * equal, in strict mode), with c->mark set and the row still locked.  c
 * says what the transaction now holds: whether it set the mark, whether it
 * created the live version (which no one else can then write before it
 * ends), the token stored there.  A raise of a version this transaction
 * created is not written but left in c, for the caller to keep in memory
 * (marks_held.c), except by CLAIM_STORE, which writes it at pre-commit.
 *
 * One loop, as execReplication.c's RelationFindReplTupleByIndex: look
 * (waiting for writers in progress), act on what was found, and look
 * again if the row changed in between.  The first look goes straight to
 * hint, when valid, the live version this transaction last knew of: if it
 * still is, the index lookup is saved; if not, the mark is looked up.  A
 * hint from the shared table (hint_shared, marks_cache.c) may point
 * anywhere.
 */
static bool
marks_claim(MarksRel *m, FenceToken token, ClaimMode mode, char set_by,
			FenceToken max_step, ItemPointer hint, bool hint_shared,
			MarksClaim *c)
{
	MarksInsertLock insert_lock = {0};
	HeapTuple	tuple;
	TM_Result	result;
	MarksWait	wait = {token, 0, true};

	for (;;)
	{
		MarksLook	look;

		if (hint != NULL && ItemPointerIsValid(hint) &&
			marks_fetch(m, hint, hint_shared, &tuple))
			look = MARKS_FOUND;
		else
			look = marks_look(m, mode >= CLAIM_ADVANCE ? NULL : &wait, &tuple);
		hint = NULL;
		if (look == MARKS_NEWER_IN_PROGRESS)
		{
			/* Stale, whatever the writer in progress does: see marks_look. */
			marks_insert_unlock(&insert_lock);
			c->mark = marks_token_of(m, tuple);
			c->written = c->own = false;
			ItemPointerSetInvalid(&c->version);
			return false;
		}
		if (look == MARKS_NONE)
		{
			/* No mark yet: lock out other first inserters, and look again. */
			if (marks_insert_lock(m, &insert_lock))
				continue;
			marks_insert(m, token, set_by, &c->version);
			marks_insert_unlock(&insert_lock);
			c->mark = c->stored = token;
			c->written = c->own = true;
			c->set_by = set_by;
			if (mode != CLAIM_STORE)
				stats_count(STATS_MARKS_RAISED);
			break;
		}
		marks_insert_unlock(&insert_lock);

		c->stored = marks_token_of(m, tuple);
		c->own = marks_written_here(tuple);
		c->set_by = marks_set_by_of(m, tuple);
		c->version = tuple->t_self;
		if (c->stored < token && max_step > 0 && token - c->stored > max_step)
		{
			/* Too far above the mark: refused by the caller (TF011). */
			c->mark = c->stored;
			c->written = false;
			return false;
		}
		if (c->stored < token && c->own && mode != CLAIM_STORE && !stored_all)
		{
			/* Ours already, and locked by that: raised in memory. */
			c->mark = token;
			c->written = true;
			stats_count(STATS_MARKS_RAISED);
			break;
		}
		if (c->stored < token)
		{
			result = marks_raise(m, tuple, token,
								 GetCurrentTransactionStartTimestamp(),
								 set_by, &c->version);
			if (result == TM_Ok)
			{
				c->mark = c->stored = token;
				c->written = c->own = true;
				c->set_by = set_by;
				if (mode != CLAIM_STORE)
					stats_count(STATS_MARKS_RAISED);
				break;
			}
		}
		else if (set_by == MARK_SET_BY_WRITE && c->set_by != MARK_SET_BY_WRITE &&
				 c->stored == token &&
				 (!c->own || mode == CLAIM_STORE || stored_all))
		{
			/*
			 * The first write at a token that an acquisition or fence_advance
			 * set: record it, which locks the mark too.  (In a version of
			 * ours, at pre-commit, with the raises kept in memory.)
			 */
			result = marks_raise(m, tuple, token,
								 GetCurrentTransactionStartTimestamp(),
								 MARK_SET_BY_WRITE, &c->version);
			if (result == TM_Ok)
			{
				c->mark = token;
				c->written = c->own = true;
				c->set_by = MARK_SET_BY_WRITE;
				break;
			}
		}
		else if (mode == CLAIM_CHECK && c->stored == token && !c->own &&
				 marks_moved_at(m, tuple) <
				 GetCurrentTransactionStartTimestamp() - MARK_REFRESH_INTERVAL)
		{
			/* A write at the mark's token: refresh it, which locks it too. */
			result = marks_raise(m, tuple, token,
								 GetCurrentTransactionStartTimestamp() - 1,
								 c->set_by, &c->version);
			if (result == TM_Ok)
			{
				c->mark = token;
				c->written = false;
				c->own = true;
				break;
			}
		}
		else
		{
			/* A version of ours is locked by us already. */
			result = c->own ? TM_Ok : marks_lock(m, tuple);
			if (result == TM_Ok)
			{
				c->mark = c->stored;
				c->written = marks_raised_here(m, tuple);
				break;
			}
		}
		marks_before_retry(m, result);
	}

	/* Later lookups in this transaction must see what we wrote or locked. */
	CommandCounterIncrement();

	/*
	 * Strict mode accepts an equal mark from the transaction that set it,
	 * by a write or by recording its write above.
	 */
	return c->mark == token && (mode != CLAIM_CHECK_STRICT || c->written);
}

/*
 * marks_claim_for_holder
 *		Raise the mark of m's resource to the token an acquisition has just
 *		been issued, creating it if need be; see marks_raise_for_holder.
 *
 * The loop of marks_claim, with a bounded wait for writers in progress
 * and without serialization failures: the raise rejects nothing, so it
 * may act on the newest version whatever the snapshot sees.  The raise is
 * always written, also over a version this transaction created.  The
 * first look goes to hint, an address from the shared table or invalid,
 * as marks_claim's does.
 */
static MarksAcquireResult
marks_claim_for_holder(MarksRel *m, FenceToken token, TimestampTz deadline,
					   ItemPointer hint, ItemPointer version)
{
	MarksInsertLock insert_lock = {0};
	HeapTuple	tuple;
	TM_Result	result;
	MarksWait	wait = {token, deadline, false};

	for (;;)
	{
		MarksLook	look;

		if (hint != NULL && ItemPointerIsValid(hint) &&
			marks_fetch_newest_version(m, hint, &tuple))
			look = MARKS_FOUND;
		else
			look = marks_look(m, &wait, &tuple);
		hint = NULL;

		if (look == MARKS_NONE)
		{
			if (marks_insert_lock(m, &insert_lock))
				continue;
			marks_insert(m, token, MARK_SET_BY_ACQUIRE, version);
			marks_insert_unlock(&insert_lock);
			return MARKS_ACQUIRE_RAISED;
		}
		marks_insert_unlock(&insert_lock);
		if (look == MARKS_TIMED_OUT)
			return MARKS_ACQUIRE_BUSY;
		if (look == MARKS_NEWER_IN_PROGRESS || marks_token_of(m, tuple) >= token)
			return MARKS_ACQUIRE_ABOVE;

		result = marks_raise(m, tuple, token,
							 GetCurrentTransactionStartTimestamp(),
							 MARK_SET_BY_ACQUIRE, version);
		if (result == TM_Ok)
			return MARKS_ACQUIRE_RAISED;
		if (result != TM_Updated && result != TM_Deleted)
			elog(ERROR, "unexpected result %d writing high-water mark of resource \"%s\"",
				 (int) result, m->resource);
	}
}

/*
 * Where to look first for the mark of the resource of hash: the live
 * version this transaction holds (held), else the address the shared
 * table recorded; invalid if neither.
 */
static void
marks_hint_for(uint32 hash, CheckedLevel *held, ItemPointer hint)
{
	if (held != NULL)
		*hint = held->version;
	else if (!marks_hint_get(hash, hint))
		ItemPointerSetInvalid(hint);
}

/*
 * Claim the mark of resource, of hash, as marks_claim does, looking first
 * where it was last seen: at the live version held, if this transaction
 * holds the mark (held), else at the address the shared table recorded.
 * Records where the mark is now.
 */
static bool
marks_claim_resource(const char *resource, uint32 hash, CheckedLevel *held,
					 FenceToken token, ClaimMode mode, char set_by,
					 FenceToken max_step, MarksClaim *c)
{
	MarksRel	m;
	ItemPointerData hint;
	bool		accepted;

	marks_hint_for(hash, held, &hint);
	marks_open(&m, resource, RowExclusiveLock);
	accepted = marks_claim(&m, token, mode, set_by, max_step, &hint,
						   held == NULL, c);
	marks_close(&m);
	marks_hint_put(hash, &c->version);
	return accepted;
}

/*
 * Remember what this transaction holds of the mark of resource after c;
 * used: a write was accepted at the mark.
 */
static void
marks_remember(const char *resource, uint32 hash, const MarksClaim *c,
			   bool used)
{
	CheckedLevel level = {0};

	level.written = c->written;
	level.own = c->own;
	level.used = used;
	level.set_by = c->set_by;
	level.token = c->mark;
	level.stored = c->stored;
	level.version = c->version;
	checked_remember(resource, hash, &level);
}

/*
 * Whether marks_store has taken a snapshot for this pre-commit's writes,
 * and found the extension dropped.  Once they are done (stored_all), a
 * raise by a later pre-commit callback is written at once.
 */
static bool store_snapshot = false;
static bool store_gone = false;

static void marks_store(const char *resource, CheckedLevel *level);

/*
 * Raise the mark held to token, above its token, in memory: the version
 * this transaction created stays locked by it until it ends, and the raise
 * is written at pre-commit (marks_xact_callback), or undone in memory by a
 * rollback of the subtransaction.
 */
static void
marks_raise_in_memory(const char *resource, uint32 hash,
					  const CheckedLevel *held, FenceToken token, bool used)
{
	CheckedLevel raised = *held;

	raised.token = token;
	raised.written = true;
	raised.used = used;
	if (stored_all)
	{
		marks_store(resource, &raised);
		PopActiveSnapshot();
		store_snapshot = false;
	}
	checked_remember(resource, hash, &raised);
	stats_count(STATS_MARKS_RAISED);
}

/*
 * Write the raise in memory of the mark of resource, held as level, to its
 * version (a new one if a statement deleted that by hand), as stored: set
 * by a write if one used it, else by the fence_advance that raised it.
 */
static void
marks_store(const char *resource, CheckedLevel *level)
{
	MarksRel	m;
	MarksClaim	c;

	if (!store_snapshot)
	{
		/* What the last command wrote must be visible to the update. */
		CommandCounterIncrement();
		PushActiveSnapshot(GetTransactionSnapshot());
		store_snapshot = true;
		/* Dropped with the extension by this transaction: nothing to keep. */
		store_gone = !OidIsValid(get_extension_oid("fencing", true));
	}
	if (store_gone)
		return;
	marks_open(&m, resource, RowExclusiveLock);
	(void) marks_claim(&m, level->token, CLAIM_STORE,
					   level->used ? MARK_SET_BY_WRITE :
					   level->token > level->stored ? MARK_SET_BY_ADVANCE :
					   level->set_by,
					   0, &level->version, false, &c);
	marks_close(&m);
	level->stored = c.mark;
	level->set_by = c.set_by;
	level->version = c.version;
}

/*
 * Write every raise this transaction kept in memory, once its deferred
 * triggers have run: at pre-commit, and at PREPARE TRANSACTION, after
 * which COMMIT PREPARED writes nothing more.
 */
static void
marks_xact_callback(XactEvent event, void *arg)
{
	if (event != XACT_EVENT_PRE_COMMIT && event != XACT_EVENT_PRE_PREPARE)
		return;
	store_snapshot = false;
	marks_held_flush(marks_store);
	if (store_snapshot)
		PopActiveSnapshot();
	store_snapshot = false;
	stored_all = true;
}

/*
 * marks_check
 *		Accept a write of token to resource, or reject it with
 *		ERRCODE_FENCING_STALE_TOKEN.
 *
 * On return the mark is at token and locked by this transaction.  With
 * strict, a token equal to a mark left by another transaction is stale
 * too.  With max_step (not 0), a token more than that above the mark is
 * rejected with ERRCODE_FENCING_TOKEN_STEP.  A mark this transaction holds
 * is answered from memory: it is locked, so no one else can have moved it.
 * With strict, an equal mark that an acquisition or fence_advance set (in
 * any session) is accepted once, the first write recording itself.
 */
void
marks_check(const char *resource, FenceToken token, bool strict,
			FenceToken max_step)
{
	uint32		hash = checked_hash(resource);
	CheckedLevel *held = checked_held(resource, hash);
	MarksClaim	c;
	FenceToken	floor;
	bool		accepted;

	/*
	 * Below the token of an acquisition in progress: stale at once, whether
	 * or not that transaction commits, since the newer token's lease
	 * exists (marks_floor.c).  Checked before what this transaction holds,
	 * which an acquisition elsewhere does not lock out.
	 */
	if (marks_floor_stale(resource, token, &floor))
		marks_report_stale(resource, NULL, NULL, token, floor);

	/*
	 * A mark this transaction holds at token, set by an acquisition or
	 * fence_advance and locked only, is recorded as written by the claim
	 * below; any other is answered from memory.
	 */
	if (held != NULL &&
		!(held->token == token && held->stored == token && !held->own &&
		  held->set_by != MARK_SET_BY_WRITE))
	{
		/*
		 * Strict mode accepts an equal mark only from the transaction that
		 * set it, which a check that merely found the mark at the token
		 * did not.  A version of ours records the write at pre-commit.
		 */
		if (held->token == token && (held->written || !strict))
		{
			if (!held->used)
			{
				CheckedLevel used = *held;

				used.used = true;
				checked_remember(resource, hash, &used);
			}
			return;
		}
		if (token <= held->token)
			marks_report_stale(resource, NULL, NULL, token, held->token);
		if (max_step > 0 && token - held->token > max_step)
			marks_report_step(resource, token, held->token, max_step);
		if (held->own)
		{
			marks_raise_in_memory(resource, hash, held, token, true);
			return;
		}
	}

	/* A temporary table is writable in a read-only transaction; marks are not. */
	PreventCommandIfReadOnly("fence_guard()");

	accepted = marks_claim_resource(resource, hash, held, token,
									strict ? CLAIM_CHECK_STRICT : CLAIM_CHECK,
									MARK_SET_BY_WRITE, max_step, &c);
	if (!accepted)
	{
		if (max_step > 0 && token > c.mark && token - c.mark > max_step)
			marks_report_step(resource, token, c.mark, max_step);
		marks_report_stale(resource, NULL, NULL, token, c.mark);
	}
	marks_remember(resource, hash, &c, true);
}

/*
 * marks_raise_for_holder
 *		Raise the mark of resource to token, just issued to a lock holder,
 *		in the calling transaction: from then on every older token is stale
 *		for the resource, before the holder writes anything.
 *
 * MARKS_ACQUIRE_BUSY when another transaction's write of the mark
 * outlasted deadline; MARKS_ACQUIRE_ABOVE when the mark is at or above
 * token already (or being set above it, by this transaction too), the
 * token then being no newer than one the database has heard of.  On
 * MARKS_ACQUIRE_RAISED the mark is at token, written (never only in
 * memory: others see it in progress), locked and remembered as set by
 * this transaction, so that the holder's writes at token need no lookup.
 */
MarksAcquireResult
marks_raise_for_holder(const char *resource, FenceToken token,
					   TimestampTz deadline)
{
	uint32		hash = checked_hash(resource);
	CheckedLevel *held = checked_held(resource, hash);
	MarksRel	m;
	MarksAcquireResult result;
	MarksClaim	c = {0};
	ItemPointerData hint;

	if (held != NULL && held->token >= token)
		return MARKS_ACQUIRE_ABOVE;
	ItemPointerSetInvalid(&c.version);
	marks_hint_for(hash, held, &hint);
	marks_open(&m, resource, RowExclusiveLock);
	result = marks_claim_for_holder(&m, token, deadline, &hint, &c.version);
	marks_close(&m);
	if (result != MARKS_ACQUIRE_RAISED)
		return result;

	stats_count(STATS_MARKS_RAISED);
	CommandCounterIncrement();
	marks_hint_put(hash, &c.version);
	c.mark = c.stored = token;
	c.written = c.own = true;
	c.set_by = MARK_SET_BY_ACQUIRE;
	marks_remember(resource, hash, &c, false);
	return result;
}

/*
 * marks_advance
 *		Raise the mark of resource to token, never lowering it; returns
 *		the mark.  Kept in memory, as marks_check's raises, when this
 *		transaction created the mark's version.  write: the raise stands
 *		for writes made elsewhere (the subscriber of a publisher that
 *		wrote, fence_attach seeding from rows written), which strict mode
 *		counts as such; else it is fence_advance's.
 */
FenceToken
marks_advance(const char *resource, FenceToken token, bool write)
{
	uint32		hash = checked_hash(resource);
	CheckedLevel *held = checked_held(resource, hash);
	MarksClaim	c;
	char		set_by = write ? MARK_SET_BY_WRITE : MARK_SET_BY_ADVANCE;

	if (held != NULL && held->token >= token)
		return held->token;
	if (held != NULL && held->own)
	{
		marks_raise_in_memory(resource, hash, held, token, write);
		return token;
	}
	(void) marks_claim_resource(resource, hash, held, token, CLAIM_ADVANCE,
								set_by, 0, &c);

	/* This transaction now holds the mark, raised to token or above it. */
	marks_remember(resource, hash, &c, write && c.mark == token);
	return c.mark;
}

/*
 * marks_forget
 *		Delete the mark of resource; true if it had one.  A raise this
 *		transaction kept in memory goes with it, unless the subtransaction
 *		rolls back.
 */
bool
marks_forget(const char *resource)
{
	MarksRel	m;
	HeapTuple	tuple;
	bool		found;

	marks_open(&m, resource, RowExclusiveLock);
	for (;;)
	{
		TM_Result	result;

		found = marks_find(&m, &tuple);
		if (!found)
			break;
		result = marks_delete(&m, tuple);
		if (result == TM_Ok)
			break;
		marks_before_retry(&m, result);
	}
	marks_close(&m);
	CommandCounterIncrement();

	checked_forget(resource);
	return found;
}
