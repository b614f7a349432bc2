/*-------------------------------------------------------------------------
 *
 * lease_takeover.c
 *	  Taking over from a holder stalled past its lease (issue 31): a newer
 *	  holder whose write waits for a transaction that holds the resource's
 *	  mark at an older token, whose lease has ended, ends that transaction;
 *	  the ended holder is told why (TF110).  With the library preloaded.
 *
 * The wait.  A guarded write that must wait for the transaction of another
 * writer of the mark asks here first (marks_stalled_hook, called by
 * marks_look): if the writer is a lease holder of this server whose lease
 * on the resource, at a lower token than the write's, ended by this
 * server's clock more than TAKEOVER_MARGIN_MS ago, and this backend holds
 * the resource's lock under the write's token (a grant Redis made only
 * after the older lease ended there too: a renewal that reached Redis in
 * time makes the newer SET NX fail, a later one fails the owner check),
 * the writer's transaction is ended; the wait polls for its end meanwhile.
 * Leases of fence_use (lease_use.c) are ended alike: such a lease is in
 * the same table, and a newer holder is one whose write's token is the
 * token it declared (fence_use or an acquisition), the proof without a
 * lock service to ask that the lock moved on.
 * Otherwise the write waits as any write does.  A holder whose lease is
 * valid by our clock is never ended (that is logged, once per wait); the
 * wait polls only if that lease ends within TAKEOVER_SOON_MS, and queues
 * otherwise, where PostgreSQL detects deadlocks.
 *
 * Ending a transaction.  Each backend has a slot here.  The first newer
 * holder to decide writes into the stalled holder's slot the transaction
 * it ends, the resource and both tokens, under the slot's spinlock; a
 * second newer holder finds the decision made and waits.  It then cancels
 * the statement (SIGINT), and if the transaction is still open after
 * TAKEOVER_CANCEL_POLLS polls (idle in transaction, or a savepoint that
 * caught the cancel), terminates the backend (SIGTERM), as PostgreSQL's
 * recovery conflicts do: PostgreSQL cannot abort an idle transaction
 * without ending its session.  Each signal is sent under ProcArrayLock,
 * after checking that the process still runs that transaction, which
 * cannot end meanwhile.  A transaction that has begun to commit marked its
 * slot so, under the same spinlock, and is waited for, never signalled;
 * one taken over fails its COMMIT instead.
 *
 * Being told.  The ended holder's emit_log_hook rewrites the cancel's
 * 57014 or the termination's 57P01 into TF110, naming the resource and
 * both tokens, when its slot says its transaction was taken over; its
 * COMMIT, if it gets that far, fails with TF110 too.
 *
 * IDENTIFICATION
 *	  src/lock/lease_takeover.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <signal.h>

#include "access/subtrans.h"
#include "access/transam.h"
#include "access/xact.h"
#include "fencing_errcodes.h"
#include "lock/lock_int.h"
#include "marks/marks.h"
#include "miscadmin.h"
#include "storage/ipc.h"
#include "storage/proc.h"
#include "storage/procarray.h"
#include "storage/shmem.h"
#include "storage/spin.h"
#include "utils/elog.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

/*
 * A lease has ended by our clock this long after its expiry.  The expiry is
 * counted from when the acquisition was sent, before Redis set the key's
 * own, and the newer holder's grant shows that Redis let it go: the margin
 * covers only timer and scheduling slack on this one clock, not the drift
 * between two (a fence_use lease is counted from the call, after its lock
 * service granted it).
 */
#define TAKEOVER_MARGIN_MS		20
/* Polling interval while a stalled holder's transaction ends. */
#define TAKEOVER_POLL_MS		10
/* A valid lease that ends within this is polled for, not queued behind. */
#define TAKEOVER_SOON_MS		1000

/*
 * Polls after the cancel before the backend is terminated: a statement
 * running at top level ends at its next interrupt check, well within
 * these; an idle transaction, which a cancel does not end, costs them.
 */
#define TAKEOVER_CANCEL_POLLS	4

