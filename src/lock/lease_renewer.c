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
 * Whatever the state, renewal stops for good where the system shows the
 * owner stopped (Linux: state T or t in /proc/<pid>/stat, a SIGSTOP or a
 * debugger), since a stopped backend still shows the state of the
 * statement it was in; and no renewal takes a lock past its longest hold,
 * max_hold after the acquisition (fencing.lease_max_hold by default): from
 * outside, a backend hung in I/O or in an endless wait looks like one
 * that works, and the ceiling is what ends its lock.
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
 * refused in a session set to another Redis server.  The scripts go as
 * EVALSHA, and again as EVAL where the server answers NOSCRIPT (its script
 * cache emptied by a restart, a failover or SCRIPT FLUSH).  A lock found
 * lost is no longer renewed.
 *
 * A failed round (Redis down, refusing, out of time) is tried again after
 * a pause that starts at 100 ms and doubles with each failure in a row, up
 * to 1 s or a third of the shortest ttl listed, whichever is less, so that
 * an outage costs about one connection attempt a second rather than ten,
 * and a 1 s lease still gets retries before it expires.  The first failure
 * is a WARNING, then one every 10 s with the count of failed rounds, and
 * the first round that succeeds again is a LOG line.
 *
 * IDENTIFICATION
 *	  src/lock/lease_renewer.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <fcntl.h>
#include <limits.h>
#include <unistd.h>

#include "core/pg_compat.h"
#include "lock/lock_int.h"
#include "lock/lock_scripts.h"
#include "miscadmin.h"
#include "postmaster/bgworker.h"
#include "postmaster/interrupt.h"
#include "redis/redis.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "tcop/tcopprot.h"
#include "utils/backend_status.h"
#include "utils/memutils.h"
#include "utils/resowner.h"
#include "utils/timestamp.h"
#include "utils/wait_event.h"

PGDLLEXPORT void fencing_lease_renewer_main(Datum arg);

/* Longest sleep with nothing to renew. */
#define RENEWER_IDLE_MS		10000
/* The pause after a first failed round, and the longest (see the header). */
#define RENEWER_RETRY_MS	100
#define RENEWER_RETRY_MAX_MS	1000
/* How often an outage is reported again. */
#define RENEWER_WARN_EVERY_MS	10000

/* One lease to renew in this round. */
typedef struct Renewal
{
	int			slot;
	uint64		generation;
	int			ttl_ms;			/* this renewal's */
	int			ncommands;		/* 1, or 2 with the counter's */
	int			pid;			/* the owner's, for the log */
	char	   *resource;
} Renewal;

/* Rounds failing in a row, as in a Redis outage. */
typedef struct RenewerOutage
{
	int			nfailed;		/* rounds failed in a row; 0: none */
	int			retry_ms;		/* the pause after the last one */
	TimestampTz since;			/* the first one's start */
	TimestampTz retry_at;		/* no round before */
	TimestampTz warned;			/* the last WARNING */
	int			nwarned;		/* rounds failed at that WARNING */
} RenewerOutage;

static RenewerOutage outage;

static RedisScript extend_script = {"fencing extend script", FENCED_EXTEND_LUA, ""};
static RedisScript counter_script = {"fencing counter extend script", FENCED_EXTEND_COUNTER_LUA, ""};

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
 * renewer_owner_stopped
 *		Whether the system shows process pid stopped: state T (a stop
 *		signal) or t (a debugger) in /proc/<pid>/stat.  False where there
 *		is no such file (not Linux, the process gone: the status table
 *		tells).
 */
