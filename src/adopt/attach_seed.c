/*-------------------------------------------------------------------------
 *
 * attach_seed.c
 *	  Raising the marks of a guarded table to the tokens its rows carry,
 *	  batch by batch: the seeding of fence_attach() and
 *	  fence_attach_concurrently(); fence_check_coverage(), whether the
 *	  marks cover the rows of guarded tables, and fence_table_marks(), the
 *	  marks of a table a role reads.
 *
 * The rows are read by a scan of the table itself, not by a query: row
 * level security, which filters a query by the policies of the caller,
 * does not hide any row from it, and every row's resource is named by the
 * guard's own rule in C (resource_template.c), from the configuration the
 * guard itself reads of the table's trigger (guard_config.c).  The caller
 * checks that it owns the tables.
 *
 * A batch reads whole pages of the table until it has read batch_rows
 * rows, keeps the highest token of each resource in a hash table, then
 * raises each mark that is below it (fence_advance's raise, never a
 * lowering).  Everything a batch allocates is in a memory context of its
 * own, reset after it, so that a table of any size is seeded in the memory
 * of one batch.  A caller may commit between batches: the scan resumes at
 * the page where the last batch stopped, and covers the pages the table
 * had when it began.  Rows written since are written under the guard,
 * which raises their marks itself, wherever they land; a rewrite of the
 * table (VACUUM FULL, CLUSTER) between batches moves every row, so the
 * scan then starts again from the first page.
 *
 * After a restore that lost or lowered marks (a dump taken without the
 * marks table, a restore that failed on it), a resource whose rows carry
 * tokens above its mark accepts stale writes.  fence_check_coverage()
 * reads every row of every guarded table, or of one, the way fence_attach()
 * seeds (above), and reports per table how many resources have a
 * mark below one of their rows' tokens or none; with repair, it raises
 * those marks.  It reads whole tables: run it when a table may be read
 * end to end.  The caller must own each table it checks; called for
 * every guarded table, it checks those it owns.
 *
 * The marks table names resources by their column values, so the view
 * fence_marks is not readable by everyone.  fence_table_marks() shows a
 * role the marks of the rows it can read of one guarded table: it queries
 * the table as the caller, so its privileges and row security apply.
 *
 * IDENTIFICATION
 *	  src/adopt/attach_seed.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/htup_details.h"
#include "access/table.h"
#include "access/tableam.h"
#include "adopt/adopt.h"
#include "catalog/pg_class.h"
#include "catalog/pg_inherits.h"
#include "catalog/pg_trigger.h"
#include "commands/trigger.h"
#include "common/hashfn.h"
#include "core/core.h"
#include "core/pg_compat.h"
#include "executor/spi.h"
#include "executor/tuptable.h"
#include "fencing_errcodes.h"
#include "funcapi.h"
#include "guard/guard.h"
#include "marks/marks.h"
#include "miscadmin.h"
#include "parser/parse_relation.h"
#include "stats/stats.h"
#include "storage/bufmgr.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/hsearch.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"

/* The highest token of one resource among a batch's rows. */
typedef struct SeedEntry
{
	const char *resource;		/* hash key: the pointer, hashed by text */
	FenceToken	token;
} SeedEntry;

/* The table's schema-qualified, quoted name. */
const char *
attach_table_sql(Oid relid)
{
	return quote_qualified_identifier(get_namespace_name(get_rel_namespace(relid)),
									  get_rel_name(relid));
}

static uint32
seed_hash(const void *key, Size keysize)
{
	const char *s = *(const char *const *) key;

	return hash_bytes((const unsigned char *) s, strlen(s));
}

static int
seed_match(const void *a, const void *b, Size keysize)
{
	return strcmp(*(const char *const *) a, *(const char *const *) b);
}

/*
 * The enabled fence_guard() row trigger of rel in resource scope; NULL if
 * it has none (row scope has no marks to seed).
 */
