/*-------------------------------------------------------------------------
 *
 * lease_renewer.c
 *	  The background worker that renews the leases taken with renew =>
 *	  true while their owners work.
 *
 * Registered at preload, it reads the shared table of leases
 * (lease_shmem.c) and, about every third of a lease's ttl, looks at its
 * owner backend in the backend status table (as pg_stat_activity does):
 *
 *	- running a statement: the lock is extended by the ttl;
 *	- idle in a transaction (aborted or not) for less than the ttl: the
 *	  lock is extended up to one ttl after the backend went idle, no
 *	  further, so that a client that stops sending loses its lock one ttl
 *	  after its last statement ended;
 *	- anything else -- idle outside a transaction, idle in a transaction
 *	  for the ttl or longer, track_activities off, gone, or another
 *	  process under the same PID (its start time differs) -- renewal of
 *	  that lease stops for good.
 *
 * The owner takes a lease out of the table before it releases it (its
 * transaction's end, fenced_release, DISCARD ALL, exit), so renewal stops
 * at the latest when the release is sent; a renewal already on its way is
 * the extend script, which only extends a lock still held under the
 * lease's owner string, unique to the lease: it can never extend another
 * owner's lock.  The outcome is written back only if the slot's
 * generation is still the one read.
 *
 * The renewals of one round go out together, pipelined, through the same
 * Redis client as the backends' (Sentinel, Cluster, TLS), where nothing
 * throws, within fencing.redis_release_timeout; the worker's settings are
 * those of the server's configuration files, whose fingerprint it
 * publishes at start and after each reload, so that renew => true is
 * refused in a session set to another Redis server.  A lock found lost is
 * no longer renewed; a failed round is tried again after a pause.
 *
 * IDENTIFICATION
 *	  src/lease_renewer.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "fenced_lock_scripts.h"
#include "fenced_settings.h"
#include "lease_renewer.h"
#include "lease_shmem.h"
#include "miscadmin.h"
#include "pg_compat.h"
#include "postmaster/bgworker.h"
#include "postmaster/interrupt.h"
#include "redis_conn.h"
#include "redis_settings.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "tcop/tcopprot.h"
#include "utils/backend_status.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"
#include "utils/wait_event.h"

PGDLLEXPORT void fencing_lease_renewer_main(Datum arg);

/* Longest sleep with nothing to renew, and the pause after a failure. */
#define RENEWER_IDLE_MS		10000
#define RENEWER_RETRY_MS	100

/* One lease to renew in this round. */
typedef struct Renewal
{
	int			slot;
	uint64		generation;
	int			ttl_ms;			/* this renewal's */
	int			ncommands;		/* 1, or 2 with the counter's */
} Renewal;

/*
 * lease_renewer_register
 *		Register the worker; called from _PG_init when preloading.
 */
void
lease_renewer_register(void)
{
	BackgroundWorker worker;

	if (!process_shared_preload_libraries_in_progress)
		return;
	memset(&worker, 0, sizeof(worker));
	worker.bgw_flags = BGWORKER_SHMEM_ACCESS |
		BGWORKER_BACKEND_DATABASE_CONNECTION;
	worker.bgw_start_time = BgWorkerStart_ConsistentState;
	worker.bgw_restart_time = 1;	/* s, after pg_terminate_backend */
	snprintf(worker.bgw_library_name, BGW_MAXLEN, "fencing");
	snprintf(worker.bgw_function_name, BGW_MAXLEN, "fencing_lease_renewer_main");
	snprintf(worker.bgw_name, BGW_MAXLEN, "fencing lease renewer");
	snprintf(worker.bgw_type, BGW_MAXLEN, "fencing lease renewer");
	RegisterBackgroundWorker(&worker);
}

/* The backend status entry of pid in the snapshot, NULL if none. */
static PgBackendStatus *
renewer_find_backend(int pid)
{
	int			n = pgstat_fetch_stat_numbackends();
	int			i;

	for (i = 1; i <= n; i++)
	{
		LocalPgBackendStatus *local = fencing_local_beentry(i);

		if (local != NULL && local->backendStatus.st_procpid == pid)
			return &local->backendStatus;
	}
	return NULL;
}

