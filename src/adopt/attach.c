/*-------------------------------------------------------------------------
 *
 * attach.c
 *	  fence_attach() and fence_detach(): guard an existing table, seeding
 *	  the marks from the rows it already holds, and take the guard away;
 *	  and the same seeding for a table joining a fenced hierarchy; and
 *	  fence_attach_concurrently(), which guards an existing table without
 *	  holding its writers up for longer than a short lock.
 *
 * A table that already holds rows with tokens has no marks yet: until
 * each resource is written once, any token, however stale, is accepted.
 * fence_attach() therefore raises the mark of every resource to the
 * highest token its rows carry, holding a SHARE ROW EXCLUSIVE lock on the
 * table (and its children) from before the triggers exist until the
 * transaction ends, so that no write slips between the scan and the
 * guard.  Marks are raised, never lowered.
 *
 * attach_guard() creates the guards; the seeding, table by table and
 * batch by batch, is in attach_seed.c, and the online form, which commits
 * between the two and between batches, below.
 *
 * The triggers are created with CREATE TRIGGER as the calling user, the
 * table's owner, who therefore needs EXECUTE on fence_guard() as for
 * creating the trigger by hand: fence_attach() grants no power of its own.
 * Their names sort after every ASCII name, since BEFORE triggers fire in
 * name order and the guard must see the row as it will be stored.
 *
 * fence_attach() holds SHARE ROW EXCLUSIVE from before the guard exists
 * until every mark is seeded, so that no write slips between; on a big
 * table its writers wait for the whole scan.  This procedure instead
 * creates the guard in a transaction of its own, taking the lock with
 * lock_timeout and trying again after a pause when it times out (writers
 * queued behind the request wait at most that long), then seeds the marks
 * batch by batch, committing after each (attach_seed.c), while the table
 * is written.
 *
 * What is fenced while it seeds: every write is checked by the guard from
 * the moment it is created, and every write it accepts raises its mark;
 * an UPDATE or DELETE of a row is checked at least against that row's own
 * token (the row-token floor, fence_guard.c).  What is not: a write to a
 * resource whose mark is not seeded yet is checked against its mark as it
 * stands, so a new row with a token below the highest token of the
 * resource's other rows, or an update of a row whose siblings carry higher
 * tokens, is accepted until their batch is seeded.  The seeding raises the
 * marks by max and never lowers one a writer raised meanwhile.
 *
 * Like CREATE INDEX CONCURRENTLY it refuses to run inside a transaction
 * block: it commits.
 *
 * IDENTIFICATION
 *	  src/adopt/attach.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_class.h"
#include "access/htup_details.h"
#include "access/table.h"
#include "access/xact.h"
#include "adopt/adopt.h"
#include "catalog/pg_inherits.h"
#include "catalog/pg_type.h"
#include "commands/trigger.h"
#include "core/core.h"
#include "core/pg_compat.h"
#include "executor/spi.h"
#include "fencing_errcodes.h"
#include "guard/guard.h"
#include "lib/stringinfo.h"
#include "miscadmin.h"
#include "nodes/makefuncs.h"
#include "nodes/parsenodes.h"
#include "parser/parse_func.h"
#include "pgstat.h"
#include "stats/stats.h"
#include "storage/latch.h"
#include "storage/lmgr.h"
#include "utils/acl.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/resowner.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"

PG_FUNCTION_INFO_V1(fence_attach);
PG_FUNCTION_INFO_V1(fence_detach);

/* Refuse unless the current user owns relid. */
static void
attach_check_owner(Oid relid)
{
	if (!fencing_relation_ownercheck(relid, GetUserId()))
		aclcheck_error(ACLCHECK_NOT_OWNER,
					   get_relkind_objtype(get_rel_relkind(relid)),
					   get_rel_name(relid));
}

/*
 * A column named by fence_attach's arguments: it must exist and must not
 * be generated (a BEFORE trigger sees a generated column before it is
 * computed).  what says which argument named it.
 */
static Form_pg_attribute
attach_column(Relation rel, const char *name, const char *what)
{
	TupleDesc	tupdesc = RelationGetDescr(rel);
	int			i;

	for (i = 0; i < tupdesc->natts; i++)
	{
		Form_pg_attribute att = TupleDescAttr(tupdesc, i);

		if (att->attisdropped || strcmp(NameStr(att->attname), name) != 0)
			continue;
		if (att->attgenerated != '\0')
			ereport(ERROR,
					(errcode(ERRCODE_FENCING_GUARD_MISCONFIGURED),
					 errmsg("%s \"%s\" of table \"%s\" is a generated column",
							what, name, RelationGetRelationName(rel)),
					 errdetail("A BEFORE trigger sees a generated column before it is computed.")));
		return att;
	}
	ereport(ERROR,
			(errcode(ERRCODE_UNDEFINED_COLUMN),
			 errmsg("%s \"%s\" does not exist in table \"%s\"",
					what, name, RelationGetRelationName(rel))));
	return NULL;				/* keep compiler quiet */
}