static Trigger *
seed_guard_trigger(Relation rel, Oid guard)
{
	int			i;

	for (i = 0; rel->trigdesc != NULL && i < rel->trigdesc->numtriggers; i++)
	{
		Trigger    *trigger = &rel->trigdesc->triggers[i];

		if (trigger->tgfoid == guard && TRIGGER_FOR_ROW(trigger->tgtype) &&
			trigger->tgenabled != TRIGGER_DISABLED &&
			trigger->tgnargs >= 2 && trigger->tgargs[1][0] != '\0')
			return trigger;
	}
	return NULL;
}

/*
 * attach_seed_guarded
 *		Whether relid has a table's storage and a guard in resource scope:
 *		whether attach_seed_batch() has rows to read in it.
 */
bool
attach_seed_guarded(Oid relid, Oid guard)
{
	Relation	rel;
	bool		guarded;

	if (get_rel_relkind(relid) != RELKIND_RELATION)
		return false;
	rel = table_open(relid, AccessShareLock);
	guarded = seed_guard_trigger(rel, guard) != NULL;
	table_close(rel, AccessShareLock);
	return guarded;
}

/*
 * attach_seed_begin
 *		Prepare to read relid, a table guarded by guard (the OID of
 *		fence_guard()), from its first page: raising the marks if raise,
 *		else only counting those below their rows' tokens.
 */
void
attach_seed_begin(SeedScan *scan, Oid relid, Oid guard, bool raise,
				  int64 batch_rows)
{
	Relation	rel = table_open(relid, AccessShareLock);

	memset(scan, 0, sizeof(*scan));
	scan->relid = relid;
	scan->guard = guard;
	scan->raise = raise;
	scan->batch_rows = batch_rows;
	scan->relfilenode = rel->rd_rel->relfilenode;
	scan->end = RelationGetNumberOfBlocks(rel);
	stats_progress_table(relid, scan->end, rel->rd_rel->reltuples, raise);
	table_close(rel, AccessShareLock);
	scan->cxt = AllocSetContextCreate(CurrentMemoryContext,
									  "fence_attach batch",
									  ALLOCSET_DEFAULT_SIZES);
}

/* Free what attach_seed_begin() made. */
void
attach_seed_end(SeedScan *scan)
{
	MemoryContextDelete(scan->cxt);
	scan->cxt = NULL;
}

/*
 * Read the rows of one batch into the hash table seen, from page
 * scan->next; advance scan->next past the pages read.
 */
static void
seed_read(SeedScan *scan, Relation rel, HTAB *seen)
{
	Trigger    *trigger = seed_guard_trigger(rel, scan->guard);
	GuardConfig *config;
	TupleDesc	tupdesc = RelationGetDescr(rel);
	FmgrInfo	flinfo;
	LOCAL_FCINFO(fcinfo, 0);
	Snapshot	snapshot;
	TableScanDesc tscan;
	TupleTableSlot *slot;
	ItemPointerData mintid;
	ItemPointerData maxtid;
	BlockNumber stop = scan->end;
	int64		read = 0;

	if (trigger == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("table \"%s\" is no longer guarded in resource scope",
						RelationGetRelationName(rel)),
				 errdetail("Its guard was dropped or disabled while its marks were being seeded.")));

	/* The guard's own reading of its arguments, as it runs as fence_guard(). */
	fmgr_info(scan->guard, &flinfo);
	InitFunctionCallInfoData(*fcinfo, &flinfo, 0, InvalidOid, NULL, NULL);
	config = guard_config(fcinfo, trigger, rel);

	/*
	 * The newest snapshot: a writer that committed while fence_attach()
	 * waited for its lock is newer than the statement's.
	 */
	snapshot = RegisterSnapshot(GetLatestSnapshot());
	ItemPointerSet(&mintid, scan->next, FirstOffsetNumber);
	ItemPointerSet(&maxtid, scan->end - 1, MaxOffsetNumber);
	tscan = table_beginscan_tidrange(rel, snapshot, &mintid, &maxtid);
	slot = table_slot_create(rel, NULL);
	while (table_scan_getnextslot_tidrange(tscan, ForwardScanDirection, slot))
	{
		BlockNumber block = ItemPointerGetBlockNumber(&slot->tts_tid);
		bool		isnull;
		Datum		token;
		const char *resource;
		SeedEntry  *entry;
		bool		found;
		int			i;

		/* A batch ends between pages, so that the next begins at one. */
		if (read >= scan->batch_rows && block != ItemPointerGetBlockNumber(&mintid))
		{
			stop = block;
			break;
		}
		ItemPointerSetBlockNumber(&mintid, block);
		read++;
		CHECK_FOR_INTERRUPTS();

		/* A row without a token or a resource has no mark to raise. */
		token = slot_getattr(slot, config->token_attnum, &isnull);
		if (isnull)
			continue;
		for (i = 0; i < config->nparts; i++)
		{
			if (config->parts[i].literal == NULL)
			{
				(void) slot_getattr(slot, config->parts[i].attnum, &isnull);
				if (isnull)
					break;
			}
		}
		if (i < config->nparts)
			continue;

		resource = resource_template_name(config->parts, config->nparts,
										  ExecFetchSlotHeapTuple(slot, false, NULL),
										  tupdesc, trigger->tgname, false);
		scan->rows++;
		entry = hash_search(seen, &resource, HASH_ENTER, &found);
		if (!found)
		{
			entry->resource = pstrdup(resource);
			entry->token = DatumGetFenceToken(token);
		}
		else if (DatumGetFenceToken(token) > entry->token)
			entry->token = DatumGetFenceToken(token);
	}
	ExecDropSingleTupleTableSlot(slot);
	table_endscan(tscan);
	UnregisterSnapshot(snapshot);
	scan->next = stop;
}

