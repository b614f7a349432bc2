/*-------------------------------------------------------------------------
 *
 * marks_sql.c
 *	  The SQL functions of the marks: fence_mark(), fence_mark_held(),
 *	  fence_advance() and fence_forget(); fence_marks_replicated(), the marks table's own
 *	  trigger; and the marks of a logical-replication subscriber.
 *
 * Subscribers.  The publisher fenced every write before it committed, so the apply
 * worker of a subscriber must not judge them again: its marks can lag the
 * publisher's, a DELETE carries no token at all, and a rejected change
 * stops replication for good (the worker retries it forever).  In the
 * apply worker the guard therefore accepts every replicated write and
 * only raises the subscriber's own marks to the tokens the rows carry,
 * so that the subscriber's local writers stay fenced (fence_guard.c;
 * the guard must be ENABLE ALWAYS or ENABLE REPLICA to fire there).
 *
 * The marks on a subscriber belong to the subscriber.  A FOR ALL TABLES
 * publication also publishes the extension's marks table; its rows then
 * arrive at the subscriber's marks table, where the trigger
 * fence_marks_replicated() turns each into a raise: a replicated mark
 * never lowers a mark of the subscriber's, never collides with one (the
 * subscriber's row is raised in place of the insert), and a mark deleted
 * on the publisher (fence_forget) stays on the subscriber.
 *
 * The same trigger makes an INSERT into the marks table, the one write of
 * it granted to the database's owner (for pg_restore), a raise: a row for
 * a resource without a mark is inserted as given (keeping a restored
 * mark's moved_at), one for a resource with a mark raises it if higher and
 * is skipped, never lowering it nor colliding with it.  The library itself
 * writes the table without firing triggers.
 *
 * IDENTIFICATION
 *	  src/marks/marks_sql.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "commands/trigger.h"
#include "core/core.h"
#include "fmgr.h"
#include "marks/marks.h"
#include "marks/marks_int.h"
#include "miscadmin.h"
#include "replication/logicalworker.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"


PG_FUNCTION_INFO_V1(fence_marks_replicated);

/*
 * replica_applying
 *		Whether this backend applies changes from a publisher: a logical
 *		replication apply or table synchronization worker.
 */
bool
replica_applying(void)
{
	return IsLogicalWorker();
}

/*
 * replica_raise
 *		Raise the subscriber's mark of resource to token, never lowering
 *		it, through fence_advance() of the extension in extnsp.
 */
void
replica_raise(Oid extnsp, const char *resource, FenceToken token)
{
	static Oid	advance_nsp = InvalidOid;
	static Oid	advance = InvalidOid;

	if (advance_nsp != extnsp)
	{
		advance = extension_advance_func(extnsp);
		advance_nsp = extnsp;
	}
	(void) OidFunctionCall2(advance, CStringGetTextDatum(resource),
							FenceTokenGetDatum(token));
}

/*
 * fence_marks_replicated
 *		BEFORE INSERT OR UPDATE OR DELETE trigger on the marks table,
 *		ENABLE ALWAYS.  In the apply worker, turns a replicated mark into a
 *		raise of the subscriber's own and skips the change itself;
 *		anywhere else, turns an INSERT into a raise and lets UPDATE and
 *		DELETE (the table owner's alone) through unchanged.
 */
