/*-------------------------------------------------------------------------
 *
 * stats_progress.c
 *	  Progress of fence_attach(), fence_attach_concurrently() and
 *	  fence_check_coverage(): the function behind the view fence_progress,
 *	  and the NOTICEs they send while they read.
 *
 * PostgreSQL's own progress reporting (pgstat_progress_start_command())
 * knows a fixed list of commands, none of them an extension's, and the
 * views of that list would show ours under another command's name.  So,
 * with the library preloaded, a table of PROGRESS_SLOTS slots in shared
 * memory, one for each backend running one of these functions; a run that
 * finds every slot taken is not shown, and sends its NOTICEs all the same.
 * Without preloading there is no shared memory to put them in: the view is
 * empty and the NOTICEs are all there is.
 *
 * A slot is claimed and given back under a spinlock, and written only by
 * its backend, between two increments of its changecount, as PostgreSQL
 * writes a PgBackendStatus; a reader copies it again until the count was
 * even and unchanged.  A slot is given back when its run ends, when its
 * transaction aborts (an error ends the run: fence_attach_concurrently()
 * commits between batches, so the end of a transaction is not the end of
 * the run), when the subtransaction it began in aborts (an exception block
 * caught its error; the subtransactions it begins itself to try a lock do
 * not end it) and when its backend exits.
 *
 * The NOTICE comes at most every fencing.progress_notice_interval, after a
 * batch that leaves some of the table to read: the share of the table's
 * pages read (a batch reads whole pages, in order, up to the number the
 * table had at the start), the rows, the rate, and the time left at that
 * rate.
 *
 * IDENTIFICATION
 *	  src/stats/stats_progress.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "catalog/pg_authid.h"
#include "fmgr.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "port/atomics.h"
#include "stats/stats.h"
#include "storage/ipc.h"
#include "storage/procarray.h"
#include "storage/shmem.h"
#include "storage/spin.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/timestamp.h"

/* Runs shown at once, in all databases. */
#define PROGRESS_SLOTS 32

typedef struct ProgressSlot
{
	int			pid;			/* 0: free */
	uint32		changecount;	/* odd while its backend writes it */
	Oid			dbid;
	Oid			userid;
	Oid			relid;
	int			command;		/* StatsProgressCommand */
	int			phase;			/* StatsProgressPhase */
	TimestampTz started;		/* the run's start */
	TimestampTz table_started;	/* the current table's start */
	int64		tables_done;
	int64		pages_done;
	int64		pages_total;
	int64		rows_done;
	int64		rows_estimate;	/* -1: never counted (no ANALYZE) */
	int64		batches;
} ProgressSlot;

typedef struct SharedProgress
{
	slock_t		mutex;			/* claims and gives back slots */
	ProgressSlot slots[PROGRESS_SLOTS];
} SharedProgress;

static const char *const command_names[] = {
	"fence_attach", "fence_attach_concurrently", "fence_check_coverage"
};

static const char *const phase_names[] = {
	"waiting for the lock", "seeding marks", "checking marks",
	"checking and repairing marks"
};

/* fencing.progress_notice_interval, in milliseconds; 0: after every batch, -1: none. */
static int	progress_notice_interval = 5000;

/* Set in shared mode, by the startup hook in the postmaster. */
static SharedProgress *shared = NULL;

/* This backend's run: its slot (NULL if none or not shown) and its state. */
static ProgressSlot *my_slot = NULL;
static bool running = false;
static ProgressSlot mine;
static TimestampTz last_notice = 0;
static int	begin_nest_level = 0;	/* the subtransaction it began in */

PG_FUNCTION_INFO_V1(fence_progress_data);

/*
 * stats_progress_shmem_size
 *		The shared memory the slots need, asked for by stats.c.
 */
Size
stats_progress_shmem_size(void)
{
	return MAXALIGN(sizeof(SharedProgress));
}

/*
 * stats_progress_shmem_startup
 *		Create or attach to the slots; called by stats.c's startup hook,
 *		under AddinShmemInitLock.
 */
void
stats_progress_shmem_startup(void)
{
	bool		found;

	shared = ShmemInitStruct("fencing progress", sizeof(SharedProgress),
							 &found);
	if (!found)
	{
		memset(shared, 0, sizeof(SharedProgress));
		SpinLockInit(&shared->mutex);
	}
}