/* The type of a resource column of fence_attach's template. */
static Oid
attach_resource_column(Relation rel, const char *name)
{
	return attach_column(rel, name, "resource column")->atttypid;
}

/* Run one command built by this file, failing loudly. */
static void
attach_run(const char *sql)
{
	if (SPI_execute(sql, false, 0) < 0)
		elog(ERROR, "SPI_execute failed: %s", sql);
}

/*
 * attach_lock_tables
 *		Keep writers out of relid and every table below it until the end of
 *		the transaction, checking that the caller owns each; their list,
 *		relid first.
 *
 * find_all_inheritors locks the children only: relid itself is locked
 * first, after the ownership check, so that a stranger cannot queue a
 * lock that holds up the table's writers.
 */
List *
attach_lock_tables(Oid relid)
{
	List	   *tables;
	ListCell   *lc;

	attach_check_owner(relid);
	LockRelationOid(relid, ShareRowExclusiveLock);
	tables = find_all_inheritors(relid, ShareRowExclusiveLock, NULL);
	foreach(lc, tables)
		attach_check_owner(lfirst_oid(lc));
	return tables;
}

/* Whether relid has a trigger calling funcoid, its own or cloned. */
static bool
attach_has_trigger(Oid relid, Oid funcoid)
{
	Relation	rel = table_open(relid, AccessShareLock);
	bool		found = false;
	int			i;

	for (i = 0; rel->trigdesc != NULL && i < rel->trigdesc->numtriggers; i++)
	{
		Trigger    *trigger = &rel->trigdesc->triggers[i];

		if (trigger->tgfoid == funcoid)
			found = true;
	}
	table_close(rel, AccessShareLock);
	return found;
}

/*
 * attach_seed_tables
 *		Raise the marks of every table of tables that guard fences in
 *		resource scope to the tokens its rows carry, in this transaction;
 *		the resources seeded.  The tables must be locked against writers.
 */
static int64
attach_seed_tables(List *tables, Oid guard)
{
	ListCell   *lc;
	int64		seeded = 0;

	foreach(lc, tables)
	{
		SeedScan	scan;

		if (!attach_seed_guarded(lfirst_oid(lc), guard))
			continue;
		attach_seed_begin(&scan, lfirst_oid(lc), guard, true,
						  ATTACH_BATCH_ROWS);
		while (attach_seed_batch(&scan))
			;
		seeded += scan.resources;
		attach_seed_end(&scan);
	}
	return seeded;
}

/*
 * attach_seed_joined
 *		Seed the marks of a table that has just joined a fenced hierarchy
 *		(ALTER TABLE ... ATTACH PARTITION or INHERIT) from the rows of relid
 *		and the tables below it, as fence_attach() does; returns the number
 *		of resources seeded.  Called by the event trigger (ddl_guard.c).
 *
 * Without it, a row at token 500 in the newcomer would not fence its
 * resource: a new row of that resource at 400 would be accepted (the
 * row-token floor covers only the row itself).  The DDL holds an ACCESS
 * EXCLUSIVE lock on relid, and ATTACH PARTITION on the tables below it
 * too, until the transaction ends, so no write slips between the scan and
 * the guard; the tables below it are locked here against writers for
 * INHERIT, which does not lock them.
 */
int64
attach_seed_joined(Oid relid, Oid guard)
{
	return attach_seed_tables(find_all_inheritors(relid, ShareRowExclusiveLock,
												  NULL),
							  guard);
}

/*
 * attach_guard
 *		Guard relid and every table below it, as fence_attach() does,
 *		holding SHARE ROW EXCLUSIVE on them until the transaction ends;
 *		their list, relid first.  The marks are not seeded yet.
 */
