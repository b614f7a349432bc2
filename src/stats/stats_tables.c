/*-------------------------------------------------------------------------
 *
 * stats_tables.c
 *	  The function behind the view fence_stat_tables: the guard's
 *	  counters of this database's tables, partitions added up to their
 *	  root (the entries of dropped tables forgotten first, by stats.c).
 *
 * The trigger fires on the partition a row goes to, and counts it there
 * (stats.c), where the hot path has no catalog lookup.  A partition is
 * added to its root here, when the counters are read, by the partition
 * tree of that moment: a partition detached since counts as a table of
 * its own, one attached since with the root it joined.  Only this
 * database's catalogs can say which table is whose partition, so each
 * database rolls up its own.
 *
 * IDENTIFICATION
 *	  src/stats/stats_tables.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/partition.h"
#include "fmgr.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "stats/stats.h"
#include "utils/hsearch.h"
#include "utils/lsyscache.h"
#include "utils/timestamp.h"
#include "utils/tuplestore.h"

/* The sum of a partition tree's counters, by its root. */
typedef struct StatsRoot
{
	Oid			root;
	StatsRow	sum;
} StatsRoot;

PG_FUNCTION_INFO_V1(fence_stat_tables_data);

/* The root of relid's partition tree; relid if it is not a partition. */
static Oid
stats_root_of(Oid relid)
{
	List	   *ancestors;

	if (!get_rel_relispartition(relid))
		return relid;
	ancestors = get_partition_ancestors(relid);
	return ancestors == NIL ? relid : llast_oid(ancestors);
}

/* Add the counts of row to sum. */
static void
stats_row_sum(StatsRow *sum, const StatsRow *row)
{
	int			i;

	for (i = 0; i < STATS_NCOUNTERS; i++)
		sum->counters[i] += row->counters[i];
	sum->last_rejected = Max(sum->last_rejected, row->last_rejected);
}

/* Add row to the result set, relid as its table. */
static void
stats_row_emit(ReturnSetInfo *rsinfo, Oid relid, const StatsRow *row)
{
	Datum		values[2 + STATS_NCOUNTERS];
	bool		nulls[2 + STATS_NCOUNTERS] = {0};
	int			i;

	values[0] = ObjectIdGetDatum(relid);
	for (i = 0; i < STATS_NCOUNTERS; i++)
		values[1 + i] = Int64GetDatum((int64) row->counters[i]);
	values[1 + STATS_NCOUNTERS] = TimestampTzGetDatum(row->last_rejected);
	nulls[1 + STATS_NCOUNTERS] = row->last_rejected == 0;
	tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
}

/*
 * fence_stat_tables_data()
 *		The counters of every guarded table of this database, partitions
 *		added to their root, and in shared mode the overflow entry (relid
 *		0) if it counted anything.
 */
Datum
fence_stat_tables_data(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	HASHCTL		info;
	HTAB	   *roots;
	HASH_SEQ_STATUS seq;
	StatsRow   *rows;
	StatsRoot  *entry;
	int			nrows;
	int			i;

	InitMaterializedSRF(fcinfo, 0);
	stats_forget_dropped();
	rows = stats_read(false, &nrows);

	info.keysize = sizeof(Oid);
	info.entrysize = sizeof(StatsRoot);
	info.hcxt = CurrentMemoryContext;
	roots = hash_create("fencing stats roots", Max(nrows, 16), &info,
						HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
	for (i = 0; i < nrows; i++)
	{
		Oid			root;
		bool		found;

		if (!OidIsValid(rows[i].relid))
		{
			stats_row_emit(rsinfo, InvalidOid, &rows[i]);
			continue;
		}
		/* dropped since stats_forget_dropped() looked */
		if (stats_row_dropped(&rows[i]))
			continue;
		root = stats_root_of(rows[i].relid);
		entry = hash_search(roots, &root, HASH_ENTER, &found);
		if (!found)
			memset(&entry->sum, 0, sizeof(StatsRow));
		stats_row_sum(&entry->sum, &rows[i]);
	}
	hash_seq_init(&seq, roots);
	while ((entry = hash_seq_search(&seq)) != NULL)
		stats_row_emit(rsinfo, entry->root, &entry->sum);
	return (Datum) 0;
}
