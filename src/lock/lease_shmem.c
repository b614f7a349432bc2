/*-------------------------------------------------------------------------
 *
 * lease_shmem.c
 *	  The shared table of every backend's leases, with the library in
 *	  shared_preload_libraries: what fenced_lock_holders shows, and what
 *	  the renewer (lease_renewer.c) renews.
 *
 * fencing.max_leases slots, fixed at server start.  Each backend lists
 * its leases there as it acquires them and takes them out as they end
 * (release, the transaction's end, DISCARD ALL, exit), besides keeping its
 * own map (lease_table.c), which stays the one it acts on.  Each slot has
 * a spinlock, and a generation that changes whenever the slot stops
 * describing the lease it did: the renewer copies a slot, renews in Redis
 * without any lock held, and writes the outcome back only if the
 * generation is still the one it read.  A free list under the table's
 * spinlock makes taking a slot O(1).
 *
 * A slot is reserved before Redis is asked for the lock, so that a full
 * table fails renew => true before a lock is taken, and a plain
 * acquisition that finds none goes on unlisted.  A backend keeps at most
 * one reserved slot between acquisitions (an acquisition that failed
 * leaves it for the next), given back at exit.
 *
 * The renewer connects with the server's configuration, not a session's
 * (ALTER DATABASE, ALTER ROLE, SET): it publishes a fingerprint of its
 * Redis settings (redis_settings_fingerprint) as it starts and after each
 * reload, and renew => true is refused before the lock is taken where the
 * session's differs, which would have the lease renewed against another
 * server, found "not ours", and silently left to expire.
 *
 * The leases of fence_use(resource, token, lease => ...) are listed here
 * too (declared), for the takeover to find (lease_use.c, lease_takeover.c)
 * and fenced_lock_holders to show; the renewer leaves them out.
 *
 * Without preloading there is no table: fenced_lock_holders shows the
 * calling backend's map, and renew => true is refused.
 *
 * IDENTIFICATION
 *	  src/lock/lease_shmem.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <limits.h>

#include "core/core.h"
#include "fencing_errcodes.h"
#include "lock/lock_int.h"
#include "miscadmin.h"
#include "redis/redis.h"
#include "storage/ipc.h"
#include "storage/lwlock.h"
#include "storage/shmem.h"
#include "utils/backend_status.h"
#include "utils/guc.h"
#include "utils/timestamp.h"
#include "utils/wait_event.h"

/*
 * How long renew => true waits for the renewer to publish settings that
 * match the session's: its first start, or a reload it has not processed
 * yet.  Polled, since the renewer has no way to wake the waiters.
 */
#define LEASE_SETTINGS_WAIT_MS		2000
#define LEASE_SETTINGS_POLL_MS		10

/* fencing.max_leases */
static int	max_leases = 1024;

typedef struct LeaseShared
{
	slock_t		mutex;			/* first_free, the slots' next_free, renewer,
								 * settings */
	int			first_free;		/* -1: none */
	Latch	   *renewer;		/* the renewer's latch, NULL when none runs */
	bool		settings_published; /* settings is set */
	uint64		settings;		/* the renewer's redis_settings_fingerprint */
	LeaseSlot	slots[FLEXIBLE_ARRAY_MEMBER];
} LeaseShared;

static LeaseShared *shared = NULL;

/* The slot this backend reserved and has not used yet, -1 if none. */
static int	reserved = -1;

static shmem_request_hook_type prev_shmem_request_hook = NULL;
static shmem_startup_hook_type prev_shmem_startup_hook = NULL;

static Size
lease_shmem_bytes(void)
{
	return add_size(offsetof(LeaseShared, slots),
					mul_size(max_leases, sizeof(LeaseSlot)));
}

static void
lease_shmem_request(void)
{
	if (prev_shmem_request_hook)
		prev_shmem_request_hook();
	RequestAddinShmemSpace(lease_shmem_bytes());
}