typedef struct TakeoverSlot
{
	slock_t		mutex;
	TransactionId committing;	/* this transaction has begun to commit */
	TransactionId taken;		/* this transaction was taken over */
	int			by_pid;			/* by this newer holder */
	int			polls;			/* its polls since the cancel */
	FenceToken	token;			/* the stalled holder's */
	FenceToken	newer;			/* the newer holder's */
	char		resource[FENCING_RESOURCE_MAX_BYTES + 1];
} TakeoverSlot;

static TakeoverSlot *slots = NULL;

static shmem_request_hook_type prev_shmem_request_hook = NULL;
static shmem_startup_hook_type prev_shmem_startup_hook = NULL;
static emit_log_hook_type prev_emit_log_hook = NULL;

/* The stalled holder whose valid lease this backend logged last. */
static TransactionId logged_valid = InvalidTransactionId;

static Size
takeover_shmem_bytes(void)
{
	return mul_size(MaxBackends, sizeof(TakeoverSlot));
}

static void
takeover_shmem_request(void)
{
	if (prev_shmem_request_hook)
		prev_shmem_request_hook();
	RequestAddinShmemSpace(takeover_shmem_bytes());
}

static void
takeover_shmem_startup(void)
{
	bool		found;

	if (prev_shmem_startup_hook)
		prev_shmem_startup_hook();
	LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
	slots = ShmemInitStruct("fencing takeovers", takeover_shmem_bytes(),
							&found);
	if (!found)
	{
		int			i;

		for (i = 0; i < MaxBackends; i++)
		{
			SpinLockInit(&slots[i].mutex);
			slots[i].committing = InvalidTransactionId;
			slots[i].taken = InvalidTransactionId;
		}
	}
	LWLockRelease(AddinShmemInitLock);
}

/* The slot of proc, a regular backend's; NULL for any other process. */
static TakeoverSlot *
takeover_slot_of(PGPROC *proc)
{
	int			i = proc - ProcGlobal->allProcs;

	return i >= 0 && i < MaxBackends ? &slots[i] : NULL;
}

/*
 * The lease of backend pid on resource in this database, from the shared
 * table of lock holders: its token and its expiry by our clock.  A lease
 * of fenced_acquire or of fence_use (lease_use.c), the higher token's if
 * the backend has both.
 */
static bool
takeover_lease_of(int pid, const char *resource, FenceToken *token,
				  TimestampTz *expires)
{
	int			n = lease_shmem_size();
	int			i;
	bool		found = false;

	for (i = 0; i < n; i++)
	{
		LeaseSlot  *slot = lease_shmem_slot(i);

		SpinLockAcquire(&slot->mutex);
		if (slot->in_use && slot->pid == pid && slot->dbid == MyDatabaseId &&
			strcmp(slot->resource, resource) == 0 &&
			(!found || slot->token > *token))
		{
			*token = slot->token;
			*expires = slot->expires;
			found = true;
		}
		SpinLockRelease(&slot->mutex);
	}
	return found;
}

/*
 * Send sig to pid if it still runs transaction xid, under ProcArrayLock so
 * that the transaction cannot end before the signal arrives.
 */
static void
takeover_signal(int pid, TransactionId xid, int sig)
{
	PGPROC	   *proc;

	LWLockAcquire(ProcArrayLock, LW_SHARED);
	proc = BackendPidGetProcWithLock(pid);
	if (proc != NULL && TransactionIdEquals(proc->xid, xid))
		(void) kill(pid, sig);
	LWLockRelease(ProcArrayLock);
}

/* One LOG line with the pid, the resource and both tokens. */
static void
takeover_log(int pid, const char *resource, FenceToken token,
			 FenceToken newer, const char *what)
{
	char		old_text[FENCE_TOKEN_TEXT_LEN];
	char		new_text[FENCE_TOKEN_TEXT_LEN];

	ereport(LOG,
			(errmsg("%s the transaction of process %d, whose lease on resource \"%s\" (token %s) has ended, for the holder of token %s",
					what, pid, resource,
					fence_token_to_cstring(token, old_text),
					fence_token_to_cstring(newer, new_text))));
}

