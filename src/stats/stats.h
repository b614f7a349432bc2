/*-------------------------------------------------------------------------
 *
 * stats.h
 *	  Counters of what the guard trigger did, per guarded table, and of
 *	  what the Redis functions did.
 *
 * IDENTIFICATION
 *	  src/stats/stats.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef FENCING_STATS_H
#define FENCING_STATS_H

#include "datatype/timestamp.h"

/* What is counted for each guarded table. */
typedef enum StatsCounter
{
	STATS_CHECKED,				/* rows the guard looked at */
	STATS_ACCEPTED,				/* rows it let through */
	STATS_REJECTED_STALE,		/* rows rejected with a stale token */
	STATS_REJECTED_NO_TOKEN,	/* rows rejected for carrying no token */
	STATS_MARKS_RAISED,			/* marks created or raised by its writes */
	STATS_NCOUNTERS
} StatsCounter;

/* What is counted for the Redis functions. */
typedef enum StatsRedisCounter
{
	STATS_REDIS_ACQUIRED,		/* fenced_acquire() took the lock */
	STATS_REDIS_BUSY,			/* fenced_acquire() gave up on a busy lock */
	STATS_REDIS_REPAIRED,		/* token counters repaired past the mark */
	STATS_REDIS_CONNECTS,		/* connections made to Redis */
	STATS_REDIS_REDIRECTS,		/* Cluster -MOVED and -ASK followed */
	STATS_REDIS_FAILOVERS,		/* moves to a new primary in Sentinel mode */
	STATS_REDIS_UNAVAILABLE,	/* errors TF101 to TF106, in that order */
	STATS_REDIS_BUSY_ERRORS,
	STATS_REDIS_CLUSTER_CHANGING,
	STATS_REDIS_REFUSED,
	STATS_REDIS_PROTOCOL,
	STATS_REDIS_NOT_REPLICATED,
	STATS_REDIS_NCOUNTERS
} StatsRedisCounter;

/* What reports its progress (stats_progress.c). */
typedef enum StatsProgressCommand
{
	STATS_PROGRESS_ATTACH,
	STATS_PROGRESS_ATTACH_CONCURRENTLY,
	STATS_PROGRESS_CHECK_COVERAGE
} StatsProgressCommand;

typedef enum StatsProgressPhase
{
	STATS_PROGRESS_WAITING,		/* for the lock to create the guard */
	STATS_PROGRESS_SEEDING,		/* reading rows, raising their marks */
	STATS_PROGRESS_CHECKING,	/* reading rows, comparing their marks */
	STATS_PROGRESS_REPAIRING	/* the same, raising those below */
} StatsProgressPhase;

/* One table's counters as read, for the views (stats_tables.c). */
typedef struct StatsRow
{
	Oid			dbid;
	Oid			relid;			/* InvalidOid: the overflow entry */
	uint64		counters[STATS_NCOUNTERS];
	TimestampTz last_rejected;	/* 0: none */
} StatsRow;

extern void stats_init(void);
extern void stats_row_start(Oid relid);
extern Datum stats_row_accepted(Datum result);
extern void stats_count(StatsCounter counter);
extern void stats_at_xact_end(void);
extern void stats_redis_count(StatsRedisCounter counter);
extern void stats_redis_acquired(TimestampTz started);
extern void stats_rejected_resource(const char *resource, bool stale);

extern void stats_progress_begin(StatsProgressCommand command);
extern void stats_progress_table(Oid relid, int64 pages, double reltuples,
								 bool raise);
extern void stats_progress_batch(int64 pages_done, int64 rows_done,
								 int64 batches);
extern void stats_progress_end(void);

/* Between stats.c, stats_tables.c and stats_redis.c */
extern StatsRow *stats_read(bool all_databases, int *nrows);
extern bool stats_row_dropped(const StatsRow *row);
extern void stats_forget_dropped(void);
extern Size stats_redis_shmem_size(void);
extern void stats_redis_shmem_startup(void);
extern void stats_redis_init(void);
extern void stats_redis_reset(void);
extern Size stats_progress_shmem_size(void);
extern void stats_progress_shmem_startup(void);
extern void stats_progress_init(void);
extern Size stats_resources_shmem_size(void);
extern void stats_resources_shmem_startup(void);
extern void stats_resources_reset(void);

#endif							/* FENCING_STATS_H */