static void
lease_shmem_startup(void)
{
	bool		found;

	if (prev_shmem_startup_hook)
		prev_shmem_startup_hook();
	LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
	shared = ShmemInitStruct("fencing leases", lease_shmem_bytes(), &found);
	if (!found)
	{
		int			i;

		SpinLockInit(&shared->mutex);
		shared->renewer = NULL;
		shared->settings_published = false;
		shared->settings = 0;
		shared->first_free = max_leases > 0 ? 0 : -1;
		for (i = 0; i < max_leases; i++)
		{
			LeaseSlot  *slot = &shared->slots[i];

			SpinLockInit(&slot->mutex);
			slot->generation = 0;
			slot->in_use = false;
			slot->next_free = i + 1 < max_leases ? i + 1 : -1;
		}
	}
	LWLockRelease(AddinShmemInitLock);
}

/*
 * lease_shmem_init
 *		When the library is preloaded, define fencing.max_leases and
 *		reserve the table; called from _PG_init.
 */
void
lease_shmem_init(void)
{
	if (!process_shared_preload_libraries_in_progress)
		return;
	DefineCustomIntVariable("fencing.max_leases",
							"Leases the shared table of lock holders has room for.",
							"Used only with the library in shared_preload_libraries.  A lease that finds it full is not shown in fenced_lock_holders, and cannot be renewed.",
							&max_leases,
							1024, 1, 1024 * 1024,
							PGC_POSTMASTER, 0,
							NULL, NULL, NULL);
	prev_shmem_request_hook = shmem_request_hook;
	shmem_request_hook = lease_shmem_request;
	prev_shmem_startup_hook = shmem_startup_hook;
	shmem_startup_hook = lease_shmem_startup;
}

/* Whether the table exists: the library was preloaded. */
bool
lease_shmem_enabled(void)
{
	return shared != NULL;
}

int
lease_shmem_size(void)
{
	return shared ? max_leases : 0;
}

LeaseSlot *
lease_shmem_slot(int i)
{
	return &shared->slots[i];
}

/* The renewer announces its latch (NULL as it exits). */
void
lease_shmem_set_renewer(Latch *latch)
{
	SpinLockAcquire(&shared->mutex);
	shared->renewer = latch;
	SpinLockRelease(&shared->mutex);
}

/*
 * The renewer publishes the fingerprint of its Redis settings.  Kept when
 * it exits, until the one started again publishes its own.
 */
void
lease_shmem_set_renewer_settings(uint64 fingerprint)
{
	SpinLockAcquire(&shared->mutex);
	shared->settings = fingerprint;
	shared->settings_published = true;
	SpinLockRelease(&shared->mutex);
}

/*
 * lease_shmem_check_settings
 *		renew => true: fail unless the renewer would renew against the
 *		server this session talks to, as its published fingerprint says.
 *		Waits up to LEASE_SETTINGS_WAIT_MS for it to publish, or to catch up
 *		with a reload; cancel interrupts the wait.
 */