/*
 * attach_seed_batch
 *		Read one batch of rows and raise (or count) the marks below their
 *		tokens; false once the table has been read to its end.
 */
bool
attach_seed_batch(SeedScan *scan)
{
	MemoryContext oldcxt = MemoryContextSwitchTo(scan->cxt);
	Relation	rel = table_open(scan->relid, AccessShareLock);
	HASHCTL		ctl;
	HTAB	   *seen;
	HASH_SEQ_STATUS status;
	SeedEntry  *entry;

	/* A rewrite moved every row: read them all again. */
	if (rel->rd_rel->relfilenode != scan->relfilenode)
	{
		scan->relfilenode = rel->rd_rel->relfilenode;
		scan->next = 0;
		scan->end = RelationGetNumberOfBlocks(rel);
	}

	ctl.keysize = sizeof(const char *);
	ctl.entrysize = sizeof(SeedEntry);
	ctl.hash = seed_hash;
	ctl.match = seed_match;
	ctl.hcxt = scan->cxt;
	seen = hash_create("fence_attach batch", 1024, &ctl,
					   HASH_ELEM | HASH_FUNCTION | HASH_COMPARE | HASH_CONTEXT);
	if (scan->next < scan->end)
		seed_read(scan, rel, seen);
	table_close(rel, AccessShareLock);

	hash_seq_init(&status, seen);
	while ((entry = hash_seq_search(&status)) != NULL)
	{
		FenceToken	mark;

		scan->resources++;
		if (marks_read(entry->resource, &mark) && mark >= entry->token)
			continue;
		scan->uncovered++;
		if (scan->raise)
			(void) marks_advance(entry->resource, entry->token, true);
	}
	scan->batches++;
	stats_progress_batch(scan->next, scan->rows, scan->batches);

	MemoryContextSwitchTo(oldcxt);
	MemoryContextReset(scan->cxt);
	return scan->next < scan->end;
}


PG_FUNCTION_INFO_V1(fence_check_coverage);
PG_FUNCTION_INFO_V1(fence_table_marks);

/*
 * Why the guard on relid cannot cover its rows, or NULL if it can: a
 * foreign table is written on its own server, which no guard of ours
 * sees; a guard with an UPDATE OF list or a WHEN condition does not fire
 * for every row (guard_refuse_shape).  Such a table is reported with its
 * counts null, and never as covered.
 */