/*
 * Decide on, or carry on with, ending the transaction xid of backend pid,
 * holder of resource at token, for this holder of newer; 0 if it is not to
 * be ended (committing, or decided by another holder) and the caller
 * waits, else the poll interval.
 */
static int
takeover_end(PGPROC *proc, int pid, TransactionId xid, const char *resource,
			 FenceToken token, FenceToken newer)
{
	TakeoverSlot *slot = takeover_slot_of(proc);
	bool		decided = false;
	int			polls = 0;

	if (slot == NULL)
		return 0;
	SpinLockAcquire(&slot->mutex);
	if (TransactionIdEquals(slot->committing, xid))
	{
		SpinLockRelease(&slot->mutex);
		return TAKEOVER_POLL_MS;	/* committing: wait for it */
	}
	if (!TransactionIdEquals(slot->taken, xid))
	{
		slot->taken = xid;
		slot->by_pid = MyProcPid;
		slot->polls = 0;
		slot->token = token;
		slot->newer = newer;
		strlcpy(slot->resource, resource, sizeof(slot->resource));
		decided = true;
	}
	else if (slot->by_pid == MyProcPid)
		polls = ++slot->polls;
	else
		polls = -1;				/* another holder's decision */
	SpinLockRelease(&slot->mutex);

	if (decided)
	{
		takeover_log(pid, resource, token, newer, "canceling");
		takeover_signal(pid, xid, SIGINT);
	}
	else if (polls == TAKEOVER_CANCEL_POLLS)
	{
		takeover_log(pid, resource, token, newer, "terminating");
		takeover_signal(pid, xid, SIGTERM);
	}
	return TAKEOVER_POLL_MS;
}

/*
 * takeover_wait_policy
 *		marks_stalled_hook: this backend's write of token to resource waits
 *		for transaction xid, which holds the mark.  The poll interval if
 *		that transaction is being ended (or a decision is pending: a lease
 *		about to end by our clock), else 0: wait for it as for any writer.
 */
static int
takeover_wait_policy(const char *resource, FenceToken newer,
					 TransactionId xid)
{
	Lease	   *mine = lease_lookup(resource);
	TransactionId top;
	PGPROC	   *proc;
	int			pid;
	FenceToken	token = 0;
	TimestampTz expires = 0;
	long		left;

	if (slots == NULL ||
		!((mine != NULL && mine->held && mine->token == newer) ||
		  use_lease_newer_holder(resource, newer)))
		return 0;
	top = SubTransGetTopmostTransaction(xid);
	proc = BackendPidGetProc(pid = BackendXidGetPid(top));
	if (pid == 0 || proc == NULL ||
		!takeover_lease_of(pid, resource, &token, &expires) || token >= newer)
		return 0;
	left = TimestampDifferenceMilliseconds(GetCurrentTimestamp(),
										   TimestampTzPlusMilliseconds(expires, TAKEOVER_MARGIN_MS));
	if (left > 0)
	{
		if (!TransactionIdEquals(logged_valid, top))
		{
			char		old_text[FENCE_TOKEN_TEXT_LEN];
			char		new_text[FENCE_TOKEN_TEXT_LEN];

			logged_valid = top;
			ereport(LOG,
					(errmsg("not ending the transaction of process %d, whose lease on resource \"%s\" (token %s) is still valid by this server's clock, for the holder of token %s",
							pid, resource,
							fence_token_to_cstring(token, old_text),
							fence_token_to_cstring(newer, new_text)),
					 errdetail("The lease ends in %ld ms by this server's clock; the lock service granted the lock before that.",
							   left)));
		}
		/*
		 * About to end: poll until it has.  Else wait in the lock queue,
		 * where deadlocks are detected, as for any writer: the lock service
		 * (Redis, or the one behind fence_use) granted this lock early by
		 * our clock (a key deleted, a clock stepped).
		 */
		return left <= TAKEOVER_SOON_MS ? (int) left : 0;
	}
	return takeover_end(proc, pid, top, resource, token, newer);
}

/* This backend's slot, if it has one. */
static TakeoverSlot *
takeover_my_slot(void)
{
	return slots != NULL && MyProc != NULL ? takeover_slot_of(MyProc) : NULL;
}

