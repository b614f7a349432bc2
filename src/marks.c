/*-------------------------------------------------------------------------
 *
 * marks.c
 *	  High-water marks: the highest token accepted per resource.
 *
 * The marks live in the extension's table fence_high_water, one row per
 * resource.  A write with token T to resource R claims R's row with
 *
 *	  INSERT ... ON CONFLICT (resource) DO UPDATE SET token = T
 *		  WHERE fence_high_water.token < T
 *
 * which either creates the mark, raises it, or finds it at or above T;
 * in every case the row is then locked by the writing transaction until it
 * ends.  Two writers of one resource therefore serialize on that row
 * lock, the later one sees the earlier one's committed mark, and a
 * rollback takes the raise back with it.  Under REPEATABLE READ and
 * SERIALIZABLE a mark moved by a concurrent transaction is a serialization
 * failure, as for any row.
 *
 * The marks table is not writable by the users whose writes are checked:
 * the statements run as the table's owner, with a fixed, schema-qualified
 * text, the way the referential integrity triggers do.
 *
 * Once a transaction has checked and locked a resource at token T, later
 * rows of that resource with token T cannot fail (nobody else can move the
 * mark while we hold the lock), so a per-transaction cache answers them
 * without a lookup.  An entry made in a subtransaction that rolls back is
 * dropped, because the rollback released the row lock and undid the
 * raise.
 *
 * IDENTIFICATION
 *	  src/marks.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "catalog/namespace.h"
#include "catalog/pg_class.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "marks.h"
#include "miscadmin.h"
#include "resource_map.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/syscache.h"

#define MARKS_TABLE "fence_high_water"

typedef struct CheckedEntry
{
	ResourceMapKey key;
	FenceToken	token;			/* the mark, locked by this transaction */
	SubTransactionId subid;		/* subtransaction that took the lock */
} CheckedEntry;

/* Marks checked and locked in this transaction. */
static ResourceMap *checked = NULL;
static MemoryContext checked_cxt = NULL;
static SubTransactionId checked_latest_subid = InvalidSubTransactionId;

/*
 * Prepared statements, for the extension schema and token type they were
 * made for (a dropped and re-created extension has a new type).
 */
static Oid	plans_nsp = InvalidOid;
static Oid	plans_token_type = InvalidOid;
static SPIPlanPtr claim_plan = NULL;
static SPIPlanPtr read_plan = NULL;
static SPIPlanPtr advance_plan = NULL;
static SPIPlanPtr forget_plan = NULL;

PG_FUNCTION_INFO_V1(fence_mark);
PG_FUNCTION_INFO_V1(fence_advance);
PG_FUNCTION_INFO_V1(fence_forget);

static void
marks_xact_callback(XactEvent event, void *arg)
{
	switch (event)
	{
		case XACT_EVENT_COMMIT:
		case XACT_EVENT_PARALLEL_COMMIT:
		case XACT_EVENT_ABORT:
		case XACT_EVENT_PARALLEL_ABORT:
		case XACT_EVENT_PREPARE:
			if (checked != NULL)
			{
				checked = NULL;
				MemoryContextReset(checked_cxt);
			}
			checked_latest_subid = InvalidSubTransactionId;
			break;
		default:
			break;
	}
}

/*
 * Move the entries of a committed subtransaction to its parent, and drop
 * those of one that rolled back.  Only subtransactions at or after the
 * newest entry's can own entries, so most ends cost nothing.
 */
static void
marks_subxact_callback(SubXactEvent event, SubTransactionId mySubid,
					   SubTransactionId parentSubid, void *arg)
{
	HASH_SEQ_STATUS status;
	CheckedEntry *entry;

	if (checked == NULL || checked_latest_subid < mySubid)
		return;
	if (event != SUBXACT_EVENT_COMMIT_SUB && event != SUBXACT_EVENT_ABORT_SUB)
		return;

	hash_seq_init(&status, checked->htab);
	while ((entry = hash_seq_search(&status)) != NULL)
	{
		if (entry->subid != mySubid)
			continue;
		if (event == SUBXACT_EVENT_COMMIT_SUB)
			entry->subid = parentSubid;
		else
			resource_map_remove(checked, entry->key.resource);
	}
	checked_latest_subid = parentSubid;
}