static void
lease_shmem_check_settings(void)
{
	uint64		mine = redis_settings_fingerprint();
	TimestampTz deadline = TimestampTzPlusMilliseconds(GetCurrentTimestamp(),
													   LEASE_SETTINGS_WAIT_MS);
	bool		published;
	uint64		theirs;

	for (;;)
	{
		SpinLockAcquire(&shared->mutex);
		published = shared->settings_published;
		theirs = shared->settings;
		SpinLockRelease(&shared->mutex);
		if ((published && theirs == mine) ||
			GetCurrentTimestamp() >= deadline)
			break;
		(void) WaitLatch(MyLatch,
						 WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 LEASE_SETTINGS_POLL_MS, PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
		CHECK_FOR_INTERRUPTS();
	}
	if (!published)
		ereport(ERROR,
				(errcode(ERRCODE_FENCING_RENEW_UNAVAILABLE),
				 errmsg("renew => true needs the lease renewer, which has not started"),
				 errdetail("The background worker \"fencing lease renewer\" did not start within %d ms.",
						   LEASE_SETTINGS_WAIT_MS),
				 errhint("Check the server log and max_worker_processes, or extend the lease with fenced_extend().")));
	if (theirs != mine)
		ereport(ERROR,
				(errcode(ERRCODE_FENCING_RENEW_UNAVAILABLE),
				 errmsg("renew => true is not available with this session's Redis settings"),
				 errdetail("This session's Redis server or credentials settings (fencing.redis_host, fencing.redis_port, the Sentinel, Cluster, database, user, password and TLS settings) differ from the server's configuration, which the lease renewer uses."),
				 errhint("Set them in postgresql.conf or with ALTER SYSTEM rather than with ALTER DATABASE, ALTER ROLE or SET, or acquire without renew and extend the lease with fenced_extend().")));
}

/* Wake the renewer, to look at a lease it has not seen yet. */
static void
lease_shmem_wake_renewer(void)
{
	Latch	   *latch;

	SpinLockAcquire(&shared->mutex);
	latch = shared->renewer;
	SpinLockRelease(&shared->mutex);
	if (latch != NULL)
		SetLatch(latch);
}

/* Put a slot back on the free list. */
static void
lease_shmem_free(int i)
{
	SpinLockAcquire(&shared->mutex);
	shared->slots[i].next_free = shared->first_free;
	shared->first_free = i;
	SpinLockRelease(&shared->mutex);
}

/*
 * lease_shmem_reserve
 *		Before an acquisition asks Redis: make sure a slot is there for its
 *		lease, listed already or not.  None left: an error with renew, else
 *		the lease goes on unlisted.
 */
void
lease_shmem_reserve(const LeaseListing *listing, bool renew)
{
	if (renew && shared == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_FENCING_RENEW_UNAVAILABLE),
				 errmsg("renew => true needs fencing in shared_preload_libraries"),
				 errdetail("Leases are renewed by a background worker, which only a preloaded library starts."),
				 errhint("Add fencing to shared_preload_libraries and restart the server, or extend the lease with fenced_extend().")));
	if (renew && !pgstat_track_activities)
		ereport(ERROR,
				(errcode(ERRCODE_FENCING_RENEW_UNAVAILABLE),
				 errmsg("renew => true needs track_activities on"),
				 errdetail("A lease is renewed while its owner runs a statement or is idle in a transaction for less than the ttl, which only track_activities reports."),
				 errhint("Turn track_activities on, or extend the lease with fenced_extend().")));
	if (renew)
		lease_shmem_check_settings();
	if (shared == NULL || reserved >= 0 ||
		(listing != NULL && listing->slot > 0))
		return;
	SpinLockAcquire(&shared->mutex);
	reserved = shared->first_free;
	if (reserved >= 0)
		shared->first_free = shared->slots[reserved].next_free;
	SpinLockRelease(&shared->mutex);
	if (reserved < 0 && renew)
		ereport(ERROR,
				(errcode(ERRCODE_FENCING_LEASE_TABLE_FULL),
				 errmsg("no room for a renewed lease: the table of lock holders is full"),
				 errdetail("It has room for fencing.max_leases (%d) leases of all backends.",
						   max_leases),
				 errhint("Raise fencing.max_leases (a restart is needed), or acquire without renew.")));
}

/*
 * lease_shmem_publish
 *		List a lease just acquired (or taken again), in the slot it had or
 *		the one reserved for it; without either it stays unlisted.
 */
void
lease_shmem_publish(LeaseListing *listing, const LeaseListed *lease)
{
	LeaseSlot  *slot;
	Oid			roleid;
	bool		counter_expires;
	int			i;

	if (shared == NULL)
		return;
	/* computed before the spinlock, under which nothing may call out */
	roleid = GetSessionUserId();	/* as pg_stat_activity */
	counter_expires = fenced_counter_expires();
	if (listing->slot > 0)
		i = listing->slot - 1;
	else if (reserved >= 0)
	{
		i = reserved;
		reserved = -1;
	}
	else
		return;
	slot = &shared->slots[i];
	SpinLockAcquire(&slot->mutex);
	slot->generation++;
	slot->in_use = true;
	slot->pid = MyProcPid;
	slot->backend_start = MyStartTimestamp;
	slot->roleid = roleid;
	slot->dbid = MyDatabaseId;
	slot->xact = lease->xact;
	slot->renewing = lease->renew;
	slot->lost = false;
	slot->counter_expires = counter_expires;
	slot->declared = lease->declared;
	slot->token = lease->token;
	slot->ttl_ms = lease->ttl_ms;
	slot->acquired = lease->acquired;
	slot->expires = lease->expires;
	slot->renewed = lease->acquired;
	slot->hold_until = TimestampTzPlusMilliseconds(lease->acquired,
												   lease->max_hold_ms);
	strlcpy(slot->owner, lease->owner, LEASE_SHMEM_OWNER_LEN);
	strlcpy(slot->resource, lease->resource, sizeof(slot->resource));
	strlcpy(slot->lock_template, fencing_redis_lock_key, LEASE_SHMEM_TEMPLATE_LEN);
	strlcpy(slot->token_template, fencing_redis_token_key, LEASE_SHMEM_TEMPLATE_LEN);
	listing->generation = slot->generation;
	SpinLockRelease(&slot->mutex);
	listing->slot = i + 1;
	if (lease->renew)
		lease_shmem_wake_renewer();
}