/*
 * renewer_ttl
 *		The ttl of this renewal of a lease of the backend, 0 if its renewal
 *		stops (see the header).
 */
static int
renewer_ttl(const LeaseSlot *copy, TimestampTz now)
{
	PgBackendStatus *be = renewer_find_backend(copy->pid);
	long		idle_ms;

	if (be == NULL || be->st_proc_start_timestamp != copy->backend_start)
		return 0;
	switch (be->st_state)
	{
		case STATE_RUNNING:
		case STATE_FASTPATH:
			return copy->ttl_ms;
		case STATE_IDLEINTRANSACTION:
		case STATE_IDLEINTRANSACTION_ABORTED:
			idle_ms = TimestampDifferenceMilliseconds(be->st_state_start_timestamp,
													  now);
			return idle_ms < copy->ttl_ms ? copy->ttl_ms - (int) idle_ms : 0;
		default:
			return 0;
	}
}

/* Stop renewing a slot's lease, if it is still the one read. */
static void
renewer_stop(int i, uint64 generation)
{
	LeaseSlot  *slot = lease_shmem_slot(i);

	SpinLockAcquire(&slot->mutex);
	if (slot->generation == generation)
		slot->renewing = false;
	SpinLockRelease(&slot->mutex);
}

/* Add the commands renewing a lease for ttl_ms. */
static int
renewer_add_commands(const LeaseSlot *copy, int ttl_ms, const char ***argv,
					 int *argc, int n)
{
	static const char *extend_lua = FENCED_EXTEND_LUA;
	static const char *counter_lua = FENCED_EXTEND_COUNTER_LUA;
	const char **cmd;

	if (copy->counter_expires)
	{
		cmd = palloc(sizeof(char *) * 5);
		cmd[0] = "EVAL";
		cmd[1] = counter_lua;
		cmd[2] = "1";
		cmd[3] = fenced_key(copy->token_template, copy->resource);
		cmd[4] = psprintf("%lld",
						  (long long) ttl_ms + fenced_counter_linger());
		argv[n] = cmd;
		argc[n++] = 5;
	}
	cmd = palloc(sizeof(char *) * 6);
	cmd[0] = "EVAL";
	cmd[1] = extend_lua;
	cmd[2] = "1";
	cmd[3] = fenced_key(copy->lock_template, copy->resource);
	cmd[4] = pstrdup(copy->owner);
	cmd[5] = psprintf("%d", ttl_ms);
	argv[n] = cmd;
	argc[n++] = 6;
	return n;
}

/* Write a renewal's outcome back, if the slot still has its lease. */
static void
renewer_record(const Renewal *r, RedisValue *reply, TimestampTz sent)
{
	LeaseSlot  *slot = lease_shmem_slot(r->slot);

	SpinLockAcquire(&slot->mutex);
	if (slot->generation == r->generation)
	{
		if (reply->integer == 1)
		{
			slot->renewed = sent;
			slot->expires = TimestampTzPlusMilliseconds(sent, r->ttl_ms);
		}
		else
			slot->renewing = false; /* lost: nothing left to renew */
	}
	SpinLockRelease(&slot->mutex);
}

/*
 * renewer_round
 *		Renew the leases due; returns how long to sleep until the next one
 *		is, in ms.
 */