/*
 * marks_init
 *		Register the transaction callbacks; called from _PG_init.
 */
void
marks_init(void)
{
	RegisterXactCallback(marks_xact_callback, NULL);
	RegisterSubXactCallback(marks_subxact_callback, NULL);
}

static void
checked_remember(const char *resource, FenceToken token)
{
	CheckedEntry *entry;
	bool		found;

	if (checked == NULL)
	{
		if (checked_cxt == NULL)
			checked_cxt = AllocSetContextCreate(TopMemoryContext,
												"fencing checked marks",
												ALLOCSET_DEFAULT_SIZES);
		checked = resource_map_create("fencing checked marks",
									  sizeof(CheckedEntry), checked_cxt);
	}
	entry = resource_map_enter(checked, resource, &found);
	entry->token = token;
	entry->subid = GetCurrentSubTransactionId();
	checked_latest_subid = entry->subid;
}

static void
checked_forget(const char *resource)
{
	if (checked != NULL)
		resource_map_remove(checked, resource);
}

/* Prepare and keep one statement over the marks table. */
static SPIPlanPtr
marks_prepare(const char *query, int nargs, Oid *argtypes)
{
	SPIPlanPtr	plan = SPI_prepare(query, nargs, argtypes);

	if (plan == NULL)
		elog(ERROR, "SPI_prepare failed for \"%s\": %s",
			 query, SPI_result_code_string(SPI_result));
	SPI_keepplan(plan);
	return plan;
}

/*
 * Make the prepared statements for the extension installed in extnsp.
 * Every name is schema-qualified, so the caller's search_path plays no
 * part.  Must be called inside SPI.
 */
static void
marks_prepare_plans(Oid extnsp, Oid token_type)
{
	char	   *nsp = get_namespace_name(extnsp);
	const char *table;
	const char *lt;
	Oid			argtypes[2];
	StringInfoData q;

	if (nsp == NULL)
		elog(ERROR, "cache lookup failed for namespace %u", extnsp);

	table = quote_qualified_identifier(nsp, MARKS_TABLE);
	lt = psprintf("OPERATOR(%s.<)", quote_identifier(nsp));
	argtypes[0] = TEXTOID;
	argtypes[1] = token_type;

	if (claim_plan)
		SPI_freeplan(claim_plan);
	if (read_plan)
		SPI_freeplan(read_plan);
	if (advance_plan)
		SPI_freeplan(advance_plan);
	if (forget_plan)
		SPI_freeplan(forget_plan);
	claim_plan = read_plan = advance_plan = forget_plan = NULL;
	plans_nsp = InvalidOid;

	initStringInfo(&q);
	appendStringInfo(&q,
					 "INSERT INTO %s AS m (resource, token, moved_at) "
					 "VALUES ($1, $2, pg_catalog.now()) "
					 "ON CONFLICT (resource) DO UPDATE "
					 "SET token = excluded.token, moved_at = excluded.moved_at "
					 "WHERE m.token %s excluded.token",
					 table, lt);
	claim_plan = marks_prepare(q.data, 2, argtypes);

	resetStringInfo(&q);
	appendStringInfo(&q, "SELECT token FROM %s WHERE resource = $1", table);
	read_plan = marks_prepare(q.data, 1, argtypes);

	resetStringInfo(&q);
	appendStringInfo(&q,
					 "INSERT INTO %s AS m (resource, token, moved_at) "
					 "VALUES ($1, $2, pg_catalog.now()) "
					 "ON CONFLICT (resource) DO UPDATE "
					 "SET token = excluded.token, moved_at = excluded.moved_at "
					 "WHERE m.token %s excluded.token "
					 "RETURNING token",
					 table, lt);
	advance_plan = marks_prepare(q.data, 2, argtypes);

	resetStringInfo(&q);
	appendStringInfo(&q, "DELETE FROM %s WHERE resource = $1 RETURNING token",
					 table);
	forget_plan = marks_prepare(q.data, 1, argtypes);

	plans_nsp = extnsp;
	plans_token_type = token_type;
}