List *
attach_guard(Oid relid, Oid extnsp, const char *token_column,
			 const char *template, ArrayType *options)
{
	Oid			guard = extension_func(extnsp, "fence_guard", 0, NULL);
	Oid			truncate_guard = extension_func(extnsp, "fence_truncate_guard", 0, NULL);
	StringInfoData args;
	Relation	rel;
	Form_pg_attribute att;
	List	   *tables;
	ListCell   *lc;

	/* Writers wait from here to the end of the transaction. */
	tables = attach_lock_tables(relid);
	foreach(lc, tables)
	{
		if (get_rel_relkind(lfirst_oid(lc)) == RELKIND_FOREIGN_TABLE)
			ereport(ERROR,
					(errcode(ERRCODE_FENCING_FOREIGN_TABLE),
					 errmsg("cannot guard foreign table \"%s\"",
							get_rel_name(lfirst_oid(lc))),
					 errdetail("A foreign table's rows are written on its own server, where no guard of this database checks them."),
					 errhint("Guard the table on the server that holds it.")));
	}

	rel = table_open(relid, NoLock);
	att = attach_column(rel, token_column, "token column");
	if (att->atttypid != fence_token_type(extnsp))
		ereport(ERROR,
				(errcode(ERRCODE_DATATYPE_MISMATCH),
				 errmsg("token column \"%s\" of table \"%s\" is not of type fence_token",
						token_column, RelationGetRelationName(rel))));
	if (att->atthasdef)
		ereport(ERROR,
				(errcode(ERRCODE_FENCING_GUARD_MISCONFIGURED),
				 errmsg("token column \"%s\" of table \"%s\" has a default",
						token_column, RelationGetRelationName(rel)),
				 errdetail("A trigger cannot tell a default from a token the statement wrote, so the default would override declared tokens."),
				 errhint("Drop the default: ALTER TABLE %s ALTER COLUMN %s DROP DEFAULT.",
						 attach_table_sql(relid), quote_identifier(token_column))));
	if (template[0] != '\0')
	{
		StringInfoData notnull;

		/* Read as the guard reads it, refusing what it would refuse. */
		initStringInfo(&notnull);
		(void) resource_template_sql(rel, template, attach_resource_column,
									 &notnull);
	}
	table_close(rel, NoLock);

	foreach(lc, tables)
	{
		if (attach_has_trigger(lfirst_oid(lc), guard))
			ereport(ERROR,
					(errcode(ERRCODE_FENCING_GUARD_MISCONFIGURED),
					 errmsg("table \"%s\" is already guarded", get_rel_name(lfirst_oid(lc))),
					 errhint("Detach the guard first with fence_detach().")));
	}

	/* The trigger's arguments: the token column, the template, options. */
	initStringInfo(&args);
	appendStringInfoString(&args, quote_literal_cstr(token_column));
	{
		Datum	   *elems;
		bool	   *nulls;
		int			nelems;
		int			i;

		deconstruct_array(options, TEXTOID, -1, false, TYPALIGN_INT,
						  &elems, &nulls, &nelems);
		if (template[0] != '\0' || nelems > 0)
			appendStringInfo(&args, ", %s", quote_literal_cstr(template));
		for (i = 0; i < nelems; i++)
		{
			if (nulls[i])
				ereport(ERROR,
						(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
						 errmsg("table, token column and options must not be null")));
			appendStringInfo(&args, ", %s",
							 quote_literal_cstr(TextDatumGetCString(elems[i])));
		}
	}

	SPI_connect();
	foreach(lc, tables)
	{
		Oid			child = lfirst_oid(lc);

		/* Partitions get the row trigger cloned from the parent's. */
		if (child == relid || !get_rel_relispartition(child))
			attach_run(psprintf("CREATE TRIGGER %s BEFORE INSERT OR UPDATE%s ON %s FOR EACH ROW EXECUTE FUNCTION %s.fence_guard(%s)",
								quote_identifier(ATTACH_GUARD_NAME),
								template[0] != '\0' ? " OR DELETE" : "",
								attach_table_sql(child),
								quote_identifier(get_namespace_name(extnsp)),
								args.data));
		if (!attach_has_trigger(child, truncate_guard))
			attach_run(psprintf("CREATE TRIGGER %s BEFORE TRUNCATE ON %s FOR EACH STATEMENT EXECUTE FUNCTION %s.fence_truncate_guard()",
								quote_identifier(ATTACH_TRUNCATE_NAME),
								attach_table_sql(child),
								quote_identifier(get_namespace_name(extnsp))));
	}
	SPI_finish();
	return tables;
}

/*
 * fence_attach(tbl regclass, token_column name, template text DEFAULT NULL,
 *				VARIADIC options text[] DEFAULT '{}') returns bigint
 *		Guard a table and its children, seeding the marks from the rows
 *		present; returns the number of resources seeded, each counted once
 *		per batch of rows it has rows in.
 */