static long
renewer_round(void)
{
	int			nslots = lease_shmem_size();
	TimestampTz now = GetCurrentTimestamp();
	long		sleep_ms = RENEWER_IDLE_MS;
	int			size = 16;
	Renewal    *due = palloc(sizeof(Renewal) * size);
	const char ***argv = palloc(sizeof(char **) * 2 * size);
	int		   *argc = palloc(sizeof(int) * 2 * size);
	LeaseSlot  *copy = palloc(sizeof(LeaseSlot));
	RedisValue **replies;
	char	   *failure = NULL;
	bool		snapshot = false;
	int			ndue = 0;
	int			ncommands = 0;
	int			i;
	int			c;

	for (i = 0; i < nslots; i++)
	{
		LeaseSlot  *slot = lease_shmem_slot(i);
		long		until;
		int			ttl_ms;

		SpinLockAcquire(&slot->mutex);
		if (slot->in_use && slot->renewing)
			memcpy(copy, slot, sizeof(LeaseSlot));
		else
			copy->in_use = false;
		SpinLockRelease(&slot->mutex);
		if (!copy->in_use)
			continue;
		until = TimestampDifferenceMilliseconds(now,
												TimestampTzPlusMilliseconds(copy->renewed,
																			Max(copy->ttl_ms / 3, 1)));
		if (until > 0)
		{
			sleep_ms = Min(sleep_ms, until);
			continue;
		}
		if (!snapshot)
		{
			pgstat_clear_backend_activity_snapshot();
			snapshot = true;
		}
		ttl_ms = renewer_ttl(copy, now);
		if (ttl_ms <= 0)
		{
			renewer_stop(i, copy->generation);
			continue;
		}
		if (ndue == size)
		{
			size *= 2;
			due = repalloc(due, sizeof(Renewal) * size);
			argv = repalloc(argv, sizeof(char **) * 2 * size);
			argc = repalloc(argc, sizeof(int) * 2 * size);
		}
		due[ndue].slot = i;
		due[ndue].generation = copy->generation;
		due[ndue].ttl_ms = ttl_ms;
		c = renewer_add_commands(copy, ttl_ms, argv, argc, ncommands);
		due[ndue].ncommands = c - ncommands;
		ncommands = c;
		ndue++;
		sleep_ms = Min(sleep_ms, Max(ttl_ms / 3, 1));
	}
	if (ndue == 0)
		return sleep_ms;

	replies = palloc(sizeof(RedisValue *) * ncommands);
	(void) redis_commands_noerror(ncommands, argc, argv, replies, &failure);
	c = 0;
	for (i = 0; i < ndue; i++)
	{
		RedisValue *reply;

		c += due[i].ncommands;
		reply = replies[c - 1];
		if (reply != NULL && reply->type == REDIS_VALUE_INTEGER)
			renewer_record(&due[i], reply, now);
		else
		{
			if (failure == NULL && reply != NULL)
				failure = reply->type == REDIS_VALUE_ERROR ?
					psprintf("The Redis server refused the extend script: %s", reply->str) :
					pstrdup("The Redis server answered the extend script with something other than an integer.");
			sleep_ms = Min(sleep_ms, RENEWER_RETRY_MS);
		}
	}
	if (failure != NULL)
		ereport(WARNING,
				(errmsg("could not renew Redis locks"),
				 errdetail_internal("%s", failure),
				 errhint("They are tried again; a lock not renewed expires at the end of its ttl.")));
	return sleep_ms;
}

/* The worker exits: backends stop waking it. */
static void
renewer_at_exit(int code, Datum arg)
{
	lease_shmem_set_renewer(NULL);
}

/*
 * fencing_lease_renewer_main
 *		The worker: renew, sleep until the next lease is due or a backend
 *		lists a new one, and again.  SIGTERM ends it (the postmaster starts
 *		it again a second later), SIGHUP rereads the configuration.
 */
void
fencing_lease_renewer_main(Datum arg)
{
	MemoryContext round_cxt;

	pqsignal(SIGHUP, SignalHandlerForConfigReload);
	pqsignal(SIGTERM, die);
	BackgroundWorkerUnblockSignals();
	/* no database: in pg_stat_activity, and terminable by a superuser */
	BackgroundWorkerInitializeConnection(NULL, NULL, 0);
	if (!lease_shmem_enabled())
		proc_exit(0);
	before_shmem_exit(renewer_at_exit, (Datum) 0);
	lease_shmem_set_renewer(MyLatch);
	lease_shmem_set_renewer_settings(redis_settings_fingerprint());
	round_cxt = AllocSetContextCreate(TopMemoryContext, "fencing renewals",
									  ALLOCSET_DEFAULT_SIZES);
	for (;;)
	{
		long		sleep_ms;

		CHECK_FOR_INTERRUPTS();
		if (ConfigReloadPending)
		{
			ConfigReloadPending = false;
			ProcessConfigFile(PGC_SIGHUP);
			lease_shmem_set_renewer_settings(redis_settings_fingerprint());
		}
		MemoryContextSwitchTo(round_cxt);
		sleep_ms = renewer_round();
		MemoryContextSwitchTo(TopMemoryContext);
		MemoryContextReset(round_cxt);
		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 sleep_ms, PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
	}
}
