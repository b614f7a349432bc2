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

/* Between stats.c, stats_tables.c and stats_redis.c */
extern StatsRow *stats_read(bool all_databases, int *nrows);
extern bool stats_row_dropped(const StatsRow *row);
extern void stats_forget_dropped(void);
extern Size stats_redis_shmem_size(void);
extern void stats_redis_shmem_startup(void);
extern void stats_redis_init(void);
extern void stats_redis_reset(void);

#endif							/* FENCING_STATS_H */