/* Copy this backend's state into its slot, between two changecounts. */
static void
progress_publish(void)
{
	uint32		count;

	if (my_slot == NULL)
		return;
	count = my_slot->changecount;
	my_slot->changecount = count + 1;
	pg_write_barrier();
	mine.pid = MyProcPid;
	mine.changecount = count + 1;
	memcpy(my_slot, &mine, sizeof(ProgressSlot));
	pg_write_barrier();
	my_slot->changecount = count + 2;
}

/* Give the slot back, and end the run. */
static void
progress_release(void)
{
	running = false;
	if (my_slot == NULL)
		return;
	SpinLockAcquire(&shared->mutex);
	my_slot->pid = 0;
	SpinLockRelease(&shared->mutex);
	my_slot = NULL;
}

static void
progress_xact_callback(XactEvent event, void *arg)
{
	if (running && (event == XACT_EVENT_ABORT ||
					event == XACT_EVENT_PARALLEL_ABORT))
		progress_release();
}

static void
progress_subxact_callback(SubXactEvent event, SubTransactionId mySubid,
						  SubTransactionId parentSubid, void *arg)
{
	if (running && event == SUBXACT_EVENT_ABORT_SUB &&
		GetCurrentTransactionNestLevel() <= begin_nest_level)
		progress_release();
}

static void
progress_exit(int code, Datum arg)
{
	progress_release();
}

/*
 * stats_progress_init
 *		The setting of the NOTICEs' interval, and the release of a slot at
 *		abort and exit; called from stats_init().
 */
void
stats_progress_init(void)
{
	DefineCustomIntVariable("fencing.progress_notice_interval",
							"How often fence_attach, fence_attach_concurrently and fence_check_coverage report their progress in a NOTICE.",
							"At most once per interval, after a batch; 0 after every batch, -1 never.",
							&progress_notice_interval,
							5000, -1, INT_MAX,
							PGC_USERSET,
							GUC_UNIT_MS,
							NULL, NULL, NULL);
	RegisterXactCallback(progress_xact_callback, NULL);
	RegisterSubXactCallback(progress_subxact_callback, NULL);
}

/*
 * stats_progress_begin
 *		A run of command begins in this backend: take a slot if there is
 *		shared memory and a free slot.
 */
void
stats_progress_begin(StatsProgressCommand command)
{
	static bool exit_registered = false;
	int			i;

	if (running)
		progress_release();
	memset(&mine, 0, sizeof(mine));
	mine.dbid = MyDatabaseId;
	mine.userid = GetUserId();
	mine.command = command;
	mine.phase = command == STATS_PROGRESS_ATTACH_CONCURRENTLY ?
		STATS_PROGRESS_WAITING : STATS_PROGRESS_SEEDING;
	mine.started = GetCurrentTimestamp();
	mine.rows_estimate = -1;
	running = true;
	begin_nest_level = GetCurrentTransactionNestLevel();
	last_notice = mine.started;
	if (shared == NULL)
		return;
	if (!exit_registered)
	{
		before_shmem_exit(progress_exit, (Datum) 0);
		exit_registered = true;
	}
	SpinLockAcquire(&shared->mutex);
	for (i = 0; i < PROGRESS_SLOTS; i++)
	{
		if (shared->slots[i].pid == 0)
		{
			my_slot = &shared->slots[i];
			my_slot->pid = MyProcPid;
			break;
		}
	}
	SpinLockRelease(&shared->mutex);
	progress_publish();
}

/*
 * stats_progress_table
 *		The run begins to read table relid, of pages pages and reltuples rows
 *		by its statistics (negative if never counted), raising the marks
 *		below its rows' tokens if raise.
 */
void
stats_progress_table(Oid relid, int64 pages, double reltuples, bool raise)
{
	if (!running)
		return;
	if (mine.relid != InvalidOid)
		mine.tables_done++;
	mine.relid = relid;
	mine.phase = mine.command != STATS_PROGRESS_CHECK_COVERAGE ?
		STATS_PROGRESS_SEEDING :
		raise ? STATS_PROGRESS_REPAIRING : STATS_PROGRESS_CHECKING;
	mine.table_started = GetCurrentTimestamp();
	mine.pages_done = 0;
	mine.pages_total = pages;
	mine.rows_done = 0;
	mine.rows_estimate = reltuples < 0 ? -1 : (int64) reltuples;
	mine.batches = 0;
	progress_publish();
}

