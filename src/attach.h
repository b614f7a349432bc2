/*-------------------------------------------------------------------------
 *
 * attach.h
 *	  Guarding an existing table (attach.c, attach_online.c), raising
 *	  its marks to the tokens of the rows it holds (attach_seed.c), and
 *	  seeding those of a table that joins a fenced hierarchy.
 *
 * IDENTIFICATION
 *	  src/attach.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef FENCING_ATTACH_H
#define FENCING_ATTACH_H

#include "nodes/pg_list.h"
#include "storage/block.h"
#include "utils/array.h"

/* Names of the triggers fence_attach() creates; "~" sorts after ASCII. */
#define ATTACH_GUARD_NAME		"~fence"
#define ATTACH_TRUNCATE_NAME	"~fence_truncate"

/* Rows a batch of fence_attach() reads, at least. */
#define ATTACH_BATCH_ROWS		10000

/* A pass over one table's rows, batch by batch (attach_seed.c). */
typedef struct SeedScan
{
	Oid			relid;
	Oid			guard;			/* fence_guard() */
	bool		raise;			/* raise the marks, or only count */
	int64		batch_rows;		/* rows a batch reads, at least */
	Oid			relfilenode;	/* a change means the table was rewritten */
	BlockNumber next;			/* the first page of the next batch */
	BlockNumber end;			/* the pages the table had at the start */
	MemoryContext cxt;			/* a batch's memory, reset after it */
	int64		batches;
	int64		rows;			/* rows read with a token and a resource */
	int64		resources;		/* resources, counted once per batch */
	int64		uncovered;		/* of those, marks missing or below a row */
} SeedScan;

/* attach.c */
extern List *attach_lock_tables(Oid relid);
extern List *attach_guard(Oid relid, Oid extnsp, const char *token_column,
						  const char *template, ArrayType *options);

/* attach.c: a table that joined a fenced hierarchy (ddl_guard.c) */
extern int64 attach_seed_joined(Oid relid, Oid guard);

/* attach_seed.c */
extern const char *attach_table_sql(Oid relid);
extern bool attach_seed_guarded(Oid relid, Oid guard);
extern void attach_seed_begin(SeedScan *scan, Oid relid, Oid guard,
							  bool raise, int64 batch_rows);
extern bool attach_seed_batch(SeedScan *scan);
extern void attach_seed_end(SeedScan *scan);

#endif							/* FENCING_ATTACH_H */