Datum
fence_marks_replicated(PG_FUNCTION_ARGS)
{
	TriggerData *trigdata = (TriggerData *) fcinfo->context;
	HeapTuple	tuple;
	bool		isnull;
	Datum		resource;
	Datum		token;

	if (!CALLED_AS_TRIGGER(fcinfo) || !TRIGGER_FIRED_FOR_ROW(trigdata->tg_event) ||
		!TRIGGER_FIRED_BEFORE(trigdata->tg_event))
		ereport(ERROR,
				(errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
				 errmsg("fence_marks_replicated: must be called as a BEFORE ROW trigger")));

	tuple = TRIGGER_FIRED_BY_UPDATE(trigdata->tg_event) ?
		trigdata->tg_newtuple : trigdata->tg_trigtuple;
	if (!replica_applying() && !TRIGGER_FIRED_BY_INSERT(trigdata->tg_event))
		return PointerGetDatum(tuple);

	/* A mark forgotten on the publisher is not forgotten here. */
	if (TRIGGER_FIRED_BY_DELETE(trigdata->tg_event))
		return PointerGetDatum(NULL);

	resource = heap_getattr(tuple, Anum_mark_resource,
							RelationGetDescr(trigdata->tg_relation), &isnull);
	if (isnull)
		return PointerGetDatum(NULL);
	token = heap_getattr(tuple, Anum_mark_token,
						 RelationGetDescr(trigdata->tg_relation), &isnull);
	if (isnull)
		return PointerGetDatum(NULL);
	if (!replica_applying())
	{
		FenceToken	mark;

		if (!marks_read_newest(TextDatumGetCString(resource), &mark))
			return PointerGetDatum(tuple);
		if (mark >= DatumGetFenceToken(token))
			return PointerGetDatum(NULL);
	}
	replica_raise(RelationGetNamespace(trigdata->tg_relation),
				  TextDatumGetCString(resource), DatumGetFenceToken(token));
	return PointerGetDatum(NULL);
}


PG_FUNCTION_INFO_V1(fence_mark);
PG_FUNCTION_INFO_V1(fence_mark_held);
PG_FUNCTION_INFO_V1(fence_advance);
PG_FUNCTION_INFO_V1(fence_forget);

/*
 * fence_mark(resource text) returns fence_token
 *		The current mark of resource, NULL if it has none.
 */
Datum
fence_mark(PG_FUNCTION_ARGS)
{
	FenceToken	mark;

	if (!marks_read(text_to_cstring(PG_GETARG_TEXT_PP(0)), &mark))
		PG_RETURN_NULL();
	PG_RETURN_FENCE_TOKEN(mark);
}

/*
 * fence_mark_held(resource text, stored fence_token) returns fence_token
 *		The mark of resource whose row holds stored, as this transaction
 *		sees it: above stored when the transaction raised it in memory
 *		after writing that row (marks.c).  The view fence_marks shows the
 *		marks through it.
 */
Datum
fence_mark_held(PG_FUNCTION_ARGS)
{
	FenceToken	stored = PG_GETARG_FENCE_TOKEN(1);
	FenceToken	mark;

	if (marks_read_held(text_to_cstring(PG_GETARG_TEXT_PP(0)), &mark) &&
		mark > stored)
		PG_RETURN_FENCE_TOKEN(mark);
	PG_RETURN_FENCE_TOKEN(stored);
}

/* fence_advance and fence_forget write the marks table: refuse where a write could not happen. */
static void
marks_prevent_readonly(const char *cmdname)
{
	PreventCommandIfReadOnly(cmdname);
	PreventCommandIfParallelMode(cmdname);
	PreventCommandDuringRecovery(cmdname);
}

/*
 * fence_advance(resource text, token fence_token) returns fence_token
 *		Raise the mark of resource to token, fencing out every holder of
 *		an older token; never lowers it.  Returns the mark.
 */
Datum
fence_advance(PG_FUNCTION_ARGS)
{
	char	   *resource;
	FenceToken	token;
	FenceToken	mark;

	if (PG_ARGISNULL(0) || PG_ARGISNULL(1))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("resource and token must not be null")));
	marks_prevent_readonly("fence_advance()");
	resource = text_to_cstring(PG_GETARG_TEXT_PP(0));
	resource_name_check(resource, strlen(resource));
	token = PG_GETARG_FENCE_TOKEN(1);

	/*
	 * Set by fence_advance: the holder's first write at the token passes a
	 * strict guard.  In a subscriber's apply worker it stands for the
	 * publisher's writes (replica_raise), and strict mode counts it so.
	 */
	mark = marks_advance(resource, token, replica_applying());
	PG_RETURN_FENCE_TOKEN(mark);
}

/*
 * fence_forget(resource text) returns boolean
 *		Delete the mark of a retired resource; true if it had one.
 */
Datum
fence_forget(PG_FUNCTION_ARGS)
{
	if (PG_ARGISNULL(0))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("resource must not be null")));
	marks_prevent_readonly("fence_forget()");
	PG_RETURN_BOOL(marks_forget(text_to_cstring(PG_GETARG_TEXT_PP(0))));
}
