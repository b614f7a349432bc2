/*-------------------------------------------------------------------------
 *
 * attach_online.c
 *	  fence_attach_concurrently(): guard an existing table without holding
 *	  its writers up for longer than a short lock.
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
 *	  src/attach_online.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "attach.h"
#include "catalog/pg_inherits.h"
#include "core/core.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "nodes/parsenodes.h"
#include "pgstat.h"
#include "storage/latch.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/resowner.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"

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
	ereport(NOTICE,
			(errmsg("fence_attach_concurrently seeded " INT64_FORMAT " resources from " INT64_FORMAT " rows in " INT64_FORMAT " batches of whole pages",
					resources, rows, batches)));
	PG_RETURN_VOID();
}
