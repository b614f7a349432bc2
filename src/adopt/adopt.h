/*-------------------------------------------------------------------------
 *
 * adopt.h
 *	  The adopt layer, for its own files: guarding an existing table
 *	  (attach.c), raising its marks to the tokens of the rows it holds
 *	  and checking they cover them (attach_seed.c), the DDL that must not
 *	  unfence a table (ddl_guard.c) and the TRUNCATE guards of
 *	  partitions, cloned from their parents' (ddl_partitions.c).  Adopt
 *	  uses core, marks and guard; nothing uses adopt but SQL.
 *
 * IDENTIFICATION
 *	  src/adopt/adopt.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef FENCING_ADOPT_ADOPT_H
#define FENCING_ADOPT_ADOPT_H

#include "nodes/parsenodes.h"
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

extern int	ddl_clone_truncate_guards(Oid relid, Oid truncate_guard);
extern List *ddl_triggers_calling(Oid relid, Oid funcoid);
extern void ddl_alter_enum(AlterEnumStmt *stmt, Oid guard);
extern void ddl_alter_column_type(Oid relid, const char *column, Oid guard);
extern void ddl_replace_trigger(CreateTrigStmt *stmt, Oid guard);
extern void ddl_clones_follow(Oid relid, const char *tgname,
							  Oid truncate_guard);
extern void ddl_make_room_for_trigger(CreateTrigStmt *stmt,
									  Oid truncate_guard);

#endif							/* FENCING_ADOPT_ADOPT_H */