static const char *
coverage_not_coverable(Oid relid, Oid guard)
{
	Relation	rel = table_open(relid, AccessShareLock);
	const char *why = NULL;
	int			i;

	for (i = 0; rel->trigdesc != NULL && i < rel->trigdesc->numtriggers; i++)
	{
		Trigger    *trigger = &rel->trigdesc->triggers[i];

		if (trigger->tgfoid != guard || trigger->tgenabled == TRIGGER_DISABLED)
			continue;
		if (rel->rd_rel->relkind == RELKIND_FOREIGN_TABLE)
			why = "it is a foreign table, written on its own server where no guard sees the writes";
		else if (trigger->tgnattr > 0 || trigger->tgqual != NULL)
			why = psprintf("its guard \"%s\" has an UPDATE OF column list or a WHEN condition, and does not fire for every row",
						   trigger->tgname);
	}
	table_close(rel, AccessShareLock);
	return why;
}

/*
 * The tables with storage guarded in resource scope, of relid or all, and
 * the guarded tables whose rows no guard covers (coverage_not_coverable).
 */
static List *
coverage_tables(Oid relid, Oid guard)
{
	List	   *tables = NIL;
	List	   *result = NIL;
	ListCell   *lc;

	if (OidIsValid(relid))
		tables = find_all_inheritors(relid, AccessShareLock, NULL);
	else
	{
		Relation	trigrel = table_open(TriggerRelationId, AccessShareLock);
		SysScanDesc scan = systable_beginscan(trigrel, InvalidOid, false,
											  NULL, 0, NULL);
		HeapTuple	tuple;

		while (HeapTupleIsValid(tuple = systable_getnext(scan)))
		{
			Form_pg_trigger trigger = (Form_pg_trigger) GETSTRUCT(tuple);

			if (trigger->tgfoid == guard)
				tables = list_append_unique_oid(tables, trigger->tgrelid);
		}
		systable_endscan(scan);
		table_close(trigrel, AccessShareLock);
	}
	foreach(lc, tables)
	{
		if (attach_seed_guarded(lfirst_oid(lc), guard) ||
			(get_rel_relkind(lfirst_oid(lc)) == RELKIND_FOREIGN_TABLE &&
			 coverage_not_coverable(lfirst_oid(lc), guard) != NULL))
			result = lappend_oid(result, lfirst_oid(lc));
	}
	return result;
}

/*
 * fence_check_coverage(tbl regclass DEFAULT NULL, repair boolean DEFAULT false,
 *		OUT table_name regclass, OUT rows bigint, OUT resources bigint,
 *		OUT uncovered bigint, OUT repaired bigint) returns setof record
 *		Per guarded table (each partition and child its own), the rows read
 *		and the resources whose mark is missing or below one of their
 *		rows' tokens; repair raises those marks.
 */