Datum
fence_attach(PG_FUNCTION_ARGS)
{
	Oid			extnsp = extension_schema_of_call(fcinfo);
	Oid			guard = extension_func(extnsp, "fence_guard", 0, NULL);
	List	   *tables;
	int64		seeded;

	if (PG_ARGISNULL(0) || PG_ARGISNULL(1) || PG_ARGISNULL(3))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("table, token column and options must not be null")));
	tables = attach_guard(PG_GETARG_OID(0), extnsp,
						  NameStr(*PG_GETARG_NAME(1)),
						  PG_ARGISNULL(2) ? "" : text_to_cstring(PG_GETARG_TEXT_PP(2)),
						  PG_GETARG_ARRAYTYPE_P(3));

	/* Every table below is locked: seed them in this transaction. */
	stats_progress_begin(STATS_PROGRESS_ATTACH);
	seeded = attach_seed_tables(tables, guard);
	stats_progress_end();
	PG_RETURN_INT64(seeded);
}

/*
 * fence_detach(tbl regclass) returns integer
 *		Drop the guards of a table and its children (their fence_guard and
 *		fence_truncate_guard triggers, whatever their names); the marks
 *		stay.  Returns the number of triggers dropped.
 */
Datum
fence_detach(PG_FUNCTION_ARGS)
{
	Oid			relid = PG_GETARG_OID(0);
	Oid			extnsp = extension_schema_of_call(fcinfo);
	Oid			funcs[2];
	List	   *tables;
	ListCell   *lc;
	int32		dropped = 0;

	funcs[0] = extension_func(extnsp, "fence_guard", 0, NULL);
	funcs[1] = extension_func(extnsp, "fence_truncate_guard", 0, NULL);
	tables = attach_lock_tables(relid);

	SPI_connect();
	foreach(lc, tables)
	{
		Oid			child = lfirst_oid(lc);
		Relation	rel = table_open(child, NoLock);
		List	   *names = NIL;
		ListCell   *nc;
		int			i;

		attach_check_owner(child);
		for (i = 0; rel->trigdesc != NULL && i < rel->trigdesc->numtriggers; i++)
		{
			Trigger    *trigger = &rel->trigdesc->triggers[i];

			/* A clone goes with its parent's trigger. */
			if ((trigger->tgfoid == funcs[0] || trigger->tgfoid == funcs[1]) &&
				!trigger->tgisclone)
				names = lappend(names, pstrdup(trigger->tgname));
		}
		table_close(rel, NoLock);
		foreach(nc, names)
		{
			attach_run(psprintf("DROP TRIGGER %s ON %s",
								quote_identifier(lfirst(nc)),
								attach_table_sql(child)));
			dropped++;
		}
	}
	SPI_finish();
	PG_RETURN_INT32(dropped);
}


PG_FUNCTION_INFO_V1(fence_attach_concurrently);

/*
 * Try once to guard relid under lock_timeout = timeout_ms, in a
 * subtransaction; false if the lock was not granted in time.
 */
static bool
online_try_guard(Oid relid, Oid extnsp, const char *token_column,
				 const char *template, ArrayType *options, int timeout_ms,
				 List **tables)
{
	MemoryContext cxt = CurrentMemoryContext;
	ResourceOwner owner = CurrentResourceOwner;
	volatile bool guarded = false;

	BeginInternalSubTransaction(NULL);
	MemoryContextSwitchTo(cxt);
	PG_TRY();
	{
		char		value[32];

		snprintf(value, sizeof(value), "%dms", timeout_ms);
		(void) set_config_option("lock_timeout", value, PGC_USERSET,
								 PGC_S_SESSION, GUC_ACTION_LOCAL, true, 0,
								 false);
		*tables = attach_guard(relid, extnsp, token_column, template, options);
		ReleaseCurrentSubTransaction();
		MemoryContextSwitchTo(cxt);
		CurrentResourceOwner = owner;
		guarded = true;
	}
	PG_CATCH();
	{
		ErrorData  *edata;

		MemoryContextSwitchTo(cxt);
		edata = CopyErrorData();
		FlushErrorState();
		RollbackAndReleaseCurrentSubTransaction();
		MemoryContextSwitchTo(cxt);
		CurrentResourceOwner = owner;
		if (edata->sqlerrcode != ERRCODE_LOCK_NOT_AVAILABLE)
			ReThrowError(edata);
		FreeErrorData(edata);
	}
	PG_END_TRY();
	return guarded;
}