static bool
renewer_owner_stopped(int pid)
{
	char		path[64];
	char		buf[512];
	const char *paren;
	ssize_t		n;
	int			fd;

	snprintf(path, sizeof(path), "/proc/%d/stat", pid);
	fd = open(path, O_RDONLY | PG_BINARY, 0);
	if (fd < 0)
		return false;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return false;
	buf[n] = '\0';
	/* "pid (comm) S ...": comm may hold anything, ")" included */
	paren = strrchr(buf, ')');
	return paren != NULL && paren[1] == ' ' &&
		(paren[2] == 'T' || paren[2] == 't');
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
	long		hold_ms;
	int			ttl_ms;

	if (be == NULL || be->st_proc_start_timestamp != copy->backend_start)
		return 0;
	/* a renewal that would not take the lock past its expiry is none */
	if (copy->hold_until <= copy->expires || renewer_owner_stopped(copy->pid))
		return 0;
	switch (be->st_state)
	{
		case STATE_RUNNING:
		case STATE_FASTPATH:
			ttl_ms = copy->ttl_ms;
			break;
		case STATE_IDLEINTRANSACTION:
		case STATE_IDLEINTRANSACTION_ABORTED:
			idle_ms = TimestampDifferenceMilliseconds(be->st_state_start_timestamp,
													  now);
			if (idle_ms >= copy->ttl_ms)
				return 0;
			ttl_ms = copy->ttl_ms - (int) idle_ms;
			break;
		default:
			return 0;
	}
	hold_ms = TimestampDifferenceMilliseconds(now, copy->hold_until);
	return (int) Min((long) ttl_ms, hold_ms);
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
	const char **cmd;

	if (copy->counter_expires)
	{
		cmd = palloc(sizeof(char *) * 5);
		cmd[0] = "EVALSHA";
		cmd[1] = counter_script.sha;
		cmd[2] = "1";
		cmd[3] = fenced_key(copy->token_template, copy->resource);
		cmd[4] = psprintf("%lld",
						  (long long) ttl_ms + fenced_counter_linger());
		argv[n] = cmd;
		argc[n++] = 5;
	}
	cmd = palloc(sizeof(char *) * 6);
	cmd[0] = "EVALSHA";
	cmd[1] = extend_script.sha;
	cmd[2] = "1";
	cmd[3] = fenced_key(copy->lock_template, copy->resource);
	cmd[4] = pstrdup(copy->owner);
	cmd[5] = psprintf("%d", ttl_ms);
	argv[n] = cmd;
	argc[n++] = 6;
	return n;
}

/*
 * renewer_record
 *		Write a renewal's outcome back, if the slot still has its lease;
 *		true if that outcome is the lease found lost.
 */
static bool
renewer_record(const Renewal *r, RedisValue *reply, TimestampTz sent)
{
	LeaseSlot  *slot = lease_shmem_slot(r->slot);
	bool		lost = false;

	SpinLockAcquire(&slot->mutex);
	/* not over what a fenced_extend since the round began wrote */
	if (slot->generation == r->generation && slot->renewed <= sent)
	{
		if (reply->integer == 1)
		{
			slot->renewed = sent;
			slot->expires = TimestampTzPlusMilliseconds(sent, r->ttl_ms);
		}
		else
		{
			slot->renewing = false; /* nothing left to renew */
			slot->lost = true;
			lost = true;
		}
	}
	SpinLockRelease(&slot->mutex);
	return lost;
}

/*
 * renewer_report_lost
 *		Say in the server log which lease was found lost, and where: a lock
 *		expired or taken over is what an operator looks for after a
 *		holder's writes were fenced out.
 */
static void
renewer_report_lost(const Renewal *r)
{
	const char *host;
	int			port;

	/* in Cluster mode the last command may have gone to another node */
	if (!redis_cluster_enabled() && redis_last_server(&host, &port))
		ereport(LOG,
				(errmsg("lease of resource \"%s\" found lost while renewing it",
						r->resource),
				 errdetail("The Redis server at \"%s:%d\" no longer holds the lock of backend %d under the lease's owner: it expired or another holder took it.  The lease is no longer renewed.",
						   host, port, r->pid)));
	else
		ereport(LOG,
				(errmsg("lease of resource \"%s\" found lost while renewing it",
						r->resource),
				 errdetail("Redis no longer holds the lock of backend %d under the lease's owner: it expired or another holder took it.  The lease is no longer renewed.",
						   r->pid)));
}

/*
 * renewer_resend_unknown_script
 *		Send again, with EVAL and the script's text, the commands that the
 *		server refused with NOSCRIPT; such a command ran nothing.  Their
 *		replies replace the NOSCRIPT ones; a failure is left in *failure
 *		unless one is there already.
 */
static void
renewer_resend_unknown_script(int ncommands, const int *argc,
							  const char ***argv, RedisValue **replies,
							  char **failure)
{
	int		   *which = palloc(sizeof(int) * ncommands);
	int		   *again_argc = palloc(sizeof(int) * ncommands);
	const char ***again_argv = palloc(sizeof(char **) * ncommands);
	RedisValue **again = palloc(sizeof(RedisValue *) * ncommands);
	char	   *again_failure = NULL;
	int			n = 0;
	int			c;

	for (c = 0; c < ncommands; c++)
	{
		if (replies[c] == NULL || replies[c]->type != REDIS_VALUE_ERROR ||
			strncmp(replies[c]->str, "NOSCRIPT", 8) != 0)
			continue;
		argv[c][0] = "EVAL";
		argv[c][1] = argv[c][1] == extend_script.sha ?
			extend_script.text : counter_script.text;
		which[n] = c;
		again_argc[n] = argc[c];
		again_argv[n] = argv[c];
		n++;
	}
	if (n == 0)
		return;
	(void) redis_commands_noerror(n, again_argc, again_argv, again,
								  &again_failure);
	for (c = 0; c < n; c++)
		replies[which[c]] = again[c];
	if (*failure == NULL)
		*failure = again_failure;
}