Datum
fence_check_coverage(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	Oid			extnsp = extension_schema_of_call(fcinfo);
	Oid			guard = extension_func(extnsp, "fence_guard", 0, NULL);
	bool		repair = !PG_ARGISNULL(1) && PG_GETARG_BOOL(1);
	List	   *tables;
	ListCell   *lc;

	InitMaterializedSRF(fcinfo, 0);
	if (repair)
	{
		PreventCommandIfReadOnly("fence_check_coverage(repair => true)");
		PreventCommandDuringRecovery("fence_check_coverage(repair => true)");
	}
	tables = coverage_tables(PG_ARGISNULL(0) ? InvalidOid : PG_GETARG_OID(0),
							 guard);
	stats_progress_begin(STATS_PROGRESS_CHECK_COVERAGE);
	foreach(lc, tables)
	{
		Oid			relid = lfirst_oid(lc);
		SeedScan	scan;
		Datum		values[5];
		bool		nulls[5] = {false, false, false, false, false};
		const char *why;

		/*
		 * Every row is read, whatever policies apply: the owner's alone.  Of
		 * all guarded tables, those of other owners are passed over.
		 */
		if (!fencing_relation_ownercheck(relid, GetUserId()))
		{
			if (PG_ARGISNULL(0))
				continue;
			aclcheck_error(ACLCHECK_NOT_OWNER, OBJECT_TABLE, get_rel_name(relid));
		}
		why = coverage_not_coverable(relid, guard);
		if (why != NULL)
		{
			ereport(WARNING,
					(errcode(ERRCODE_FENCING_GUARD_MISCONFIGURED),
					 errmsg("the rows of table \"%s\" cannot be covered by marks",
							get_rel_name(relid)),
					 errdetail("The table is guarded, but %s.", why)));
			values[0] = ObjectIdGetDatum(relid);
			nulls[1] = nulls[2] = nulls[3] = nulls[4] = true;
			tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
			continue;
		}
		attach_seed_begin(&scan, relid, guard, repair, ATTACH_BATCH_ROWS);
		while (attach_seed_batch(&scan))
			;
		attach_seed_end(&scan);
		values[0] = ObjectIdGetDatum(relid);
		values[1] = Int64GetDatum(scan.rows);
		values[2] = Int64GetDatum(scan.resources);
		values[3] = Int64GetDatum(scan.uncovered);
		values[4] = Int64GetDatum(repair ? scan.uncovered : 0);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	stats_progress_end();
	return (Datum) 0;
}

/* The type of a placeholder's column, for resource_template_sql(). */
static Oid
coverage_column_type(Relation rel, const char *name)
{
	AttrNumber	attnum = attnameAttNum(rel, name, false);

	if (attnum == InvalidAttrNumber)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_COLUMN),
				 errmsg("resource column \"%s\" does not exist in table \"%s\"",
						name, RelationGetRelationName(rel))));
	return TupleDescAttr(RelationGetDescr(rel), attnum - 1)->atttypid;
}

/*
 * fence_table_marks(tbl regclass, OUT resource text, OUT token fence_token)
 *		returns setof record
 *		The marks of the resources named by the rows of tbl the caller can
 *		read, by the template of its guard.
 */
Datum
fence_table_marks(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	Oid			relid = PG_GETARG_OID(0);
	Oid			extnsp = extension_schema_of_call(fcinfo);
	Oid			guard = extension_func(extnsp, "fence_guard", 0, NULL);
	const char *template = NULL;
	StringInfoData notnull;
	StringInfoData sql;
	char	   *expr;
	Relation	rel;
	uint64		i;
	int			t;

	InitMaterializedSRF(fcinfo, 0);
	rel = table_open(relid, AccessShareLock);
	for (t = 0; rel->trigdesc != NULL && t < rel->trigdesc->numtriggers; t++)
	{
		Trigger    *trigger = &rel->trigdesc->triggers[t];

		if (trigger->tgfoid == guard && trigger->tgnargs >= 2 &&
			trigger->tgargs[1][0] != '\0')
			template = pstrdup(trigger->tgargs[1]);
	}
	if (template == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("table \"%s\" has no guard in resource scope",
						RelationGetRelationName(rel))));
	initStringInfo(&notnull);
	expr = resource_template_sql(rel, template, coverage_column_type, &notnull);
	table_close(rel, AccessShareLock);

	/* As the caller: its privileges and the policies on it apply. */
	initStringInfo(&sql);
	appendStringInfo(&sql, "SELECT DISTINCT %s FROM %s WHERE true%s",
					 expr, attach_table_sql(relid), notnull.data);
	SPI_connect();
	if (SPI_execute(sql.data, true, 0) != SPI_OK_SELECT)
		elog(ERROR, "SPI_execute failed: %s", sql.data);
	for (i = 0; i < SPI_processed; i++)
	{
		bool		isnull;
		char	   *resource = TextDatumGetCString(SPI_getbinval(SPI_tuptable->vals[i],
																 SPI_tuptable->tupdesc,
																 1, &isnull));
		FenceToken	mark;
		Datum		values[2];
		bool		nulls[2] = {false, false};

		if (!marks_read(resource, &mark))
			continue;
		values[0] = CStringGetTextDatum(resource);
		values[1] = FenceTokenGetDatum(mark);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	SPI_finish();
	return (Datum) 0;
}