/*
 * stats_progress_batch
 *		A batch has been read: pages_done of the table's pages, rows_done of
 *		its rows, batches batches.  Sends the NOTICE if it is due.
 */
void
stats_progress_batch(int64 pages_done, int64 rows_done, int64 batches)
{
	TimestampTz now;
	long		secs;
	int			usecs;
	double		elapsed;
	double		share;

	if (!running)
		return;
	mine.pages_done = pages_done;
	mine.rows_done = rows_done;
	mine.batches = batches;
	progress_publish();
	if (progress_notice_interval < 0)
		return;
	now = GetCurrentTimestamp();
	if (progress_notice_interval > 0 &&
		!TimestampDifferenceExceeds(last_notice, now, progress_notice_interval))
		return;
	last_notice = now;
	TimestampDifference(mine.table_started, now, &secs, &usecs);
	elapsed = secs + usecs / 1000000.0;
	share = mine.pages_total > 0 ?
		Min(1.0, (double) pages_done / mine.pages_total) : 1.0;
	if (share > 0 && share < 1)
		ereport(NOTICE,
				(errmsg("%s: table \"%s\" %.0f%% read, " INT64_FORMAT " rows in " INT64_FORMAT " batches, %.0f rows/s, about %.0f s left",
						command_names[mine.command], get_rel_name(mine.relid),
						100 * share, rows_done, batches,
						elapsed > 0 ? rows_done / elapsed : 0,
						elapsed * (1 - share) / share)));
}

/*
 * stats_progress_end
 *		The run has ended.
 */
void
stats_progress_end(void)
{
	if (running)
		progress_release();
}

/* Copy slot i, consistently; false if it is free. */
static bool
progress_read_slot(int i, ProgressSlot *copy)
{
	volatile ProgressSlot *slot = &shared->slots[i];

	for (;;)
	{
		uint32		before = slot->changecount;

		pg_read_barrier();
		memcpy(copy, (ProgressSlot *) slot, sizeof(ProgressSlot));
		pg_read_barrier();
		if (before % 2 == 0 && before == slot->changecount)
			break;
		CHECK_FOR_INTERRUPTS();
	}
	return copy->pid != 0;
}

/*
 * fence_progress_data()
 *		One row per run shown: pid, database, role, command, phase, table,
 *		its start and the run's, the tables done, pages, rows and batches.
 *		A run of another role shows its pid, database, role and command
 *		only, unless the caller has the privileges of that role or of
 *		pg_read_all_stats, as in pg_stat_progress_vacuum.
 */
Datum
fence_progress_data(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	int			i;

	InitMaterializedSRF(fcinfo, 0);
	if (shared == NULL)
		return (Datum) 0;
	for (i = 0; i < PROGRESS_SLOTS; i++)
	{
		ProgressSlot slot;
		Datum		values[14];
		bool		nulls[14] = {0};
		int			n;

		if (!progress_read_slot(i, &slot) || BackendPidGetProc(slot.pid) == NULL)
			continue;
		values[0] = Int32GetDatum(slot.pid);
		values[1] = ObjectIdGetDatum(slot.dbid);
		values[2] = ObjectIdGetDatum(slot.userid);
		values[3] = CStringGetTextDatum(command_names[slot.command]);
		values[4] = CStringGetTextDatum(phase_names[slot.phase]);
		values[5] = ObjectIdGetDatum(slot.relid);
		nulls[5] = slot.relid == InvalidOid;
		values[6] = TimestampTzGetDatum(slot.started);
		values[7] = TimestampTzGetDatum(slot.table_started);
		nulls[7] = slot.relid == InvalidOid;
		values[8] = Int64GetDatum(slot.tables_done);
		values[9] = Int64GetDatum(slot.pages_done);
		values[10] = Int64GetDatum(slot.pages_total);
		values[11] = Int64GetDatum(slot.rows_done);
		values[12] = Int64GetDatum(slot.rows_estimate);
		nulls[12] = slot.rows_estimate < 0;
		values[13] = Int64GetDatum(slot.batches);
		if (!has_privs_of_role(GetUserId(), slot.userid) &&
			!has_privs_of_role(GetUserId(), ROLE_PG_READ_ALL_STATS))
		{
			for (n = 4; n < 14; n++)
				nulls[n] = true;
		}
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	return (Datum) 0;
}