/*
 * The ended holder's own report: a cancel or termination of a transaction
 * taken over is TF110, naming the resource and both tokens.
 */
static void
takeover_emit_log(ErrorData *edata)
{
	TakeoverSlot *slot = takeover_my_slot();
	TransactionId xid = GetTopTransactionIdIfAny();

	if (slot != NULL && edata->elevel >= ERROR && TransactionIdIsValid(xid) &&
		(edata->sqlerrcode == ERRCODE_QUERY_CANCELED ||
		 edata->sqlerrcode == ERRCODE_ADMIN_SHUTDOWN) &&
		TransactionIdEquals(slot->taken, xid))
	{
		MemoryContext old = MemoryContextSwitchTo(ErrorContext);
		char		old_text[FENCE_TOKEN_TEXT_LEN];
		char		new_text[FENCE_TOKEN_TEXT_LEN];

		edata->sqlerrcode = ERRCODE_FENCING_TAKEN_OVER;
		edata->message = psprintf("the lock on resource \"%s\" was taken over: this transaction is ended",
								  slot->resource);
		edata->detail = psprintf("Its lease (token %s) ended, and the holder of token %s waited for this transaction.",
								 fence_token_to_cstring(slot->token, old_text),
								 fence_token_to_cstring(slot->newer, new_text));
		edata->hint = pstrdup("Acquire the lock again for a new token, and read again what it protects.");
		MemoryContextSwitchTo(old);
	}
	if (prev_emit_log_hook)
		prev_emit_log_hook(edata);
}

/*
 * Before this transaction commits: fail if it was taken over, else mark it
 * committing, after which nobody signals it.  At its end: clear both.
 */
static void
takeover_xact_callback(XactEvent event, void *arg)
{
	TakeoverSlot *slot = takeover_my_slot();
	TransactionId xid = GetTopTransactionIdIfAny();
	bool		taken = false;

	if (slot == NULL)
		return;
	switch (event)
	{
		case XACT_EVENT_PRE_COMMIT:
		case XACT_EVENT_PRE_PREPARE:
			if (!TransactionIdIsValid(xid))
				return;
			SpinLockAcquire(&slot->mutex);
			if (TransactionIdEquals(slot->taken, xid))
				taken = true;
			else
				slot->committing = xid;
			SpinLockRelease(&slot->mutex);
			if (taken)
			{
				char		old_text[FENCE_TOKEN_TEXT_LEN];
				char		new_text[FENCE_TOKEN_TEXT_LEN];

				ereport(ERROR,
						(errcode(ERRCODE_FENCING_TAKEN_OVER),
						 errmsg("the lock on resource \"%s\" was taken over: this transaction is ended",
								slot->resource),
						 errdetail("Its lease (token %s) ended, and the holder of token %s waited for this transaction.",
								   fence_token_to_cstring(slot->token, old_text),
								   fence_token_to_cstring(slot->newer, new_text)),
						 errhint("Acquire the lock again for a new token, and read again what it protects.")));
			}
			break;
		case XACT_EVENT_COMMIT:
		case XACT_EVENT_ABORT:
		case XACT_EVENT_PREPARE:
			SpinLockAcquire(&slot->mutex);
			slot->committing = InvalidTransactionId;
			slot->taken = InvalidTransactionId;
			SpinLockRelease(&slot->mutex);
			break;
		default:
			break;
	}
}

/*
 * lease_takeover_init
 *		When the library is preloaded, reserve the slots and install the
 *		hooks; called from _PG_init.
 */
void
lease_takeover_init(void)
{
	if (!process_shared_preload_libraries_in_progress)
		return;
	prev_shmem_request_hook = shmem_request_hook;
	shmem_request_hook = takeover_shmem_request;
	prev_shmem_startup_hook = shmem_startup_hook;
	shmem_startup_hook = takeover_shmem_startup;
	prev_emit_log_hook = emit_log_hook;
	emit_log_hook = takeover_emit_log;
	marks_stalled_hook = takeover_wait_policy;
	RegisterXactCallback(takeover_xact_callback, NULL);
}