/*
 * Connect to SPI with the statements ready, acting as the marks table's
 * owner.  *save_userid and *save_sec_context receive what to restore.
 */
static void
marks_begin(Oid extnsp, Oid *save_userid, int *save_sec_context)
{
	Oid			relid = get_relname_relid(MARKS_TABLE, extnsp);
	Oid			token_type;
	HeapTuple	tuple;
	Oid			owner;

	token_type = GetSysCacheOid2(TYPENAMENSP, Anum_pg_type_oid,
								 CStringGetDatum("fence_token"),
								 ObjectIdGetDatum(extnsp));
	if (!OidIsValid(relid) || !OidIsValid(token_type))
		elog(ERROR, "fencing objects not found in schema %u", extnsp);
	tuple = SearchSysCache1(RELOID, ObjectIdGetDatum(relid));
	if (!HeapTupleIsValid(tuple))
		elog(ERROR, "cache lookup failed for relation %u", relid);
	owner = ((Form_pg_class) GETSTRUCT(tuple))->relowner;
	ReleaseSysCache(tuple);

	GetUserIdAndSecContext(save_userid, save_sec_context);
	SetUserIdAndSecContext(owner, *save_sec_context |
						   SECURITY_LOCAL_USERID_CHANGE |
						   SECURITY_NOFORCE_RLS);

	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	if (plans_nsp != extnsp || plans_token_type != token_type)
		marks_prepare_plans(extnsp, token_type);
}

static void
marks_end(Oid save_userid, int save_sec_context)
{
	if (SPI_finish() != SPI_OK_FINISH)
		elog(ERROR, "SPI_finish failed");
	SetUserIdAndSecContext(save_userid, save_sec_context);
}

/* Run a prepared statement; the token of its first row, if it returns one. */
static bool
marks_run(SPIPlanPtr plan, const char *resource, FenceToken token,
		  bool read_only, int expected, FenceToken *result)
{
	Datum		args[2];
	int			rc;
	bool		isnull;

	args[0] = CStringGetTextDatum(resource);
	args[1] = FenceTokenGetDatum(token);
	rc = SPI_execute_plan(plan, args, NULL, read_only, 1);
	if (rc != expected)
		elog(ERROR, "SPI_execute_plan returned %s",
			 SPI_result_code_string(rc));
	if (SPI_processed == 0 || SPI_tuptable == NULL || result == NULL)
		return SPI_processed > 0;
	*result = DatumGetFenceToken(SPI_getbinval(SPI_tuptable->vals[0],
											   SPI_tuptable->tupdesc, 1,
											   &isnull));
	Assert(!isnull);
	return true;
}

/*
 * marks_check
 *		Accept a write of token to resource, or reject it with
 *		ERRCODE_FENCE_TOKEN_STALE.
 *
 * On return the mark is at token and locked by this transaction.  With
 * strict, a token equal to a mark left by another transaction is stale
 * too.
 */