/*
 * renewer_failed
 *		A round failed: report it (see the header) and set when the next
 *		may start, given the shortest ttl listed.
 */
static void
renewer_failed(const char *failure, int min_ttl_ms, TimestampTz now)
{
	int			cap = Min(RENEWER_RETRY_MAX_MS, Max(min_ttl_ms / 3, 1));

	if (outage.nfailed == 0)
	{
		outage.since = now;
		outage.retry_ms = Min(RENEWER_RETRY_MS, cap);
	}
	else
		outage.retry_ms = Min(outage.retry_ms * 2, cap);
	outage.nfailed++;
	outage.retry_at = TimestampTzPlusMilliseconds(now, outage.retry_ms);
	if (outage.nfailed == 1)
		ereport(WARNING,
				(errmsg("could not renew Redis locks"),
				 errdetail_internal("%s", failure),
				 errhint("They are tried again, at least once a second; a lock not renewed expires at the end of its ttl.")));
	else if (TimestampDifferenceExceeds(outage.warned, now,
										RENEWER_WARN_EVERY_MS))
		ereport(WARNING,
				(errmsg("could not renew Redis locks"),
				 errdetail_internal("%d rounds of renewals failed in %ld ms, %d since the last report.  The last failure: %s",
									outage.nfailed,
									TimestampDifferenceMilliseconds(outage.since, now),
									outage.nfailed - outage.nwarned,
									failure),
				 errhint("They are tried again, at least once a second; a lock not renewed expires at the end of its ttl.")));
	else
		return;
	outage.warned = now;
	outage.nwarned = outage.nfailed;
}

/* A round succeeded: end an outage, saying so. */
static void
renewer_succeeded(TimestampTz now)
{
	if (outage.nfailed == 0)
		return;
	ereport(LOG,
			(errmsg("renewing Redis locks again"),
			 errdetail("%d rounds of renewals failed in a row, over %ld ms.",
					   outage.nfailed,
					   TimestampDifferenceMilliseconds(outage.since, now))));
	memset(&outage, 0, sizeof(outage));
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
	int			min_ttl_ms = INT_MAX;
	int			i;
	int			c;

	if (outage.nfailed > 0 && now < outage.retry_at)
		return TimestampDifferenceMilliseconds(now, outage.retry_at);
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
		min_ttl_ms = Min(min_ttl_ms, copy->ttl_ms);
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
		due[ndue].pid = copy->pid;
		due[ndue].resource = pstrdup(copy->resource);
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
	renewer_resend_unknown_script(ncommands, argc, argv, replies, &failure);
	c = 0;
	for (i = 0; i < ndue; i++)
	{
		RedisValue *reply;

		c += due[i].ncommands;
		reply = replies[c - 1];
		if (reply != NULL && reply->type == REDIS_VALUE_INTEGER)
		{
			if (renewer_record(&due[i], reply, now))
				renewer_report_lost(&due[i]);
		}
		else
		{
			if (failure == NULL)
				failure = reply == NULL ?
					pstrdup("The Redis server did not answer the extend script.") :
					reply->type == REDIS_VALUE_ERROR ?
					psprintf("The Redis server refused the extend script: %s", reply->str) :
					pstrdup("The Redis server answered the extend script with something other than an integer.");
		}
	}
	if (failure == NULL)
	{
		renewer_succeeded(now);
		return sleep_ms;
	}
	renewer_failed(failure, min_ttl_ms, now);
	return Min(sleep_ms, outage.retry_ms);
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
	ResourceOwner owner;

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
	/* the scripts' SHA1, with OpenSSL, needs a resource owner for a while */
	owner = ResourceOwnerCreate(NULL, "fencing lease renewer");
	CurrentResourceOwner = owner;
	redis_script_prepare(&extend_script);
	redis_script_prepare(&counter_script);
	CurrentResourceOwner = NULL;
	ResourceOwnerDelete(owner);
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