/*
 * lease_shmem_unpublish
 *		Take a lease out of the table as it ends, before its release is
 *		sent: from then on the renewer leaves it alone.  Never an error.
 */
void
lease_shmem_unpublish(LeaseListing *listing)
{
	LeaseSlot  *slot;
	int			i = listing->slot - 1;

	if (shared == NULL || listing->slot <= 0)
		return;
	slot = &shared->slots[i];
	SpinLockAcquire(&slot->mutex);
	slot->generation++;
	slot->in_use = false;
	slot->renewing = false;
	SpinLockRelease(&slot->mutex);
	listing->slot = 0;
	lease_shmem_free(i);
}

/* The slot of a listing, if the lease is still in it; else NULL. */
static LeaseSlot *
lease_shmem_listed(const LeaseListing *listing)
{
	if (shared == NULL || listing->slot <= 0)
		return NULL;
	return &shared->slots[listing->slot - 1];
}

/* fenced_extend set the lease's expiry: its later renewals keep its ttl. */
void
lease_shmem_set_expires(const LeaseListing *listing, TimestampTz expires)
{
	LeaseSlot  *slot = lease_shmem_listed(listing);
	TimestampTz now = GetCurrentTimestamp();

	if (slot == NULL)
		return;
	SpinLockAcquire(&slot->mutex);
	if (slot->generation == listing->generation)
	{
		slot->expires = expires;
		slot->renewed = now;
		slot->ttl_ms = (int) Min((expires - now + 999) / 1000, INT_MAX);
	}
	SpinLockRelease(&slot->mutex);
}

/*
 * Bring *expires up to date with the lease's renewals.  The slot has the
 * latest expiry set -- by the acquisition, fenced_extend (which the
 * renewer does not overwrite) or a renewal -- even where a renewal
 * shortened it (the owner idle in a transaction): that is what Redis has.
 */
void
lease_shmem_refresh(const LeaseListing *listing, TimestampTz *expires)
{
	LeaseSlot  *slot = lease_shmem_listed(listing);

	if (slot == NULL)
		return;
	SpinLockAcquire(&slot->mutex);
	if (slot->generation == listing->generation)
		*expires = slot->expires;
	SpinLockRelease(&slot->mutex);
}

/* Whether the lease is still being renewed. */
bool
lease_shmem_renewing(const LeaseListing *listing)
{
	LeaseSlot  *slot = lease_shmem_listed(listing);
	bool		renewing = false;

	if (slot == NULL)
		return false;
	SpinLockAcquire(&slot->mutex);
	if (slot->generation == listing->generation)
		renewing = slot->renewing;
	SpinLockRelease(&slot->mutex);
	return renewing;
}

/*
 * Whether the renewer found the lease's lock held by another owner: lost
 * before its expiry (lock_valid.c).
 */
bool
lease_shmem_lost(const LeaseListing *listing)
{
	LeaseSlot  *slot = lease_shmem_listed(listing);
	bool		lost = false;

	if (slot == NULL)
		return false;
	SpinLockAcquire(&slot->mutex);
	if (slot->generation == listing->generation)
		lost = slot->lost;
	SpinLockRelease(&slot->mutex);
	return lost;
}

/* Give back the slot this backend reserved and did not use (exit). */
void
lease_shmem_free_reserved(void)
{
	if (shared == NULL || reserved < 0)
		return;
	lease_shmem_free(reserved);
	reserved = -1;
}