void
marks_check(Oid extnsp, const char *resource, FenceToken token, bool strict)
{
	CheckedEntry *entry = NULL;
	Oid			save_userid;
	int			save_sec_context;
	FenceToken	mark = 0;
	bool		accepted;

	if (checked != NULL)
		entry = resource_map_lookup(checked, resource);
	if (entry != NULL && entry->token == token)
		return;

	marks_begin(extnsp, &save_userid, &save_sec_context);
	if (marks_run(claim_plan, resource, token, false, SPI_OK_INSERT, NULL))
	{
		accepted = true;
		mark = token;
	}
	else
	{
		/*
		 * The mark is at or above token and now locked by us.  Not read-only,
		 * so that the read takes a new snapshot and, under READ COMMITTED,
		 * sees the value committed by whoever held the lock before us.
		 */
		if (!marks_run(read_plan, resource, token, false, SPI_OK_SELECT, &mark))
			elog(ERROR, "high-water mark of resource \"%s\" vanished while locked",
				 resource);
		accepted = mark == token && !strict;
	}
	marks_end(save_userid, save_sec_context);

	if (accepted)
	{
		checked_remember(resource, token);
		return;
	}

	{
		char		offered[FENCE_TOKEN_TEXT_LEN];
		char		current[FENCE_TOKEN_TEXT_LEN];

		fence_token_to_cstring(token, offered);
		fence_token_to_cstring(mark, current);
		ereport(ERROR,
				(errcode(ERRCODE_FENCE_TOKEN_STALE),
				 errmsg("stale fence token for resource \"%s\"", resource),
				 mark == token ?
				 errdetail("Token %s is not above the current mark %s, and this table requires strictly increasing tokens.",
						   offered, current) :
				 errdetail("Token %s is below the current mark %s.",
						   offered, current),
				 errhint("A newer lock holder has written to this resource; acquire the lock again for a new token.")));
	}
}

/*
 * fence_mark(resource text) returns fence_token
 *		The current mark of resource, NULL if it has none.
 */
Datum
fence_mark(PG_FUNCTION_ARGS)
{
	Oid			extnsp = get_func_namespace(fcinfo->flinfo->fn_oid);
	char	   *resource = text_to_cstring(PG_GETARG_TEXT_PP(0));
	FenceToken	mark;
	bool		found;
	Oid			save_userid;
	int			save_sec_context;

	marks_begin(extnsp, &save_userid, &save_sec_context);
	found = marks_run(read_plan, resource, 0, true, SPI_OK_SELECT, &mark);
	marks_end(save_userid, save_sec_context);

	if (!found)
		PG_RETURN_NULL();
	PG_RETURN_FENCE_TOKEN(mark);
}

/*
 * fence_advance(resource text, token fence_token) returns fence_token
 *		Raise the mark of resource to token, fencing out every holder of
 *		an older token; never lowers it.  Returns the mark.
 */
Datum
fence_advance(PG_FUNCTION_ARGS)
{
	Oid			extnsp = get_func_namespace(fcinfo->flinfo->fn_oid);
	char	   *resource;
	FenceToken	token;
	FenceToken	mark;
	Oid			save_userid;
	int			save_sec_context;

	if (PG_ARGISNULL(0) || PG_ARGISNULL(1))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("resource and token must not be null")));
	resource = text_to_cstring(PG_GETARG_TEXT_PP(0));
	token = PG_GETARG_FENCE_TOKEN(1);

	marks_begin(extnsp, &save_userid, &save_sec_context);
	if (!marks_run(advance_plan, resource, token, false,
				   SPI_OK_INSERT_RETURNING, &mark) &&
		!marks_run(read_plan, resource, token, false, SPI_OK_SELECT, &mark))
		elog(ERROR, "high-water mark of resource \"%s\" vanished while locked",
			 resource);
	marks_end(save_userid, save_sec_context);

	/* A cached check at an older token no longer describes the mark. */
	checked_forget(resource);
	PG_RETURN_FENCE_TOKEN(mark);
}

/*
 * fence_forget(resource text) returns boolean
 *		Delete the mark of a retired resource; true if it had one.
 */
Datum
fence_forget(PG_FUNCTION_ARGS)
{
	Oid			extnsp = get_func_namespace(fcinfo->flinfo->fn_oid);
	char	   *resource;
	bool		found;
	Oid			save_userid;
	int			save_sec_context;

	if (PG_ARGISNULL(0))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("resource must not be null")));
	resource = text_to_cstring(PG_GETARG_TEXT_PP(0));

	marks_begin(extnsp, &save_userid, &save_sec_context);
	found = marks_run(forget_plan, resource, 0, false,
					  SPI_OK_DELETE_RETURNING, NULL);
	marks_end(save_userid, save_sec_context);

	checked_forget(resource);
	PG_RETURN_BOOL(found);
}
