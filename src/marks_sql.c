/*-------------------------------------------------------------------------
 *
 * marks_sql.c
 *	  The SQL functions of the marks: fence_mark(), fence_advance() and
 *	  fence_forget().
 *
 * IDENTIFICATION
 *	  src/marks_sql.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "core/core.h"
#include "fmgr.h"
#include "marks.h"
#include "miscadmin.h"
#include "utils/builtins.h"

PG_FUNCTION_INFO_V1(fence_mark);
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

	if (PG_ARGISNULL(0) || PG_ARGISNULL(1))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("resource and token must not be null")));
	marks_prevent_readonly("fence_advance()");
	resource = text_to_cstring(PG_GETARG_TEXT_PP(0));
	resource_name_check(resource, strlen(resource));
	PG_RETURN_FENCE_TOKEN(marks_advance(resource, PG_GETARG_FENCE_TOKEN(1)));
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