/*
 * fence_attach_concurrently(tbl regclass, token_column name,
 *		template text DEFAULT NULL, options text[] DEFAULT '{}',
 *		batch_rows integer DEFAULT 10000,
 *		lock_timeout interval DEFAULT '200ms',
 *		lock_attempts integer DEFAULT 50)
 *		A procedure: guard a table and its children as fence_attach()
 *		does, then seed their marks in batches of its own transactions.
 */
Datum
fence_attach_concurrently(PG_FUNCTION_ARGS)
{
	Oid			extnsp = extension_schema_of_call(fcinfo);
	Oid			guard = extension_func(extnsp, "fence_guard", 0, NULL);
	Oid			relid;
	const char *token_column;
	const char *template;
	ArrayType  *options;
	int32		batch_rows;
	Interval   *timeout;
	int64		timeout_ms;
	int32		attempts;
	int32		attempt;
	List	   *tables = NIL;
	ListCell   *lc;
	int64		rows = 0;
	int64		resources = 0;
	int64		batches = 0;

	if (fcinfo->context == NULL || !IsA(fcinfo->context, CallContext) ||
		castNode(CallContext, fcinfo->context)->atomic)
		ereport(ERROR,
				(errcode(ERRCODE_ACTIVE_SQL_TRANSACTION),
				 errmsg("fence_attach_concurrently cannot run inside a transaction block"),
				 errdetail("It commits after creating the guard and after each batch of rows it seeds."),
				 errhint("CALL it on its own, outside BEGIN and COMMIT, or use fence_attach().")));
	if (PG_ARGISNULL(0) || PG_ARGISNULL(1) || PG_ARGISNULL(3) ||
		PG_ARGISNULL(4) || PG_ARGISNULL(5) || PG_ARGISNULL(6))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("only the template of fence_attach_concurrently may be null")));
	batch_rows = PG_GETARG_INT32(4);
	timeout = PG_GETARG_INTERVAL_P(5);
	timeout_ms = (timeout->time +
				  (timeout->day + (int64) timeout->month * DAYS_PER_MONTH) * USECS_PER_DAY) / 1000;
	attempts = PG_GETARG_INT32(6);
	if (batch_rows < 1 || attempts < 1)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("batch_rows and lock_attempts must be positive")));
	if (timeout_ms < 1 || timeout_ms > INT_MAX)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("lock_timeout must be between 1 millisecond and 24 days")));

	/* SPI's procedure context outlives the commits: keep the arguments there. */
	SPI_connect_ext(SPI_OPT_NONATOMIC);
	relid = PG_GETARG_OID(0);
	token_column = pstrdup(NameStr(*PG_GETARG_NAME(1)));
	template = PG_ARGISNULL(2) ? "" : text_to_cstring(PG_GETARG_TEXT_PP(2));
	options = PG_GETARG_ARRAYTYPE_P_COPY(3);

	stats_progress_begin(STATS_PROGRESS_ATTACH_CONCURRENTLY);
	for (attempt = 1;; attempt++)
	{
		if (online_try_guard(relid, extnsp, token_column, template, options,
							 (int) timeout_ms, &tables))
			break;
		if (attempt == attempts)
			ereport(ERROR,
					(errcode(ERRCODE_LOCK_NOT_AVAILABLE),
					 errmsg("could not lock table \"%s\" to guard it in %d attempts of %s each",
							get_rel_name(relid), attempts,
							DatumGetCString(DirectFunctionCall1(interval_out,
																PG_GETARG_DATUM(5)))),
					 errhint("A long transaction writing the table holds the lock it needs; retry when it ends, or give more lock_attempts.")));

		/* Let the writers that queued behind the request through. */
		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 (long) timeout_ms, PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
		CHECK_FOR_INTERRUPTS();
	}
	SPI_commit();

	foreach(lc, tables)
	{
		Oid			child = lfirst_oid(lc);
		SeedScan	scan;
		bool		more;

		if (!attach_seed_guarded(child, guard))
			continue;
		attach_seed_begin(&scan, child, guard, true, batch_rows);
		do
		{
			PushActiveSnapshot(GetTransactionSnapshot());
			more = attach_seed_batch(&scan);
			PopActiveSnapshot();
			SPI_commit();
		} while (more);
		rows += scan.rows;
		resources += scan.resources;
		batches += scan.batches;
		attach_seed_end(&scan);
	}
	SPI_finish();
	stats_progress_end();
	ereport(NOTICE,
			(errmsg("fence_attach_concurrently seeded " INT64_FORMAT " resources from " INT64_FORMAT " rows in " INT64_FORMAT " batches of whole pages",
					resources, rows, batches)));
	PG_RETURN_VOID();
}
