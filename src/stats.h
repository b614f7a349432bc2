/*-------------------------------------------------------------------------
 *
 * stats.h
 *	  Counters of what the guard trigger did, per guarded table.
 *
 * IDENTIFICATION
 *	  src/stats.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef FENCING_STATS_H
#define FENCING_STATS_H

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

extern void stats_init(void);
extern void stats_row_start(Oid relid);
extern Datum stats_row_accepted(Datum result);
extern void stats_count(StatsCounter counter);
extern void stats_at_xact_end(void);

#endif							/* FENCING_STATS_H */
